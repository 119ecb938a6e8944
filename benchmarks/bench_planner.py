"""Time per planner application (``passes/planner.py``) with its plan cached.

    python benchmarks/bench_planner.py                 # every planner case, median of 3
    python benchmarks/bench_planner.py --case planner_tp2 --runs 5
    python benchmarks/bench_planner.py --case 'zoo_*' --no-cold   # real models (models group)

The plans are made first (once, cached under ``$PADDLE_PASS_VERIFY_CACHE``;
planning is not timed: the gate reuses cached plans).  Then each
application runs ``--runs`` times with isolation on and its worker warm
(one untimed run first): reading the stage records, the stage checks, the
serial program check, the parameter shapes, and the numeric relation (one
worker call: the serial run and the ranks in lock step, 3 steps).  Printed
per case: the median wall time, split into the static part (everything
before the worker call) and the relation run; flagged when over the 0.6 s
target.  The executor runs of a relation are memoized in the plan dir,
keyed by everything that decides them (``passes/planner.py``,
``_run_memo``): the warm figures read them; ``cold s`` is one run with the
memo off (``VERIFY_PLANNER_RUN_MEMO=0``): the serial run and the ranks in
lock step, once per wave of independent collectives, and the relation's
value proof (``proof s``: its own seconds, part of ``cold s``; memoized in
the plan dir like the runs).  The static checks (stage checks, serial
program, parameter shapes) are memoized in the plan dir too (``_static_memo``,
keyed by the snapshots' bytes and the check modules): the warm ``static s``
reads them; the untimed warm-up run fills them.  The verdict is followed by how it stands:
"proved" (the value proof on every rank) or "witnessed" (the numeric runs).
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from verify.ir import legacy_ir  # noqa: E402,F401  (before paddle)

import cases  # noqa: E402
from passes.planner import ADAPTER, planner_dir  # noqa: E402
from verify.engine import isolation  # noqa: E402
from verify.engine.application import run_application  # noqa: E402

TARGET = 0.6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="*")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true",
                    help="skip the run with the memo off (the real-model cases' cold runs "
                         "take minutes)")
    a = ap.parse_args(argv)
    isolation.configure(enabled=True)
    chosen = [c for n, c in cases.all_cases().items()
              if fnmatch.fnmatchcase(n, a.case) and ADAPTER.handles(c)]
    print(f"{'case':28} {'ranks':>5} {'median s':>9} {'static s':>9} {'relation s':>10} "
          f"{'cold s':>7} {'proof s':>8}")
    worst = 0.0
    for case in chosen:
        planner_dir(case)  # plan once (cached), untimed
        run_application(ADAPTER, case, numeric=lambda *x: [])  # warm the worker
        total, static = [], []
        for _ in range(a.runs):
            t = time.perf_counter()
            app = run_application(ADAPTER, case, numeric=None)  # no relation: static part
            static.append(time.perf_counter() - t)
            t = time.perf_counter()
            app = run_application(ADAPTER, case, numeric=lambda *x: [])
            total.append(time.perf_counter() - t)
        cold, proof = float("nan"), float("nan")
        if not a.no_cold:
            os.environ["VERIFY_PLANNER_RUN_MEMO"] = "0"
            t = time.perf_counter()
            capp = run_application(ADAPTER, case, numeric=lambda *x: [])
            cold = time.perf_counter() - t
            proof = max([c.details.get("seconds", 0.0) for c in capp.checks
                         if c.name == "planner relation proof"] or [float("nan")])
            os.environ.pop("VERIFY_PLANNER_RUN_MEMO")
        med = statistics.median(total)
        worst = max(worst, med)
        flag = "  OVER" if med > TARGET else ""
        print(f"{case.name:28} {len(case.ranks):5d} {med:9.3f} "
              f"{statistics.median(static):9.3f} {med - statistics.median(static):10.3f} "
              f"{cold:7.2f} {proof:8.2f}  {app.verdict.value} ({app.proof}){flag}")
    print(f"largest median {worst:.3f} s per application (target {TARGET} s)")
    isolation.shutdown() if hasattr(isolation, "shutdown") else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
