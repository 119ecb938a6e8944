"""``python -m verify mutate``: does the checker catch broken rewrites?

Every program-level operator of ``program_mutants`` is applied to the
rewritten program of every application whose baseline is EQUIVALENT and
where the pass fires (on one rank, alternating), and every pass-level
mutant of ``mutation_catalog`` is loaded through ``--pass-file`` exactly as a
user's changed pass would be.  A mutant is *caught* when its application is
no longer EQUIVALENT.  Kill rate = caught / mutants that change behaviour;
a survivor whose operator argues it changes nothing is counted apart, every
other survivor is listed as a gap.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from .application import run_application


@dataclass
class MutantResult:
    level: str  # program | pass
    pass_name: str
    case_name: str
    rank: object
    operator: str
    description: str
    verdict: str
    caught_by: list
    equivalent_by_argument: str = ""

    @property
    def caught(self) -> bool:
        return self.verdict != "EQUIVALENT"


def _caught_by(app) -> list:
    return sorted({f"{c.kind}/{c.name}" for c in app.checks
                   if c.verdict.value in ("NOT_EQUIVALENT", "PASS_CRASHED", "NOT_APPLIED")})


def program_mutants(adapters, cases, numeric, sample=None, out=None):
    from . import baseline, program_mutants as pm

    base = baseline.load()["entries"]
    results, skipped = [], []
    jobs = []
    for adapter in adapters:
        for case in cases:
            entry = base.get(baseline.key(adapter.name, case.name))
            if not entry or entry["verdict"] != "EQUIVALENT" or not entry["fires"]:
                continue
            for k, op in enumerate(pm.OPERATORS):
                rank = case.ranks[(k + len(case.name)) % len(case.ranks)]
                jobs.append((adapter, case, rank, op))
    if sample:
        jobs = jobs[:: max(1, len(jobs) // sample)][:sample]
    for adapter, case, rank, op in jobs:
        app = run_application(adapter, case, numeric=numeric, mutator=(rank, op))
        m = app.mutation
        if m is None:
            continue  # no site for this operator in this program
        r = MutantResult("program", adapter.name, case.name, rank, m.operator,
                         m.description, app.verdict.value, _caught_by(app),
                         m.equivalent_by_argument)
        results.append(r)
        if out is not None:
            print(_row(r), file=out, flush=True)
    return results, skipped


def pass_mutants(numeric, out=None):
    from passes import get
    from passes.loader import load_pass_file

    import cases as case_lib

    from .mutation_catalog import PASS_MUTANTS

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = []
    for path, pass_name, case_name, description in PASS_MUTANTS:
        loaded = load_pass_file(os.path.join(root, path))
        try:
            app = run_application(get(pass_name), case_lib.all_cases()[case_name],
                                  source=loaded.path, numeric=numeric)
        finally:
            loaded.restore()
        r = MutantResult("pass", pass_name, case_name, "all", os.path.basename(path),
                         description, app.verdict.value, _caught_by(app))
        results.append(r)
        if out is not None:
            print(_row(r), file=out, flush=True)
    return results


def _row(r: MutantResult) -> str:
    mark = "CAUGHT  " if r.caught else "SURVIVED"
    by = ", ".join(r.caught_by[:3]) if r.caught else (r.equivalent_by_argument or "-")
    return (f"{mark} {r.level:7s} {r.pass_name[:24]:24s} {r.case_name:26s} "
            f"rank {str(r.rank):3s} {r.operator:24s} {r.verdict:14s} {by}")


def kill_rate(results) -> tuple:
    relevant = [r for r in results if r.caught or not r.equivalent_by_argument]
    caught = sum(r.caught for r in relevant)
    return caught, len(relevant)


def main(argv=None, out=sys.stdout) -> int:
    import argparse

    import cases as case_lib
    import passes

    from .gate import pick_backend
    from .report import DEFAULT_SEED

    p = argparse.ArgumentParser(prog="python -m verify mutate")
    p.add_argument("--sample", type=int, default=None,
                   help="run only this many program-level mutants (spread over the matrix)")
    p.add_argument("--backend", default="simulated", choices=["none", "simulated"])
    p.add_argument("--no-pass-mutants", action="store_true")
    args = p.parse_args(argv)
    _, numeric = pick_backend(args.backend, DEFAULT_SEED)
    start = time.perf_counter()
    print(f"{'':8s} {'level':7s} {'pass':24s} {'case':26s} {'rank':8s} {'operator':24s} "
          f"{'verdict':14s} caught by / why it survives", file=out)
    results, skipped = program_mutants(list(passes.adapters().values()),
                                       list(case_lib.all_cases().values()), numeric,
                                       sample=args.sample, out=out)
    if not args.no_pass_mutants:
        results += pass_mutants(numeric, out=out)
    survivors = [r for r in results if not r.caught]
    print("", file=out)
    for s in skipped:
        print(f"not mutated: {s}", file=out)
    for r in survivors:
        why = r.equivalent_by_argument or "GAP: no check saw this change"
        print(f"survivor: {r.operator} on {r.pass_name} / {r.case_name} rank {r.rank}: "
              f"{r.description} -> {why}", file=out)
    caught, total = kill_rate(results)
    pct = 100.0 * caught / total if total else 0.0
    print(f"{len(results)} mutants in {time.perf_counter() - start:.0f}s", file=out)
    print(f"kill rate {pct:.1f}% ({caught}/{total})", file=out)
    return 0
