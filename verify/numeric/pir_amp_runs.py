"""Numeric runs of the PIR Engine's AMP: the AMP serial program against the
float32 serial program of the same model, with Paddle's own low-precision
kernels (this CPU build runs the bfloat16 programs the planner makes: oneDNN
matmuls), one training step on the same seeded parameters and feeds.

Compared by meaning, not by value name (the two programs name their values
apart): the loss, every parameter's gradient as its optimizer reads it, and
every parameter after the update, each within the tolerance of
``verify/numeric/amp_runs.py``: ``2 * u(dtype) * R * (|ref| + rms(ref))``,
``R`` the distinct roundings in the value's expected term
(``verify/value/pir_amp_rounding.rounding_depths``).  The same first-order
caveat: a program holding a kink (relu, max, ...) that a rounding can move a
value across is INCONCLUSIVE outside the bound, never NOT_EQUIVALENT.
"""
from __future__ import annotations

import json

from verify.verdicts import CheckResult, Verdict

from .amp_runs import NONSMOOTH, UNIT_ROUNDOFF, within
from .inputs import feed_value, param_value

KIND, NAME = "numeric", "pir amp rounding run"


def _serial(rank_dir):
    data = json.loads((rank_dir / "serial.json").read_text())
    data["main"], data["startup"] = data["main"].encode(), data["startup"].encode()
    rel = json.loads((rank_dir / "planner.json").read_text())["serial_relation"]
    return data, rel


def _watch(rel) -> dict:
    """``{("loss", None) | ("grad", p) | ("param", p): value name}``."""
    out = {("loss", None): rel["loss"]} if rel.get("loss") else {}
    for p, r in rel["params"].items():
        out[("grad", p)] = r["grad"]
        out[("param", p)] = r["param"]
    return out


def run_pair(fp32_dir, amp_dir, seed: int = 0, steps: int = 1) -> tuple:
    """``(reference, candidate)``: ``{key: ndarray}`` after ``steps`` steps of
    each serial program (``fp32_dir``/``amp_dir``: a plan's ``rank<R>``), in
    this process (:func:`check` sends it to an isolation worker: a crash of
    Paddle's executor costs the check, not the run)."""
    from pathlib import Path

    from .planner_runs import run_serial_exported

    (fdata, frel), (adata, arel) = _serial(Path(fp32_dir)), _serial(Path(amp_dir))
    params = {n: param_value(seed, n, p["shape"], p["dtype"])
              for n, p in frel["parameters"].items()}
    feeds = [{n: feed_value(seed, n, f["shape"], f["dtype"], 0, k)
              for n, f in frel["feeds"].items() if not f["persistable"]}
             for k in range(steps)]
    out = []
    for data, rel in ((fdata, frel), (adata, arel)):
        watch = _watch(rel)
        names = list(dict.fromkeys(watch.values()))
        got = run_serial_exported(data, params, feeds, names, steps, seed)[-1]
        out.append({k: got[n] for k, n in watch.items()})
    return out[0], out[1]


def check(where, rank, fp32_dir, amp_dir, dtype, depths, op_types, seed=0) -> CheckResult:
    """One CheckResult: every watched value of the AMP run within the
    rounding tolerance of the float32 run (module docstring)."""
    from . import offload

    try:
        ref, got = offload.run_call("verify.numeric.pir_amp_runs", "run_pair", {
            "fp32_dir": str(fp32_dir), "amp_dir": str(amp_dir), "seed": seed}, where)
    except Exception as exc:  # a program the executor cannot run, or a crash of it
        from verify.verdicts import failure_line

        return CheckResult(KIND, NAME, rank, Verdict.INCONCLUSIVE,
                           f"{where}: the serial programs did not run: {failure_line(exc)}")
    missing = sorted(str(k) for k in set(ref) ^ set(got))
    if missing:
        return CheckResult(KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
                           f"{where}: the AMP and float32 plans watch other values: "
                           f"{', '.join(missing)}",
                           counterexample={"rank": rank, "unmatched": missing})
    label = lambda k: k[0] if k[1] is None else f"{k[0]} of {k[1]}"  # noqa: E731
    diffs = {k: within(label(k), ref[k], got[k], dtype, depths.get(k, 0)) for k in ref}
    bad = [d for d in diffs.values() if not d.ok]
    rule = (f"tol = 2 * u * R * (|ref| + rms(ref)), u = 2^"
            f"{int(round(__import__('math').log2(UNIT_ROUNDOFF[dtype])))} ({dtype}), R the "
            f"roundings upstream (1 to {max(depths.values(), default=0)})")
    kinks = sorted({t.split(".", 1)[-1] for t in op_types} & NONSMOOTH)
    if bad:
        d = max(bad, key=lambda x: x.max_abs / max(x.tol, 1e-300))
        return CheckResult(
            KIND, NAME, rank, Verdict.INCONCLUSIVE if kinks else Verdict.NOT_EQUIVALENT,
            f"{where}: {d.name} of the AMP run differs from the float32 run by "
            f"{d.max_abs:.3g} at {d.worst_index} (tolerance {d.tol:.3g}: {rule})" + (
                f"; the program holds {', '.join(kinks)}, whose kink a rounding can cross"
                if kinks else ""),
            counterexample={"rank": rank, "value": d.name, "index": d.worst_index,
                            "reference": d.reference, "candidate": d.candidate,
                            "tolerance": d.tol},
            details={"diffs": [x.to_dict() for x in diffs.values()]})
    worst = max(diffs.values(), key=lambda x: x.max_abs / max(x.tol, 1e-300))
    exact = sum(1 for d in diffs.values() if d.bitwise)
    return CheckResult(
        KIND, NAME, rank, Verdict.EQUIVALENT,
        f"{where}: {len(diffs)} value(s) of the AMP run within the rounding tolerance of "
        f"the float32 run ({rule}); worst {worst.name}: {worst.max_abs:.3g} of "
        f"{worst.tol:.3g}; {exact} bit-identical",
        # one process, Paddle's executor: what the report calls the simulator
        details={"diffs": [x.to_dict() for x in diffs.values()], "witness": "simulator only"})
