"""``python -m verify generate [--count N] [--seed S] [--out DIR]``: plan
generated models (``verify/generate/models.py``) with Paddle's planner, check
each with the planner family, print every verdict, a summary (plans,
verdicts, plans per minute) and the planner-coverage report
(``verify/generate/coverage.py``).  Exit 1 when a finding no entry of
``run.KNOWN`` explains appears (shrunk, written out with the command that
reproduces it), 2 on bad input, else 0.

    python -m verify generate --count 20 --seed 7 --out /tmp/gen
    python -m verify generate --replay /tmp/gen/plan_7_0003/model.json   # judged (and shrunk)
    python -m verify generate --coverage --out /tmp/gen   # the table of a past run
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from verify.arguments import ArgumentParser, count_arg, seed_arg


def parser():
    p = ArgumentParser(prog="python -m verify generate",
                       description="Plan generated models with Paddle's planner, check each "
                       "with the planner family, report verdicts and planner coverage.")
    p.add_argument("--count", type=count_arg, default=10, help="plans to make (default 10)")
    p.add_argument("--seed", type=seed_arg, default=0, help="the generator's seed (default 0)")
    p.add_argument("--out", default="reports/generate", metavar="DIR",
                   help="where each plan's spec, model file and verdict go")
    p.add_argument("--replay", metavar="FILE", help="judge this spec file (a plan's "
                   "model.json) alone")
    p.add_argument("--coverage", action="store_true",
                   help="print the coverage table of the plans of --out's last run only")
    p.add_argument("--shrink-budget", type=count_arg, default=12, metavar="N",
                   help="plans a new finding's shrinking may try (default 12)")
    p.add_argument("--no-shrink", action="store_true",
                   help="write a new finding out as drawn, unshrunk")
    return p


def _line(out) -> str:
    from verify.generate.models import describe

    tail = f"  [{out.known}]" if out.known else (f"  {out.why[:100]}" if out.why else "")
    return f"{out.name:<18} {out.status:<12} {out.verdict:<15} {out.seconds:5.1f}s  " \
           f"{describe(out.spec)}{tail}"


def _coverage_of(dirs) -> str:
    from verify.generate.coverage import format_table, merge_traces, report, traces_under

    files = traces_under([d for d in dirs if d])
    if not files:
        return "planner coverage: no traces"
    return format_table(report(merge_traces(files)))


def _replay(path: Path, out_root: Path, budget: int = 0) -> int:
    from verify.generate.run import judge

    try:
        spec = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: --replay {path}: {exc}", file=sys.stderr)
        return 2
    from verify.generate.models import problems

    bad = problems(spec)
    if bad:
        print(f"error: --replay {path}: not a spec: {'; '.join(bad[:3])}", file=sys.stderr)
        return 2
    folder = out_root / f"replay_{spec.get('seed', 0)}_{spec.get('index', 0):04d}"
    out = judge(spec, folder, folder.name)
    print(_line(out))
    for f in out.failing:
        print(f"  {f[0]} (rank {f[1]}): {f[2]}")
    if out.status == "finding" and budget > 0:
        _report_finding(out, folder, budget)
    return 1 if out.status == "finding" else 0


def _report_finding(out, folder: Path, budget: int) -> None:
    """Shrink ``out`` (a new finding) and write the smallest spec found with
    the command that reproduces it."""
    from verify.generate.run import write_failure, write_plan

    small, tries = (out.spec, 0) if budget <= 0 else \
        _shrunk(out, folder / "shrink", budget)
    smallest = folder / "smallest"
    write_plan(small, smallest)
    spec_file = write_failure(out, smallest)
    print(f"  finding ({tries} shrink plans): smallest spec {spec_file}\n"
          f"  reproduce: python -m verify generate --replay {spec_file}", flush=True)


def _shrunk(out, folder: Path, budget: int):
    from verify.generate.run import judge
    from verify.generate.shrink import shrink

    n = [0]

    def same(cand):
        n[0] += 1
        got = judge(cand, folder / f"try{n[0]:02d}", f"{out.name}_s{n[0]}")
        return got.signature() == out.signature()
    small, tries = shrink(out.spec, same, budget)
    return small, tries


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.no_shrink:
        args.shrink_budget = 0
    root = Path(args.out)
    if args.coverage:
        try:
            summary = json.loads((root / "summary.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"error: --coverage: no run in {root} ({exc})", file=sys.stderr)
            return 2
        print(_coverage_of(p["plan_dir"] for p in summary["plans"]))
        return 0
    if args.replay:
        return _replay(Path(args.replay), root, args.shrink_budget)
    from verify.generate.models import spec
    from verify.generate.run import judge

    root.mkdir(parents=True, exist_ok=True)
    outs, start = [], time.perf_counter()
    for i in range(args.count):
        name = f"plan_{args.seed}_{i:04d}"
        out = judge(spec(args.seed, i), root / name, name)
        outs.append(out)
        print(_line(out), flush=True)
        if out.status == "finding":
            _report_finding(out, root / name, args.shrink_budget)
    minutes = (time.perf_counter() - start) / 60
    counts = {}
    for o in outs:
        counts[o.status] = counts.get(o.status, 0) + 1
    verdicts = {}
    for o in outs:
        verdicts[o.verdict] = verdicts.get(o.verdict, 0) + 1
    print(f"\n{len(outs)} plans (seed {args.seed}) in {minutes * 60:.0f} s: "
          f"{len(outs) / max(minutes, 1e-9):.1f} plans/minute")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    table = _coverage_of(o.plan_dir for o in outs)
    print(table)
    (root / "summary.json").write_text(json.dumps({
        "seed": args.seed, "count": args.count, "seconds": round(minutes * 60, 1),
        "outcomes": counts, "verdicts": verdicts,
        "plans": [{**o.to_dict(), "plan_dir": o.plan_dir} for o in outs]}, indent=1))
    return 1 if counts.get("finding") else 0
