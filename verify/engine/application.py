"""One application: a pass on a case, on every rank, with all its checks.

Data flows one way here: case -> per-rank programs -> pass adapter ->
(original, rewritten) -> snapshots -> checks -> verdicts.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

from verify import interrupt
from verify.engine import isolation
from verify.ir import snapshot as snap_mod
from verify.checks import CheckContext, run_static_checks
from verify.ir.origin import forget
from verify.ir.rank_snapshot import snapshot_of as _snapshot
from verify.verdicts import CheckResult, Verdict, combine, error_line


@dataclass
class RankOutcome:
    rank: int
    before: snap_mod.ProgramSnapshot | None
    after: snap_mod.ProgramSnapshot | None
    fired: bool = False
    error: str | None = None  # the pass's traceback when it raised
    build_error: str | None = None  # the case's traceback when it did not build
    run: object = None  # passes.PassRun (live programs), dropped from reports
    # _identical(before, after), taken once for these two snapshot objects
    _same: tuple = field(default=None, repr=False, compare=False)

    def identical(self) -> bool:
        """``_identical(before, after)``, remembered for these very snapshot
        objects (the value proof and the verdict both ask; snapshots are
        never edited in place, a new one is a new object)."""
        got = self._same  # holds the two objects: no other object takes their id
        if got is None or got[0] is not self.before or got[1] is not self.after:
            got = self._same = (self.before, self.after, _identical(self.before, self.after))
        return got[2]

    def to_dict(self, with_programs: bool = True) -> dict:
        d = {"rank": self.rank, "fired": self.fired, "error": self.error,
             "build_error": self.build_error}
        if self.before is not None and self.after is not None:
            d["ops_before"] = len(self.before.ops)
            d["ops_after"] = len(self.after.ops)
            d["diff"] = snap_mod.diff(self.before, self.after)
            if with_programs:
                d["before"] = self.before.to_dict()
                d["after"] = self.after.to_dict()
        return d


@dataclass
class Application:
    pass_name: str
    case_name: str
    ranks: list
    expected: object  # cases.Expect
    source: str = "installed"  # the pass files applied, else "installed" (see applied)
    # What was really applied, per pass looked up (verify/ir/pass_sources.py): a
    # file's path and sha256, or "installed" with Paddle's version and commit.
    applied: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    outcomes: list = field(default_factory=list)
    seconds: float = 0.0
    verdict: Verdict = Verdict.INCONCLUSIVE
    mutation: object = None  # program_mutants.Mutation when a mutant was checked
    notes: list = field(default_factory=list)  # what was not run, and why
    case_file: str = ""  # the case file the case came from ("" built-in)

    @property
    def as_expected(self) -> bool:
        return self.verdict.value == self.expected.verdict

    @property
    def fired_ranks(self) -> list:
        return [o.rank for o in self.outcomes if o.fired]

    @property
    def left_alone(self) -> bool:
        """EQUIVALENT because the pass changed nothing (its pattern absent),
        as opposed to a rewrite found equivalent."""
        return self.verdict == Verdict.EQUIVALENT and bool(self.outcomes) and \
            not self.fired_ranks and not any(o.error for o in self.outcomes)

    @property
    def proof(self) -> str:
        """How an EQUIVALENT verdict stands: "proved" (the value check proved
        every rank), "witnessed" (it did not: no value check, or one that
        was INCONCLUSIVE and advisory, e.g. a gradient merge's in-place
        accumulators; the verdict rests on the numeric runs, i.e. sampling),
        "proved at sizes B in 1, 3, 4" (proved on every rank, but at
        sampled values of the -1 dims only: ``details["sizes_proved"]``; no
        argument extends it to every size), "" for any other verdict."""
        if self.verdict != Verdict.EQUIVALENT:
            return ""
        value = [c for c in self.checks if c.kind == "value"]
        ok = value and all(c.verdict == Verdict.EQUIVALENT for c in value) and \
            {c.rank for c in value} >= set(self.ranks)
        if not ok:
            return "witnessed"
        sampled = [c.details["sizes_proved"] for c in value
                   if (c.details or {}).get("sizes_proved")]
        if sampled:
            from verify.value.proof import sizes_label
            return f"{PROVED_AT_SIZES} {sizes_label(sampled[0])}"
        return "proved"

    @property
    def status(self) -> str:
        """The verdict as the matrix shows it: left-alone cells apart."""
        return "LEFT_ALONE" if self.left_alone else self.verdict.value

    def op_delta(self) -> str:
        parts = []
        for o in self.outcomes:
            if o.before is not None and o.after is not None:
                parts.append(f"{len(o.before.ops)}->{len(o.after.ops)}")
        return ",".join(parts)

    def to_dict(self, with_programs: bool | None = None) -> dict:
        """Plain data; whole programs only with ``with_programs`` (default:
        where the verdict is a finding), a diff always."""
        if with_programs is None:
            with_programs = self.verdict != Verdict.EQUIVALENT
        return {"pass": self.pass_name, "case": self.case_name, "ranks": self.ranks,
                "source": self.source, "applied": list(self.applied),
                "case_file": self.case_file,
                "verdict": self.verdict.value, "status": self.status, "proof": self.proof,
                "expected": self.expected.verdict, "expected_fires": self.expected.fires,
                "expected_reason": self.expected.reason, "as_expected": self.as_expected,
                "seconds": round(self.seconds, 3), "notes": list(self.notes),
                "checks": [c.to_dict() for c in self.checks],
                "rank_outcomes": [o.to_dict(with_programs) for o in self.outcomes]}


def _identical(before, after) -> bool:
    """The rewritten snapshot is the original: the same main and startup ops
    (types, slots, value names, attrs), the same declared values and feeds."""
    def decls(s):
        return {n: (list(v.shape), v.dtype, v.persistable) for n, v in s.vars.items()}
    return before is not None and after is not None and \
        not snap_mod.changed(before, after) and decls(before) == decls(after) and \
        sorted(before.feeds) == sorted(after.feeds)


def _identity_proofs(adapter, case, outcomes) -> list:
    """The value proof when the pass changed nothing on any rank: every
    value of the rewritten programs is, by identity, the original's, for all
    inputs (a proof, not a run; no op needs a row)."""
    from verify.value.proof import KIND, NAME

    return [CheckResult(KIND, NAME, o.rank, Verdict.EQUIVALENT,
                        f"{adapter.name} on {case.name} rank {o.rank}: the rewritten programs "
                        "are the originals op for op on every rank (the pass changed "
                        "nothing): every value equal for all inputs by identity",
                        details={"queries": 0, "proved": ["identity"], "refuted": [],
                                 "identity": True})
            for o in outcomes]


PROVED_AT_SIZES = "proved at sizes"  # the proof label's prefix of a sampled-size proof


def numeric_sizes(case, outcomes) -> dict:
    """{size symbol: sizes} the numeric runs feed: each fed var's concrete
    shape (``FeedSpec.shape``) at its -1 dims (the snapshot's declaration),
    by the symbol the proof gives that dim."""
    from verify.value.symbolic import size_symbol

    out = {}
    for o in outcomes:
        rp = o.run.original
        for f in rp.feeds:
            v = o.before.vars.get(f.name) if o.before is not None else None
            if v is None or not v.shape or len(v.shape) != len(f.shape):
                continue
            for i, d in enumerate(v.shape):
                if int(d) < 0:
                    out.setdefault(size_symbol(case.symbols, f.name, i), set()).add(
                        int(f.shape[i]))
    return {k: sorted(v) for k, v in out.items()}


def value_checks(adapter, case, outcomes) -> list:
    """The value proof of every rank (``verify/value``): original and
    rewritten programs of all ranks executed symbolically together, Z3
    proving or refuting each watched value for all inputs."""
    from verify.ir.dead_values import unobserved
    from verify.value import prove_application

    if outcomes and all(o.identical() for o in outcomes):
        return _identity_proofs(adapter, case, outcomes)
    own = getattr(adapter, "value_checks", None)
    if own is not None:  # a pass whose rewrite is an equivalence modulo a model (AMP's rounding)
        return own(case, outcomes)
    watched, split, renames, dead = {}, {}, {}, {}
    for o in outcomes:
        rp = o.run.original
        watched[o.rank] = list(rp.fetches) + ([rp.loss] if rp.loss else [])
        if getattr(case, "family", "") == "program_dir":
            # what built-in cases watch: each gradient, parameter after the
            # update and optimizer state (a PIR update's results are new values)
            from verify.value.proof import optimizer_watch
            watched[o.rank] += optimizer_watch(o.before)
        # a value the pass moved to a new name is compared under it
        renames[o.rank] = adapter.renames(case, o.rank, o.before, o.after)
        # values the pass leaves stale on purpose, confirmed dead (verify/ir/dead_values.py)
        dead[o.rank] = unobserved(adapter, case, o.rank, o.before, o.after)
        split.update({f.name: f.split for f in rp.feeds})

    def feed_key(rank, name):  # the same data where the numeric runs feed the same
        key = f"dp{case.dp_index(rank)}"
        return key + (f"tp{case.tp_index(rank)}" if split.get(name) != "dp" else "")

    return prove_application(f"{adapter.name} on {case.name}", case.ranks, case.rings,
                             {o.rank: o.before for o in outcomes},
                             {o.rank: o.after for o in outcomes}, watched, feed_key=feed_key,
                             renames=renames, unobserved=dead, symbols=dict(case.symbols),
                             avoid_sizes=numeric_sizes(case, outcomes))


def values_statement(checks, ranks) -> str:
    """What a CONTRACT_BROKEN verdict may say of the values: "values kept"
    only where a value proof or a numeric run witnessed them equal on every
    rank; else which ranks nothing witnessed."""
    witnesses, covered = [], set()
    for c in checks:
        if c.kind in ("value", "numeric") and c.ok and not c.advisory:
            covered |= set(ranks) if c.rank is None else {c.rank}
            witnesses.append(c.name)
    if witnesses and covered >= set(ranks):
        return ("CONTRACT_BROKEN, values kept: witnessed equal by "
                + ", ".join(dict.fromkeys(witnesses)))
    missing = sorted(set(ranks) - covered)
    return ("CONTRACT_BROKEN; the values are NOT witnessed equal on rank(s) "
            f"{missing}: no value proof or numeric run decided EQUIVALENT there")


def run_application(adapter, case, source: str = "installed",
                    numeric=None, mutator=None, value=True) -> Application:
    """Apply ``adapter``'s pass to every rank of ``case`` and check the result.

    ``numeric`` is an optional callable ``(case, adapter, outcomes) ->
    [CheckResult]`` that runs the programs (the numeric backends).
    ``mutator`` is an optional ``(rank, operator)``: the operator (see
    ``program_mutants``) edits that rank's rewritten program before any
    check sees it; the Mutation it returns lands in ``app.mutation``.
    ``value`` runs the value proofs (on every rank, when every rank built
    and no pass crashed).
    """
    if hasattr(adapter, "handles") and not adapter.handles(case):
        raise ValueError(f"{adapter.name} rewrites {adapter.ir} programs; case {case.name} "
                         f"is {getattr(case, 'ir', 'legacy')}: not a pair the matrix makes")
    from verify.ir.pass_sources import recording, summary, unique

    with recording() as applied:
        app = _run_application(adapter, case, source, numeric, mutator, value)
    app.applied = unique(applied)
    if app.applied:  # what ran, whatever the caller meant to run
        app.source = summary(app.applied)
    return app


def _run_application(adapter, case, source, numeric, mutator, value) -> Application:
    whole = getattr(adapter, "whole_application", None)
    if whole is not None:  # an application that is not one pass per rank (the planner)
        start = time.perf_counter()
        app = Application(adapter.name, case.name, case.ranks, case.expectation(adapter.name),
                          source=source, case_file=getattr(case, "source_file", "") or "")
        try:
            got = whole(case, numeric=numeric is not None)
        except Exception:  # e.g. a program dir's stage file that does not read:
            interrupt.check()  # INCONCLUSIVE, never the run's (and its report's) end
            tb = traceback.format_exc()
            got = {"checks": [CheckResult(
                "case", "build", None, Verdict.INCONCLUSIVE,
                f"{adapter.name} on case {case.name} could not be judged: "
                f"{tb.strip().splitlines()[-1]}", details={"traceback": tb})],
                "notes": [], "outcomes": []}
        app.checks, app.notes = list(got["checks"]), list(got["notes"])
        fired = got.get("fired") or {}  # {rank: bool} where the adapter says (else fired)
        app.outcomes = [RankOutcome(r, before, after, fired=fired.get(r, True), error=err)
                        for r, before, after, err in got["outcomes"]]
        app.verdict = combine(app.checks)
        app.seconds = time.perf_counter() - start
        return app
    start = time.perf_counter()
    app = Application(adapter.name, case.name, case.ranks, case.expectation(adapter.name),
                      source=source, case_file=getattr(case, "source_file", "") or "")
    failed = getattr(case, "build_failures", None)
    if failed:  # a user's builder that did not build in a worker is never called here
        for rank, why in sorted(failed.items()):
            app.outcomes.append(RankOutcome(rank, None, None, build_error=why))
            app.checks.append(CheckResult(
                "case", "build", rank, Verdict.INCONCLUSIVE,
                f"case {case.name} failed to build rank {rank} (its builder, run first in "
                f"an isolation worker): {why}"))
        app.verdict = combine(app.checks)
        app.seconds = time.perf_counter() - start
        return app
    for rank in case.ranks:
        try:
            run = isolation.run_pass(adapter, case, rank)
            interrupt.check()  # an interrupt the pass (or Paddle) turned into an error
        except Exception:
            tb = traceback.format_exc()
            app.outcomes.append(RankOutcome(rank, None, None, build_error=tb))
            app.checks.append(CheckResult(
                "case", "build", rank, Verdict.INCONCLUSIVE,
                f"case {case.name} failed to build rank {rank}: "
                f"{tb.strip().splitlines()[-1]}", details={"traceback": tb}))
            continue
        if getattr(run, "environment", None):  # not the pass's doing: no finding
            app.outcomes.append(RankOutcome(rank, None, None, build_error=run.error))
            app.checks.append(CheckResult(
                "pass", "pass ran", rank, Verdict.INCONCLUSIVE,
                f"{adapter.name} on case {case.name} rank {rank}: {run.environment}",
                details={"traceback": run.error}))
            continue
        before = _snapshot(run.original, case, rank, "original")
        after = _snapshot(run.rewritten, case, rank, "rewritten")
        if mutator is not None and mutator[0] == rank and not run.error:
            forget(run.rewritten)  # edited in place: no longer what its stamp names
            app.mutation = mutator[1](run.rewritten.main, run.rewritten.startup, after, rank)
            after = _snapshot(run.rewritten, case, rank, "rewritten")
        outcome = RankOutcome(rank, before, after, fired=snap_mod.changed(before, after),
                              error=run.error, run=run)
        app.outcomes.append(outcome)
        for p in adapter.predict(case, rank, before):
            p.advisory = True  # explains; the program the pass built decides
            app.checks.append(p)
        if run.error:
            app.checks.append(CheckResult(
                "pass", "pass ran", rank, Verdict.PASS_CRASHED,
                f"{adapter.name} raised on case {case.name} rank {rank}: "
                f"{getattr(run, 'crash', None) or error_line(run.error)}",
                details={"traceback": run.error}))
            # a pass pipeline says which of its stages raised, and what those before it did
            app.checks += getattr(adapter, "crash_checks", lambda *a: [])(case, rank, before, after)
            continue
        contract = adapter.contract(case, rank, before, after)
        if not outcome.fired and any(c.verdict == Verdict.NOT_APPLIED for c in contract):
            # nothing changed where the pattern is present: what else the
            # contract misses restates that; it explains, NOT_APPLIED decides
            for c in contract:
                if c.verdict == Verdict.CONTRACT_BROKEN:
                    c.advisory = True
        app.checks += contract
        ctx = CheckContext(pass_name=adapter.name, case_name=case.name, rank=rank,
                           before=before, after=after, symbols=dict(case.symbols),
                           intended=adapter.intended_changes(case, rank, before, after),
                           renames=adapter.renames(case, rank, before, after),
                           rings=dict(getattr(case, "rings", None) or {}))
        app.checks += run_static_checks(ctx)
    # Executing a program can crash Paddle's executor only where an op reads
    # a tensor nothing ever writes or an op's shape precondition fails; a
    # stale declared shape does not stop it, so the values still get judged.
    unsafe = [c for c in app.checks if not c.ok and not c.advisory
              and c.details.get("crashes_executor")]
    if numeric is not None and unsafe:
        app.checks.append(CheckResult(
            "numeric", "not run", None, Verdict.INCONCLUSIVE,
            f"numeric runs skipped: executing the rewritten program would fail "
            f"({unsafe[0].kind}/{unsafe[0].name} on rank {unsafe[0].rank}: "
            f"{unsafe[0].message})"))
    elif numeric is not None and not any(o.error or o.build_error for o in app.outcomes):
        app.checks += numeric(case, adapter, app.outcomes, mutator, app.notes)
    complete = [o for o in app.outcomes if o.before is not None and not o.error
                and not o.build_error]
    if value and complete and len(complete) == len(case.ranks):
        app.checks += value_checks(adapter, case, complete)
        if all(o.identical() for o in complete):
            # the identity proof decides; a numeric backend that cannot run the
            # (unchanged) program is shown, not counted
            for c in app.checks:
                if c.kind == "numeric" and c.verdict == Verdict.INCONCLUSIVE:
                    c.advisory = True
                    c.message += " (advisory: the programs are unchanged, the identity " \
                                 "proof decides)"
    app.verdict = combine(app.checks)
    if app.verdict == Verdict.CONTRACT_BROKEN:
        app.notes.append(values_statement(app.checks, case.ranks))
    app.seconds = time.perf_counter() - start
    for o in app.outcomes:
        o.run = None  # release live Paddle objects
    return app
