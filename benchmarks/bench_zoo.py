"""The model zoo's costs: a cold plan per model, and per application with
the plans cached.

    python benchmarks/bench_zoo.py                 # cached plans: build + applications (~5-10 min)
    python benchmarks/bench_zoo.py --cold          # + a cold plan of every case (~15-25 min on 2 cores)
    python benchmarks/bench_zoo.py --case 'zoo_llama_tp2'
    python benchmarks/bench_zoo.py --runners --no-apply   # the PIR simulator: segments vs prefix stages
    python benchmarks/bench_zoo.py --no-build --pass fuse_allreduce_split_to_reducescatter_pass \
        --pass _pir_split_matmul_grad_to_matmul     # the two PIR passes only

Numeric runs are remembered on disk (``verify/numeric/run_memo.py``): point
``PADDLE_PASS_VERIFY_RUN_CACHE`` at an empty dir for a cold figure, run
again for a warm one (``=0`` turns it off).

Needs the ``models`` group (paddleformers).  What is timed:

* **cold plan** (``--cold``): ``cases.zoo.planned_dir`` into an empty cache
  (``$PADDLE_PASS_VERIFY_CACHE`` pointed at a fresh temp dir): one fresh
  subprocess per rank importing Paddle and paddleformers, ``dist.to_static``,
  serialization; the ranks run in parallel, so wall time on 2 cores.
* **build**: one rank's programs from the cached plan (``case.build``: PIR
  import of the serialized programs), median of 3, per rank.
* **coverage**: each case's op types and the checks a missing shape rule
  or value row would stop (``verify.selfcheck.coverage.scan``; the tests
  scan only ``zoo.TEST_SAMPLE``, the one zoo model they plan).
* **application**: ``python -m verify run --case C`` (isolation on, the
  default numeric backends and the value proof, as the gate runs it), the
  per-application ``seconds`` of its report.json, and the wall time of the
  whole run (process start, imports and worker start-up included), and the
  CPU seconds of that run and its workers (user + sys; on a shared machine
  the wall seconds grow with the load, the CPU seconds much less).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from verify.ir import legacy_ir  # noqa: E402,F401  (legacy IR before paddle)

import cases  # noqa: E402
from cases import zoo  # noqa: E402


def cold_plans(chosen) -> None:
    with tempfile.TemporaryDirectory(prefix="zoo-cold-") as tmp:
        old = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
        os.environ["PADDLE_PASS_VERIFY_CACHE"] = tmp
        try:
            for case in chosen:
                t = time.perf_counter()
                zoo.planned_dir(case.params)
                print(f"cold plan  {case.name:28s} ranks={len(case.ranks)}  "
                      f"{time.perf_counter() - t:6.1f} s", flush=True)
        finally:
            if old is None:
                os.environ.pop("PADDLE_PASS_VERIFY_CACHE")
            else:
                os.environ["PADDLE_PASS_VERIFY_CACHE"] = old


def builds(chosen, runs: int) -> None:
    for case in chosen:
        zoo.planned_dir(case.params)  # warm (untimed)
        per_rank = []
        for rank in case.ranks:
            ts = []
            for _ in range(runs):
                t = time.perf_counter()
                case.build(rank)
                ts.append(time.perf_counter() - t)
            per_rank.append(statistics.median(ts))
        print(f"build      {case.name:28s} per rank (median of {runs}): "
              + ", ".join(f"{x:.2f}" for x in per_rank) + " s", flush=True)


def runners(chosen) -> None:
    """The PIR simulator on each case's original programs, 3 steps, the loss
    watched: segments (each op once per step) against the prefix stages
    (re-run per collective, state restored), CPU seconds of this process and
    whether the losses agree bitwise."""
    import paddle

    from verify.ir.pir_snapshot import export_programs
    from verify.ir.rank_snapshot import snapshot_of
    from verify.numeric import pir_runner
    from verify.numeric.pir_ranks import run_exported_ranks
    from verify.numeric.startup_pieces import startup_states

    for case in chosen:
        rps = {r: case.build(r) for r in case.ranks}
        ranks = {}
        for r, rp in rps.items():
            snap = snapshot_of(rp, case, r, "original")
            with paddle.pir_utils.IrGuard():
                exported = export_programs(rp.main, rp.startup, rp.names)
            params, feeds = pir_runner.rank_inputs(case, r, rp, snap, 0, 3)
            ranks[r] = {"exported": exported, "params": params, "feeds": feeds,
                        "watch": [rp.loss] if rp.loss else [],
                        "states": startup_states(snap, r)}
        got, secs = {}, {}
        for mode in ("segments", "prefix"):
            t = time.process_time()
            try:
                got[mode] = run_exported_ranks(ranks, dict(case.rings), 3,
                                               restore_state=mode == "prefix",
                                               segments=mode == "segments")
            except Exception as exc:
                lines = [x for x in str(exc).splitlines() if x.strip()]
                got[mode] = f"{type(exc).__name__}: {(lines or [''])[-1][:90]}"
                if os.environ.get("BENCH_ZOO_TRACE"):
                    import traceback

                    traceback.print_exc()
            secs[mode] = time.process_time() - t
        same = got["segments"] == got["prefix"] if isinstance(got["prefix"], str) else all(
            all((a[n] == b[n]).all() for n in a) for r in case.ranks
            for a, b in zip(got["segments"][r], got["prefix"][r]))
        note = got["segments"] if isinstance(got["segments"], str) else \
            ("losses bitwise equal" if same else "LOSSES DIFFER")
        print(f"runner     {case.name:28s} segments {secs['segments']:5.1f} s  prefix "
              f"{secs['prefix']:5.1f} s CPU  {note}", flush=True)


def coverage_stops(chosen) -> None:
    """Every zoo case's op types against the shape rules and value rows (the
    tests scan only ``zoo.TEST_SAMPLE``)."""
    from verify.selfcheck import coverage

    for case in chosen:
        types, stops = coverage.scan([case])
        print(f"coverage   {case.name:28s} {len(types)} op types, "
              f"{len(stops)} stops" + "".join(f"; {s}" for s in stops), flush=True)


def applications(chosen, passes_=()) -> None:
    with tempfile.TemporaryDirectory(prefix="zoo-run-") as tmp:
        args = [sys.executable, "-m", "verify", "run", "--report-dir", tmp]
        for case in chosen:
            args += ["--case", case.name]
        for name in passes_:
            args += ["--pass", name]
        t = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU of `verify run` and its workers (reaped): what a busy machine
        # does not inflate, unlike the wall seconds
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        report = json.load(open(os.path.join(tmp, "report.json")))
    secs = []
    for a in report["applications"]:
        secs.append(a["seconds"])
        print(f"apply      {a['pass'][:42]:42s} {a['case']:28s} {a['status']:13s} "
              f"{a['seconds']:6.1f} s", flush=True)
    print(f"{len(secs)} applications: median {statistics.median(secs):.1f} s, "
          f"total {sum(secs):.1f} s; `verify run` wall {wall:.1f} s, "
          f"CPU {cpu:.1f} s ({cpu / max(len(secs), 1):.1f} s per application, "
          f"start-up and report included); load average {os.getloadavg()[0]:.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true", help="also time a cold plan of each case")
    ap.add_argument("--case", action="append", default=[], help="case glob (default zoo_*)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-apply", action="store_true")
    ap.add_argument("--pass", dest="passes", action="append", default=[],
                    help="only these passes in the applications (default all)")
    ap.add_argument("--no-build", action="store_true", help="skip the build and coverage lines")
    ap.add_argument("--runners", action="store_true",
                    help="also time the PIR simulator's segments against its prefix stages")
    a = ap.parse_args(argv)
    if zoo.UNAVAILABLE:
        print(f"zoo unavailable: {zoo.UNAVAILABLE}")
        return 2
    chosen = cases.select(a.case or ["zoo_*"])
    print(f"cores: {os.cpu_count()}  paddleformers {zoo.pinned()}")
    if a.cold:
        cold_plans(chosen)
    if not a.no_build:
        builds(chosen, a.runs)
    if a.runners:
        runners(chosen)
    if not a.no_build:
        coverage_stops(chosen)
    if not a.no_apply:
        applications(chosen, a.passes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
