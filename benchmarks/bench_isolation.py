"""Isolation overhead: one application in process vs through an isolation worker.

    python benchmarks/bench_isolation.py [--runs 3] [--backend none|simulated] [--case GLOB]

For every library application (each case with the pass it is about, or both
passes for cases that name both) the whole ``run_application`` is timed with
isolation off and on (a warm worker; its start-up is timed apart), median of
``--runs``; printed per application and as medians over all.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from verify.ir import legacy_ir  # noqa: E402,F401

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine import isolation  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", default="none", choices=["none", "simulated"])
    ap.add_argument("--case", action="append", default=[])
    args = ap.parse_args()
    _, numeric = pick_backend(args.backend)
    chosen = cases.select(args.case) if args.case else list(cases.all_cases().values())
    pairs = [(passes.get(p), c) for c in chosen for p in c.expect] or []
    t = time.perf_counter()
    isolation.configure(enabled=True)
    isolation.apply_pass(pairs[0][0], pairs[0][1], pairs[0][1].ranks[0])
    print(f"worker start-up (import paddle, cases, passes) + first job: "
          f"{time.perf_counter() - t:.2f} s")
    rows, inproc, iso = [], [], []
    for adapter, case in pairs:
        times = {}
        for on in (False, True):
            isolation.configure(enabled=on)
            got = []
            for _ in range(args.runs):
                start = time.perf_counter()
                app = run_application(adapter, case, numeric=numeric)
                got.append(time.perf_counter() - start)
            times[on] = statistics.median(got)
        inproc.append(times[False])
        iso.append(times[True])
        rows.append((adapter.short, case.name, len(case.ranks), times[False], times[True],
                     app.verdict.value))
    print(f"{'pass':10s} {'case':30s} rk  in-proc s  isolated s  +s/app  +s/rank  verdict")
    for short, name, rk, a, b, v in rows:
        print(f"{short:10s} {name:30s} {rk:2d}  {a:9.3f}  {b:10.3f}  {b - a:+6.3f}  "
              f"{(b - a) / rk:+7.3f}  {v}")
    over = [b - a for a, b in zip(inproc, iso)]
    per_rank = [(r[4] - r[3]) / r[2] for r in rows]
    print(f"{len(rows)} applications (backend {args.backend}, median of {args.runs}): "
          f"in process median {statistics.median(inproc):.3f} s, isolated median "
          f"{statistics.median(iso):.3f} s; overhead median {statistics.median(over):+.3f} s "
          f"per application ({statistics.median(per_rank):+.3f} s per rank), "
          f"total {sum(inproc):.1f} s -> {sum(iso):.1f} s")
    isolation.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
