"""Static-check time per application against program size.

    python benchmarks/bench_static.py                      # full run (~5 min on 2 cores)
    python benchmarks/bench_static.py --sizes 1,2,4 --no-library   # quick look
    python benchmarks/bench_static.py --profile            # + cProfile at the largest size

"Static" is what every application does after the pass ran, per rank:
``adapter.contract`` plus ``verify.checks.run_static_checks`` on a
``CheckContext`` (shape, def-use, streams, reaching definitions; each timed
as ``run_static_checks`` runs it, in ``static_checks()`` order).  The
overlap adapter's ``predict`` (Z3 shapes of the plan, made from the original
before the pass runs) is timed apart and printed next to it.  Building the
case and applying the pass are timed separately and excluded.

Part 1: stacks of N MLP blocks (``cases.layer_stack.make_case``), ~100 ops
per block, one rank, median of ``--runs`` runs; ops/s and
``time(N) / time(1) / N`` (1.0 = linear; it falls below 1 while fixed
per-call costs are amortised).  Part 2: every application of the library
(every pass on every case, all ranks of the case), median of ``--runs``,
flagged when over the 0.5 s target.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import logging
import os
import pstats
import statistics
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from verify.ir import legacy_ir  # noqa: E402,F401  (legacy IR before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from cases.layer_stack import make_case  # noqa: E402
from passes.base import PassAdapter, PassRun  # noqa: E402
from verify.ir.rank_snapshot import snapshot_of as _snapshot  # noqa: E402
from verify.checks import CheckContext, static_checks  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402

LIBRARY_TARGET = 0.5  # s per application of a library case
STACK_TARGET = 5.0  # s per rank for 48 blocks
CHECK_NAMES = ["contract"] + [f.__module__.rsplit(".", 1)[-1] for f in static_checks()]


def now():
    return time.perf_counter()


def apply_timed(adapter, case, rank):
    """(PassRun, build seconds, pass seconds) for one rank.

    Mirrors ``PassAdapter.apply`` (two fresh builds, the pass on one) so that
    building and the pass are timed apart; an adapter overriding ``apply``
    is called as is and its pass time is the rest after two builds.
    """
    if type(adapter).apply is not PassAdapter.apply:
        t0 = now()
        case.build(rank)
        t_build = now() - t0
        t0 = now()
        run = run_pass(adapter, case, rank)
        return run, t_build, max(now() - t0 - 2 * t_build, 0.0)
    from paddle.distributed.passes import PassContext, new_pass

    t0 = now()
    original = case.build(rank)
    t_build = now() - t0
    rewritten = case.build(rank)
    logging.disable(logging.WARNING)
    t0 = now()
    try:
        p = new_pass(adapter.name, adapter.attrs(case, rewritten))
        p.apply([rewritten.main], [rewritten.startup], PassContext())
        for prog in (rewritten.main, rewritten.startup):
            prog.global_block()._sync_with_cpp()
        run = PassRun(original, rewritten)
    except Exception as exc:
        run = PassRun(original, rewritten, traceback.format_exc(), type(exc).__name__)
    finally:
        logging.disable(logging.NOTSET)
    return run, t_build, now() - t0


def static_once(adapter, case, rank, before, after) -> dict:
    """Seconds per static check of one rank (as an application runs them)."""
    times = {}
    t0 = now()
    adapter.contract(case, rank, before, after)
    times["contract"] = now() - t0
    t0 = now()
    ctx = CheckContext(pass_name=adapter.name, case_name=case.name, rank=rank,
                       before=before, after=after, symbols=dict(case.symbols),
                       intended=adapter.intended_changes(case, rank, before, after))
    times["contract"] += now() - t0
    for check in static_checks():  # exactly run_static_checks(ctx), timed per check
        t0 = now()
        check(ctx)
        times[check.__module__.rsplit(".", 1)[-1]] = now() - t0
    times["static"] = sum(times[k] for k in CHECK_NAMES)
    return times


def predict_once(adapter, case, rank, before) -> float:
    t0 = now()
    adapter.predict(case, rank, before)
    return now() - t0


def median_times(runs: list) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def snapshots(run, case, rank):
    t0 = now()
    before = _snapshot(run.original, case, rank, "original")
    after = _snapshot(run.rewritten, case, rank, "rewritten")
    return before, after, now() - t0


# --------------------------------------------------------------- part 1
def bench_stack(sizes, runs, rank, tp, profile):
    adapters = list(passes.adapters().values())
    rows = {a.short: [] for a in adapters}
    print(f"== layer stack, TP {tp}, rank {rank}: static checks of one rank "
          f"(median of {runs}) ==")
    head = (f"{'pass':9s} {'N':>3s} {'ops':>11s} {'build':>6s} {'pass':>6s} {'snap':>5s} | "
            + " ".join(f"{n[:8]:>8s}" for n in CHECK_NAMES)
            + f" | {'STATIC':>7s} {'ops/s':>7s} {'t/t1/N':>6s} | {'predict':>7s}")
    print(head)
    print("-" * len(head))
    for n in sizes:
        case = make_case(n, tp=tp)
        for adapter in adapters:
            run, t_build, t_pass = apply_timed(adapter, case, rank)
            if run.error:
                print(f"{adapter.short:9s} {n:3d} pass raised: {run.error.strip().splitlines()[-1]}")
                continue
            before, after, t_snap = snapshots(run, case, rank)
            med = median_times([static_once(adapter, case, rank, before, after)
                                for _ in range(runs)])
            pred = statistics.median(predict_once(adapter, case, rank, before)
                                     for _ in range(runs))
            rows[adapter.short].append((n, med["static"]))
            t1 = rows[adapter.short][0][1] if rows[adapter.short][0][0] == 1 else None
            lin = f"{med['static'] / t1 / n:6.2f}" if t1 else f"{'-':>6s}"
            ops = f"{len(before.ops)}->{len(after.ops)}"
            print(f"{adapter.short:9s} {n:3d} {ops:>11s} {t_build:6.2f} {t_pass:6.2f} "
                  f"{t_snap:5.2f} | " + " ".join(f"{med[k]:8.3f}" for k in CHECK_NAMES)
                  + f" | {med['static']:7.3f} {len(after.ops) / med['static']:7.0f} {lin} | "
                  + f"{pred:7.3f}", flush=True)
            if profile and n == max(sizes):
                prof = cProfile.Profile()
                prof.enable()
                static_once(adapter, case, rank, before, after)
                adapter.predict(case, rank, before)
                prof.disable()
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
                print(f"-- cProfile, {adapter.short}, N={n}: static checks + predict, "
                      "by own time --")
                print("\n".join(out.getvalue().splitlines()[6:]))
    print()
    for short, pts in rows.items():
        if pts and pts[-1][0] == 48:
            verdict = "OK" if pts[-1][1] < STACK_TARGET else "OVER TARGET"
            print(f"{short}: 48 blocks static {pts[-1][1]:.2f} s per rank "
                  f"(target < {STACK_TARGET:.0f} s): {verdict}")
    print()


# --------------------------------------------------------------- part 2
def bench_library(runs, pattern):
    adapters = list(passes.adapters().values())
    chosen = cases.select([pattern] if pattern else None)
    print(f"== library: every application, all ranks (median of {runs}); "
          f"'!!' = static + predict over {LIBRARY_TARGET} s ==")
    head = (f"{'pass':9s} {'case':28s} {'rk':>2s} {'ops/rank':>8s} {'build+pass':>10s} "
            f"{'static':>7s} {'predict':>7s}")
    print(head)
    print("-" * len(head))
    over = []
    worst = (0.0, "")
    for case in chosen:
        for adapter in adapters:
            jobs = []  # per rank: (static thunk or None when the pass raised, predict thunk)
            t_bp = 0.0
            n_ops = 0
            try:
                for rank in case.ranks:
                    run, tb, tpass = apply_timed(adapter, case, rank)
                    t_bp += 2 * tb + tpass
                    before, after, _ = snapshots(run, case, rank)
                    n_ops = max(n_ops, len(before.ops))
                    static_fn = None if run.error else (
                        lambda b=before, a=after, r=rank:
                        static_once(adapter, case, r, b, a)["static"])
                    jobs.append((static_fn, lambda b=before, r=rank:
                                 predict_once(adapter, case, r, b)))
            except Exception as exc:  # a case that does not build
                print(f"{adapter.short:9s} {case.name:28s} does not build: {exc}")
                continue
            static = statistics.median(sum(s() for s, _ in jobs if s) for _ in range(runs))
            predict = statistics.median(sum(p() for _, p in jobs) for _ in range(runs))
            total = static + predict
            flag = " !!" if total > LIBRARY_TARGET else ""
            if total > worst[0]:
                worst = (total, f"{adapter.short} on {case.name}")
            if flag:
                over.append(f"{adapter.short} on {case.name}")
            print(f"{adapter.short:9s} {case.name:28s} {case.world_size:2d} {n_ops:8d} "
                  f"{t_bp:10.3f} {static:7.3f} {predict:7.3f}{flag}", flush=True)
    print()
    print(f"worst application: {worst[1]} at {worst[0]:.3f} s static + predict "
          f"(target < {LIBRARY_TARGET} s)")
    print("over target: " + (", ".join(over) if over else "none"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,2,4,8,16,32,48",
                    help="stack sizes in blocks (default 1,2,4,8,16,32,48)")
    ap.add_argument("--runs", type=int, default=3, help="runs per median (default 3)")
    ap.add_argument("--rank", type=int, default=0, help="rank of the stack timed (default 0)")
    ap.add_argument("--tp", type=int, default=2, help="TP degree of the stack (default 2)")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the static checks at the largest size")
    ap.add_argument("--no-stack", action="store_true")
    ap.add_argument("--no-library", action="store_true")
    ap.add_argument("--case", default=None, help="library case glob (default all)")
    args = ap.parse_args(argv)
    import platform

    print(f"# {platform.node()} python {platform.python_version()}, "
          f"{os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M')}")
    if not args.no_stack:
        bench_stack([int(s) for s in args.sizes.split(",")], args.runs, args.rank,
                    args.tp, args.profile)
    if not args.no_library:
        bench_library(args.runs, args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
