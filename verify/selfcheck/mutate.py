"""``python -m verify mutate``: does the checker catch broken rewrites?

Mutants are made of every application whose baseline is EQUIVALENT and
where the pass fires:

* ``in_region`` (``program_mutants.IN_REGION_OPERATORS``): well-formed,
  shape-preserving edits inside the region the pass rewrote (the ops it
  added or changed and their neighbours), one per operator and rank where
  the operator finds a site.  Their kill rate is the score that means
  something: each such mutant computes other values than the pass's
  rewrite, and only a check that sees values can catch it.
* ``legacy`` (``program_mutants.LEGACY_OPERATORS``): whole-program operators
  (drop an op, rename an input, ...) on one rank, alternating; many leave a
  program that is not well formed, so a structural check catches them.
* ``pass``: the pass-level mutants of ``mutation_catalog`` (real passes with
  one injected bug), loaded through ``--pass-file`` as a user's changed pass.

A mutant is KILLED when its application's verdict is NOT_EQUIVALENT,
CONTRACT_BROKEN, PASS_CRASHED or NOT_APPLIED; INCONCLUSIVE is reported apart
and is never a kill; EQUIVALENT means it SURVIVED.  Kills are broken down by
the kinds of the checks that failed (a mutant can be caught by several).
A survivor whose operator argues it changes nothing is counted apart; every
other survivor is a gap, listed by name.
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

# verify.engine (and with it Paddle) is imported where a mutant runs, not
# here: ``python -m verify mutate --help`` answers without loading Paddle.

KILLING = ("NOT_EQUIVALENT", "CONTRACT_BROKEN", "PASS_CRASHED", "NOT_APPLIED")
KINDS = ("contract", "shape", "dataflow", "numeric", "value", "pass")
SCOPES = ("in_region", "legacy", "pass")


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
    scope: str = "legacy"  # in_region | legacy | pass
    inconclusive_by: list = field(default_factory=list)
    problems: list = field(default_factory=list)  # well-formedness (in-region only)

    @property
    def killed(self) -> bool:
        return self.verdict in KILLING

    @property
    def inconclusive(self) -> bool:
        return self.verdict == "INCONCLUSIVE"

    @property
    def survived(self) -> bool:
        return self.verdict == "EQUIVALENT"

    caught = killed  # the older name

    @property
    def kinds(self) -> set:
        return {c.split("/", 1)[0] for c in self.caught_by}

    @property
    def status(self) -> str:
        return "KILLED" if self.killed else "INCONCL" if self.inconclusive else "SURVIVED"


def _deciding(app) -> list:
    """The checks that decide the verdict (predictions are advisory)."""
    return [c for c in app.checks if not getattr(c, "advisory", False)]


def _caught_by(app) -> list:
    return sorted({f"{c.kind}/{c.name}" for c in _deciding(app) if c.verdict.value in KILLING})


def _inconclusive_by(app) -> list:
    return sorted({f"{c.kind}/{c.name}" for c in _deciding(app)
                   if c.verdict.value == "INCONCLUSIVE"})


class _Unmutated:
    """Each application's verdict without a mutant, computed once: a mutant
    of an application that is not EQUIVALENT today (the baseline may be
    stale) would be 'killed' by the existing finding, so it is not made."""

    def __init__(self, numeric):
        self.numeric = numeric
        self.verdicts = {}

    def verdict(self, adapter, case) -> str:
        key = (adapter.name, case.name)
        if key not in self.verdicts:
            from verify.engine.application import run_application

            self.verdicts[key] = run_application(adapter, case, numeric=self.numeric).verdict.value
        return self.verdicts[key]

    def skipped(self) -> list:
        return [f"{p} / {c}: {v} without any mutant (baseline says EQUIVALENT), so its "
                "mutants would prove nothing" for (p, c), v in self.verdicts.items()
                if v != "EQUIVALENT"]


def _jobs(adapters, cases):
    """``{scope: [(scope, adapter, case, [rank], operator)]}`` for every
    EQUIVALENT application where the pass fires; operator-major, so an even
    spread over the list samples every operator, then every pass and case."""
    from verify.engine import baseline
    from verify.selfcheck import program_mutants as pm

    base = baseline.load()["entries"]
    apps = []
    for adapter in adapters:
        for case in cases:
            if hasattr(adapter, "handles") and not adapter.handles(case):
                continue
            if hasattr(adapter, "whole_application"):
                # no one rewritten program to edit: the planner's mutants are
                # changed planner modules (tests/planner_mutant_edits.py, --paddle-file)
                continue
            entry = base.get(baseline.key(adapter.name, case.name))
            if entry and entry["verdict"] == "EQUIVALENT" and entry["fires"]:
                apps.append((adapter, case))
    jobs = {"in_region": [], "legacy": []}
    # The whole-program operators edit ProgramDescs; the in-region ones
    # describe their edits as data (verify/ir/program_edits.py), so they
    # mutate PIR programs too.
    legacy_apps = [(a, c) for a, c in apps if getattr(c, "ir", "legacy") == "legacy"]
    for k, op in enumerate(pm.LEGACY_OPERATORS):
        for adapter, case in legacy_apps:
            rank = case.ranks[(k + len(case.name)) % len(case.ranks)]
            jobs["legacy"].append(("legacy", adapter, case, [rank], op))
    for op in pm.IN_REGION_OPERATORS:
        for adapter, case in apps:
            for rank in case.ranks:
                jobs["in_region"].append(("in_region", adapter, case, [rank], op))
    return jobs


def _spread(jobs, n):
    """``n`` groups of jobs evenly spread over ``jobs``: each group is the
    chosen job followed by the ones up to the next choice (tried in turn
    when the chosen one has no site)."""
    if n is None or n >= len(jobs):
        return [[j] for j in jobs]
    if n <= 0:
        return []
    starts = [round(i * len(jobs) / n) for i in range(n)] + [len(jobs)]
    return [jobs[a:b] for a, b in zip(starts, starts[1:])]


def _run_job(job, numeric, unmutated=None):
    from verify.engine.application import run_application
    from verify.selfcheck import program_mutants as pm

    scope, adapter, case, ranks, op = job
    rank = ranks[0]
    if unmutated is not None and unmutated.verdict(adapter, case) != "EQUIVALENT":
        return None
    mutator = pm.prepare(op, adapter, case, rank)
    if mutator is None:
        return None
    app = run_application(adapter, case, numeric=numeric, mutator=(rank, mutator))
    m = app.mutation
    if m is None:
        return None  # no site for this operator in this program
    problems = []
    if scope == "in_region":
        # the edit keeps the program well formed (checked on the snapshots of
        # the application itself, the mutated rewritten program included)
        o = next((o for o in app.outcomes if o.rank == rank), None)
        if o is not None and o.after is not None:
            problems = pm.well_formedness(mutator.after, o.after)
        if False in mutator.replays:
            problems.append("the edit could not be replayed on every copy of the program "
                            "(float32 twin)")
    return MutantResult("program", adapter.name, case.name, rank, m.operator,
                        m.description, app.verdict.value, _caught_by(app),
                        m.equivalent_by_argument, scope, _inconclusive_by(app), problems)


def program_mutants(adapters, cases, numeric, sample=None, out=None):
    """Results of the program-level mutants (``sample``: about that many,
    two thirds in-region, spread over the matrix)."""
    jobs = _jobs(adapters, cases)
    n_legacy = None if sample is None else sample // 3
    n_region = None if sample is None else sample - n_legacy
    results = []
    unmutated = _Unmutated(numeric)
    for groups in (_spread(jobs["in_region"], n_region), _spread(jobs["legacy"], n_legacy)):
        results += _run_groups(groups, numeric, unmutated, out)
    return results, unmutated.skipped()


def _run_groups(groups, numeric, unmutated, out) -> list:
    """One mutant per group, where it has one; a group that gives none
    leaves its share to the next."""
    results = []
    owed = 0  # mutants earlier groups could not give (no site, or not mutated)
    for group in groups:
        want, got = 1 + owed, 0
        for job in group:
            r = _run_job(job, numeric, unmutated)
            if r is None:
                continue
            results.append(r)
            got += 1
            if out is not None:
                print(_row(r), file=out, flush=True)
            if got == want:
                break
        owed = want - got
    return results


def pass_mutants(numeric, out=None):
    from passes import get
    from verify.engine.application import run_application
    from verify.ir.pass_files import load_pass_file

    import cases as case_lib

    from verify.selfcheck.mutation_catalog import PASS_MUTANTS

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    results = []
    for path, pass_name, case_name, description in PASS_MUTANTS:
        loaded = load_pass_file(os.path.join(root, path))
        try:
            app = run_application(get(pass_name), case_lib.all_cases()[case_name],
                                  source=loaded.path, numeric=numeric)
        finally:
            loaded.restore()
        r = MutantResult("pass", pass_name, case_name, "all", os.path.basename(path),
                         description, app.verdict.value, _caught_by(app), scope="pass",
                         inconclusive_by=_inconclusive_by(app))
        results.append(r)
        if out is not None:
            print(_row(r), file=out, flush=True)
    return results


def _row(r: MutantResult) -> str:
    if r.killed:
        by = ", ".join(r.caught_by[:3])
    elif r.inconclusive:
        by = "inconclusive: " + ", ".join(r.inconclusive_by[:2])
    else:
        by = r.equivalent_by_argument or "-"
    return (f"{r.status:8s} {r.scope:9s} {r.pass_name[:24]:24s} {r.case_name:26s} "
            f"rank {str(r.rank):3s} {r.operator:24s} {r.verdict:15s} {by}")


def kill_rate(results) -> tuple:
    """(killed, mutants that change behaviour): survivors the operator argues
    equivalent are left out; INCONCLUSIVE ones count, never as kills."""
    relevant = [r for r in results if r.killed or not r.equivalent_by_argument]
    return sum(r.killed for r in relevant), len(relevant)


def in_region_rate(results) -> tuple:
    return kill_rate([r for r in results if r.scope == "in_region"])


def kind_table(results) -> str:
    """Per operator (grouped by scope): mutants, killed, inconclusive,
    survived, equivalent by argument, and kills per check kind."""
    head = ["scope", "operator", "mutants", "killed", "inconcl", "survived", "equiv"] + \
        list(KINDS)
    rows = [head]

    def row(scope, name, rs):
        kinds = Counter(k for r in rs if r.killed for k in r.kinds)
        return [scope, name, str(len(rs)), str(sum(r.killed for r in rs)),
                str(sum(r.inconclusive for r in rs)),
                str(sum(r.survived and not r.equivalent_by_argument for r in rs)),
                str(sum(r.survived and bool(r.equivalent_by_argument) for r in rs))] + \
            [str(kinds.get(k, 0)) for k in KINDS]

    for scope in SCOPES:
        mine = [r for r in results if r.scope == scope]
        if not mine:
            continue
        for name in dict.fromkeys(r.operator for r in mine):
            rows.append(row(scope, name, [r for r in mine if r.operator == name]))
        rows.append(row(scope, "(all)", mine))
    rows.append(row("all", "(all)", results))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _pct(a, b) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def report(results, seconds, out=sys.stdout, skipped=()) -> None:
    """The summary: table, survivors, inconclusive ones, the rates."""
    print("", file=out)
    for s in skipped:
        print(f"not mutated: {s}", file=out)
    print("kills per check kind (a mutant caught by several kinds counts in each):",
          file=out)
    print(kind_table(results), file=out)
    print("", file=out)
    for r in results:
        if r.survived:
            why = r.equivalent_by_argument or "GAP: no check saw this change"
            print(f"survivor: {r.scope} {r.operator} on {r.pass_name} / {r.case_name} rank "
                  f"{r.rank}: {r.description} -> {why}", file=out)
    for r in results:
        if r.inconclusive:
            print(f"inconclusive (not a kill): {r.scope} {r.operator} on {r.pass_name} / "
                  f"{r.case_name} rank {r.rank}: {r.description} -> "
                  f"{', '.join(r.inconclusive_by)}", file=out)
    for r in results:
        if r.problems:
            print(f"NOT WELL FORMED (operator bug): {r.operator} on {r.pass_name} / "
                  f"{r.case_name} rank {r.rank}: {'; '.join(r.problems)}", file=out)
    caught, total = kill_rate(results)
    rk, rt = in_region_rate(results)
    print(f"{len(results)} mutants in {seconds:.0f}s "
          f"({sum(r.inconclusive for r in results)} inconclusive, never counted as kills)",
          file=out)
    print(f"kill rate {_pct(caught, total)} ({caught}/{total})", file=out)
    print(f"in-region kill rate {_pct(rk, rt)} ({rk}/{rt})", file=out)


def main(argv=None, out=sys.stdout) -> int:
    from verify.arguments import ArgumentParser, count_arg
    from verify.report.write import DEFAULT_SEED

    p = ArgumentParser(prog="python -m verify mutate")
    p.add_argument("--sample", type=count_arg, default=None,
                   help="run only about this many program-level mutants (two thirds "
                        "in-region), spread over the matrix")
    p.add_argument("--backend", default="simulated", choices=["none", "simulated"],
                   help="how each mutant's numeric check runs: 'simulated' (the "
                        "in-process simulator, the default) or 'none' (static and "
                        "value checks only)")
    p.add_argument("--no-pass-mutants", action="store_true",
                   help="skip the pass-level mutants (tests/mutants/: edited pass "
                        "files); make only the program-level ones")
    args = p.parse_args(argv)
    import cases as case_lib  # after parsing: --help answers without Paddle
    import passes

    from verify.engine.matrix_runner import pick_backend

    _, numeric = pick_backend(args.backend, DEFAULT_SEED)
    start = time.perf_counter()
    print(f"{'':8s} {'scope':9s} {'pass':24s} {'case':26s} {'rank':8s} {'operator':24s} "
          f"{'verdict':15s} caught by / why not", file=out)
    results, skipped = program_mutants(list(passes.adapters().values()),
                                       list(case_lib.all_cases().values()), numeric,
                                       sample=args.sample, out=out)
    if not args.no_pass_mutants:
        results += pass_mutants(numeric, out=out)
    report(results, time.perf_counter() - start, out=out, skipped=skipped)
    return 0
