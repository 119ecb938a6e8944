"""Wall time and memory of the numeric backends.

    python benchmarks/bench_numeric.py                    # everything (~5-10 min on 2 cores)
    python benchmarks/bench_numeric.py --no-ranks --case 'row_*'
    python benchmarks/bench_numeric.py --no-library --scale-layers 2,8

Part 1, per library case: ``numeric_checks`` of one application (the pass
the case exists for; ``--all-passes`` for every pass) on the ``simulated``
backend, median of ``--runs``.  The pass is applied outside the timing
(for AMP cases ``numeric_checks`` itself re-applies it to the float32 twin:
that is part of the numeric cost and is inside).  ``py peak`` is the peak
of Python allocations (tracemalloc, in one extra untimed run: tracemalloc
slows Python down); Paddle's C++ tensors are not in it, the process RSS at
the end is printed for those.

Part 2, scaling with ranks: the simulator on TP 2, 4 and 8 for stacks of
``--scale-layers`` blocks (``cases.layer_stack.make_case(n, tp=...)``) and
for the row-parallel MP case (``cases.row_parallel._case(..., tp=...)``).
Each configuration runs in a fresh child process, so its peak RSS
(``ru_maxrss``) is its own; ``+run MB`` is the growth of that peak during
the numeric runs (after Paddle was imported, the case built and the pass
applied).

Part 3, the ``ranks`` backend (real processes via Paddle's launcher, gloo
here), when ``verify/numeric/rank_pool.py`` exists: per case whose programs
gloo runs faithfully (float16 cases through their float32 twin, as
``numeric_checks`` does), ``cold`` = the first job after every pool was shut
down (launch + rendezvous + job), ``warm`` = median of ``--runs`` jobs on
the pool then alive.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from verify.ir import legacy_ir  # noqa: E402,F401  (legacy IR before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.numeric.equivalence import numeric_checks  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402


def now():
    return time.perf_counter()


def maxrss_mb() -> float:
    """Peak RSS of this process in MB.

    ``VmHWM`` of /proc/self/status where it exists: Linux carries
    ``ru_maxrss`` over ``execve``, so a child started from a big parent
    would report the parent's peak; ``VmHWM`` belongs to the new image.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def outcomes_of(adapter, case):
    """Per-rank objects numeric_checks reads (``.rank``, ``.run``), or None
    when the pass raised on some rank (the gate runs no numerics then)."""
    out = []
    for rank in case.ranks:
        run = run_pass(adapter, case, rank)
        if run.error:
            return None
        out.append(SimpleNamespace(rank=rank, run=run))
    return out


def timed_numeric(case, adapter, outcomes, backend, runs):
    """(median seconds, verdicts of the last run)."""
    times, res = [], []
    for _ in range(runs):
        t0 = now()
        res = numeric_checks(case, outcomes, backends=(backend,), adapter=adapter)
        times.append(now() - t0)
    return statistics.median(times), sorted({r.verdict.value for r in res})


def py_peak_mb(case, adapter, outcomes, backend="simulated") -> float:
    tracemalloc.start()
    try:
        numeric_checks(case, outcomes, backends=(backend,), adapter=adapter)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def applications(all_passes: bool, pattern):
    chosen = cases.select([pattern] if pattern else None)
    table = passes.adapters()
    for case in chosen:
        names = list(table) if all_passes or not case.expect else list(case.expect)
        for name in names:
            yield case, table[name]


# --------------------------------------------------------------- part 1
def bench_library(runs, all_passes, pattern):
    print(f"== simulated backend per application (median of {runs}) ==")
    head = (f"{'case':28s} {'pass':9s} {'rk':>2s} {'ops':>5s} {'sim s':>7s} "
            f"{'py peak MB':>10s}  verdicts")
    print(head)
    print("-" * len(head))
    total = 0.0
    for case, adapter in applications(all_passes, pattern):
        outcomes = outcomes_of(adapter, case)
        if outcomes is None:
            print(f"{case.name:28s} {adapter.short:9s} pass raised: no numeric run")
            continue
        n_ops = len(outcomes[0].run.original.main.global_block().ops)
        secs, verdicts = timed_numeric(case, adapter, outcomes, "simulated", runs)
        total += secs
        peak = py_peak_mb(case, adapter, outcomes)
        twin = " (fp32 twin)" if case.numeric_twin() is not case else ""
        print(f"{case.name:28s} {adapter.short:9s} {case.world_size:2d} {n_ops:5d} "
              f"{secs:7.3f} {peak:10.1f}  {','.join(verdicts)}{twin}", flush=True)
    print(f"sum of medians: {total:.1f} s; process max RSS {maxrss_mb():.0f} MB")
    print()


# --------------------------------------------------------------- part 2
def _scale_case(family, tp, layers):
    if family == "stack":
        from cases.layer_stack import make_case

        return make_case(layers, tp=tp)
    from cases.row_parallel import _case
    from cases.base import Expect

    return _case(f"row_mp_o0_sgd_tp{tp}", f"MP, TP {tp}", Expect(True), tp=tp)


def child(spec: str) -> int:
    """Run one scaling configuration; print one JSON line."""
    family, tp, layers, pass_name, runs = spec.split(":")
    tp, layers, runs = int(tp), int(layers), int(runs)
    case = _scale_case(family, tp, layers)
    adapter = passes.get(pass_name)
    t0 = now()
    outcomes = outcomes_of(adapter, case)
    t_apply = now() - t0
    if outcomes is None:
        print(json.dumps({"error": "pass raised"}))
        return 0
    n_ops = len(outcomes[0].run.original.main.global_block().ops)
    rss0 = maxrss_mb()
    secs, verdicts = timed_numeric(case, adapter, outcomes, "simulated", runs)
    out = {"ops": n_ops, "apply": t_apply, "sim": secs, "verdicts": verdicts,
           "rss_before": rss0, "rss": maxrss_mb(),
           "py_peak": py_peak_mb(case, adapter, outcomes)}
    print("RESULT " + json.dumps(out))
    return 0


def bench_scaling(layers_list, tps, runs, pass_name):
    print(f"== simulated backend against ranks ({pass_name}; median of {runs}; "
          "one child process per row) ==")
    head = (f"{'case':24s} {'tp':>3s} {'ops/rank':>8s} {'apply s':>7s} {'sim s':>7s} "
            f"{'s/rank':>7s} {'max RSS MB':>10s} {'+run MB':>7s} {'py peak MB':>10s}  verdicts")
    print(head)
    print("-" * len(head))
    configs = [("stack", n) for n in layers_list] + [("row", 1)]
    for family, layers in configs:
        for tp in tps:
            spec = f"{family}:{tp}:{layers}:{pass_name}:{runs}"
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", spec],
                                  capture_output=True, text=True, cwd=ROOT)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")),
                        None)
            name = (f"stack_{layers}_layers" if family == "stack" else "row_mp_o0_sgd")
            if line is None:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
                print(f"{name:24s} {tp:3d} failed: {tail}")
                continue
            r = json.loads(line[len("RESULT "):])
            if "error" in r:
                print(f"{name:24s} {tp:3d} {r['error']}")
                continue
            print(f"{name:24s} {tp:3d} {r['ops']:8d} {r['apply']:7.2f} {r['sim']:7.3f} "
                  f"{r['sim'] / tp:7.3f} {r['rss']:10.0f} {r['rss'] - r['rss_before']:7.0f} "
                  f"{r['py_peak']:10.1f}  "
                  f"{','.join(r['verdicts'])}", flush=True)
    print()


# --------------------------------------------------------------- part 3
def bench_ranks(runs, all_passes, pattern):
    print(f"== ranks backend (real processes) per application: cold = first job after "
          f"every pool is shut down, warm = median of {runs} ==")
    try:
        rank_pool = importlib.import_module("verify.numeric.rank_pool")
    except ImportError as exc:
        print(f"ranks backend not available: verify/numeric/rank_pool.py ({exc})")
        return
    if not hasattr(rank_pool, "run_ranks"):
        print("ranks backend not available: rank_pool has no run_ranks")
        return
    head = f"{'case':28s} {'pass':9s} {'rk':>2s} {'cold s':>7s} {'warm s':>7s}  verdicts"
    print(head)
    print("-" * len(head))
    try:
        for case, adapter in applications(all_passes, pattern):
            # as numeric_checks decides: a float32 twin has no float16 problem
            twin = case.numeric_twin() is not case
            unfaithful = [r for r in (case.gloo_unfaithful or "").split("; ")
                          if r and not (twin and "float16" in r)]
            if unfaithful:
                print(f"{case.name:28s} {adapter.short:9s} skipped: {'; '.join(unfaithful)}")
                continue
            outcomes = outcomes_of(adapter, case)
            if outcomes is None:
                print(f"{case.name:28s} {adapter.short:9s} pass raised: no numeric run")
                continue
            rank_pool.shutdown_pools()
            t0 = now()
            res = numeric_checks(case, outcomes, backends=("ranks",), adapter=adapter)
            cold = now() - t0
            warm, verdicts = timed_numeric(case, adapter, outcomes, "ranks", runs)
            verdicts = sorted(set(verdicts) | {r.verdict.value for r in res})
            print(f"{case.name:28s} {adapter.short:9s} {case.world_size:2d} {cold:7.2f} "
                  f"{warm:7.3f}  {','.join(verdicts)}{' (fp32 twin)' if twin else ''}",
                  flush=True)
    finally:
        rank_pool.shutdown_pools()
    print()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per median (default 3)")
    ap.add_argument("--case", default=None, help="library case glob (default all)")
    ap.add_argument("--all-passes", action="store_true",
                    help="every pass on every case (default: the passes each case names)")
    ap.add_argument("--scale-layers", default="2,8",
                    help="stack sizes for the ranks scaling (default 2,8)")
    ap.add_argument("--scale-tp", default="2,4,8", help="TP degrees (default 2,4,8)")
    ap.add_argument("--scale-pass", default="promotion",
                    help="pass applied in the scaling runs (default promotion)")
    ap.add_argument("--no-library", action="store_true")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--no-ranks", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    import platform

    print(f"# {platform.node()} python {platform.python_version()}, "
          f"{os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M')}")
    if not args.no_library:
        bench_library(args.runs, args.all_passes, args.case)
    if not args.no_scaling:
        bench_scaling([int(x) for x in args.scale_layers.split(",")],
                      [int(x) for x in args.scale_tp.split(",")], args.runs, args.scale_pass)
    if not args.no_ranks:
        bench_ranks(args.runs, args.all_passes, args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
