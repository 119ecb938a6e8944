"""One shape rule per op type: the table the shape check runs (like XLA's
HLO verifier).  Adding an op is adding one row to ``RULES`` (and its
read-set to ``verify/ir/read_sets.py``: an op carrying a slot or attr its
rule does not interpret is left unchecked, named).

A rule gets the op (a snapshot ``Op``) and a :class:`Shapes` view that maps
its input slots to shapes.  A shape is a list of dims; a dim is a Python int
when it is static and a Z3 integer expression when it depends on a symbol.
The rule states preconditions with ``s.need(cond, why)`` and returns the
output shapes by slot (``{"Out": [shape]}``); a slot it does not return is
not checked.  Preconditions and outputs are proven for all symbol values by
the engine in ``shape_check.py``.
"""
from __future__ import annotations

import re

from functools import reduce

import z3


def is_static(d) -> bool:
    return isinstance(d, int)


def prod(dims):
    return reduce(lambda a, b: a * b, dims, 1)


def eq(a, b):
    """``a == b``: a Python bool when both are static, else a Z3 formula."""
    return a == b


class Shapes:
    """An op's input shapes by slot, plus the preconditions a rule states."""

    def __init__(self, op, inputs: dict, program_shapes: str | None = None):
        self.op = op
        self.inputs = inputs  # slot -> [shape or None]
        self.needs = []  # [(cond, why)]
        # "global" or "local": which shapes the program declares (a planner
        # stage's snapshot says so in its meta); None: not said
        self.program_shapes = program_shapes

    def __call__(self, slot: str, i: int = 0):
        shapes = self.inputs.get(slot) or []
        if i >= len(shapes) or shapes[i] is None:
            raise RuleError(f"input {slot}[{i}] has no known shape")
        return shapes[i]

    def has(self, slot: str) -> bool:
        return bool(self.inputs.get(slot))

    def all(self, slot: str) -> list:
        return [s for s in self.inputs.get(slot) or [] if s is not None]

    def attr(self, name, default=None):
        return self.op.attrs.get(name, default)

    def need(self, cond, why: str) -> None:
        if cond is True:
            return
        self.needs.append((cond, why))


class RuleError(Exception):
    """The rule cannot be evaluated (missing input, unsupported attr)."""


# -- shared shape algebra ------------------------------------------------
def broadcast(s: Shapes, a, b, axis=-1):
    """Paddle elementwise broadcast of ``b`` into ``a`` (``axis`` as in the op)."""
    if axis == -1 or len(a) == len(b):
        n = max(len(a), len(b))
        a2 = [1] * (n - len(a)) + list(a)
        b2 = [1] * (n - len(b)) + list(b)
    else:
        if axis < 0:
            axis = len(a) - len(b)
        a2 = list(a)
        b2 = [1] * axis + list(b) + [1] * (len(a) - axis - len(b))
        if len(b2) != len(a2):
            raise RuleError(f"axis {axis} does not fit shapes {a} and {b}")
    out = []
    for i, (x, y) in enumerate(zip(a2, b2)):
        if is_static(x) and is_static(y):
            s.need(x == y or x == 1 or y == 1,
                   f"dim {i} of X ({x}) and Y ({y}) do not broadcast")
            out.append(max(x, y) if 1 in (x, y) else x)
        else:
            s.need(z3.Or(x == y, x == 1, y == 1), f"dim {i} of X and Y do not broadcast")
            out.append(z3.If(x == 1, y, x) if not (is_static(y) and y == 1) else x)
    return out


def matmul_shape(s: Shapes, x, y, tx: bool, ty: bool):
    x, y = list(x), list(y)
    xv, yv = len(x) == 1, len(y) == 1
    if xv:
        x = [1] + x
    if yv:
        y = y + [1]
    if tx and not xv:
        x = x[:-2] + [x[-1], x[-2]]
    if ty and not yv:
        y = y[:-2] + [y[-1], y[-2]]
    s.need(eq(x[-1], y[-2]),
           f"matmul contracts X dim {x[-1]} with Y dim {y[-2]}")
    batch = broadcast(s, x[:-2], y[:-2]) if (len(x) > 2 or len(y) > 2) else []
    out = batch + [x[-2], y[-1]]
    if xv:
        out.pop(-2)
    if yv:
        out.pop(-1)
    return out


def reshape_target(s: Shapes, x, target):
    """Paddle reshape semantics: 0 copies a dim, one -1 is inferred."""
    out = []
    unknown = None
    for i, t in enumerate(target):
        if t == 0:
            if i >= len(x):
                s.need(False, f"target dim {i} is 0 but X has rank {len(x)}")
                return list(target)
            out.append(x[i])
        elif t == -1:
            if unknown is not None:
                s.need(False, f"target {list(target)} holds more than one -1")
            unknown = i
            out.append(None)
        elif t < 0:
            s.need(False, f"target {list(target)} holds {t} at position {i}: only "
                          "one -1 may be negative")
            return list(target)
        else:
            out.append(t)
    n = prod(x)
    if unknown is not None:
        known = prod([d for d in out if d is not None])
        s.need(eq(n % known, 0) if not (is_static(n) and is_static(known)) else n % known == 0,
               f"element count {n} is not divisible by {known}")
        out[unknown] = n / known if not (is_static(n) and is_static(known)) else n // known
    else:
        s.need(eq(prod(out), n), f"target {list(target)} changes the element count")
    return out


def reduce_shape(s: Shapes, x, dims, keep, reduce_all):
    r = len(x)
    if reduce_all or not dims or len(dims) == r:
        return [1] * r if keep else []
    axes = {d % r for d in dims}
    return [(1 if i in axes else d) for i, d in enumerate(x) if keep or i not in axes]


# -- rows ----------------------------------------------------------------
def same_as(slot_in="X", slot_out="Out"):
    return lambda s: {slot_out: [s(slot_in)]}


def each_same(slot_in="X", slot_out="Out"):
    return lambda s: {slot_out: s.all(slot_in)}


def grads_like(**pairs):
    """Grad ops: each ``GRADSLOT=FWDSLOT`` output has its forward input's shape."""
    def rule(s):
        return {g: [s(f)] for g, f in pairs.items() if s.has(f)}
    return rule


def from_attr(name="shape", slot="Out"):
    return lambda s: {slot: [list(s.attr(name, []))]}


def _matmul(s):
    return {"Out": [matmul_shape(s, s("X"), s("Y"), bool(s.attr("trans_x")),
                                 bool(s.attr("trans_y")))]}


def _matmul_grad(s):
    out = matmul_shape(s, s("X"), s("Y"), bool(s.attr("trans_x")), bool(s.attr("trans_y")))
    dout = s("Out@GRAD")
    s.need(len(dout) == len(out), f"Out@GRAD has rank {len(dout)}, the product {len(out)}")
    for i, (a, b) in enumerate(zip(dout, out)):
        s.need(eq(a, b), f"Out@GRAD dim {i} ({a}) is not the product's ({b})")
    return {"X@GRAD": [s("X")], "Y@GRAD": [s("Y")]}


def _elementwise(s):
    return {"Out": [broadcast(s, s("X"), s("Y"), s.attr("axis", -1))]}


def _elementwise_grad(s):
    broadcast(s, s("X"), s("Y"), s.attr("axis", -1))
    return {"X@GRAD": [s("X")], "Y@GRAD": [s("Y")]}


def _reduce(s):
    return {"Out": [reduce_shape(s, s("X"), s.attr("dim", []), s.attr("keep_dim", False),
                                 s.attr("reduce_all", False))]}


def _nranks(s):
    n = s.attr("nranks", None)
    if n is None:
        raise RuleError("collective without an nranks attr")
    return int(n)


def _reduce_scatter(s):
    x = s("x") if s.has("x") else s("X")
    n = _nranks(s)
    s.need(eq(x[0] % n, 0) if not is_static(x[0]) else x[0] % n == 0,
           f"dim 0 ({x[0]}) is not divisible by nranks {n}")
    first = x[0] // n if is_static(x[0]) else x[0] / n
    return {"out": [[first] + list(x[1:])], "Out": [[first] + list(x[1:])]}


def _all_gather(s):
    x = s("x") if s.has("x") else s("X")
    return {"out": [[x[0] * _nranks(s)] + list(x[1:])],
            "Out": [[x[0] * _nranks(s)] + list(x[1:])]}


def _stack(s):
    xs = s.all("X")
    for i, x in enumerate(xs[1:], 1):
        s.need(len(x) == len(xs[0]), f"stack input {i} has another rank")
        for d, (a, b) in enumerate(zip(x, xs[0])):
            s.need(eq(a, b), f"stack input {i} dim {d} differs")
    axis = s.attr("axis", 0)
    base = list(xs[0])
    axis = axis % (len(base) + 1)
    return {"Y": [base[:axis] + [len(xs)] + base[axis:]]}


def _split(s):
    """``split`` along ``axis`` into ``num`` equal chunks, or by ``sections``
    (one -1 inferred); tensor-valued axis/sections are not modelled."""
    if s.has("AxisTensor") or s.has("SectionsTensorList"):
        raise RuleError("split with a tensor-valued axis or sections")
    x = list(s("X"))
    axis = int(s.attr("axis", 0))
    axis = axis + len(x) if axis < 0 else axis
    if not 0 <= axis < len(x):
        s.need(False, f"axis {s.attr('axis')} is out of range for rank {len(x)}")
        return {}
    d = x[axis]
    sections = [int(v) for v in s.attr("sections", []) or []]
    if sections:
        known = sum(v for v in sections if v != -1)
        free = sections.count(-1)
        s.need(free <= 1, "more than one -1 in sections")
        if free:
            s.need(d - known > 0, f"sections {sections} leave nothing for -1 of dim {d}")
            sections = [d - known if v == -1 else v for v in sections]
        else:
            s.need(eq(d, known), f"sections {sections} do not add up to dim {axis} ({d})")
        return {"Out": [x[:axis] + [v] + x[axis + 1:] for v in sections]}
    n = int(s.attr("num", 0))
    if n <= 0:
        raise RuleError("split without num or sections")
    s.need(d % n == 0, f"dim {axis} ({d}) is not divisible by num {n}")
    part = d // n if is_static(d) else d / n
    return {"Out": [x[:axis] + [part] + x[axis + 1:] for _ in range(n)]}


def _sum(s):
    xs = s.all("X")
    for i, x in enumerate(xs[1:], 1):
        for d, (a, b) in enumerate(zip(x, xs[0])):
            s.need(eq(a, b), f"sum input {i} dim {d} differs")
    return {"Out": [xs[0]]}


def _optimizer(*state):
    """Optimizer ops: outputs have their inputs' shapes; Grad matches Param."""
    def rule(s):
        p, g = s("Param"), s("Grad")
        s.need(len(p) == len(g), "Grad has another rank than Param")
        for i, (a, b) in enumerate(zip(p, g)):
            s.need(eq(a, b), f"Grad dim {i} ({b}) differs from Param's ({a})")
        out = {"ParamOut": [p]}
        for name in state:
            if s.has(name):
                out[name + "Out"] = [s(name)]
        return out
    return rule


def _scalar(slot="Out"):
    return lambda s: {slot: [[]]}


def _check_finite(s):
    return {"Out": s.all("X"), "FoundInfinite": [[1]]}


def _transpose(s):
    x = s("X")
    perm = list(s.attr("axis", []))
    if sorted(perm) != list(range(len(x))):
        s.need(False, f"axis {perm} is not a permutation of rank {len(x)}")
        return {}
    return {"Out": [[x[p] for p in perm]], "XShape": [[0] + list(x)]}


def _layer_norm(s):
    x = s("X")
    axis = int(s.attr("begin_norm_axis", 1))
    inner = prod(x[axis:])
    for slot in ("Scale", "Bias"):
        if s.has(slot):
            p = s(slot)
            s.need(len(p) == 1, f"{slot} must be 1-D")
            if len(p) == 1:
                s.need(p[0] == inner, f"{slot} has {p[0]} elements, the normalised "
                                      f"dims {inner}")
    # Mean/Variance keep the leading dims (their declared shapes in 3.x)
    return {"Y": [x], "Mean": [list(x[:axis])], "Variance": [list(x[:axis])]}


def _reshape_like_x(s):
    x = s("X")
    return {"Out": [reshape_target(s, x, s.attr("shape", []))], "XShape": [[0] + list(x)]}


def _softmax_ce(s):
    logits = s("Logits")
    return {"Softmax": [logits], "Loss": [list(logits[:-1]) + [1]]}


RULES = {
    # linear algebra
    "matmul_v2": _matmul,
    "matmul_v2_grad": _matmul_grad,
    # shape manipulation
    "reshape2": _reshape_like_x,
    "transpose2": _transpose,
    "transpose2_grad": lambda s: {"X@GRAD": [list(s("XShape")[1:])]},
    "layer_norm": _layer_norm,
    "layer_norm_grad": grads_like(**{"X@GRAD": "X", "Scale@GRAD": "Scale",
                                     "Bias@GRAD": "Bias"}),
    "reshape2_grad": lambda s: {"X@GRAD": [list(s("XShape")[1:])]},
    # elementwise
    **{f"elementwise_{k}": _elementwise for k in ("add", "sub", "mul", "div", "max", "min", "pow")},
    **{f"elementwise_{k}_grad": _elementwise_grad
       for k in ("add", "sub", "mul", "div", "max", "min")},
    # unary and same-shape ops
    **{k: same_as() for k in ("cast", "scale", "sqrt", "relu", "gelu", "tanh", "sigmoid",
                               "c_identity", "assign", "dropout", "softmax", "exp", "square",
                               "clip_by_norm", "clip", "memcpy", "share_data")},
    **{f"{k}_grad": grads_like(**{"X@GRAD": "X"}) for k in ("relu", "gelu", "tanh", "sigmoid",
                                                             "sqrt", "square", "exp")},
    "reduce_mean_grad": grads_like(**{"X@GRAD": "X"}),
    "dropout_grad": grads_like(**{"X@GRAD": "Out@GRAD"}),
    "reduce_sum_grad": grads_like(**{"X@GRAD": "X"}),
    # reductions
    "reduce_mean": _reduce,
    "reduce_sum": _reduce,
    "mean": _scalar(),
    "seed": lambda s: {"Out": [[1]]},  # one int32 seed, whatever its value
    # squared_l2_norm's output is 0-D or [1] depending on the Paddle
    # version: its declared shape is kept, only its input is required.
    "squared_l2_norm": lambda s: (s("X"), {})[1],
    "sum": _sum,
    "stack": _stack,
    "split": _split,
    # constants and initialisers
    "fill_constant": from_attr(),
    "uniform_random": from_attr(),
    "gaussian_random": from_attr(),
    # collectives
    "c_allreduce_sum": same_as("X", "Out"),
    "mp_allreduce_sum": same_as("X", "Out"),
    "all_reduce": same_as("x", "out"),
    "broadcast": same_as("x", "out"),
    "reduce": same_as("x", "out"),  # to root_id; the others keep x (sharding stage 2)
    "c_broadcast": same_as("X", "Out"),
    "reduce_scatter": _reduce_scatter,
    "all_gather": _all_gather,
    # optimizers
    "sgd": _optimizer(),
    "adam": _optimizer("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"),
    "adamw": _optimizer("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"),
    "momentum": _optimizer("Velocity"),
    # AMP
    "check_finite_and_unscale": _check_finite,
    "update_loss_scaling": lambda s: {"Out": s.all("X")},
    # losses
    "softmax_with_cross_entropy": _softmax_ce,
}


# -- PIR ops (keyed by op.name(); slots and attrs as verify/ir/pir_snapshot.py
# records them: a constant operand's value is the attr "<slot>@value") ------
def _pir_matmul(s):
    return {"out": [matmul_shape(s, s("x"), s("y"), bool(s.attr("transpose_x")),
                                 bool(s.attr("transpose_y")))]}


def _pir_matmul_grad(s):
    out = matmul_shape(s, s("x"), s("y"), bool(s.attr("transpose_x")),
                       bool(s.attr("transpose_y")))
    dout = s("out_grad")
    s.need(len(dout) == len(out), f"out_grad has rank {len(dout)}, the product {len(out)}")
    for i, (a, b) in enumerate(zip(dout, out)):
        s.need(eq(a, b), f"out_grad dim {i} ({a}) is not the product's ({b})")
    return {"x_grad": [s("x")], "y_grad": [s("y")]}


def _pir_reshape(s):
    target = s.attr("shape@value")
    if target is None:
        raise RuleError("reshape target is not a constant (no shape@value)")
    return {"out": [reshape_target(s, s("x"), list(target))]}


def _pir_mean(s):
    axis = s.attr("axis@value")
    if axis is None:
        raise RuleError("mean axes are not a constant (no axis@value)")
    return {"out": [reduce_shape(s, s("x"), list(axis), bool(s.attr("keepdim")), False)]}


def _pir_sgd(s):
    p, g = s("param"), s("grad")
    s.need(len(p) == len(g), "grad has another rank than param")
    for i, (a, b) in enumerate(zip(p, g)):
        s.need(eq(a, b), f"grad dim {i} ({b}) differs from param's ({a})")
    return {"param_out": [p]}


def _pir_transpose(s):
    x, perm = s("x"), list(s.attr("perm", []))
    if sorted(perm) != list(range(len(x))):
        s.need(False, f"perm {perm} is not a permutation of rank {len(x)}")
        return {}
    return {"out": [[x[p] for p in perm]]}


def _pir_transpose_grad(s):
    g, perm = s("out_grad"), list(s.attr("perm", []))
    if sorted(perm) != list(range(len(g))):
        s.need(False, f"perm {perm} is not a permutation of rank {len(g)}")
        return {}
    inv = [perm.index(i) for i in range(len(perm))]
    return {"x_grad": [[g[p] for p in inv]]}


def _pir_definition(s):
    """builtin.parameter / pd_op.data / ...: the declared shape IS the
    definition (nothing to infer)."""
    return {}


RULES.update({
    "builtin.parameter": _pir_definition,
    "pd_op.data": _pir_definition,
    "builtin.set_parameter": _pir_definition,
    "builtin.shadow_output": _pir_definition,
    "pd_op.full": lambda s: {"out": [list(s.attr("shape", []))]},
    "pd_op.full_int_array": lambda s: {"out": [[len(s.attr("value", []))]]},
    "pd_op.uniform": lambda s: {"out": [list(s.attr("shape@value") or [])]}
    if s.attr("shape@value") is not None else {},
    "pd_op.full_like": same_as("x", "out"),
    "pd_op.matmul": _pir_matmul,
    "pd_op.matmul_grad": _pir_matmul_grad,
    "pd_op.reshape": _pir_reshape,
    "pd_op.transpose": _pir_transpose,
    "pd_op.transpose_grad": _pir_transpose_grad,
    "pd_op.square": same_as("x", "out"),
    "pd_op.scale": same_as("x", "out"),
    "pd_op.square_grad": grads_like(x_grad="x"),
    "pd_op.mean": _pir_mean,
    "pd_op.mean_grad": grads_like(x_grad="x"),
    "pd_op.sgd_": _pir_sgd,
})


# -- PIR collectives and their neighbours (fuse_allreduce_split_to_reducescatter).
# A vector value (split_with_num's ``out``) of equal pieces has the shape of
# the pieces stacked: ``[count] + piece`` (its declared type is a ``vec[...]``,
# which the checker does not compare); builtin.slice / builtin.split take
# pieces out of it.
def _pir_split_with_num(s):
    axis = s.attr("axis@value")
    if axis is None:
        raise RuleError("split_with_num axis is not a constant (no axis@value)")
    axis = int(axis[0] if isinstance(axis, list) else axis)
    x = list(s("x"))
    axis = axis + len(x) if axis < 0 else axis
    if not 0 <= axis < len(x):
        s.need(False, f"axis {axis} is out of range for rank {len(x)}")
        return {}
    n = int(s.attr("num", 0))
    if n <= 0:
        raise RuleError("split_with_num without num")
    d = x[axis]
    s.need(d % n == 0, f"dim {axis} ({d}) is not divisible by num {n}")
    part = d // n if is_static(d) else d / n
    return {"out": [[n] + x[:axis] + [part] + x[axis + 1:]]}


def _pir_vector_piece(s):
    v = s("operands")
    if len(getattr(v, "pieces", [])) > 1:
        i = int(s.attr("index", 0))
        s.need(0 <= i < len(v.pieces), f"builtin.slice index {i} of a vector of {len(v.pieces)}")
        return {"results": [list(v.pieces[i])] if 0 <= i < len(v.pieces) else []}
    i = int(s.attr("index", 0))
    s.need(0 <= i < v[0] if is_static(v[0]) else True,
           f"builtin.slice index {i} of a vector of {v[0]}")
    return {"results": [list(v[1:])]}


def _pir_vector_pieces(s):
    v = s("operands")
    if len(getattr(v, "pieces", [])) > 1:
        # the snapshot names only the used results; results@index says which
        at = s.attr("results@index") or list(range(len(v.pieces)))
        if len(at) != len(s.op.outputs.get("results") or []) or \
                any(not 0 <= i < len(v.pieces) for i in at):
            raise RuleError(f"builtin.split of {len(v.pieces)} pieces: named results "
                            f"{s.op.outputs.get('results')} at {at} do not line up")
        return {"results": [list(v.pieces[i]) for i in at]}
    return {"results": [list(v[1:]) for _ in range(int(v[0]))]}


def _pir_add(s):
    return {"out": [broadcast(s, s("x"), s("y"), -1)]}


def _pir_add_grad(s):
    broadcast(s, s("x"), s("y"), s.attr("axis", -1))
    return {"x_grad": [s("x")], "y_grad": [s("y")]}


RULES.update({
    "pd_op.all_reduce": same_as("x", "out"),
    "pd_op.all_reduce_": same_as("x", "out"),
    "pd_op.reduce_scatter": _reduce_scatter,
    "pd_op.all_gather": _all_gather,
    "pd_op.broadcast": same_as("x", "out"),
    # phi AllToAllInferMeta: out is x's shape (chunks exchanged, none resized);
    # dim 0 divisible by the ring's size is the kernel's to enforce (the
    # simulator and the value row check it: a rule sees no ring)
    "pd_op.all_to_all": same_as("x", "out"),
    # a pipeline's point-to-point pair: a send makes nothing; a recv's out is
    # the shape its out_shape attr declares (what its peer sends is the
    # simulator's to compare, simulated_ranks._point_to_point)
    "pd_op.send_v2": lambda s: {},
    "pd_op.recv_v2": lambda s: {"out": [list(s.attr("out_shape", []))]},
    "pd_op.assign": same_as("x", "out"),
    "pd_op.c_identity": same_as("x", "out"),
    "pd_op.split_with_num": _pir_split_with_num,
    "builtin.slice": _pir_vector_piece,
    "builtin.split": _pir_vector_pieces,
    "pd_op.add": _pir_add,
    "pd_op.add_": _pir_add,
    "pd_op.add_grad": _pir_add_grad,
})


# -- the GPT model's ops (embedding lookup, softmax grad) ----------------------
def _lookup(s):
    w = s("W")
    s.need(len(w) == 2, f"lookup table W has rank {len(w)}, not 2")
    return {"Out": [list(s("Ids")) + [w[-1]]]}


def _softmax_grad(s):
    y, g = s("Out"), s("Out@GRAD")
    s.need(len(y) == len(g), f"Out@GRAD has rank {len(g)}, Out {len(y)}")
    for i, (a, b) in enumerate(zip(y, g)):
        s.need(eq(a, b), f"Out@GRAD dim {i} ({b}) is not Out's ({a})")
    return {"X@GRAD": [y]}


RULES.update({
    "lookup_table_v2": _lookup,
    "lookup_table_v2_grad": grads_like(**{"W@GRAD": "W"}),
    "softmax_grad": _softmax_grad,
})


# auto_parallel_data_parallel_optimization: grads become views of one fused
# buffer (its aligned size is the kernel's; only the views are checked); the
# pass's dependency op orders vars without computing them
RULES.update({
    "coalesce_tensor": lambda s: {"Output": s.all("Input")},
    "nop": lambda s: {},
})


# -- PIR training ops of the gradient-merge cases (their optimizers, the
# merge's in-place scale and zeroing of an accumulator) ---------------------
def _pir_same_shapes(s, ref, *slots):
    """``ref`` and every slot in ``slots`` have one shape; returns it."""
    p = s(ref)
    for slot in slots:
        g = s(slot)
        s.need(len(p) == len(g), f"{slot} has rank {len(g)}, {ref} {len(p)}")
        for i, (a, b) in enumerate(zip(p, g)):
            s.need(eq(a, b), f"{slot} dim {i} ({b}) differs from {ref}'s ({a})")
    return p


def _pir_momentum(s):
    p = _pir_same_shapes(s, "param", "grad", "velocity")
    return {"param_out": [p], "velocity_out": [p]}


def _pir_adam(s):
    p = _pir_same_shapes(s, "param", "grad", "moment1", "moment2")
    out = {"param_out": [p], "moment1_out": [p], "moment2_out": [p]}
    for pow_ in ("beta1_pow", "beta2_pow"):
        b = s(pow_)
        s.need(len(b) <= 1, f"{pow_} has shape {list(b)}, not a scalar")
        for d in b:
            s.need(eq(d, 1), f"{pow_} has shape {list(b)}, not a scalar")
        out[pow_ + "_out"] = [b]
    return out


def _pir_set_value_with_tensor(s):
    """Writes ``values`` (broadcast) into a slice of ``x``; the result is
    ``x``'s shape.  Only the whole-tensor form (no axes) is checked for the
    broadcast of ``values``."""
    x, v = s("x"), s("values")
    if not s.attr("axes"):
        s.need(len(v) <= len(x), f"values has rank {len(v)} > x's {len(x)}")
        for i, d in enumerate(reversed(v)):
            xd = x[len(x) - 1 - i]
            s.need(eq(d, 1) or eq(d, xd), f"values dim {len(v) - 1 - i} ({d}) does not "
                   f"broadcast to x's ({xd})")
    return {"out": [x]}


def _pir_subtract_grad(s):
    broadcast(s, s("x"), s("y"), s.attr("axis", -1))
    return {"x_grad": [s("x")], "y_grad": [s("y")]}


def _pir_sum(s):
    axis = s.attr("axis@value")
    if axis is None:
        raise RuleError("sum axes are not a constant (no axis@value)")
    return {"out": [reduce_shape(s, s("x"), list(axis), bool(s.attr("keepdim")), False)]}


RULES.update({
    "pd_op.subtract": _pir_add,
    "pd_op.subtract_grad": _pir_subtract_grad,
    "pd_op.sum": _pir_sum,
    "pd_op.sum_grad": grads_like(x_grad="x"),
    "pd_op.scale_": same_as("x", "out"),
    "pd_op.momentum_": _pir_momentum,
    "pd_op.adam_": _pir_adam,
    "pd_op.adamw_": _pir_adam,
    "pd_op.set_value_with_tensor_": _pir_set_value_with_tensor,
})


# -- PIR reshard index maps (3.3.1's planner): pd_op.slice, pd_op.concat of a
# stacked vector (split_with_num's).
def _pir_slice(s):
    """``pd_op.slice`` with constant bounds (``starts@value``/``ends@value``):
    Paddle's clamping and ``decrease_axis``, as the legacy ``slice`` rule."""
    starts, ends = s.attr("starts@value"), s.attr("ends@value")
    if starts is None or ends is None:
        raise RuleError("slice bounds are not constants (no starts@value/ends@value)")
    view = Shapes(_AttrView(s.op, {"axes": s.attr("axes", []), "starts": starts,
                                   "ends": ends,
                                   "decrease_axis": s.attr("decrease_axis", [])}),
                  {"Input": s.inputs.get("input")})
    out = _slice(view)
    s.needs.extend(view.needs)
    return {"out": out["Out"]}


class _AttrView:
    """An op seen with other attrs (a PIR op through a legacy rule)."""

    def __init__(self, op, attrs):
        self.type, self.inputs, self.outputs, self.attrs = op.type, op.inputs, op.outputs, attrs
        self.idx = getattr(op, "idx", 0)


def _pir_concat_vector(s):
    axis = s.attr("axis@value")
    if axis is None:
        raise RuleError("concat axis is not a constant (no axis@value)")
    vec = s("x")
    if len(getattr(vec, "pieces", [])) > 1:  # combine's pieces: sum along axis
        pieces = vec.pieces
        a = int(axis[0] if isinstance(axis, list) else axis) % max(len(pieces[0]), 1)
        out = list(pieces[0])
        for i, p in enumerate(pieces[1:], 1):
            s.need(len(p) == len(out), f"concat piece {i} has rank {len(p)}, not {len(out)}")
            for d, (x, y) in enumerate(zip(out, p)):
                if d != a:
                    s.need(eq(x, y), f"concat piece {i} dim {d} ({y}) is not {x}")
            out[a] = out[a] + p[a] if len(p) > a else out[a]
        return {"out": [out]}
    v = list(vec)
    piece = v[1:]
    axis = int(axis[0] if isinstance(axis, list) else axis) % max(len(piece), 1)
    piece[axis] = piece[axis] * v[0]
    return {"out": [piece]}


RULES.update({
    "pd_op.slice": _pir_slice,
    "pd_op.concat": _pir_concat_vector,
})


# -- slice and its grad ----------------------------------------------------------
def _slice(s):
    """Paddle's clamping of starts/ends on static dims; on a symbolic dim a
    non-negative start with an end past any size (INT_MAX) keeps ``d - s``,
    a smaller non-negative end needs ``end <= d``; tensor-valued
    starts/ends and negative bounds on symbolic dims are not modelled."""
    for slot in ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"):
        if s.has(slot):
            raise RuleError(f"slice with {slot}")
    x = list(s("Input"))
    out = list(x)
    for a, st, en in zip(s.attr("axes", []), s.attr("starts", []), s.attr("ends", [])):
        a, st, en = int(a) % max(len(x), 1), int(st), int(en)
        d = x[a]
        if is_static(d):
            st = max(0, min(d, st + d if st < 0 else st))
            en = max(0, min(d, en + d if en < 0 else en))
            out[a] = max(0, en - st)
        elif st >= 0 and en >= 2 ** 30:
            s.need(st < d, f"slice start {st} is past dim {a}")
            out[a] = d - st
        elif 0 <= st <= en:
            s.need(en <= d, f"slice end {en} is past dim {a}")
            out[a] = en - st
        else:
            raise RuleError(f"slice [{st}:{en}] of symbolic dim {a}")
    for a in sorted({int(v) % max(len(x), 1) for v in s.attr("decrease_axis", []) or []},
                    reverse=True):
        s.need(eq(out[a], 1), f"decrease_axis {a} has size {out[a]}, not 1")
        out.pop(a)
    return {"Out": [out]}


RULES.update({
    "slice": _slice,
    "slice_grad": grads_like(**{"Input@GRAD": "Input"}),
})


# -- the ops of paddleformers' causal LMs (cases/zoo.py: LLaMA, Phi-3, Gemma 3,
# GPT-OSS) as 3.3.1's PIR planner emits them.  Constant operands are read from
# their ``<slot>@value`` attrs (verify/pir_snapshot.py).  A vector value
# (builtin.combine of equal shapes) is [count] + the pieces' shape, as
# split_with_num's. -----------------------------------------------------------
def _const_list(s, name):
    v = s.attr(f"{name}@value")
    if v is None:
        raise RuleError(f"{name} is not a constant (no {name}@value)")
    return [int(x) for x in (v if isinstance(v, list) else [v])]


class Pieces(list):
    """A vector value's shape: ``[count] + the first piece's shape`` (what the
    vector rules read when the pieces are equal), with every piece's shape in
    ``pieces`` (builtin.combine of unequal pieces, e.g. a KV cache's
    zero-length past concatenated with the new keys)."""

    pieces: list = []


def _pir_combine(s):
    shapes = [list(sh) for sh in s.all("operands")]
    if len(shapes) != len(s.inputs.get("operands") or []):
        raise RuleError("builtin.combine: an operand has no known shape")
    if not shapes:
        return {"results": [[0]]}
    out = Pieces([len(shapes)] + shapes[0])
    out.pieces = shapes
    return {"results": [out]}


def _equal_pieces(s, v, what):
    """``v``'s pieces are all of one shape (else RuleError naming ``what``)."""
    for i, sh in enumerate(getattr(v, "pieces", [])[1:], 1):
        first = v.pieces[0]
        if len(sh) != len(first) or any(not (is_static(a) and is_static(b) and a == b)
                                        for a, b in zip(sh, first)):
            raise RuleError(f"{what} of a vector of unequal pieces {first} and {sh} "
                            f"(piece {i})")


def _pir_add_n(s):
    v = s("inputs")
    _equal_pieces(s, v, "add_n")
    return {"out": [list(v[1:])]}


def _pir_stack(s):
    """``pd_op.stack`` of a vector of equal pieces of rank r: the piece count
    inserted at ``axis`` (in ``[-(r+1), r]``)."""
    v = s("x")
    _equal_pieces(s, v, "stack")
    piece = list(v[1:])
    axis = int(s.attr("axis", 0))
    s.need(-(len(piece) + 1) <= axis <= len(piece),
           f"stack axis {axis} outside [{-(len(piece) + 1)}, {len(piece)}]")
    axis %= len(piece) + 1
    return {"out": [piece[:axis] + [v[0]] + piece[axis:]]}


def _pir_arange(s):
    start, end, step = (s.attr(f"{n}@value") for n in ("start", "end", "step"))
    if None in (start, end, step):
        raise RuleError("arange bounds are not constants")
    s.need(step != 0, "arange step is 0")
    if step == 0:
        return {}
    import math
    n = math.ceil((float(end) - float(start)) / float(step))
    s.need(n > 0, f"arange [{start}, {end}) step {step} is empty")
    return {"out": [[max(n, 0)]]}


def _pir_unsqueeze(s):
    x = list(s("x"))
    for a in _const_list(s, "axis"):
        a = a + len(x) + 1 if a < 0 else a
        s.need(0 <= a <= len(x), f"unsqueeze axis {a} out of range for rank {len(x)}")
        x.insert(min(max(a, 0), len(x)), 1)
    return {"out": [x]}


def _pir_tile(s):
    x, rep = list(s("x")), _const_list(s, "repeat_times")
    n = max(len(x), len(rep))
    x, rep = [1] * (n - len(x)) + x, [1] * (n - len(rep)) + rep
    for i, r in enumerate(rep):
        s.need(r > 0, f"tile repeat {r} of dim {i} is not positive")
    return {"out": [[d * r for d, r in zip(x, rep)]]}


def _pir_expand(s):
    x, shape = list(s("x")), _const_list(s, "shape")
    s.need(len(shape) >= len(x), f"expand to rank {len(shape)} from rank {len(x)}")
    if len(shape) < len(x):
        return {}
    x = [1] * (len(shape) - len(x)) + x
    out = []
    for i, (d, t) in enumerate(zip(x, shape)):
        if t == -1:
            out.append(d)
            continue
        s.need(z3.Or(d == t, d == 1) if not is_static(d) else (d == t or d == 1),
               f"expand dim {i}: {d} cannot become {t}")
        out.append(t)
    return {"out": [out]}


def _pir_tri(s):
    x = s("x")
    s.need(len(x) >= 2, f"tril/triu of rank {len(x)} (needs 2)")
    return {"out": [list(x)]}


def _pir_binary(s):
    return {"out": [broadcast(s, s("x"), s("y"), -1)]}


def _pir_where(s):
    xy = broadcast(s, s("x"), s("y"), -1)
    return {"out": [broadcast(s, s("condition"), xy, -1)]}


def _pir_binary_grad(s):
    broadcast(s, s("x"), s("y"), -1)
    return {"x_grad": [s("x")], "y_grad": [s("y")]}


def _pir_split_sections(s):
    """``pd_op.split`` by constant ``sections@value`` along ``axis@value`` (one
    -1 section takes the rest): a vector of the pieces."""
    x = list(s("x"))
    axis = _const_list(s, "axis")[0]
    axis = axis + len(x) if axis < 0 else axis
    secs = _const_list(s, "sections")
    d = x[axis]
    if -1 in secs:
        if not is_static(d):
            raise RuleError("split with a -1 section of a symbolic dim")
        secs[secs.index(-1)] = d - sum(c for c in secs if c != -1)
    s.need(eq(sum(secs), d), f"split sections {secs} do not sum to dim {axis} ({d})")
    pieces = [x[:axis] + [c] + x[axis + 1:] for c in secs]
    out = Pieces([len(pieces)] + pieces[0])
    out.pieces = pieces
    return {"out": [out]}


def _pir_empty(s):
    return {"out": [_const_list(s, "shape")]}


def _pir_assign_value(s):
    return {"out": [list(s.attr("shape", []))]}


def _pir_softmax_grad(s):
    y, g = s("out"), s("out_grad")
    s.need(len(y) == len(g), f"out_grad has rank {len(g)}, out {len(y)}")
    for i, (a, b) in enumerate(zip(y, g)):
        s.need(eq(a, b), f"out_grad dim {i} ({b}) is not out's ({a})")
    return {"x_grad": [list(y)]}


def _ce_axis(s, x):
    a = int(s.attr("axis", -1))
    return a + len(x) if a < 0 else a


def _pir_cross_entropy(s):
    """Hard labels: ``label`` is ``input`` with the class dim 1 (or without it);
    ``loss`` is ``input`` with the class dim 1, ``softmax`` is ``input``."""
    x, lab = list(s("input")), list(s("label"))
    axis = _ce_axis(s, x)
    reduced = x[:axis] + [1] + x[axis + 1:]
    if s.attr("soft_label", False):
        s.need(len(lab) == len(x) and all(eq(a, b) for a, b in zip(lab, x)),
               f"soft label {lab} is not input's shape {x}")
    else:
        s.need((len(lab) == len(x) and all(eq(a, b) for a, b in zip(lab, reduced)))
               or (len(lab) == len(x) - 1 and all(eq(a, b) for a, b in
                                                  zip(lab, x[:axis] + x[axis + 1:]))),
               f"label {lab} does not fit input {x} with class axis {axis}")
    return {"softmax": [x], "loss": [reduced]}


def _pir_cross_entropy_grad(s):
    sm, lg = list(s("softmax")), list(s("loss_grad"))
    axis = _ce_axis(s, sm)
    want = sm[:axis] + [1] + sm[axis + 1:]
    s.need(len(lg) == len(want) and all(eq(a, b) for a, b in zip(lg, want)),
           f"loss_grad {lg} is not softmax {sm} with the class dim 1")
    return {"input_grad": [sm]}


def _pir_embedding(s):
    w = s("weight")
    s.need(len(w) == 2, f"embedding weight has rank {len(w)}, not 2")
    return {"out": [list(s("x")) + [w[-1]]]}


def _pir_embedding_grad(s):
    w, x, g = s("weight"), list(s("x")), list(s("out_grad"))
    want = x + [w[-1]]
    s.need(len(g) == len(want) and all(eq(a, b) for a, b in zip(g, want)),
           f"out_grad {g} is not ids {x} + [{w[-1]}]")
    return {"weight_grad": [list(w)]}


def _pir_c_embedding(s):
    w = s("weight")
    s.need(len(w) == 2, f"c_embedding weight has rank {len(w)}, not 2")
    return {"out": [list(s("x")) + [w[-1]]]}


def _pir_c_embedding_grad(s):
    w, x, g = s("weight"), list(s("x")), list(s("out_grad"))
    want = x + [w[-1]]
    s.need(len(g) == len(want) and all(eq(a, b) for a, b in zip(g, want)),
           f"out_grad {g} is not ids {x} + [{w[-1]}]")
    return {"weight_grad": [list(w)]}


def _pir_reshape_grad(s):
    x, g = list(s("x")), list(s("out_grad"))
    s.need(eq(prod(x), prod(g)), f"out_grad {g} does not hold x's {x} elements")
    return {"x_grad": [x]}


def _pir_concat_grad(s):
    vec = s("x")
    if len(getattr(vec, "pieces", [])) > 1:  # unequal pieces: the grads are the pieces
        out = _pir_concat_vector(s)["out"][0]
        g = list(s("out_grad"))
        s.need(len(g) == len(out) and all(eq(a, b) for a, b in zip(g, out)),
               f"out_grad {g} is not the concatenation {out}")
        return {"x_grad": [vec]}
    v = list(s("x"))
    axis = _const_list(s, "axis")[0]
    piece = v[1:]
    axis = axis % max(len(piece), 1)
    g = list(s("out_grad"))
    want = piece[:axis] + [piece[axis] * v[0]] + piece[axis + 1:]
    s.need(len(g) == len(want) and all(eq(a, b) for a, b in zip(g, want)),
           f"out_grad {g} is not the concatenation {want}")
    return {"x_grad": [v]}


def _pir_slice_grad(s):
    return {"input_grad": [list(s("input"))]}


def _pir_same(slot_in, *slots_out):
    def rule(s):
        x = list(s(slot_in))
        return {o: [x] for o in slots_out}
    return rule


def _pir_layer_norm(s):
    """``out`` is ``x``; ``mean`` / ``variance`` keep the dims before
    ``begin_norm_axis``; ``scale`` and ``bias`` (optional) are 1-D of the
    normalised dims' size."""
    x = list(s("x"))
    axis = int(s.attr("begin_norm_axis", 1))
    axis = axis + len(x) if axis < 0 else axis
    inner = prod(x[axis:])
    for slot in ("scale", "bias"):
        for p in s.all(slot):
            s.need(len(p) == 1, f"{slot} must be 1-D, is {list(p)}")
            if len(p) == 1:
                s.need(eq(p[0], inner), f"{slot} has {p[0]} elements, the normalised dims "
                                        f"{inner}")
    return {"out": [x], "mean": [x[:axis]], "variance": [x[:axis]]}


def _pir_layer_norm_grad(s):
    """``x_grad`` is ``x`` (and ``out_grad``); ``scale_grad`` / ``bias_grad``
    their parameters' shapes where those are given."""
    x, g = list(s("x")), list(s("out_grad"))
    s.need(len(x) == len(g), f"out_grad has rank {len(g)}, x {len(x)}")
    for i, (a, b) in enumerate(zip(x, g)):
        s.need(eq(a, b), f"out_grad dim {i} ({b}) is not x's ({a})")
    out = {"x_grad": [x]}
    for slot in ("scale", "bias"):
        got = s.all(slot)
        if got:
            out[f"{slot}_grad"] = [list(got[0])]
    return out


def _pir_swiglu(s):
    """SwiGLUInferMeta (3.3.1): with ``y`` x and y of one shape, out x's;
    without, x's last dim even and out's its half (x split in two)."""
    x = list(s("x"))
    if s.has("y"):
        return {"out": [list(_pir_same_shapes(s, "x", "y"))]}
    s.need(len(x) >= 1, "swiglu without y of a 0-D x")
    if not x:
        return {"out": [x]}
    last = x[-1]
    s.need(eq(last % 2, 0), f"swiglu without y: x's last dim ({last}) is odd")
    return {"out": [x[:-1] + [last // 2 if is_static(last) else last / 2]]}


def _pir_swiglu_grad(s):
    """x_grad (and y_grad) of x's (y's) shape; out_grad of the forward's out."""
    out = _pir_swiglu(s)["out"][0]
    g = s("out_grad")
    s.need(len(g) == len(out), f"out_grad has rank {len(g)}, swiglu's out {len(out)}")
    for i, (a, b) in enumerate(zip(out, g)):
        s.need(eq(a, b), f"out_grad dim {i} ({b}) differs from swiglu's out ({a})")
    res = {"x_grad": [list(s("x"))]}
    if s.has("y"):
        res["y_grad"] = [list(s("y"))]
    return res


_UNARY = ["pd_op.cast", "pd_op.cos", "pd_op.sin", "pd_op.rsqrt", "pd_op.silu", "pd_op.pow",
          "pd_op.softmax", "pd_op.assign_out_", "pd_op.gelu", "pd_op.relu", "pd_op.share_data_",
          "pd_op.sqrt", "pd_op.tanh"]

RULES.update({t: _pir_same("x", "out") for t in _UNARY})
RULES.update({
    "builtin.combine": _pir_combine,
    "pd_op.add_n": _pir_add_n,
    "pd_op.arange": _pir_arange,
    "pd_op.unsqueeze": _pir_unsqueeze,
    "pd_op.tile": _pir_tile,
    "pd_op.expand": _pir_expand,
    "pd_op.tril": _pir_tri,
    "pd_op.assign_value_": _pir_assign_value,
    "pd_op.empty": _pir_empty,
    "pd_op.split": _pir_split_sections,
    "pd_op.set_value_": _pir_same("x", "out"),
    "pd_op.where": _pir_where,
    "pd_op.multiply": _pir_binary,
    "pd_op.divide": _pir_binary,
    "pd_op.maximum": _pir_binary,
    "pd_op.minimum": _pir_binary,
    "pd_op.stack": _pir_stack,
    # SquaredL2NormInferMeta: out is [1] whatever x's shape
    "pd_op.squared_l2_norm": lambda s: (s("x"), {"out": [[1]]})[1],
    "pd_op.bitwise_and": _pir_binary,
    "pd_op.not_equal": _pir_binary,
    "pd_op.multiply_grad": _pir_binary_grad,
    "pd_op.divide_grad": _pir_binary_grad,
    "pd_op.rsqrt_grad": _pir_same("out", "x_grad"),
    "pd_op.tanh_grad": _pir_softmax_grad,  # x_grad is out (and out_grad), as softmax's
    "pd_op.silu_grad": _pir_same("x", "x_grad"),
    "pd_op.swiglu": _pir_swiglu,
    "pd_op.swiglu_grad": _pir_swiglu_grad,
    "pd_op.pow_grad": _pir_same("x", "x_grad"),
    "pd_op.gelu_grad": _pir_same("x", "x_grad"),
    "pd_op.relu_grad": _pir_softmax_grad,  # x_grad is out (and out_grad), as softmax's
    "pd_op.layer_norm": _pir_layer_norm,
    "pd_op.layer_norm_grad": _pir_layer_norm_grad,
    "pd_op.softmax_grad": _pir_softmax_grad,
    "pd_op.cross_entropy_with_softmax": _pir_cross_entropy,
    "pd_op.cross_entropy_with_softmax_grad": _pir_cross_entropy_grad,
    "pd_op.embedding": _pir_embedding,
    "pd_op.embedding_grad": _pir_embedding_grad,
    "pd_op.c_embedding": _pir_c_embedding,
    "pd_op.c_embedding_grad": _pir_c_embedding_grad,
    "pd_op.reshape_grad": _pir_reshape_grad,
    "pd_op.concat_grad": _pir_concat_grad,
    "pd_op.slice_grad": _pir_slice_grad,
})

def _dims_mapping(text) -> tuple:
    """``(mesh shape, dims mapping)`` of a dist attr as the snapshot renders it."""
    mesh = re.search(r"mesh_shape:\[([\d,\s]*)\]", text or "")
    dims = re.search(r"dims_mappings:\[([-\d,\s]*)\]", text or "")
    if not mesh or not dims:
        raise RuleError(f"dist attr {text!r} names no mesh shape or dims mapping")
    return ([int(x) for x in mesh.group(1).split(",") if x.strip()],
            [int(x) for x in dims.group(1).split(",") if x.strip()])


def _local_of(s, shape, mesh, dims, what):
    """The local shape Paddle gives a value of global ``shape`` under ``dims``
    on a mesh of ``mesh`` (``InferLocalDDim``: a dim split over n processes is
    ceil(size / n) on every rank); None where a dim is dynamic."""
    s.need(len(dims) == len(shape),
           f"{what}'s dims mapping {dims} does not fit its global shape {shape}")
    out = []
    for d, m in zip(shape, dims):
        if d is None or d < 0:
            return None
        if m == -1:
            out.append(d)
        elif 0 <= m < len(mesh) and mesh[m] > 0:
            out.append(-(-d // mesh[m]))
        else:
            raise RuleError(f"{what}'s dims mapping {dims} names no axis of mesh {mesh}")
    return out


def _reshard(s):
    """``dist_op.reshard`` changes a value's placements, never its global
    shape: on global shapes (the planner's serial and partition stages) its
    result has its operand's shape.  On local shapes (a stage checked on its
    dense clone, where a reshard not yet removed is left) the snapshot records
    the operand's and result's dist attrs and global shapes
    (``verify/plan/stages.py`` ``dist_records``): the global shapes are equal,
    the operand's local shape is its global shape under its dims mapping, and
    the result's local shape is that global shape under the result's.
    Without the global shapes the rule derives a result only where the
    placements keep every dim's mapping (an uneven split's local size is not
    derived from a local one), and says so otherwise."""
    x = list(s("operands"))
    if s.program_shapes == "global":
        return {"results": [x]}
    dist = s.attr("dist_attr") or {}
    try:
        src = _dims_mapping((dist.get("operands") or [None])[0])
        dst = _dims_mapping((dist.get("results") or [None])[0])
    except (AttributeError, TypeError):
        raise RuleError("no operand and result dist attrs") from None
    shapes = dist.get("shapes") if isinstance(dist, dict) else None
    if shapes and s.program_shapes == "local":
        try:
            g_in = list((shapes.get("operands") or [None])[0])
            g_out = list((shapes.get("results") or [None])[0])
        except TypeError:
            raise RuleError(f"recorded global shapes {shapes} name no operand and result") \
                from None
        s.need(g_in == g_out, f"reshard changes the global shape {g_in} to {g_out}")
        want = _local_of(s, g_in, *src, "the operand")
        out = _local_of(s, g_in, *dst, "the result")
        if want is not None and out is not None:
            name = (s.op.inputs.get("operands") or ["?"])[0]
            s.need(len(x) == len(want),
                   f"operand {name}'s local shape {x} has rank {len(x)}, its global shape "
                   f"{g_in} rank {len(g_in)}")
            for i, (a, b) in enumerate(zip(x, want)):
                s.need(eq(a, b), f"operand {name} dim {i} is {a}, not {b}: its global shape "
                                 f"{g_in} under dims mapping {src[1]} on mesh {src[0]}")
            return {"results": [out]}
    if src != dst:
        raise RuleError(f"reshard from {src} to {dst} on {s.program_shapes or 'undeclared'} "
                        "shapes: the result's local shape is not derived")
    return {"results": [x]}


RULES["dist_op.reshard"] = _reshard


# -- the GLM-style rotary of ERNIE 4.5 (cases/zoo.py): repeat_interleave,
# strided_slice (even/odd lanes), flatten, and the grads of the last two and of
# stack (a vector of the stacked pieces, as builtin.combine's). ---------------
def _same_shape(s, got, want, what):
    s.need(len(got) == len(want), f"{what} has rank {len(got)}, not {len(want)}")
    for i, (a, b) in enumerate(zip(got, want)):
        s.need(eq(a, b), f"{what} dim {i} ({a}) is not {b}")


def _pir_repeat_interleave(s):
    x = list(s("x"))
    rep = int(s.attr("repeats", 0))
    s.need(rep > 0, f"repeat_interleave repeats {rep} is not positive")
    if not x:
        return {"out": [[rep]]}
    axis = int(s.attr("axis", 0)) % len(x)
    x[axis] = x[axis] * rep
    size = int(s.attr("output_size", -1))
    if size != -1:
        s.need(eq(x[axis], size), f"repeat_interleave output_size {size} is not {x[axis]}")
    return {"out": [x]}


def _strided_shape(s, x):
    """x's shape through ``strided_slice``'s constant bounds: Paddle's
    clamping on static dims; on a symbolic dim a non-negative start with an
    end past any size keeps ``ceil((d - start) / stride)``; negative strides
    and other bounds on symbolic dims are not modelled."""
    starts, ends, strides = (_const_list(s, n) for n in ("starts", "ends", "strides"))
    axes = [int(a) for a in s.attr("axes", [])]
    s.need(len(axes) == len(starts) == len(ends) == len(strides),
           f"strided_slice axes {axes}, starts {starts}, ends {ends}, strides {strides} "
           "differ in length")
    out = list(x)
    for a, st, en, sp in zip(axes, starts, ends, strides):
        if sp <= 0:
            raise RuleError(f"strided_slice with stride {sp}")
        a = a % max(len(x), 1)
        d = x[a]
        if is_static(d):
            st = max(0, min(d, st + d if st < 0 else st))
            en = max(0, min(d, en + d if en < 0 else en))
            out[a] = max(0, (en - st + sp - 1) // sp)
        elif st >= 0 and en >= 2 ** 30:
            s.need(st < d, f"strided_slice start {st} is past dim {a}")
            out[a] = (d - st + sp - 1) / sp
        else:
            raise RuleError(f"strided_slice [{st}:{en}:{sp}] of symbolic dim {a}")
    return out


def _pir_strided_slice(s):
    return {"out": [_strided_shape(s, list(s("x")))]}


def _pir_strided_slice_grad(s):
    x = list(s("x"))
    _same_shape(s, list(s("out_grad")), _strided_shape(s, x), "out_grad")
    return {"x_grad": [x]}


def _pir_flatten(s):
    x = list(s("x"))
    if not x:
        return {"out": [[1]]}
    a, b = (int(s.attr(n, 1)) % len(x) for n in ("start_axis", "stop_axis"))
    s.need(a <= b, f"flatten start_axis {a} is after stop_axis {b}")
    if a > b:
        return {}
    return {"out": [x[:a] + [prod(x[a:b + 1])] + x[b + 1:]]}


def _pir_stack_grad(s):
    v, g = s("x"), list(s("out_grad"))
    _equal_pieces(s, v, "stack_grad")
    piece = list(v[1:])
    axis = int(s.attr("axis", 0)) % (len(piece) + 1)
    _same_shape(s, g, piece[:axis] + [v[0]] + piece[axis:], "out_grad")
    return {"x_grad": [v]}


RULES.update({
    "pd_op.repeat_interleave": _pir_repeat_interleave,
    "pd_op.strided_slice": _pir_strided_slice,
    "pd_op.strided_slice_grad": _pir_strided_slice_grad,
    "pd_op.flatten": _pir_flatten,
    "pd_op.flatten_grad": _pir_reshape_grad,  # out_grad holds x's elements; x_grad is x
    "pd_op.stack_grad": _pir_stack_grad,
})
