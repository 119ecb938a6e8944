"""The PIR Engine's AMP as rounding: a serial program planned with
``strategy.amp`` equals the float32 serial program of the same model with
``round_<dtype>`` applied exactly where Paddle's PIR AMP puts casts.

``verify/value/amp_rounding.py`` states this for the legacy pass; here the
program is the one Paddle's PIR planner builds (``Engine._prepare_program``
builds the model under ``paddle.amp.auto_cast``, so the serial program the
planner records holds the ``pd_op.cast`` s).  Its terms, its idempotent
``round_d`` and its witness are reused; the rules are PIR's:

* every op is an uninterpreted function of its type, its attrs (bookkeeping
  aside) and its inputs by slot (congruence); a ``pd_op.cast`` to
  float16/bfloat16 of a float value is ``round_d``, a cast to float32 of a
  low or float32 value the identity; a kernel whose result is typed low
  rounds that result (``round_d`` of its term): a low kernel is modelled as
  the float32 kernel of its inputs, rounded;
* EXPECTED precisions, from the float32 program and Paddle's lists (those
  ``paddle.amp.auto_cast`` installs: ``_update_list(custom white, custom
  black, level, dtype)``), the dygraph-style rule PIR's op builders apply
  with ``use_promote`` (3.3.1's default at O1 and O2), each op looked up by
  its legacy name where it has one (:func:`amp_name`): a forward op on the
  white list computes in the low dtype; on the black list in float32; any
  other op in float32 if one of its float inputs is float32, else in the
  low dtype (its tensor inputs, not its mutable attributes:
  :func:`mutable_attributes`); a forward op the model built inside its own
  ``auto_cast(enable=False)`` (marked ``amp_off_region``, :func:`amp_off_ops`)
  computes in float32 whatever the lists say; the model's own cast to
  another value's dtype (``x.to(dtype=y.dtype)``: to float32 in the float32
  program, to the low dtype in the AMP one) rounds (:func:`following_casts`;
  where the float32 program builds no cast for it, :func:`model_casts`).  A low op rounds each float32
  input and its results; a float32
  op widens a low input (the identity).  The backward is Paddle's autodiff of
  that forward: a ``*_grad`` op computes in its forward op's precision, and
  the gradient it writes for an input has that input's dtype (a low grad
  cast back to float32 where the forward had cast the input down); any
  other backward op (a gradient sum, the loss seed) computes in the dtype of
  its inputs.  The optimizer, built outside ``auto_cast``, computes in
  float32.
* ops are paired in order by type (the AMP program's extra casts unpaired);
  at each pair the input terms, then the result terms, are compared slot by
  slot: the first difference is the refutation (AMP op index and type, slot,
  value, expected and found roundings, a concrete witness).  A float32 op
  with no counterpart is refuted too.

What it does not claim: the low kernels' own accuracy (accumulation
precision; that is what ``verify/numeric/amp_runs.py``'s tolerance covers);
loss scaling (3.3.1's Engine enables its ``GradScaler`` for float16 only,
and a float16 plan does not build on CPU); ops Paddle keeps in float32
inside a low op (none met on the planned cases: a case where one appears
is refuted, never proved).
"""
from __future__ import annotations

import functools

from verify.verdicts import CheckResult, Verdict

from .amp_rounding import LOW, Terms, Val, rounding_witness

KIND, NAME = "value", "pir amp rounding"
FLOAT = ("float32",) + LOW
# the bool attr marking an op the model built inside its own
# ``auto_cast(enable=False)`` (examples/amp_of.py marks them at plan time)
AMP_OFF = "amp_off_region"
# the bool attr marking a pd_op.cast the model's own code built (paddle.cast,
# Tensor.astype; examples/amp_of.py marks them at plan time)
MODEL_CAST = "model_cast"
_BOOKKEEPING = {"op_role", "chunk_id", "struct_name", "stop_gradient", "persistable",
                "op_callstack", "dist_attr", "op_namescope", AMP_OFF, MODEL_CAST}
_FORWARD, _BACKWARD, _OPTIMIZE = 0, 1, 2
# ops whose result is an input of the program, read by name (a feed, a
# parameter, a state the startup writes): one symbol per name on both sides
INPUT_OPS = ("pd_op.data", "builtin.parameter")


def pir_lists(dtype: str, level: str = "O1", white=(), black=()) -> tuple:
    """``(white, black)``: the op lists ``paddle.amp.auto_cast`` installs for
    ``dtype`` and ``level`` (Paddle's own ``_update_list``)."""
    from paddle.amp.auto_cast import _update_list

    w, b = _update_list(set(white) or None, set(black) or None, level.upper(), dtype)
    return frozenset(w), frozenset(b)


def short(op_type: str) -> str:
    """The op's own name: ``pd_op.matmul`` -> ``matmul``."""
    return op_type.split(".", 1)[1] if op_type.startswith("pd_op.") else op_type


@functools.lru_cache(maxsize=1)
def _fluid_names() -> dict:
    """``{phi name: legacy (fluid) op name}`` of the legacy ops whose phi
    kernel has another name (``matmul`` -> ``matmul_v2``, ``add`` ->
    ``elementwise_add``, ``mean`` -> ``reduce_mean``), from Paddle's own
    table (``core._get_phi_kernel_name`` over every registered op proto)."""
    from paddle.base import core, framework

    out = {}
    for x in sorted(framework.OpProtoHolder.instance().op_proto_map):
        p = core._get_phi_kernel_name(x)
        if p != x:
            out.setdefault(p, x)
    return out


def amp_name(op_type: str) -> str:
    """The name PIR's AMP looks the op up by in the lists: its legacy name
    where it has one (the op builders translate the op name to its fluid
    name first: a list entry ``matmul`` does not reach ``pd_op.matmul``,
    ``matmul_v2`` does), else its own."""
    t = short(op_type)
    return _fluid_names().get(t, t)


@functools.lru_cache(maxsize=None)
def mutable_attributes(op_type: str) -> frozenset:
    """The operands of ``op_type`` that are attributes made tensors (PIR's
    mutable attributes: ``pd_op.scale``'s ``scale``, a reshape's ``shape``):
    the attrs of its legacy op proto (Paddle's own table).  PIR's AMP promote
    reads the op's tensor inputs only, never these."""
    from paddle.base import framework

    protos = framework.OpProtoHolder.instance().op_proto_map
    proto = protos.get(amp_name(op_type))
    return frozenset(a.name for a in proto.attrs) if proto is not None else frozenset()


def _attrs_key(op) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if k not in _BOOKKEEPING))


def _dtype(snap, name):
    v = snap.var(name)
    return v.dtype if v is not None else None


def _role(op) -> int:
    r = op.attrs.get("op_role", op.role)
    return int(r) if isinstance(r, (int, float)) and r >= 0 else 0


def _is_grad(op) -> bool:
    return _role(op) == _BACKWARD and op.type.endswith("_grad")


def _slots(op, which):
    for slot, names in sorted(which.items()):
        for j, n in enumerate(names):
            if n:
                yield slot, j, n


class Run:
    """Executes one snapshot into :class:`Val` s (by value name) on shared
    :class:`Terms`; ``reads``/``writes``: per op index, its input and result
    terms by ``(slot, j)``."""

    def __init__(self, snap, terms):
        self.snap, self.terms, self.env = snap, terms, {}
        self.reads, self.writes = {}, {}

    def read(self, name) -> Val:
        v = self.env.get(name)
        if v is None:
            v = self.env[name] = Val(0, self.terms.mk(("in", name)))
        return v

    def term(self, op, ins, slot, j) -> Val:
        if op.type in INPUT_OPS:
            return Val(0, self.terms.mk(("in", op.outputs[slot][j])))
        args = tuple((s, tuple(v.key() for v in vs)) for s, vs in sorted(ins.items()))
        return Val(0, self.terms.mk(("op", op.type, _attrs_key(op), slot, j, args)))

    def round(self, d, v) -> Val:
        return Val(v.k, self.terms.round(d, v.t))

    def record(self, op, ins, outs) -> None:
        self.reads[op.idx] = {(s, j): v for s, vs in ins.items() for j, v in enumerate(vs)}
        self.writes[op.idx] = dict(outs)
        for (slot, j), v in outs.items():
            self.env[op.outputs[slot][j]] = v


def amp_run(snap, terms) -> Run:
    """The AMP program as it is: casts round or widen, low results round."""
    run = Run(snap, terms)
    for op in snap.ops:
        ins = {s: [run.read(n) for n in ns if n] for s, ns in op.inputs.items()}
        ins = {s: vs for s, vs in ins.items() if vs}
        outs = {}
        for slot, j, n in _slots(op, op.outputs):
            d = _dtype(snap, n)
            if op.type == "pd_op.cast":
                x = next(iter(ins.values()))[0]
                src = _dtype(snap, next(n for _, _, n in _slots(op, op.inputs)))
                if src in FLOAT and d == "float32":
                    outs[(slot, j)] = x  # widening: the identity on the (rounded) value
                    continue
                if src in FLOAT and d in LOW:
                    outs[(slot, j)] = run.round(d, x)
                    continue
            v = run.term(op, ins, slot, j)
            outs[(slot, j)] = run.round(d, v) if d in LOW and not op.type.startswith(
                "builtin.") else v
        run.record(op, ins, outs)
    return run


def forward_of(snap) -> dict:
    """``{grad op idx: forward op}``: a ``T_grad`` backward op and the last
    forward ``T`` op (not yet taken) that reads or writes every forward value
    the grad op reads (Paddle's autodiff passes the forward's operands and
    results to its grad op)."""
    fwd_vals, out, taken = {}, {}, set()
    forward = [op for op in snap.ops if _role(op) == _FORWARD]
    for op in forward:
        for _, _, n in _slots(op, op.outputs):
            fwd_vals[n] = op
    defined = {n for op in snap.ops for _, _, n in _slots(op, op.outputs)}
    inputs = {n for op in snap.ops for _, _, n in _slots(op, op.inputs) if n not in defined}
    for g in snap.ops:
        if not _is_grad(g):
            continue
        t = g.type[:-len("_grad")]
        want = {n for _, _, n in _slots(g, g.inputs) if n in fwd_vals or n in inputs}
        for f in reversed(forward):
            if f.type != t or f.idx in taken:
                continue
            touched = {n for _, _, n in _slots(f, f.inputs)} | \
                {n for _, _, n in _slots(f, f.outputs)}
            if want <= touched:
                out[g.idx] = f
                taken.add(f.idx)
                break
    return out


def amp_off_ops(fp32, amp) -> frozenset:
    """The float32 program's op indices the model built with AMP off: marked
    ``AMP_OFF`` there or at their AMP counterpart (:func:`pair_ops`; the
    float32 plan is built without AMP, so only the AMP build marks them)."""
    pairs = pair_ops(fp32, amp)
    return frozenset({o.idx for o in fp32.ops if o.attrs.get(AMP_OFF)} |
                     {pairs[o.idx].idx for o in amp.ops
                      if o.attrs.get(AMP_OFF) and o.idx in pairs})


def expected_run(snap, dtype, white, black, terms, off=(), follow=(), cast_down=()) -> tuple:
    """The float32 program with ``round_<dtype>`` where the lists imply
    (module docstring; ``off``: the op indices built with AMP off; ``follow``:
    the model's casts that follow a low value's dtype, :func:`following_casts`;
    ``cast_down``: the values the model casts down, :func:`model_casts`):
    ``(run, precision by op idx: True low / False)``."""
    run = Run(snap, terms)
    low_held = set()  # values the AMP program holds in the low dtype
    fwd_of = forward_of(snap)
    prec, fwd_in_low = {}, {}
    # builtin.combine's vectors of float values (a concat's input): float
    # inputs of their readers, held low when every element is
    float_vecs = set()
    for op in snap.ops:
        ins_n = [(s, j, n) for s, j, n in _slots(op, op.inputs)]
        attr_slots = mutable_attributes(op.type)
        floats = [n for s, _, n in ins_n if (_dtype(snap, n) == "float32" or n in float_vecs)
                  and s not in attr_slots]
        role = _role(op)
        if op.type.startswith("builtin.") or role == _OPTIMIZE or not floats or \
                (role == _FORWARD and op.idx in off) or \
                (op.type == "pd_op.cast" and op.attrs.get("dtype") == "float32"):
            low = False  # (a cast's own dtype attr decides its result)
        elif role == _FORWARD:
            t = amp_name(op.type)
            low = (t in white) or (t not in black and all(n in low_held for n in floats))
        elif _is_grad(op) and op.idx in fwd_of:
            low = prec.get(fwd_of[op.idx].idx, False)
        else:  # a backward op in its inputs' dtype
            low = all(n in low_held for n in floats)
        prec[op.idx] = low
        ins = {}
        for s, j, n in ins_n:
            v = run.read(n)
            if low and _dtype(snap, n) == "float32" and n not in low_held and \
                    s not in attr_slots:
                v = run.round(dtype, v)
            ins.setdefault(s, []).append(v)
        if role == _FORWARD:
            fwd_in_low[op.idx] = {s: [n in low_held for n in ns] for s, ns in op.inputs.items()}
        outs = {}
        grad_of = fwd_in_low.get(fwd_of[op.idx].idx) if op.idx in fwd_of else None
        for slot, j, n in _slots(op, op.outputs):
            v = run.term(op, ins, slot, j)
            float_out = _dtype(snap, n) == "float32"
            if op.type == "pd_op.cast" and float_out and \
                    all(_dtype(snap, x) in FLOAT for _, _, x in ins_n):
                # a cast to float32 of a float value is the identity (as amp_run's
                # widening); the AMP build may have built none there
                v = next(iter(ins.values()))[0]
            if op.idx in follow and float_out:  # x.to(dtype=<a low value's dtype>)
                v = run.round(dtype, next(iter(ins.values()))[0])
                outs[(slot, j)] = v
                low_held.add(n)
                continue
            if low and float_out:
                v = run.round(dtype, v)
            held = low and float_out
            if grad_of is not None and slot.endswith("_grad"):
                # the grad of a forward input has that input's dtype: the grad of
                # the cast the forward read it through casts it back, which
                # rounds where the forward widened a low input
                held = float_out and (grad_of.get(slot[:-len("_grad")]) or
                                      [False] * (j + 1))[j:j + 1] == [True]
                if held and not low:
                    v = run.round(dtype, v)
            elif op.type.startswith("builtin.") and (float_out or (
                    op.type == "builtin.combine" and any(
                        _dtype(snap, x) == "float32" or x in float_vecs for _, _, x in ins_n))):
                held = all(x in low_held for _, _, x in ins_n) and bool(ins_n)
                if not float_out:
                    float_vecs.add(n)
            if n in cast_down and float_out:  # the model's own cast to a low value's dtype
                v, held = run.round(dtype, v), True
            outs[(slot, j)] = v
            if held:
                low_held.add(n)
            else:
                low_held.discard(n)
        run.record(op, ins, outs)
    return run, prec


def pair_ops(fp32, amp) -> dict:
    """``{AMP op idx: float32 op}``: the float32 program's ops found in order
    in the AMP program by type; an AMP ``pd_op.cast`` pairs only with a
    float32 ``pd_op.cast`` of the same target dtype at the next position
    (else it is one the AMP build inserted); an optimizer op pairs with the
    one of its type updating the same parameter (3.3.1's AMP optimizer
    orders the updates otherwise)."""
    def param(op):  # an optimizer op: the parameter it updates
        p = op.inputs.get("param") if _role(op) == _OPTIMIZE else None
        return (op.type, p[0]) if p else None

    def named(op):  # a program input: by the name of the value it declares
        return (op.type, tuple(n for _, _, n in _slots(op, op.outputs))) \
            if op.type in INPUT_OPS else None

    by_param = {param(o): o for o in fp32.ops if param(o)}
    by_name = {named(o): o for o in fp32.ops if named(o)}
    out, i = {}, 0
    ops = [o for o in fp32.ops if not param(o) and not named(o)]
    for op in amp.ops:
        if param(op):  # the AMP optimizer orders its updates otherwise
            if param(op) in by_param:
                out[op.idx] = by_param[param(op)]
            continue
        if named(op):  # and declares its states otherwise (only those it reads)
            if named(op) in by_name:
                out[op.idx] = by_name[named(op)]
            continue
        if op.type == "pd_op.cast":
            if i < len(ops) and ops[i].type == op.type and (
                    ops[i].attrs.get("dtype") == op.attrs.get("dtype") or
                    _follows(ops[i], op)):
                out[op.idx] = ops[i]
                i += 1
            continue
        for k in range(i, len(ops)):
            if ops[k].type == op.type:
                out[op.idx] = ops[k]
                i = k + 1
                break
    return out


def _follows(fp32_cast, amp_cast) -> bool:
    """The model's own cast to another value's dtype (``x.to(dtype=y.dtype)``):
    to float32 in the float32 program, to a low dtype at the same place in the
    AMP program, where ``y`` is low."""
    return fp32_cast.attrs.get("dtype") == "float32" and amp_cast.attrs.get("dtype") in LOW


def following_casts(fp32, amp) -> frozenset:
    """The float32 program's casts the AMP program makes to a low dtype
    (:func:`_follows`): they round there."""
    by_idx = {o.idx: o for o in amp.ops}
    return frozenset(f.idx for a, f in pair_ops(fp32, amp).items()
                     if f.type == "pd_op.cast" and _follows(f, by_idx[a]))


def model_casts(fp32, amp) -> frozenset:
    """The float32 program's values the model itself casts down in the AMP
    program (``q_embed.astype(q.dtype)`` with ``q`` low; in the float32
    program a cast to the same dtype, which builds no op): an AMP cast to a
    low dtype that pairs with nothing and that the model's own code built
    (marked ``MODEL_CAST`` at plan time, ``examples/amp_of.py``; the casts
    AMP inserts are built by Paddle's op builders and carry no mark), its
    input the result of a paired op."""
    pairs = pair_ops(fp32, amp)
    made = {n: (op, s, j) for op in amp.ops for s, j, n in _slots(op, op.outputs)}
    out = set()
    for c in amp.ops:
        if c.type != "pd_op.cast" or c.idx in pairs or c.attrs.get("dtype") not in LOW \
                or not c.attrs.get(MODEL_CAST):
            continue
        src = made.get(c.inputs["x"][0])
        if src is None or src[0].idx not in pairs:
            continue
        op, s, j = src
        names = pairs[op.idx].outputs.get(s) or []
        if j < len(names) and names[j]:
            out.add(names[j])
    return frozenset(out)


def check_serial(where, rank, fp32, amp, dtype, level="O1", lists=None) -> CheckResult:
    """One CheckResult: the AMP serial snapshot ``amp`` against the float32
    one ``fp32`` (module docstring)."""
    white, black = lists if lists is not None else pir_lists(dtype, level)
    terms = Terms()
    exp, prec = expected_run(fp32, dtype, white, black, terms, amp_off_ops(fp32, amp),
                             following_casts(fp32, amp), model_casts(fp32, amp))
    got = amp_run(amp, terms)
    pairs = pair_ops(fp32, amp)
    paired = {o.idx for o in pairs.values()}
    show = lambda v: terms.describe(v.t) if v is not None else None  # noqa: E731
    read = {n for op in amp.ops for _, _, n in _slots(op, op.inputs)}
    for op in amp.ops:
        o = pairs.get(op.idx)
        if o is None:
            continue
        # results are compared where nothing reads them (the updated parameters):
        # elsewhere their readers' inputs are, after the casts between
        sinks = {k: v for k, v in got.writes[op.idx].items()
                 if op.outputs[k[0]][k[1]] not in read}
        for which, want, have, names in (
                ("input", exp.reads[o.idx], got.reads[op.idx], op.inputs),
                ("result", {k: v for k, v in exp.writes[o.idx].items() if k in sinks},
                 sinks, op.outputs)):
            for key in sorted(set(want) | set(have)):
                w, g = want.get(key), have.get(key)
                if w is not None and g is not None and w == g:
                    continue
                slot, j = key
                var = (names.get(slot) or [None] * (j + 1))[j] if j < len(
                    names.get(slot) or []) else None
                cex = {"rank": rank, "op_index": op.idx, "op_type": op.type, "slot": slot,
                       "which": which, "var": var, "fp32_op_index": o.idx,
                       "expected_precision": dtype if prec.get(o.idx) else "float32",
                       "expected": show(w), "found": show(g)}
                if w is not None and g is not None:
                    cex["witness"] = rounding_witness(terms, w, g)
                return CheckResult(
                    KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
                    f"{where}: op {op.idx} ({op.type}) {which} {slot} {var!r} is "
                    f"{cex['found']}; the {dtype} {level} lists imply {cex['expected']} "
                    f"(the op computes in {cex['expected_precision']})", counterexample=cex)
    changed = input_changes(fp32, amp)
    if changed:
        name, was, now = changed[0]
        return CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: the program input {name!r} is declared {now} in the AMP program, "
            f"{was} in the float32 one: the programs start from other values",
            counterexample={"rank": rank, "var": name, "fp32": was, "amp": now})
    fp32_read = {n for op in fp32.ops for _, _, n in _slots(op, op.inputs)}
    missing = [o for o in fp32.ops if o.idx not in paired and not (
        o.type in INPUT_OPS and not any(n in fp32_read for _, _, n in _slots(o, o.outputs)))]
    # (an input no op reads declares nothing the programs compute: the AMP
    # optimizer declares states only for the parameters it updates)
    if missing:
        o = missing[0]
        return CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: float32 op {o.idx} ({o.type}) has no counterpart in the AMP program",
            counterexample={"rank": rank, "fp32_op_index": o.idx, "op_type": o.type,
                            "missing": [m.idx for m in missing]})
    rounded = sum(1 for ins in exp.reads.values() for v in ins.values() if terms.roundings(v.t))
    extra = sorted({op.type for op in amp.ops if op.idx not in pairs})
    low_ops = sorted({short(o.type) for o in fp32.ops if prec.get(o.idx)})
    return CheckResult(
        KIND, NAME, rank, Verdict.EQUIVALENT,
        f"{where}: the AMP serial program equals the float32 one with round_{dtype} at the "
        f"{rounded} input(s) and the results of the {sum(prec.values())} op(s) the {level} "
        f"lists put in {dtype} ({', '.join(low_ops) or 'none'}), for all inputs (ops "
        f"uninterpreted); {len(pairs)} op(s) paired, unpaired AMP op types: "
        f"{', '.join(extra) or 'none'}",
        details={"rounded_inputs": rounded, "low_ops": low_ops, "dtype": dtype,
                 "level": level, "paired": len(pairs), "unpaired_amp_types": extra})


def amp_rewrites(fp32, amp) -> list:
    """``[(AMP op idx, op type, why)]``: what the AMP build put into the
    serial program beyond the float32 one -- an op with no float32
    counterpart (:func:`pair_ops`: the casts ``auto_cast`` inserts) or one
    with a result typed in a low dtype.  Empty: the build left the program
    as the float32 plan has it (what "fired" means for this rewrite)."""
    pairs = pair_ops(fp32, amp)
    out = []
    for op in amp.ops:
        low = [n for _, _, n in _slots(op, op.outputs) if _dtype(amp, n) in LOW]
        if op.idx not in pairs:
            out.append((op.idx, op.type, "no counterpart in the float32 program"))
        elif low:
            out.append((op.idx, op.type, f"result {low[0]!r} typed {_dtype(amp, low[0])}"))
    return out


def _numel_shape(shape):
    """A shape up to size-1 dims (``[]`` and ``[1]`` hold one element alike)."""
    return [int(d) for d in shape if int(d) != 1]


def input_changes(fp32, amp) -> list:
    """``[(name, (shape, dtype) in float32, (shape, dtype) in AMP)]``: the
    program inputs (``INPUT_OPS`` results, by name, that an op reads) declared
    otherwise, up to
    size-1 dims (3.3.1's AMP optimizer declares the learning rate ``[1]``
    where the float32 one is ``[]``: one element either way)."""
    def inputs(snap):
        read = {n for op in snap.ops for _, _, n in _slots(op, op.inputs)}
        out = {}
        for op in snap.ops:
            if op.type in INPUT_OPS:
                for _, _, n in _slots(op, op.outputs):
                    if n not in read:  # declared, read by no op: no value starts from it
                        continue
                    v = snap.var(n)
                    out[n] = (list(v.shape), v.dtype) if v is not None else None
        return out

    a, b = inputs(fp32), inputs(amp)
    out = []
    for n in sorted(set(a) | set(b)):
        x, y = a.get(n), b.get(n)
        if x is None or y is None or x[1] != y[1] or _numel_shape(x[0]) != _numel_shape(y[0]):
            out.append((n, x, y))
    return out


def rounding_depths(fp32, dtype, level="O1", lists=None, off=(), follow=(),
                    cast_down=()) -> dict:
    """``{("loss", None) | ("grad", param) | ("param", param): R}``: the
    distinct roundings in each watched value's expected term (the tolerance
    of ``verify/numeric/amp_runs.py``; ``off``: :func:`amp_off_ops`)."""
    white, black = lists if lists is not None else pir_lists(dtype, level)
    terms = Terms()
    exp, _ = expected_run(fp32, dtype, white, black, terms, off, follow, cast_down)
    return _watched_depths(fp32, exp, terms)


def _watched_depths(snap, run, terms) -> dict:
    """The rounding counts of ``run``'s terms (a run of ``snap``) at the
    watched values: each optimizer's grad and updated param, and the loss
    the backward's seed (``pd_op.full_like``) is shaped after."""
    out = {}
    for op in snap.ops:
        if _role(op) == _OPTIMIZE and op.inputs.get("param") and op.inputs.get("grad"):
            p = op.inputs["param"][0]
            out[("grad", p)] = terms.rounding_count(run.reads[op.idx][("grad", 0)].t)
            res = run.writes[op.idx].get(("param_out", 0))
            out[("param", p)] = terms.rounding_count(res.t) if res else 0
        if op.type == "pd_op.full_like" and _role(op) == _BACKWARD:
            x = run.reads[op.idx].get(("x", 0))
            if x is not None:
                out[("loss", None)] = terms.rounding_count(x.t)
    return out


def low_dtype(snap):
    """The low float dtype ``snap`` computes in (a value typed float16 or
    bfloat16), or None for a float32 program."""
    got = {v.dtype for v in snap.vars.values()} & set(LOW)
    return sorted(got)[0] if got else None


def own_rounding_depths(snap) -> dict:
    """As :func:`rounding_depths`, of an AMP program as it is (its casts and
    low results: :func:`amp_run`): the roundings each watched value passed
    through (the planner relation's tolerance for such a program)."""
    terms = Terms()
    return _watched_depths(snap, amp_run(snap, terms), terms)
