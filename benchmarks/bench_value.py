"""Value-proof time per application and against program size (figures, not tests).

    python benchmarks/bench_value.py                 # stacks 1..48 + the library
    python benchmarks/bench_value.py --sizes 1,2,4 --no-library

Timed: ``verify.value.prove_application`` on every rank of an application
(symbolic execution of original and rewritten programs of all ranks, the
comparisons, Z3).  Building the case and applying the pass are excluded.
Part 1: stacks of N MLP blocks (``cases.layer_stack.make_case``, ~100 ops
per block per rank, TP 2), both passes.  Part 2: every firing application
of the library, median over applications (goal < 0.5 s).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from verify.ir import legacy_ir  # noqa: E402,F401

import cases  # noqa: E402
import passes  # noqa: E402
from cases.layer_stack import make_case  # noqa: E402
from verify.ir.snapshot import from_programs  # noqa: E402
from verify.value import prove_application  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402


def snapshots(adapter, case):
    befores, afters, watched, per_tp = {}, {}, {}, set()
    for r in case.ranks:
        run = run_pass(adapter, case, r)
        if run.error:
            return None
        befores[r] = from_programs(run.original.main, run.original.startup)
        afters[r] = from_programs(run.rewritten.main, run.rewritten.startup)
        befores[r].feeds = afters[r].feeds = sorted(f.name for f in run.original.feeds)
        watched[r] = list(run.original.fetches) + ([run.original.loss] if run.original.loss else [])
        per_tp |= {f.name for f in run.original.feeds if getattr(f, "per_tp_rank", False)}

    def feed_key(rank, name):
        return f"dp{case.dp_index(rank)}" + (f"tp{case.tp_index(rank)}" if name in per_tp else "")
    return befores, afters, watched, feed_key


def timed(adapter, case):
    snaps = snapshots(adapter, case)
    if snaps is None:
        return None
    b, a, w, fk = snaps
    t = time.perf_counter()
    res = prove_application(f"{adapter.short} on {case.name}", case.ranks, case.rings, b, a, w,
                            feed_key=fk)
    secs = time.perf_counter() - t
    return secs, res, len(b[case.ranks[0]].ops)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,2,4,8,16,32,48")
    ap.add_argument("--no-library", action="store_true")
    args = ap.parse_args()
    print("Part 1: stacks (TP 2), both ranks")
    print(f"{'blocks':>6} {'pass':>9} {'ops/rank':>8} {'seconds':>8} {'s/block':>8} "
          f"{'queries':>7}  verdicts")
    for n in [int(x) for x in args.sizes.split(",")]:
        case = make_case(n)
        for short in ("overlap", "promotion"):
            secs, res, ops = timed(passes.get(short), case)
            q = sum(r.details.get("queries", 0) for r in res)
            print(f"{n:>6} {short:>9} {ops:>8} {secs:>8.3f} {secs / n:>8.4f} {q:>7}  "
                  + ",".join(r.verdict.value for r in res), flush=True)
    if args.no_library:
        return
    print("\nPart 2: every firing application of the library")
    times = []
    for name, case in cases.all_cases().items():
        for short in ("overlap", "promotion"):
            adapter = passes.get(short)
            if not case.expectation(adapter.name).fires:
                continue
            out = timed(adapter, case)
            if out is None:
                continue  # the pass crashed: no rewritten program to prove
            secs, res, ops = out
            times.append(secs)
            verdict = ",".join(r.verdict.value[:5] for r in res)
            q = sum(r.details.get("queries", 0) for r in res)
            print(f"  {name:28s} {short:9s} {secs:7.3f} s  q={q:<3d} {verdict}", flush=True)
    print(f"\n{len(times)} applications: median {statistics.median(times):.3f} s, "
          f"max {max(times):.3f} s, total {sum(times):.1f} s")


if __name__ == "__main__":
    main()
