"""AMP as rounding: the rewritten program is the original with ``round_<dtype>``
applied at exactly the points Paddle's white/black/gray lists imply.

An AMP rewrite does not compute the fp32 program's values; it computes the
fp32 program with a rounding at each cast.  This check proves that, per rank,
on plain snapshots, by executing both programs into hash-consed terms:

* every op is an uninterpreted function of its type, its attrs (bookkeeping
  attrs aside) and its inputs by slot (equal arguments give equal results:
  congruence), whatever dtype it computes in;
* a ``cast`` to float16/bfloat16 is ``round_<dtype>`` (an uninterpreted
  function with one axiom, idempotence ``round_d(round_d(x)) = round_d(x)``),
  a cast to float32/float64 is the identity on the (rounded) value; a cast
  from or to an integer or bool dtype is an ordinary uninterpreted op;
* a ``fill_constant`` whose ``dtype`` is a low float is ``round_<dtype>`` of
  the float32 constant;
* loss scaling is exact: a value is a pair ``S^k * t`` where ``S`` is the
  loss-scaling variable (the ``Scale`` of ``check_finite_and_unscale``, set by
  the startup to a power of two).  ``elementwise_mul`` by ``S`` (the scaled
  loss) and ``elementwise_mul_grad`` with ``Y = S`` raise ``k`` by one,
  ``check_finite_and_unscale`` lowers it by one, a backward ``*_grad`` op is
  linear in its ``@GRAD`` inputs and a backward ``sum``/``assign`` in all
  (their common ``k`` carries through; any other op reading a scaled value
  keeps ``k`` inside its term, so it can only differ), and
  ``round_d(S^k t) = S^k round_d(t)`` (axiom: exact for a power of two
  absent overflow and underflow).  ``update_loss_scaling`` passes its ``X``
  through when its ``FoundInfinite`` is the unscale's overflow flag (the
  step where no value overflowed: the flag false).
  A scale applied twice leaves ``k = 1`` at the watched gradient: refuted.

The EXPECTED values are the ORIGINAL program's with ``round_<dtype>``
applied where the lists imply (:func:`expected_run`):
a white op (and a gray op whose producers are white and none black) computes
in the low dtype, so each of its float32 inputs (the slots Paddle keeps in
float32 aside) is rounded; a black op, an unlisted op, or a gray op after a
black one computes in float32 (a low input is widened: the identity); a grad
op has its forward op's precision.  The lists are read from the installed
Paddle (``paddle.static.amp.fp16_lists.AutoMixedPrecisionLists``), the
slots kept in float32 from ``paddle.static.amp.fp16_utils._keep_fp32_input``.

Both programs are executed by the same evaluator; the rewritten program's
ops that exist in the original (same type and outputs) are paired in order,
and at each pair the input terms are compared slot by slot: the first
difference is the refutation's point (rewritten op index, op type, slot,
variable, expected and found rounding).  Then every watched value (loss,
fetched outputs, gradients) must be the same term.  A term difference is a
refutation with a witness: :func:`rounding_witness` gives a concrete input
on which the two roundings differ (computed with the real rounding of
``verify/value/kernels.py``).

What it does not claim: the values of the low-precision kernels themselves
(an fp16 matmul is modelled as the fp32 matmul of its rounded inputs: the
model "the fp32 program with a rounding at each cast"); steps in which a
scaled value overflows or underflows; the startup program beyond this:
every var the original startup writes must be written by the same ops in
the rewritten one (:func:`startup_changes`; else refuted), its values are
then the main program's inputs, the same symbols on both sides, and the loss
scale's initial value is read, to be a power of two; the loss-scale state
``update_loss_scaling`` writes for the next step; Paddle's custom lists,
``black_varnames`` and per-op ``amp_options`` (the adapter passes none).
"""
from __future__ import annotations

from fractions import Fraction

from verify.verdicts import CheckResult, Verdict

from .semantics import dtype_name

KIND, NAME = "value", "amp rounding"
LOW = ("float16", "bfloat16")
WIDE = ("float32", "float64")
_BOOKKEEPING = {"op_role", "op_role_var", "op_namescope", "op_device", "with_quant_attr",
                "op_callstack", "use_mkldnn", "mkldnn_data_type"}
_BACKWARD, _OPTIMIZE = 1, 2
_LINEAR = frozenset({"sum", "assign"})  # backward ops linear in every input


class Unsupported(Exception):
    """The program holds something the rounding model does not cover."""


# -- terms ----------------------------------------------------------------
class Terms:
    """Hash-consed terms: each node a tuple over child ids, each id an int, so
    equal terms are equal ids (a comparison costs nothing however deep the
    term, and a program's shared values stay shared)::

        ("in", name)          an input of the main program
        ("one",)              1 (the loss scale is S^1 * 1)
        ("round", d, t)       round_d(t)
        ("op", type, attrs, out slot, j, ((slot, ((k, t), ...)), ...))
    """

    def __init__(self):
        self.ids = {}
        self.nodes = []

    def mk(self, node) -> int:
        i = self.ids.get(node)
        if i is None:
            i = self.ids[node] = len(self.nodes)
            self.nodes.append(node)
        return i

    def round(self, d: str, t: int) -> int:
        """``round_d(t)``, idempotent: ``round_d(round_d(x)) = round_d(x)``."""
        if self.nodes[t][:2] == ("round", d):
            return t
        return self.mk(("round", d, t))

    def roundings(self, t: int) -> list:
        """The roundings at the top of ``t``, outermost first (``["float16"]``)."""
        out = []
        while self.nodes[t][0] == "round":
            out.append(self.nodes[t][1])
            t = self.nodes[t][2]
        return out

    def describe(self, t: int, depth=2) -> str:
        """A short human rendering of a term."""
        n = self.nodes[t]
        if n[0] == "in":
            return n[1]
        if n[0] == "one":
            return "1"
        if n[0] == "round":
            return f"round_{n[1]}({self.describe(n[2], depth)})"
        if depth <= 0:
            return f"{n[1]}(...)"
        return f"{n[1]}.{n[3]}[{n[4]}](" + ", ".join(
            f"{s}=" + ",".join(self.describe(c, depth - 1) + (f"*S^{k}" if k else "")
                               for k, c in vs) for s, vs in n[5]) + ")"

    def overflow_flag(self, t: int) -> bool:
        """Whether ``t`` is the overflow flag of unscaled gradients: a
        ``FoundInfinite`` of ``check_finite_and_unscale``, or an any/or/concat
        of such flags.  Only then is "no overflow this step" the condition
        under which ``update_loss_scaling`` passes its ``X`` through."""
        n = self.nodes[t]
        if n[0] != "op":
            return False
        if n[1] == "check_finite_and_unscale":
            return n[3] == "FoundInfinite"
        if n[1] in ("reduce_any", "concat", "logical_or"):
            args = [c for s, vs in n[5] if s not in ("AxisTensor", "AxisTensorList")
                    for _, c in vs]
            return bool(args) and all(self.overflow_flag(c) for c in args)
        return False

    def rounding_count(self, t: int) -> int:
        """Distinct roundings ``t`` depends on."""
        seen, todo, count = set(), [t], 0
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            n = self.nodes[i]
            if n[0] == "round":
                count += 1
                todo.append(n[2])
            elif n[0] == "op":
                todo += [c for _, vs in n[5] for _, c in vs]
        return count


class Val:
    """``S^k * t``: a term id of a :class:`Terms` and its loss-scale exponent."""

    __slots__ = ("k", "t")

    def __init__(self, k, t):
        self.k, self.t = k, t

    def key(self):
        return (self.k, self.t)

    def __eq__(self, other):
        return isinstance(other, Val) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"Val({self.k}, #{self.t})"


def _attrs_key(op) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if k not in _BOOKKEEPING))


def _is_grad(op) -> bool:
    return bool(op.role & _BACKWARD) and not op.role & _OPTIMIZE


# -- the evaluator --------------------------------------------------------
class Evaluator:
    """Executes one snapshot's ops into :class:`Val` s (an env by var name)."""

    def __init__(self, snap, scale_vars=frozenset(), terms=None):
        self.snap = snap
        self.env = {}
        self.scale_vars = set(scale_vars)  # vars holding the loss scale S
        self.terms = terms if terms is not None else Terms()  # shared: equal terms, equal ids
        self.one = self.terms.mk(("one",))

    def show(self, v) -> str:
        """``v`` in words."""
        return self.terms.describe(v.t) + (f" * S^{v.k}" if v.k else "")

    def read(self, name) -> Val:
        v = self.env.get(name)
        if v is None:
            if name in self.scale_vars:
                v = Val(1, self.one)  # S = S^1 * 1
            else:
                v = Val(0, self.terms.mk(("in", name)))
            self.env[name] = v
        return v

    def inputs(self, op) -> dict:
        return {s: [self.read(n) for n in ns] for s, ns in sorted(op.inputs.items()) if ns}

    def run(self, op, ins=None) -> None:
        """Execute ``op`` on ``ins`` (default: its inputs from the env)."""
        ins = self.inputs(op) if ins is None else ins
        for slot, names in op.outputs.items():
            for j, n in enumerate(names):
                self.env[n] = self.value(op, ins, slot, j)

    def value(self, op, ins, slot, j) -> Val:
        t = op.type
        if t == "cast":
            x = ins["X"][0]
            src = dtype_name(op.attrs.get("in_dtype"))
            dst = dtype_name(op.attrs.get("out_dtype"))
            if src in LOW + WIDE and (dst == "float64" or dst == "float32" and
                                      src != "float64"):
                return x  # widening: the identity on the (rounded) value
            if src in LOW + WIDE and dst in LOW:
                return Val(x.k, self.terms.round(dst, x.t))  # round_d(S^k t) = S^k round_d(t)
        if t == "fill_constant" and not ins:
            d = dtype_name(op.attrs.get("dtype"))
            if d in LOW:  # the float32 constant rounded to the low dtype
                at = tuple(kv for kv in _attrs_key(op) if kv[0] != "dtype") + \
                    (("dtype", repr("float32")),)
                return Val(0, self.terms.round(d, self.terms.mk(("op", t, at, slot, j, ()))))
        if t == "elementwise_mul" and slot == "Out":
            y = ins.get("Y", [None])[0]
            if y is not None and y.t == self.one and y.k == 1:
                x = ins["X"][0]
                return Val(x.k + 1, x.t)
        if t == "elementwise_mul_grad" and slot == "X@GRAD":
            y = ins.get("Y", [None])[0]
            if y is not None and y.t == self.one and y.k == 1:
                g = ins["Out@GRAD"][0]
                return Val(g.k + 1, g.t)  # dX = dOut * S
        if t == "check_finite_and_unscale" and slot == "Out":
            s = ins.get("Scale", [None])[0]
            if s is not None and s.t == self.one and s.k == 1:
                x = ins["X"][j]
                return Val(x.k - 1, x.t)
        if t == "update_loss_scaling" and slot == "Out" and \
                all(self.terms.overflow_flag(v.t) for v in ins.get("FoundInfinite", [])):
            return ins["X"][j]  # no overflow this step: X passes through
        if _is_grad(op) and (t.endswith("_grad") or t in _LINEAR):
            # a grad op is linear in its incoming grads (dX = J^T dOut); a sum
            # or a copy in all its inputs
            lin = (lambda s: s.endswith("@GRAD")) if t.endswith("_grad") else (lambda s: True)
            gk = {v.k for s, vs in ins.items() if lin(s) for v in vs}
            if len(gk) == 1:  # linear in the incoming grads: their scale carries through
                k = gk.pop()
                args = tuple((s, tuple((0, v.t) if lin(s) else v.key()
                                       for v in vs)) for s, vs in ins.items())
                return Val(k, self.terms.mk(("op", t, _attrs_key(op), slot, j, args)))
        args = tuple((s, tuple(v.key() for v in vs)) for s, vs in ins.items())
        return Val(0, self.terms.mk(("op", t, _attrs_key(op), slot, j, args)))


def scale_vars(snap) -> set:
    """The loss-scale variables: ``Scale`` of ``check_finite_and_unscale``,
    which the startup must set to a power of two (else Unsupported: rounding
    would not commute with the scale)."""
    names = {n for op in snap.ops if op.type == "check_finite_and_unscale"
             for n in op.inputs.get("Scale", [])}
    if len(names) > 1:  # one symbol S stands for one value
        raise Unsupported(f"{len(names)} loss-scale variables ({', '.join(sorted(names))})")
    for n in names:
        init = [o for o in snap.startup_ops if n in o.writes()]
        if len(init) != 1 or init[0].type != "fill_constant":
            raise Unsupported(f"loss scale {n} is not set by one fill_constant in the startup")
        at = init[0].attrs  # the kernel reads str_value when it is set
        v = Fraction(float(at.get("str_value") or at.get("value", 0.0)))
        if v <= 0 or v.numerator & (v.numerator - 1) or v.denominator & (v.denominator - 1):
            raise Unsupported(f"loss scale {n} = {float(v)} is not a power of two: "
                              "rounding does not commute with it")
    return names


# -- the lists and the expected precisions -------------------------------
def amp_lists(dtype: str, white=(), black=(), black_varnames=()):
    """Paddle's own lists for ``dtype`` (with the custom ones added)."""
    import logging

    from paddle.static.amp.fp16_lists import AutoMixedPrecisionLists

    # its warning that this build has no low-precision kernel for the white
    # list's matmuls is a fact of every CPU run, printed once per call: quiet
    log = logging.getLogger("paddle.static.amp.fp16_lists")
    level, log.level = log.level, logging.ERROR
    try:
        return AutoMixedPrecisionLists(set(white), set(black), set(black_varnames),
                                       dtype=dtype)
    finally:
        log.setLevel(level)


def _keep_fp32_input(op, slot) -> bool:
    from paddle.static.amp.fp16_utils import _keep_fp32_input

    return bool(_keep_fp32_input(op, slot))


def forward_of(snap) -> dict:
    """``{grad op idx: forward op}``: a ``T_grad`` op reading ``out@GRAD`` of
    the ``T`` op writing ``out`` (Paddle's grad maker's naming)."""
    writer = {}
    out = {}
    for op in snap.ops:
        if not _is_grad(op) and not op.type.endswith("_grad"):
            for n in op.writes():
                writer[n] = op
        elif op.type.endswith("_grad"):
            for slot, ns in op.inputs.items():
                if slot.endswith("@GRAD"):
                    for n in ns:
                        f = writer.get(n[:-len("@GRAD")]) if n.endswith("@GRAD") else None
                        if f is not None and f.type + "_grad" == op.type:
                            out[op.idx] = f
    return out


def precisions(snap, lists) -> dict:
    """``{op idx: True (low) | False (fp32) | None (undetermined)}`` of the
    original's ops, as the lists imply (module docstring)."""
    prec, producer = {}, {}
    fwd = forward_of(snap)
    for op in snap.ops:
        if op.role & _OPTIMIZE:
            break
        if _is_grad(op) or op.type.endswith("_grad"):
            f = fwd.get(op.idx)
            prec[op.idx] = prec.get(f.idx) if f is not None else None
            continue
        if op.type in lists.black_list:
            p = False
        elif op.type in lists.white_list:
            p = True
        elif op.type in lists.gray_list:
            seen = [prec.get(producer[n].idx) if producer[n].type not in lists.black_list
                    else False for n in op.reads() if n in producer]
            p = False if False in seen else (True if True in seen else None)
        else:
            p = False  # unlisted: fp32, for numerical safety
        prec[op.idx] = p
        for n in op.writes():
            producer[n] = op
    return prec


def _keep_fp32_output(op, slot) -> bool:
    from paddle.static.amp.fp16_utils import _keep_fp32_output

    return bool(_keep_fp32_output(op, slot))


def held_after(op, low, snap, held) -> None:
    """Update ``held`` (values already in the low dtype) after ``op``: its
    float32 outputs are low when it computes in the low dtype, except the
    slots Paddle keeps in float32."""
    for slot, names in op.outputs.items():
        for n in names:
            held.discard(n)
            if low and _float32(snap, n) and not _keep_fp32_output(op, slot):
                held.add(n)


def _float32(snap, name) -> bool:
    v = snap.var(name)
    return v is not None and dtype_name(v.dtype) == "float32"


def expected_inputs(ev, op, low, dtype, held) -> dict:
    """``op``'s inputs in the expected run: each float32 input of a low op
    (slots kept in float32 aside) rounded to ``dtype``, unless the value is
    held in the low dtype already (``held``: names written by low ops)."""
    ins = ev.inputs(op)
    if not low:
        return ins
    out = {}
    for slot, vals in ins.items():
        names = op.inputs[slot]
        if _keep_fp32_input(op, slot):
            out[slot] = vals
            continue
        out[slot] = [v if n in held or not _float32(ev.snap, n)
                     else Val(v.k, ev.terms.round(dtype, v.t)) for n, v in zip(names, vals)]
    return out


def expected_run(before, dtype, lists=None):
    """The EXPECTED execution: ``before`` with ``round_<dtype>`` where the
    lists imply; returns the evaluator and ``{op idx: the op's inputs}``."""
    prec = precisions(before, lists if lists is not None else amp_lists(dtype))
    ev, held, reads = Evaluator(before), set(), {}
    for op in before.ops:
        low = bool(prec.get(op.idx))
        reads[op.idx] = expected_inputs(ev, op, low, dtype, held)
        ev.run(op, reads[op.idx])
        held_after(op, low, before, held)
    return ev, reads


# -- pairing and comparison ----------------------------------------------
def pair_ops(before, after) -> dict:
    """``{rewritten op idx: original op}``: the original's ops found in order
    in the rewritten program (same type, same outputs up to a rename the
    pass made to a ``.cast_*`` var); an original op the pass replaced (the
    loss grad's ``fill_constant``) stays unpaired and is judged through the
    watched values only."""
    out, i = {}, 0
    ops = before.ops
    for op in after.ops:
        for k in range(i, len(ops)):
            if op.type == ops[k].type and _same_outputs(ops[k], op):
                out[op.idx] = ops[k]
                i = k + 1
                break
    return out


def _base(name: str) -> str:
    import re

    return re.sub(r"\.cast_(fp16|bf16|fp32)", "", name)


def _same_outputs(o, op) -> bool:
    return {s: [_base(n) for n in ns] for s, ns in o.outputs.items() if ns} == \
        {s: [_base(n) for n in ns] for s, ns in op.outputs.items() if ns}


def rounding_witness(terms, expected: Val, found: Val) -> dict:
    """A concrete value on which the outermost roundings of the two terms
    differ (the real rounding, ``kernels.round_to``), or a note when they
    differ only deeper (or by the loss scale's exponent)."""
    from .kernels import round_to

    if expected.k != found.k:
        return {"loss_scale_exponent": {"expected": expected.k, "found": found.k},
                "why": f"the value carries the loss scale S^{found.k - expected.k} too many"
                if found.k > expected.k else "the value lacks a loss scale factor"}
    re_, rf = terms.roundings(expected.t), terms.roundings(found.t)
    if re_ == rf:
        return {"why": "the roundings differ below this op (see the inputs' terms)"}
    candidates = [Fraction(1) + Fraction(1, 2 ** 9), Fraction(1) + Fraction(1, 2 ** 12),
                  Fraction(1, 3), Fraction(70000)]
    for x in candidates:
        a, b = x, x
        for d in reversed(re_):
            a = round_to(a, d)
        for d in reversed(rf):
            b = round_to(b, d)
        if a != b:
            return {"input": str(x), "expected": f"{' o '.join('round_' + d for d in re_) or 'id'}"
                    f"(x) = {float(a)!r}", "found": f"{' o '.join('round_' + d for d in rf) or 'id'}"
                    f"(x) = {float(b)!r}"}
    return {"why": "no witness among the probe values"}


def startup_changes(before, after) -> list:
    """``[(var, rewritten startup op index or None)]``: each var the original
    startup writes that the rewritten startup writes otherwise (other ops,
    types, attrs or inputs).  The proof takes the startup's values as the
    same input symbols on both sides, so this must be empty."""
    def writers(ops):
        out = {}
        for op in ops:
            for n in op.writes():
                out.setdefault(n, []).append(op)
        return out

    wa, wb = writers(before.startup_ops), writers(after.startup_ops)
    sig = lambda op: (op.type, _attrs_key(op), tuple(sorted(  # noqa: E731
        (s, tuple(ns)) for s, ns in op.inputs.items())))
    out = []
    for n, ops in wa.items():
        got = wb.get(n, [])
        if [sig(o) for o in ops] != [sig(o) for o in got]:
            out.append((n, got[-1].idx if got else None))
    return out


def check_rank(pass_name, case_name, rank, before, after, dtype, watched, lists=None) -> list:
    """One CheckResult for ``rank``: EQUIVALENT when every paired op reads the
    expected terms and every watched value is the expected one; else
    NOT_EQUIVALENT at the first point; INCONCLUSIVE when the model does not
    cover the program."""
    where = f"{pass_name} on {case_name} rank {rank}"
    changed = startup_changes(before, after)
    if changed:
        var, idx = changed[0]
        return [CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: the rewritten startup initialises {var!r} otherwise than the "
            f"original (startup op {idx}): the programs start from other values",
            counterexample={"rank": rank, "var": var, "startup_op_index": idx,
                            "changed": [v for v, _ in changed]})]
    try:
        exp, exp_reads = expected_run(before, dtype, lists)
        rew = Evaluator(after, scale_vars(after), terms=exp.terms)
        pairs = pair_ops(before, after)
        first = None
        for op in after.ops:
            ins = rew.inputs(op)
            o = pairs.get(op.idx)
            if o is not None and first is None:
                want = exp_reads[o.idx]
                for slot in sorted(set(want) | set(ins)):
                    w, g = want.get(slot, []), ins.get(slot, [])
                    # the backward carries the loss scale on purpose: an incoming
                    # grad is compared up to S^k; the watched values judge k
                    same = (lambda a, b: a.t == b.t) if slot.endswith("@GRAD") and \
                        _is_grad(op) else (lambda a, b: a == b)
                    for j in range(max(len(w), len(g))):
                        if j >= len(w) or j >= len(g) or not same(w[j], g[j]):
                            first = (op, o, slot, j, w[j] if j < len(w) else None,
                                     g[j] if j < len(g) else None)
                            break
                    if first:
                        break
            rew.run(op, ins)
    except Unsupported as exc:
        return [CheckResult(KIND, NAME, rank, Verdict.INCONCLUSIVE, f"{where}: {exc}")]
    rounded = sum(1 for ins in exp_reads.values() for vs in ins.values()
                  for v in vs if exp.terms.roundings(v.t))
    unpaired = sorted(o.idx for o in before.ops) if not pairs else \
        sorted(set(o.idx for o in before.ops) - {o.idx for o in pairs.values()})
    if first is not None:
        op, o, slot, j, w, g = first
        var = op.inputs.get(slot, [None] * (j + 1))[j] if j < len(op.inputs.get(slot, [])) \
            else None
        cex = {"rank": rank, "op_index": op.idx, "op_type": op.type, "slot": slot,
               "var": var, "original_op_index": o.idx,
               "expected": exp.show(w) if w else None, "found": exp.show(g) if g else None}
        if w is not None and g is not None:
            cex["witness"] = rounding_witness(exp.terms, w, g)
        return [CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: op {op.idx} ({op.type}) reads {slot} {var!r} as {cex['found']}; the "
            f"{dtype} lists imply {cex['expected']}", counterexample=cex)]
    for name in watched:
        w, g = exp.env.get(name), rew.env.get(name)
        if w is None or g is None or w != g:
            cex = {"rank": rank, "var": name,
                   "expected": exp.show(w) if w else None, "found": exp.show(g) if g else None}
            if w is not None and g is not None:
                cex["witness"] = rounding_witness(exp.terms, w, g)
            return [CheckResult(KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
                                f"{where}: watched {name!r} is {cex['found']}, the lists imply "
                                f"{cex['expected']}", counterexample=cex)]
    return [CheckResult(
        KIND, NAME, rank, Verdict.EQUIVALENT,
        f"{where}: the AMP program equals the original with round_{dtype} at the "
        f"{rounded} input(s) the lists imply, for all inputs (ops uninterpreted, "
        f"loss scale exact; {len(watched)} watched value(s))",
        details={"rounded_inputs": rounded, "watched": list(watched), "dtype": dtype,
                 "unpaired_original_ops": unpaired})]
