"""Numeric runs of an AMP rewrite: the fp32 program with a rounding at each cast.

This CPU build has no float16/bfloat16 matmul kernels, so the rewritten
program is run EMULATED: every low-precision var held in float32, every
``cast`` to the low dtype replaced by a cast to the low dtype and straight
back to float32 (a real rounding by Paddle's own cast kernel), every
``fill_constant`` of the low dtype filled in float32 and rounded the same
way.  That is the model the value check (``verify/value/amp_rounding.py``)
proves the rewrite equal to; here it runs with the real kernels, against the
float32 original, on the same parameters and feeds
(``verify/numeric/inputs.py``), one step, without the optimizer.

Tolerance, per watched value v, a first-order rounding bound:

    tol_i = 2 * u(d) * R_v * (|ref_i| + rms(ref))

where ``u`` is the low dtype's unit roundoff (``u(float16) = 2^-11``,
``u(bfloat16) = 2^-8``), ``R_v`` the number of distinct roundings in v's
term (the rounding points its op chain passes through, from the proof's own
term): each perturbs what flows into v by at most ``u`` relative, to first
order, and ``rms(ref)`` stands for the magnitude of the terms a sum adds up
(an element that cancels to near zero still carries their rounding); the 2
covers second-order terms.  While ``2 u R_v < 1`` the bound is not vacuous
(a zeroed, halved or sign-flipped value is outside it; ``tests/
test_amp_rounding.py`` evaluates it on the real runs).  A scale applied
twice (a gradient 2^15 times too large) is far outside it; a missing cast
is not (it only removes error): the value check decides those.

A first-order bound needs the ops to be smooth where the values are: a kink
(relu, max, abs, ...) that a rounding moves a value across changes the
result by a whole term.  On a program holding such an op, a value outside
the bound is INCONCLUSIVE, saying so, never NOT_EQUIVALENT.
"""
from __future__ import annotations

import numpy as np

from verify.verdicts import CheckResult, Verdict

from .compare import TensorDiff

KIND = "numeric"
# ops whose result jumps or bends where a rounding can move an input across
NONSMOOTH = frozenset({"relu", "relu_grad", "relu6", "abs", "elementwise_max",
                       "elementwise_min", "maximum", "minimum", "clip", "round", "floor",
                       "ceil", "sign", "hard_swish", "hard_sigmoid", "leaky_relu"})
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def tolerance(dtype: str, roundings: int, ref):
    """Per-element tolerance of a value through ``roundings`` rounding points
    (module docstring)."""
    r = np.abs(np.asarray(ref, dtype=np.float64))
    rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
    return 2.0 * UNIT_ROUNDOFF[dtype] * max(roundings, 1) * (r + rms)
FP32 = 5


def emulated(program, dtype: str = ""):
    """A clone of ``program`` whose casts to float16 or bfloat16 (whichever
    the rewrite holds, ``dtype`` or not) round in float32."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    from paddle.base import core

    prog = program.clone()
    block = prog.global_block()
    vartype = {4: core.VarDesc.VarType.FP16, 22: core.VarDesc.VarType.BF16}
    for v in block.vars.values():
        if v.dtype in vartype.values():
            v.desc.set_dtype(core.VarDesc.VarType.FP32)
    i = 0
    while i < len(block.ops):
        op = block.ops[i]
        attr = "out_dtype" if op.type == "cast" else "dtype" if op.type == "fill_constant" \
            else None
        if op.type == "cast" and int(op.attr("in_dtype")) in vartype:
            op._set_attr("in_dtype", FP32)
        low = int(op.attr(attr)) if attr else None
        if low not in vartype:
            i += 1
            continue
        out = op.output("Out")[0]
        tmp = block.create_var(name=f"{out}.emulated_round", shape=block.var(out).shape,
                               dtype=paddle.float32)
        op._set_attr(attr, FP32)
        op.desc._rename_output(out, tmp.name)
        mid = block.create_var(name=f"{out}.emulated_low", shape=block.var(out).shape,
                               dtype=vartype[low])
        block._insert_op(i + 1, type="cast", inputs={"X": [tmp]}, outputs={"Out": [mid]},
                         attrs={"in_dtype": FP32, "out_dtype": low})
        block._insert_op(i + 2, type="cast", inputs={"X": [mid]}, outputs={"Out": [out]},
                         attrs={"in_dtype": low, "out_dtype": FP32})
        i += 3
    block._sync_with_cpp()
    return prog


def _run(rp, main, seed, startup=None):
    """Fetch ``rp``'s watched values of one step of ``main`` (``startup`` run
    first, parameters and feeds from the seed; a parameter that ``startup``
    initialises otherwise than ``rp``'s own startup gets what that
    initialisation draws, ``inputs.init_like``)."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    from .inputs import feed_value, initial_params, startup_inits

    scope = paddle.static.Scope()
    exe = paddle.static.Executor(paddle.CPUPlace())
    watched = list(dict.fromkeys(list(rp.fetches) + ([rp.loss] if rp.loss else [])))
    with paddle.static.scope_guard(scope):
        exe.run(startup or rp.startup)
        params = {p.name: (p.shape, "float32") for p, _ in rp.params_grads}
        values = initial_params(seed, params, src_inits=startup_inits(rp.startup),
                                dst_inits=startup_inits(startup or rp.startup))
        for name, v in values.items():
            scope.find_var(name).get_tensor().set(v, paddle.CPUPlace())
        feed = {f.name: feed_value(seed, f.name, f.shape, f.dtype, 0, 0) for f in rp.feeds}
        got = exe.run(main, feed=feed, fetch_list=watched)
    return dict(zip(watched, [np.asarray(g) for g in got]))


def rounding_depths(before, after, dtype, watched) -> dict:
    """``{var: R_v}``: distinct roundings in each watched value's expected term."""
    from verify.value.amp_rounding import expected_run

    ev, _ = expected_run(before, dtype)
    return {n: ev.terms.rounding_count(ev.env[n].t) if n in ev.env else 0 for n in watched}


def within(name, ref, cand, dtype, roundings) -> TensorDiff:
    """``cand`` against ``ref`` (float32 arrays) within :func:`tolerance`."""
    r = np.asarray(ref, dtype=np.float64)
    c = np.asarray(cand, dtype=np.float64)
    if r.shape != c.shape:
        return TensorDiff(name, 0, dtype, list(r.shape), float("inf"), float("inf"), [], 0.0,
                          0.0, 0.0, False, False, f"shape {list(c.shape)} differs")
    diff = np.abs(r - c)
    diff = np.where(np.isnan(r) != np.isnan(c), np.inf, np.nan_to_num(diff, nan=0.0))
    tol = np.broadcast_to(tolerance(dtype, roundings, r), r.shape)
    if diff.size == 0:
        return TensorDiff(name, 0, dtype, list(r.shape), 0.0, 0.0, [], 0.0, 0.0, 0.0, True, True)
    flat = int(np.argmax(diff / tol))
    idx = [int(i) for i in np.unravel_index(flat, diff.shape)] if diff.ndim else []
    rel = diff / np.maximum(np.abs(r), 1e-30)
    return TensorDiff(name, 0, dtype, list(r.shape), float(diff.reshape(-1)[flat]),
                      float(rel.max()), idx, float(r.reshape(-1)[flat]),
                      float(c.reshape(-1)[flat]), float(tol.reshape(-1)[flat]),
                      bool(np.array_equal(r, c)), bool(np.all(diff <= tol)))


def amp_numeric_checks(pass_name, case, outcomes, dtype, seed=0) -> list:
    """One CheckResult per rank: the emulated rewrite against the float32 original."""
    out = []
    for o in outcomes:
        where = f"{pass_name} on {case.name} rank {o.rank}"
        try:
            ref = _run(o.run.original, o.run.original.main, seed)
            got = _run(o.run.original, emulated(o.run.rewritten.main, dtype), seed,
                       o.run.rewritten.startup)
        except Exception as exc:  # a program the emulation cannot run
            out.append(CheckResult(KIND, "amp rounding run", o.rank, Verdict.INCONCLUSIVE,
                                   f"{where}: the emulated run failed: {exc}"))
            continue
        depths = rounding_depths(o.before, o.after, dtype, list(ref))
        diffs = [within(n, ref[n], got[n], dtype, depths.get(n, 0)) for n in ref]
        bad = [d for d in diffs if not d.ok]
        rule = (f"tol = 2 * u * R * (|ref| + rms(ref)), u = 2^{int(np.log2(UNIT_ROUNDOFF[dtype]))} "
                f"({dtype}), R = roundings upstream of the value: "
                + ", ".join(f"{n} {r}" for n, r in depths.items()))
        kinks = sorted({op.type for op in o.before.ops} & NONSMOOTH)
        if bad:
            d = max(bad, key=lambda x: x.max_abs / max(x.tol, 1e-300))
            out.append(CheckResult(
                KIND, "amp rounding run", o.rank,
                Verdict.INCONCLUSIVE if kinks else Verdict.NOT_EQUIVALENT,
                f"{where}: {d.name} differs from the float32 run by {d.max_abs:.3g} at "
                f"{d.worst_index} (tolerance {d.tol:.3g}: {rule})" + (
                    f"; the program holds {', '.join(kinks)}, whose kink a rounding can "
                    "cross: the first-order bound does not hold there" if kinks else ""),
                counterexample={"rank": o.rank, "var": d.name, "index": d.worst_index,
                                "reference": d.reference, "candidate": d.candidate,
                                "tolerance": d.tol},
                details={"diffs": [x.to_dict() for x in diffs]}))
        else:
            worst = max(diffs, key=lambda x: x.max_abs / max(x.tol, 1e-300)) if diffs else None
            out.append(CheckResult(
                KIND, "amp rounding run", o.rank, Verdict.EQUIVALENT,
                f"{where}: {len(diffs)} value(s) within the rounding tolerance of the float32 "
                f"run ({rule})" + (f"; worst {worst.name}: {worst.max_abs:.3g} of "
                                   f"{worst.tol:.3g}" if worst else ""),
                details={"diffs": [x.to_dict() for x in diffs]}))
    for r in out:  # one process, Paddle's executor: what the report calls the simulator
        r.details["witness"] = "simulator only"
    return out
