"""Numeric runs of PIR programs: Paddle's executor under PIR, in this process.

For each rank, the original and the rewritten programs run K training steps
with identical seeded parameters (set after the startup program ran) and
seeded inputs (``inputs.py``: values depend on seed, name and step only);
every watched value (the case's loss and fetches, by value name; a value the
pass renamed is fetched under its new name) is compared per element with
the dtype- and depth-derived tolerances of ``compare.py``.

Limits, stated: the programs run in this process (not in an isolation
worker), one rank at a time, with no collectives (the cases of this slice are
single-rank); real ranks do not run PIR programs yet, so the witness is the
simulator's executor alone and the checks say so.
"""
from __future__ import annotations

import traceback

from verify.verdicts import CheckResult, Verdict

from .compare import compare
from .inputs import feed_value, param_value

KIND = "numeric"


def _values_by_name(program, names) -> dict:
    out = {}
    for op in program.global_block().ops:
        for i in range(op.num_results()):
            v = op.result(i)
            if not v.initialized():
                continue
            n = names.name(v)
            if n is not None:
                out.setdefault(n, v)
    return out


def run_program(rp, snap, watch: list, seed: int, steps: int) -> list:
    """``[{name: ndarray}]`` per step; ``watch`` names values of ``rp.main``
    (named by ``rp.names``)."""
    import numpy as np
    import paddle

    with paddle.pir_utils.IrGuard():
        values = _values_by_name(rp.main, rp.names)
        missing = [n for n in watch if n not in values]
        if missing:
            raise KeyError(f"no value named {missing[0]} in the program")
        fetch = [values[n] for n in watch]
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        out = []
        with paddle.static.scope_guard(scope):
            exe.run(rp.startup)
            for name, var in snap.vars.items():
                if var.is_parameter:
                    val = param_value(seed, name, var.shape, var.dtype)
                    scope.var(name).get_tensor().set(np.ascontiguousarray(val),
                                                     paddle.CPUPlace())
            for k in range(steps):
                feed = {f.name: feed_value(seed, f.name, f.shape, f.dtype, 0, k)
                        for f in rp.feeds}
                got = exe.run(rp.main, feed=feed, fetch_list=fetch)
                out.append({n: np.array(a) for n, a in zip(watch, got)})
        return out


def _depth(snap, steps) -> int:
    k = 1
    for op in snap.ops:
        if op.type in ("pd_op.matmul", "pd_op.matmul_grad"):
            x = snap.shape((op.inputs.get("x") or [""])[0]) or []
            k = max(k, max([abs(int(d)) for d in x] + [1]))
    return k * steps


def pir_numeric_checks(case, outcomes, backends=("simulated",), seed: int = 0, steps: int = 3,
                       adapter=None, notes=None) -> list:
    results = []
    backend = "simulated"
    if notes is not None and "ranks" in backends:
        notes.append("ranks backend not run: PIR programs are run by Paddle's executor in "
                     "one process (pir_runner); numeric evidence comes from it only")
    for o in outcomes:
        rp_o, rp_r = o.run.original, o.run.rewritten
        ren = adapter.renames(case, o.rank, o.before, o.after) if adapter is not None else {}
        watch = list(dict.fromkeys(list(rp_o.fetches) + ([rp_o.loss] if rp_o.loss else [])))
        where = f"PIR executor run of {case.name}"
        try:
            ref = run_program(rp_o, o.before, watch, seed, steps)
        except Exception as exc:
            results.append(CheckResult(KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                                       f"the ORIGINAL program does not run: "
                                       f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                                       details={"backend": backend,
                                                "traceback": traceback.format_exc()}))
            continue
        present = set(o.after.vars)
        cand_names = [ren.get(n, n) for n in watch]
        vanished = [n for n, c in zip(watch, cand_names) if c not in present]
        try:
            cand = run_program(rp_r, o.after, [c for c in cand_names if c in present],
                               seed, steps)
        except Exception as exc:
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {o.rank}: the rewritten program fails where the original runs: "
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}",
                counterexample={"rank": o.rank, "error": str(exc)[:2000]},
                details={"backend": backend}))
            continue
        depth = _depth(o.before, steps)
        diffs = []
        for k in range(steps):
            for n, c in zip(watch, cand_names):
                if n in vanished:
                    continue
                note = f"renamed by the pass to {c}" if c != n else ""
                diffs.append(compare(n, k, ref[k][n], cand[k][c], depth, note=note))
        bad = [d for d in diffs if not d.ok]
        if vanished:
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {o.rank}: watched value(s) {vanished} vanished from the "
                "rewritten program without a declared rename",
                counterexample={"rank": o.rank, "vanished": vanished},
                details={"backend": backend}))
        if bad:
            w = max(bad, key=lambda d: d.max_abs)
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {o.rank}: {len(bad)} of {len(diffs)} tensor comparisons "
                f"differ; worst {w.name} at step {w.step} index {w.worst_index}: "
                f"{w.candidate:.6g} vs {w.reference:.6g} (abs err {w.max_abs:.3g} > "
                f"tol {w.tol:.3g}){' ' + w.note if w.note else ''}",
                counterexample={"rank": o.rank, "backend": backend, "tensor": w.name,
                                "step": w.step, "index": w.worst_index,
                                "original": w.reference, "rewritten": w.candidate,
                                "abs_err": w.max_abs, "tol": w.tol},
                details={"backend": backend, "tensors": [d.to_dict() for d in bad[:20]]}))
        elif diffs and not vanished:
            w = max(diffs, key=lambda d: d.max_abs)
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.EQUIVALENT,
                f"{where} rank {o.rank}: {len(diffs)} tensor comparisons over {steps} steps "
                f"agree ({sum(d.bitwise for d in diffs)} bitwise); largest abs err "
                f"{w.max_abs:.3g} on {w.name} (tol {w.tol:.3g})",
                details={"backend": backend}))
    for r in results:
        r.details["witness"] = "simulator only"
        if "ranks" in backends and r.verdict != Verdict.INCONCLUSIVE:
            r.message += " [simulator only: real ranks did not run this case]"
    return results
