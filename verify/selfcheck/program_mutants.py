"""Program-level mutation operators, applied to a rewritten program.

Each operator picks a site from the snapshot of the rewritten program (so
the choice is deterministic and explainable), edits the live Paddle program
in place, and returns a :class:`Mutation`, or ``None`` when the program has
no site for it.  ``equivalent_by_argument`` is set when the operator itself
can argue the mutant changes nothing (a survivor then is no gap).

Two families, reported apart (``Mutation.scope``):

* ``legacy`` (``LEGACY_OPERATORS``): whole-program operators that act on the
  first matching op, wherever it is (often the loss head), and may leave a
  program that is not well formed (a read without a writer, a shape that no
  longer holds).  Easy to kill; kept as a smoke test of every check.
* ``in_region`` (``IN_REGION_OPERATORS``): operators that keep the program
  well formed (every read still has a writer, no declared shape changes) and
  act inside the region the pass rewrote: the ops of the rewritten program
  whose rendered text is not in the original (added or changed) and their
  direct neighbours (the last writer of each var they read, the readers of
  each var they write).  They need the original snapshot: call
  ``operator(main, startup, after, rank, before=before)``, or let
  :func:`prepare` choose the site from one application of the pass and hand
  back a mutator that replays exactly that edit (on the float32 twin of an
  AMP case too).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from verify.ir.legacy_ir import paddle_module

from verify.checks.def_use import DECLARED_ONLY

from verify.ir.program_edits import Edit, EditNotPossible, _reorder, apply_legacy, apply_pir

COLLECTIVES = {"all_reduce", "c_allreduce_sum", "mp_allreduce_sum", "reduce_scatter",
               "all_gather", "broadcast", "c_identity"}


@dataclass
class Mutation:
    operator: str
    description: str
    equivalent_by_argument: str = ""
    scope: str = "legacy"  # legacy | in_region
    site: dict = field(default_factory=dict)  # op index, op type, var, ...


def _deps(a, b) -> bool:
    wa, ra = set(a.writes()), set(a.reads())
    wb, rb = set(b.writes()), set(b.reads())
    return bool(wa & rb or wb & ra or wa & wb)


def drop_op(main, startup, snap, rank):
    cands = [o for o in snap.ops if o.role in (0, 1) and o.type not in ("fill_constant",)]
    if not cands:
        return None
    op = cands[(rank * 7 + 3) % len(cands)]
    main.global_block()._remove_op(op.idx)
    return Mutation("drop op", f"dropped op {op.idx} ({op.type})")


def swap_dependent(main, startup, snap, rank):
    pairs = [(a, b) for a, b in zip(snap.ops, snap.ops[1:]) if _deps(a, b)
             and a.type not in COLLECTIVES and b.type not in COLLECTIVES]
    if not pairs:
        return None
    a, b = pairs[(rank * 5 + 1) % len(pairs)]
    order = list(range(len(snap.ops)))
    order[a.idx], order[b.idx] = b.idx, a.idx
    _reorder(main.global_block(), order)
    return Mutation("swap dependent ops", f"swapped op {a.idx} ({a.type}) and op {b.idx} "
                                          f"({b.type}), which depend on each other")


def swap_across_collective(main, startup, snap, rank):
    for c in snap.ops:
        if c.type in COLLECTIVES and c.idx > 0 and c.type != "c_identity":
            prev = snap.ops[c.idx - 1]
            if prev.type in COLLECTIVES:
                continue
            order = list(range(len(snap.ops)))
            order[prev.idx], order[c.idx] = c.idx, prev.idx
            _reorder(main.global_block(), order)
            eq = "" if _deps(prev, c) else (
                f"op {prev.idx} ({prev.type}) and the {c.type} share no variable")
            return Mutation("swap across collective",
                            f"moved op {prev.idx} ({prev.type}) after {c.type} at op {c.idx}",
                            eq)
    return None


def rename_input(main, startup, snap, rank):
    for op in snap.ops:
        if op.role != 1 or op.type in COLLECTIVES:
            continue
        for slot, names in op.inputs.items():
            for n in names:
                v = snap.var(n)
                if v is None or v.is_parameter:
                    continue
                twins = [w for w in snap.vars.values() if w.name != n and w.shape == v.shape
                         and w.dtype == v.dtype and not w.is_parameter
                         and any(w.name in o.writes() for o in snap.ops[:op.idx])]
                if twins:
                    w = sorted(twins, key=lambda t: t.name)[rank % len(twins)]
                    main.global_block().ops[op.idx]._rename_input(n, w.name)
                    return Mutation("rename input", f"op {op.idx} ({op.type}) reads {w.name} "
                                                    f"instead of {n} (same shape)")
    return None


def reshape_target(main, startup, snap, rank):
    for op in snap.ops:
        if op.type == "reshape2":
            shape = list(op.attrs.get("shape", []))
            if len(shape) == 2 and shape[0] > 0 and shape[1] > 0 and shape[0] != shape[1]:
                new = [shape[1], shape[0]]
            elif len(shape) >= 2 and all(d > 0 for d in shape):
                new = [shape[0] * shape[1]] + shape[2:]
            else:
                continue
            main.global_block().ops[op.idx].desc._set_int32s_attr("shape", new)
            return Mutation("reshape target", f"reshape2 at op {op.idx}: target {shape} -> "
                                              f"{new} (same element count)")
    return None


def collective_attr(main, startup, snap, rank):
    for op in snap.ops:
        if op.type == "all_reduce":
            main.global_block().ops[op.idx].desc._set_int32_attr("reduce_type", 1)
            return Mutation("reduce_type", f"all_reduce at op {op.idx}: SUM -> MAX")
        if op.type == "c_allreduce_sum":
            main.global_block().ops[op.idx].desc._set_int32_attr("ring_id", 99)
            return Mutation("ring_id", f"c_allreduce_sum at op {op.idx}: ring 0 -> 99")
    return None


def delete_startup_init(main, startup, snap, rank):
    for op in snap.startup_ops:
        if any(snap.var(n) is not None and snap.var(n).is_parameter for n in op.writes()):
            startup.global_block()._remove_op(op.idx)
            return Mutation("delete startup init",
                            f"startup op {op.idx} ({op.type} of {op.writes()[0]}) deleted")
    return None


def remove_collective(main, startup, snap, rank):
    for op in snap.ops:
        if op.type in COLLECTIVES and op.type != "c_identity":
            main.global_block()._remove_op(op.idx)
            return Mutation("remove collective", f"removed {op.type} at op {op.idx}")
    return None


def duplicate_bias_add(main, startup, snap, rank):
    for op in snap.ops:
        if op.type == "elementwise_add" and op.role == 0:
            y = op.inputs["Y"][0]
            v = snap.var(y)
            if v is None or not v.is_parameter:
                continue
            out = op.outputs["Out"][0]
            block = main.global_block()
            block._insert_op_without_sync(op.idx + 1, type="elementwise_add",
                                          inputs={"X": [out], "Y": [y]},
                                          outputs={"Out": [out]},
                                          attrs={"axis": -1, "op_role": 0})
            block._sync_with_cpp()
            return Mutation("duplicate bias add", f"bias {y} added twice after op {op.idx}")
    return None


def cast_dtype(main, startup, snap, rank):
    from paddle.base import core

    for op in snap.ops:
        if op.type == "cast":
            d = main.global_block().ops[op.idx].desc
            old = d.attr("out_dtype")
            new = int(core.VarDesc.VarType.FP64) if old != int(core.VarDesc.VarType.FP64) \
                else int(core.VarDesc.VarType.FP32)
            d._set_int32_attr("out_dtype", new)
            return Mutation("cast dtype", f"cast at op {op.idx}: out_dtype {old} -> {new}")
    return None


def flip_trans(main, startup, snap, rank):
    for op in snap.ops:
        if op.type in ("matmul_v2", "matmul_v2_grad") and op.role == 1:
            x, y = snap.shape(op.inputs["X"][0]), snap.shape(op.inputs["Y"][0])
            if x and y and len(y) == 2 and y[0] == y[1]:
                slot = "trans_y"
            elif x and len(x) >= 2 and x[-1] == x[-2]:
                slot = "trans_x"
            else:
                slot = "trans_y"
            d = main.global_block().ops[op.idx].desc
            d._set_bool_attr(slot, not bool(op.attrs.get(slot)))
            return Mutation("flip trans", f"{op.type} at op {op.idx}: {slot} flipped")
    return None


LEGACY_OPERATORS = [drop_op, swap_dependent, swap_across_collective, rename_input,
                    reshape_target, collective_attr, delete_startup_init, remove_collective,
                    duplicate_bias_add, cast_dtype, flip_trans]
for _op in LEGACY_OPERATORS:
    _op.scope = "legacy"



# -- in-region operators --------------------------------------------------
#
# Each is a RegionOperator: ``plan(before, after, rank)`` picks the site from
# the two snapshots (deterministically: candidate sites in region order, the
# added/changed ops first, then their neighbours, each by index; the rank
# rotates through them) and returns a Plan, whose ``apply`` edits a live
# program.  Sites are restricted to edits that keep the program well formed
# and that a consumer really sees: a var read only for its shape (the X of
# an elementwise_add_grad, say) is no site, a value that nothing reads after
# the edit is no site, a sibling equal in value (c_identity's input and
# output, say) is no sibling.

FLOAT_DTYPES = {"float16", "bfloat16", "float32", "float64"}
# (op type, input slot) that the op reads for its shape only: a change of
# value there changes nothing.
SHAPE_ONLY = {("elementwise_add_grad", "X"), ("elementwise_add_grad", "Y"),
              ("elementwise_sub_grad", "X"), ("elementwise_sub_grad", "Y"),
              ("reduce_mean_grad", "X"), ("reduce_sum_grad", "X"),
              ("reshape2_grad", "XShape"), ("transpose2_grad", "XShape"),
              ("fill_zeros_like", "X"), ("fill_any_like", "X"),
              # phi's layer_norm_grad kernel never reads the bias (its grads
              # need x, scale, mean, variance and dy only)
              ("layer_norm_grad", "Bias"), ("pd_op.layer_norm_grad", "bias"),
              # PIR spellings
              ("pd_op.add_grad", "x"), ("pd_op.add_grad", "y"),
              ("pd_op.subtract_grad", "x"), ("pd_op.subtract_grad", "y"),
              ("pd_op.mean_grad", "x"), ("pd_op.sum_grad", "x"),
              ("pd_op.reshape_grad", "xshape"), ("pd_op.full_like", "x")}
# (op type, input slot, output slot) whose output equals that input in value
# (when their shapes are equal).
VALUE_COPIES = {("c_identity", "X", "Out"), ("assign", "X", "Out"),
                ("share_data", "X", "Out"), ("memcpy", "X", "Out"),
                ("elementwise_add_grad", "Out@GRAD", "X@GRAD"),
                ("elementwise_add_grad", "Out@GRAD", "Y@GRAD"),
                ("elementwise_sub_grad", "Out@GRAD", "X@GRAD"),
                ("pd_op.assign", "x", "out"), ("pd_op.add_grad", "out_grad", "x_grad"),
                ("pd_op.add_grad", "out_grad", "y_grad"),
                ("pd_op.subtract_grad", "out_grad", "x_grad")}


# (op type, input slot): the output slot whose value alone the kernel
# computes from it; without that output the input is not read (phi's CPU
# layer_norm_grad uses the scale for the input's gradient only).
READ_FOR_OUTPUT = {("layer_norm_grad", "Scale"): "X@GRAD",
                   ("pd_op.layer_norm_grad", "scale"): "x_grad"}


def reads_value(op, slot) -> bool:
    """``op`` reads the values of input ``slot``, not only its dims: not in
    :data:`SHAPE_ONLY`, not a slot whose use depends on the op's attrs
    that the dataflow check declares named-only (``def_use.DECLARED_ONLY``:
    ``coalesce_tensor``'s ``Input`` without ``copy_data``, whose kernel
    sizes the fused buffer by it and copies nothing), and not a slot of
    :data:`READ_FOR_OUTPUT` whose output the op does not write."""
    if (op.type, slot) in SHAPE_ONLY or slot in NO_VALUE_SLOTS:
        return False
    needs = READ_FOR_OUTPUT.get((op.type, slot))
    if needs is not None and not any(op.outputs.get(needs) or ()):
        return False
    return slot not in DECLARED_ONLY.get(op.type, lambda _: ())(op)


REDUCE_MAX = 1  # phi ReduceType::kRedMax
NO_VALUE_SLOTS = {"XShape", "xshape"}


@dataclass
class Region:
    """Op indices of the rewritten program: what the pass added or changed
    (``core``) and their direct producers and consumers (``neighbours``)."""

    core: list
    neighbours: list

    def sites(self) -> list:
        return list(self.core) + list(self.neighbours)

    def where(self, idx) -> str:
        return "added/changed by the pass" if idx in self.core else "next to a rewritten op"


def _readers(snap, var, idx) -> list:
    """``(op, slot)`` reading ``var`` after op ``idx``, up to (and with) the
    next op that writes it."""
    out = []
    for op in snap.ops[idx + 1:]:
        for slot, names in sorted(op.inputs.items()):
            if var in names:
                out.append((op, slot))
        if var in op.writes():
            break
    return out


def _value_readers(snap, var, idx) -> list:
    return [(o, s) for o, s in _readers(snap, var, idx) if reads_value(o, s)]


def _last_writer(snap, var, idx):
    for op in reversed(snap.ops[:idx]):
        if var in op.writes():
            return op.idx
    return None


def _defined_before(snap, var, idx) -> bool:
    """Something wrote ``var`` before op ``idx``: a feed, the startup
    program, or an earlier op."""
    v = snap.var(var)
    return (var in snap.feeds or (v is not None and v.is_data) or var in snap.startup_writes()
            or _last_writer(snap, var, idx) is not None)


def region(before, after) -> Region:
    """The region of ``after`` the pass rewrote, relative to ``before``."""
    left = Counter(o.render() for o in before.ops)
    core = []
    for op in after.ops:
        r = op.render()
        if left[r] > 0:
            left[r] -= 1
        else:
            core.append(op.idx)
    near = set()
    for i in core:
        op = after.ops[i]
        for v in op.reads():
            w = _last_writer(after, v, i)
            if w is not None:
                near.add(w)
        for v in op.writes():
            near.update(o.idx for o, _ in _readers(after, v, i))
    return Region(core, sorted(near - set(core)))


def _value_outputs(snap, op):
    """``(var name, Var)`` of the floating-point values ``op`` writes."""
    for slot, names in sorted(op.outputs.items()):
        if slot in NO_VALUE_SLOTS:
            continue
        for n in names:
            v = snap.var(n)
            if v is not None and v.dtype in FLOAT_DTYPES and 0 not in v.shape:
                yield n, v


def _value_classes(snap) -> dict:
    """var -> representative of the vars provably equal to it in value."""
    parent = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for op in snap.ops:
        for t, si, so in VALUE_COPIES:
            if op.type != t:
                continue
            for a in op.inputs.get(si, []):
                for b in op.outputs.get(so, []):
                    if snap.shape(a) == snap.shape(b):
                        parent[find(b)] = find(a)
    return {n: find(n) for n in snap.vars}


@dataclass
class Plan:
    """One chosen edit: the Mutation it makes and how to make it on a live
    program.  ``ops`` are the ops of the program the site was chosen on; the
    live program must have the same op types in the same order (the program
    itself, or the float32 twin of an AMP case, whose casts write other
    names): ``edit(main, startup, tr)`` gets ``tr``, which maps a var name
    of the chosen-on program to the live program's."""

    mutation: Mutation
    edit: Edit  # carried out by verify/ir/program_edits.py on either IR
    ops: list
    ir: str = "legacy"

    def translation(self, main):
        """``{name: live name}``, or None when the programs do not align."""
        live = main.global_block().ops
        if len(live) != len(self.ops):
            return None
        tr = {}
        for a, op in zip(self.ops, live):
            if a.type != op.type:
                return None
            for slots, get in ((a.inputs, op.desc.input), (a.outputs, op.desc.output)):
                for slot, names in slots.items():
                    for x, y in zip(names, get(slot)):
                        if tr.setdefault(x, y) != y:
                            return None
        return tr

    def apply(self, main, startup):
        if self.ir == "pir":
            try:
                apply_pir(self.edit, main, startup, self.ops)
            except EditNotPossible:
                return None
        else:
            tr = self.translation(main)
            if tr is None:
                return None
            apply_legacy(self.edit, main, startup, lambda n: tr.get(n, n))
        return Mutation(**{k: (dict(v) if isinstance(v, dict) else v)
                           for k, v in self.mutation.__dict__.items()})


class RegionOperator:
    """An in-region operator; ``choose(before, after, region, rank)`` -> Plan."""

    scope = "in_region"

    def __init__(self, name, label, choose):
        self.__name__ = name
        self.__qualname__ = name
        self.label = label
        self._choose = choose

    def __repr__(self):
        return f"<in-region operator {self.__name__}>"

    def plan(self, before, after, rank):
        return self._choose(before, after, region(before, after), rank)

    def __call__(self, main, startup, snap, rank, before=None):
        if before is None:
            raise ValueError(f"{self.__name__} acts on the region the pass rewrote and needs the "
                             "original snapshot: call it with before=..., or use "
                             "program_mutants.prepare(operator, adapter, case, rank)")
        p = self.plan(before, snap, rank)
        return None if p is None else p.apply(main, startup)


def _mutation(label, desc, op, var, **site):
    return Mutation(label, desc, scope="in_region",
                    site=dict(op_index=op.idx, op_type=op.type, var=var, **site))


def _plan(mutation, edit, after) -> "Plan":
    return Plan(mutation, edit, after.ops, after.meta.get("ir", "legacy"))


def _tensor_sites(after, reg, need_pair=False):
    """``(op, var, Var, readers)`` for region ops' floating outputs that some
    later op reads for its value."""
    out = []
    for i in reg.sites():
        op = after.ops[i]
        for n, v in _value_outputs(after, op):
            if need_pair and _equal_axes(v.shape) is None:
                continue
            if not _value_readers(after, n, i):
                continue
            out.append((op, n, v, [o.idx for o, _ in _readers(after, n, i)]))
    return out


def _equal_axes(shape):
    for a in range(len(shape)):
        for b in range(a + 1, len(shape)):
            if shape[a] == shape[b] and shape[a] > 1:
                return a, b
    return None


def _choose_swap_axes(before, after, reg, rank):
    sites = _tensor_sites(after, reg, need_pair=True)
    if not sites:
        return None
    op, n, v, readers = sites[rank % len(sites)]
    a, b = _equal_axes(v.shape)
    perm = list(range(len(v.shape)))
    perm[a], perm[b] = b, a
    edit = Edit("insert_unary", op.idx, var=n, readers=readers,
                params={"unary": "transpose", "perm": perm})
    desc = (f"op {op.idx} ({op.type}, {reg.where(op.idx)}) writes {n} {v.shape}: a transpose "
            f"swapping axes {a} and {b} (both {v.shape[a]}) is inserted after it and its "
            f"reader(s) {readers} read its result")
    return _plan(_mutation("swapped axes", desc, op, n, axes=[a, b], readers=readers), edit,
                 after)


# Adam's update m / (sqrt(v) + eps) does not change (up to eps) when its
# gradient is scaled by a positive factor at every step.
SCALE_INVARIANT_SINKS = {("adam", "Grad"), ("adamw", "Grad"), ("lamb", "Grad"),
                         ("pd_op.adam_", "grad"), ("pd_op.adamw_", "grad")}
# (op type, input slot) of ops whose outputs are positively homogeneous of
# degree 1 in that input (the others fixed): a positive scale of the input
# scales the outputs (some outputs may not depend on it at all).
HOMOGENEOUS = {("matmul_v2", "X"), ("matmul_v2", "Y"), ("matmul_v2_grad", "Out@GRAD"),
               ("elementwise_mul", "X"), ("elementwise_mul", "Y"),
               ("elementwise_add_grad", "Out@GRAD"), ("elementwise_sub_grad", "Out@GRAD"),
               ("cast", "X"), ("reshape2", "X"), ("transpose2", "X"), ("assign", "X"),
               ("c_identity", "X"), ("reduce_sum", "X"), ("reduce_mean", "X"),
               ("pd_op.matmul", "x"), ("pd_op.matmul", "y"), ("pd_op.matmul_grad", "out_grad"),
               ("pd_op.multiply", "x"), ("pd_op.multiply", "y"),
               ("pd_op.add_grad", "out_grad"), ("pd_op.subtract_grad", "out_grad"),
               ("pd_op.cast", "x"), ("pd_op.reshape", "x"), ("pd_op.transpose", "x"),
               ("pd_op.assign", "x"), ("pd_op.sum", "x"),
               ("pd_op.mean", "x")}


def _is_param_grad(op, name, params) -> bool:
    """``name`` (an output of ``op``) is a parameter's gradient: legacy
    ``w@GRAD``; PIR: the ``<slot>_grad`` result of a grad op whose ``<slot>``
    operand is a parameter."""
    if name.endswith("@GRAD") and name[:-5] in params:
        return True
    for slot, names in op.outputs.items():
        if name in names and slot.endswith("_grad"):
            return any(n in params for n in op.inputs.get(slot[:-5], []))
    return False


def scale_invariance(snap, var, idx) -> str:
    """Why a positive scale of ``var`` after op ``idx`` changes nothing, or ''.

    It does not when every path of values from it ends in the gradient of an
    Adam-type update (linear ops in between; a collective, a non-linear op
    or a parameter's gradient, which the numeric runs compare, ends it)."""
    params = {n for n, v in snap.vars.items() if v.is_parameter}
    todo, seen, sinks = [(var, idx)], set(), set()
    while todo:
        name, at = todo.pop()
        if (name, at) in seen:
            continue
        seen.add((name, at))
        for op, slot in _value_readers(snap, name, at):
            if (op.type, slot) in SCALE_INVARIANT_SINKS:
                sinks.add(f"op {op.idx} ({op.type})")
                continue
            if (op.type, slot) not in HOMOGENEOUS:
                return ""
            for out_name, _ in _value_outputs(snap, op):
                if _is_param_grad(op, out_name, params):
                    return ""  # a gradient the numeric runs compare
                todo.append((out_name, op.idx))
    if not sinks:
        return ""
    return (f"every value computed from it ends in the gradient of {', '.join(sorted(sinks))}, "
            "whose update m/(sqrt(v)+eps) is invariant to a positive scale of the gradient "
            "(up to eps)")


def _scaled(factor, label, salt):
    def choose(before, after, reg, rank):
        sites = _tensor_sites(after, reg)
        if not sites:
            return None
        why = {}
        if factor > 0:  # prefer sites where the scale changes something
            why = {id(s): scale_invariance(after, s[1], s[0].idx) for s in sites}
            live = [s for s in sites if not why[id(s)]]
            sites = live or sites
        op, n, v, readers = sites[(rank + salt) % len(sites)]
        edit = Edit("insert_unary", op.idx, var=n, readers=readers,
                    params={"unary": "scale", "factor": float(factor)})
        desc = (f"op {op.idx} ({op.type}, {reg.where(op.idx)}) writes {n} {v.shape}: "
                f"scaled by {factor} before its reader(s) {readers}")
        m = _mutation(label, desc, op, n, factor=factor, readers=readers)
        m.equivalent_by_argument = why.get(id(sites[(rank + salt) % len(sites)]), "")
        return _plan(m, edit, after)

    return choose


def _choose_sibling(before, after, reg, rank):
    classes = _value_classes(after)
    cands = []
    for i in reg.sites():
        op = after.ops[i]
        for slot, names in sorted(op.inputs.items()):
            if not reads_value(op, slot):
                continue
            for n in names:
                v = after.var(n)
                if v is None or v.dtype not in FLOAT_DTYPES or 0 in v.shape:
                    continue
                sibs = []
                for w in after.vars.values():
                    if (w.name == n or w.shape != v.shape or w.dtype != v.dtype
                            or w.name in op.writes() or classes.get(w.name) == classes.get(n)
                            or not _defined_before(after, w.name, i)):
                        continue
                    last = _last_writer(after, w.name, i)
                    sibs.append((-(last if last is not None else -1), w.name))
                if sibs:
                    cands.append((op, slot, n, v, min(sibs)[1]))
    if not cands:
        return None
    op, slot, n, v, w = cands[rank % len(cands)]

    edit = Edit("rename_input", op.idx, var=n, new=w, slot=slot)

    desc = (f"op {op.idx} ({op.type}, {reg.where(op.idx)}) reads {w} instead of {n} in slot "
            f"{slot} (both {v.shape} {v.dtype}; {w} is written before it)")
    return _plan(_mutation("sibling operand", desc, op, n, slot=slot, sibling=w), edit, after)


def _choose_moved_write(before, after, reg, rank):
    if after.meta.get("ir") == "pir":
        return None  # SSA: a definition moved past its use is no program at all
    cands = []
    for i in reg.sites():
        p = after.ops[i]
        for n, v in _value_outputs(after, p):
            if not _defined_before(after, n, i):
                continue  # the reader would read an unwritten var
            readers = _value_readers(after, n, i)
            if not readers:
                continue
            r = readers[0][0]
            if n in r.writes():
                continue  # an in-place reader: the move would clobber its result
            between = after.ops[i + 1:r.idx + 1]
            if any(set(o.writes()) & (set(p.reads()) | set(p.writes())) for o in between):
                continue  # p would read other inputs, or overwrite a newer value
            if any(m != n and not _defined_before(after, m, i) and
                   any(m in o.reads() for o in between) for m in p.writes()):
                continue  # another output of p would be read before it is written
            if p.type in COLLECTIVES and any(o.type in COLLECTIVES for o in between):
                continue  # the collectives' order on the ring must stay the same
            cands.append((p, n, v, r))
    if not cands:
        return None
    p, n, v, r = cands[rank % len(cands)]

    edit = Edit("move_after", p.idx, var=n, params={"reader": r.idx})

    w = _last_writer(after, n, p.idx)
    prior = f"op {w} ({after.ops[w].type})" if w is not None else "the startup program/feed"
    desc = (f"op {p.idx} ({p.type}, {reg.where(p.idx)}) writing {n} moved after its first "
            f"reader, op {r.idx} ({r.type}), which now reads the value {prior} wrote")
    return _plan(_mutation("write past reader", desc, p, n, reader=r.idx), edit, after)


def _ring(op):
    v = op.attrs.get("ring_id")
    return None if v is None else int(v)


def _choose_wrong_ring(before, after, reg, rank):
    rings = sorted({_ring(o) for o in after.ops + after.startup_ops
                    if o.type in COLLECTIVES and _ring(o) is not None})
    cands = []
    for i in reg.sites():
        op = after.ops[i]
        if op.type not in COLLECTIVES or op.type == "c_identity" or _ring(op) is None:
            continue
        others = [r for r in rings if r != _ring(op)]
        if others:
            cands.append((op, "ring_id", _ring(op), others[0]))
        elif int(op.attrs.get("reduce_type", -1)) == 0:
            cands.append((op, "reduce_type", 0, REDUCE_MAX))
    if not cands:
        return None
    op, attr, old, new = cands[rank % len(cands)]

    edit = Edit("set_int_attr", op.idx, params={"attr": attr, "value": int(new)})

    var = (op.inputs.get("x") or op.inputs.get("X") or [""])[0]
    what = (f"ring {old} -> {new} (a ring this rank also uses)" if attr == "ring_id"
            else "reduce_type SUM -> MAX (the rank has one ring)")
    desc = f"op {op.idx} ({op.type}, {reg.where(op.idx)}) on {var}: {what}"
    return _plan(_mutation("wrong ring", desc, op, var, attr=attr, old=old, new=new), edit,
                 after)


swap_axes = RegionOperator("swap_axes", "swapped axes", _choose_swap_axes)
scale_half = RegionOperator("scale_half", "scaled tensor", _scaled(0.5, "scaled tensor", 0))
sign_flip = RegionOperator("sign_flip", "sign-flipped tensor",
                           _scaled(-1.0, "sign-flipped tensor", 1))
sibling_operand = RegionOperator("sibling_operand", "sibling operand", _choose_sibling)
write_past_reader = RegionOperator("write_past_reader", "write past reader",
                                   _choose_moved_write)
wrong_ring = RegionOperator("wrong_ring", "wrong ring", _choose_wrong_ring)

IN_REGION_OPERATORS = [swap_axes, scale_half, sign_flip, sibling_operand, write_past_reader,
                       wrong_ring]
OPERATORS = LEGACY_OPERATORS + IN_REGION_OPERATORS


def scope_of(operator) -> str:
    return getattr(operator, "scope", "legacy")


# -- choosing once, replaying everywhere ------------------------------------
class Prepared:
    """A mutator for ``run_application(mutator=(rank, prepared))``: replays one
    Plan on ``rank``'s rewritten program (and on the float32 twin's, which
    has the same ops)."""

    def __init__(self, operator, plan, rank, before=None, after=None):
        self.operator = operator
        self.__name__ = operator.__name__
        self.plan = plan
        self.rank = rank
        self.before, self.after = before, after  # the snapshots the site was chosen on
        self.replays = []  # one entry per call: applied or not

    @property
    def mutation(self):
        return self.plan.mutation

    def __call__(self, main, startup, snap, rank):
        if rank != self.rank:
            return None
        m = self.plan.apply(main, startup)
        self.replays.append(m is not None)
        return m


def snapshots(run, case=None, rank=None):
    """Snapshots (original, rewritten) of a ``passes.PassRun``, with feeds,
    as the application takes them (either IR)."""
    from verify.ir.rank_snapshot import snapshot_of as _snapshot

    if case is None:
        case = type("LegacyCase", (), {"name": "", "ir": "legacy"})()
    return [_snapshot(rp, case, rank, which)
            for rp, which in ((run.original, "original"), (run.rewritten, "rewritten"))]


def prepare(operator, adapter, case, rank):
    """The mutator to hand to ``run_application`` for ``operator`` on
    ``case``'s ``rank``, or None when the operator has no site there.

    A legacy operator is returned as is (it picks its site when called).  An
    in-region operator picks its site now, from one application of the pass
    (the pass is deterministic, so the application under test rewrites the
    same program), and the returned Prepared replays that edit.
    """
    if scope_of(operator) != "in_region":
        return operator
    from verify.engine.isolation import run_pass

    run = run_pass(adapter, case, rank)
    if run.error:
        return None
    before, after = snapshots(run, case, rank)
    plan = operator.plan(before, after, rank)
    return None if plan is None else Prepared(operator, plan, rank, before, after)


def structure_problems(snap) -> list:
    """``(op index, op type, var)`` of every read without a writer before it
    (main ops, startup, feeds)."""
    written = set(snap.feeds) | snap.startup_writes() | {
        v.name for v in snap.vars.values() if v.is_data}
    problems = []
    for op in snap.ops:
        for n in op.reads():
            if n and n not in written:
                problems.append((op.idx, op.type, n))
        written.update(op.writes())
    return problems


def well_formedness(reference, mutated) -> list:
    """What ``mutated`` breaks that ``reference`` (the rewritten program it
    was made from) did not: new reads without a writer, vars whose declared
    shape or dtype changed or that vanished.  Empty: well formed."""
    known = Counter((t, n) for _, t, n in structure_problems(reference))
    problems = []
    for i, t, n in structure_problems(mutated):
        if known[(t, n)] > 0:
            known[(t, n)] -= 1
        else:
            problems.append(f"op {i} ({t}) reads {n}, which nothing wrote before it")
    for name, v in reference.vars.items():
        w = mutated.var(name)
        if w is None:
            problems.append(f"var {name} vanished")
        elif list(w.shape) != list(v.shape) or w.dtype != v.dtype:
            problems.append(f"var {name}: {v.shape} {v.dtype} -> {w.shape} {w.dtype}")
    return problems
