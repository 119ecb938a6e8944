"""Value-proof time per application and against program size (figures, not tests).

    python benchmarks/bench_value.py                 # stacks 1..48 + the library
    python benchmarks/bench_value.py --sizes 1,2,4 --no-library

Timed: ``verify.value.prove_application`` on every rank of an application
(symbolic execution of original and rewritten programs of all ranks, the
comparisons, Z3).  Building the case and applying the pass are excluded.
Part 1: stacks of N MLP blocks (``cases.layer_stack.make_case``, ~100 ops
per block per rank, TP 2), both passes.  Part 2: every firing application
of the library, median over applications (goal < 0.5 s), each beside the
same application with a broken edit (goal: broken costs <= 2x faithful).
Proofs are at the real shapes (every -1 dim at 1, 2, 3).

Beside the seconds, each line prints the deterministic budget the proof
spent (``details["budget"]``): work units of the symbolic executions
(``units``) and Z3's rlimit count (``rlim``); the end of part 2 prints the
correlation of units with CPU seconds over the applications, and the most
any application spent against the default limits (the margin).
"""
from __future__ import annotations

import argparse
import fnmatch
import math
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
from verify.ir.snapshot import Op, ProgramSnapshot, from_programs  # noqa: E402
from verify.value import prove_application  # noqa: E402
from verify.value.proof import DEFAULT_BUDGET, configure_budget  # noqa: E402
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


def broken(snap):
    """A copy of a rewritten snapshot with a small wrong edit that changes
    every grad and parameter: the loss grad's seed (a fill_constant writing
    ``*@GRAD``) doubled.  None where there is no such seed."""
    ops = []
    hit = False
    for op in snap.ops:
        if not hit and op.type == "fill_constant" and \
                any(n.endswith("@GRAD") for n in op.writes()):
            attrs = dict(op.attrs)
            attrs["value"] = 2.0 * float(attrs.get("value", 1.0) or 1.0)
            attrs.pop("str_value", None)
            op = Op(op.idx, op.type, dict(op.inputs), dict(op.outputs), attrs, op.role,
                    op.stream)
            hit = True
        ops.append(op)
    if not hit:
        return None
    return ProgramSnapshot(ops, snap.vars, snap.startup_ops, list(snap.feeds), dict(snap.meta))


def prove_timed(where, case, b, a, w, fk):
    t, c = time.perf_counter(), time.process_time()
    res = prove_application(where, case.ranks, case.rings, b, a, w, feed_key=fk)
    return time.perf_counter() - t, time.process_time() - c, res


def spent(res):
    """(work units, Z3 rlimit) one application spent (the same on every rank)."""
    b = [r.details.get("budget") or {} for r in res]
    return (max([x.get("work_units_spent", 0) for x in b] or [0]),
            max([x.get("z3_rlimit_spent", 0) for x in b] or [0]))


def correlation(xs, ys) -> float:
    """Pearson's r."""
    n = len(xs)
    if n < 2:
        return float("nan")
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def timed(adapter, case, with_broken=False):
    """(wall s, cpu s, results, ops/rank[, (wall, cpu, results) of the broken edit])."""
    snaps = snapshots(adapter, case)
    if snaps is None:
        return None
    b, a, w, fk = snaps
    secs, cpu, res = prove_timed(f"{adapter.short} on {case.name}", case, b, a, w, fk)
    out = (secs, cpu, res, len(b[case.ranks[0]].ops))
    if with_broken:
        bad = {r: broken(s) for r, s in a.items()}
        out += (None if any(s is None for s in bad.values()) else
                prove_timed(f"broken {adapter.short} on {case.name}", case, b, bad, w, fk),)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,2,4,8,16,32,48")
    ap.add_argument("--no-library", action="store_true")
    ap.add_argument("--cases", default="*", help="glob of the library cases of part 2")
    ap.add_argument("--passes", default="overlap,promotion",
                    help="short names of the passes of part 2 ('all': every pass)")
    ap.add_argument("--unlimited", action="store_true",
                    help="measure without the budget (work units and rlimits 10^15)")
    args = ap.parse_args()
    if args.unlimited:
        configure_budget(work_units=10 ** 15, z3_rlimit_per_query=10 ** 15,
                         z3_rlimit_per_application=10 ** 15)
    print("Part 1: stacks (TP 2), both ranks (wall and CPU seconds; the machine may be shared)")
    print(f"{'blocks':>6} {'pass':>9} {'ops/rank':>8} {'seconds':>8} {'cpu':>8} {'s/block':>8} "
          f"{'queries':>7} {'units':>12} {'rlimit':>10}  verdicts")
    for n in [int(x) for x in args.sizes.split(",")]:
        case = make_case(n)
        for short in ("overlap", "promotion"):
            out = timed(passes.get(short), case)
            if out is None:
                print(f"{n:>6} {short:>9} the pass application failed (see VERIFY_ISOLATION=0 "
                      "to apply it in this process)", flush=True)
                continue
            secs, cpu, res, ops = out
            q = sum(r.details.get("queries", 0) for r in res)
            units, rlim = spent(res)
            print(f"{n:>6} {short:>9} {ops:>8} {secs:>8.3f} {cpu:>8.3f} {secs / n:>8.4f} {q:>7} "
                  f"{units:>12} {rlim:>10}  " + ",".join(r.verdict.value for r in res),
                  flush=True)
    if args.no_library:
        return
    print("\nPart 2: every firing application of the library; beside each, the same "
          "application with a broken edit (the loss grad's seed doubled in every rank's "
          "rewritten program: every grad and parameter differs)")
    times, cpus, bad_times, bad_cpus = [], [], [], []
    units_cpu = []  # (units, cpu s, name) of every proof that executed, faithful and broken
    rlims = []
    shorts = [a.short for a in passes.adapters().values()] if args.passes == "all" else \
        args.passes.split(",")
    for name, case in cases.all_cases().items():
        if not fnmatch.fnmatch(name, args.cases):
            continue
        for short in shorts:
            adapter = passes.get(short)
            # this script snapshots legacy programs only (PIR: python -m verify run)
            if adapter.ir != "legacy" or not adapter.handles(case) or \
                    not case.expectation(adapter.name).fires:
                continue
            out = timed(adapter, case, with_broken=True)
            if out is None:
                continue  # the pass crashed: no rewritten program to prove
            secs, cpu, res, ops, bad = out
            times.append(secs)
            cpus.append(cpu)
            verdict = ",".join(r.verdict.value[:5] for r in res)
            q = sum(r.details.get("queries", 0) for r in res)
            units, rlim = spent(res)
            if units:
                units_cpu.append((units, cpu, f"{short} on {name}"))
            rlims.append((rlim, f"{short} on {name}"))
            line = (f"  {name:28s} {short:9s} {secs:7.3f} s (cpu {cpu:6.3f}) units {units:>11} "
                    f"rlim {rlim:>9} q={q:<3d} {verdict}")
            if bad is not None:
                bad_times.append(bad[0])
                bad_cpus.append(bad[1])
                bu, br = spent(bad[2])
                if bu:
                    units_cpu.append((bu, bad[1], f"broken {short} on {name}"))
                rlims.append((br, f"broken {short} on {name}"))
                line += (f" | broken {bad[0]:7.3f} s (cpu {bad[1]:6.3f}) units {bu:>11} "
                         f"rlim {br:>9} " + ",".join(r.verdict.value[:5] for r in bad[2]))
            print(line, flush=True)
    print(f"\n{len(times)} applications: median {statistics.median(times):.3f} s "
          f"(cpu {statistics.median(cpus):.3f}), max {max(times):.3f} s, "
          f"total {sum(times):.1f} s (cpu {sum(cpus):.1f})")
    if bad_times:
        print(f"broken edit, {len(bad_times)} applications: median "
              f"{statistics.median(bad_times):.3f} s (cpu {statistics.median(bad_cpus):.3f}), "
              f"total {sum(bad_times):.1f} s (cpu {sum(bad_cpus):.1f}); broken/faithful CPU "
              f"total {sum(bad_cpus) / max(sum(cpus), 1e-9):.2f}x (goal <= 2x)")
    if units_cpu:
        us = [u for u, _, _ in units_cpu]
        cs = [c for _, c, _ in units_cpu]
        big = [(u, c) for u, c, _ in units_cpu if c >= 0.5]
        logs = correlation([math.log(u) for u in us], [math.log(max(c, 1e-4)) for c in cs])
        rate = statistics.median(u / max(c, 1e-4) for u, c in zip(us, cs))
        print(f"\nwork units vs CPU s over {len(us)} proofs that executed: Pearson r "
              f"{correlation(us, cs):.3f}; on logs r {logs:.3f}; units per CPU s: median "
              f"{rate:.3g}"
              + (f", over proofs >= 0.5 s: median {statistics.median(u / c for u, c in big):.3g}, "
                 f"min {min(u / c for u, c in big):.3g}, max {max(u / c for u, c in big):.3g}"
                 if big else ""))
        top = max(units_cpu)
        limit = DEFAULT_BUDGET["work_units"]
        print(f"most units: {top[0]} ({top[2]}, cpu {top[1]:.2f} s) of the default "
              f"{limit} ({limit / top[0]:.1f}x margin)")
    if rlims:
        top = max(rlims)
        print(f"most Z3 rlimit: {top[0]} ({top[1]}) of the default "
              f"{DEFAULT_BUDGET['z3_rlimit_per_application']} per application, "
              f"{DEFAULT_BUDGET['z3_rlimit_per_query']} per query")


if __name__ == "__main__":
    main()
