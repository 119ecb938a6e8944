"""``summary.md``: the pre-merge result as a review comment.

Per affected pass, in the words of ``verify.engine.baseline`` (the same in
``run`` and the gate): NEW and CHANGED CAUSE (verdict, the new and gone
finding identities, one evidence line, the reproducer's path), FIXED, GONE,
no longer reproduced but not proved (-> INCONCLUSIVE), unchanged; skipped
families; the vocabulary audit's new and gone names; the
changed files that were not checked; and the command to rerun.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    """One application compared with its baseline entry (by finding
    identity where the baseline records them: ``verify.engine.baseline.compare``)."""

    pass_name: str
    short: str
    case: str
    baseline: str
    now: str
    evidence: str = ""
    reproducer: str = ""
    cached: bool = False
    label: str = ""  # one of verify.engine.baseline.LABELS ("" : by verdict)
    new_ids: list = field(default_factory=list)  # identities not in the baseline
    gone_ids: list = field(default_factory=list)  # the baseline's, gone

    @property
    def kind(self) -> str:
        return self.label or classify(self.baseline, self.now)


def classify(baseline: str, now: str) -> str:
    """unchanged | FIXED | NEW | UNPROVED (a finding gone, not proved gone),
    by verdict only (the words of ``verify.engine.baseline``).

    An EQUIVALENT application that became INCONCLUSIVE is NEW: it lost its
    proof, and INCONCLUSIVE never counts as EQUIVALENT."""
    from verify.engine.baseline import classify as by_verdict

    return by_verdict(baseline, now)


@dataclass
class Review:
    checkout: str
    base: str
    base_how: str
    rerun: str
    python_changed: list  # [(status, path)]
    native: list  # [(status, path)]
    other: list
    affected: dict  # pass name -> changed modules reaching it
    outcomes: list = field(default_factory=list)  # [Outcome]
    vocabulary_new: list = field(default_factory=list)  # [(pass, key, message, where)]
    vocabulary_gone: list = field(default_factory=list)  # [(pass, key)]
    # [(pass, key, message, where)]: typed only by a variable's name, never gating
    vocabulary_advisory: list = field(default_factory=list)
    vocabulary_error: str = ""
    not_selected: dict = field(default_factory=dict)  # pass -> why it did not run
    planner: list = field(default_factory=list)
    planner_adapters: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    # changed modules no suite pass reaches by imports within paddle.distributed
    # (overlaid all the same; nothing was run for them)
    unreached: list = field(default_factory=list)
    reports: list = field(default_factory=list)  # report dirs of the runs
    seconds: float = 0.0
    cache: str = ""
    unreadable: list = field(default_factory=list)  # [(path, why)]: not overlaid

    skipped: list = field(default_factory=list)  # [(pass, family, why)]: unavailable
    # "pass::case" -> "executed" (its recorded run ran the change) | "import graph"
    selected_by: dict = field(default_factory=dict)
    # "pass::case" of the baseline with no recorded run: selected by the import graph
    fallback: list = field(default_factory=list)

    def new(self) -> list:
        """NEW and CHANGED CAUSE: a defect the baseline does not have."""
        return [o for o in self.outcomes if o.kind in ("NEW", "CHANGED CAUSE")]

    def exit_code(self) -> int:
        return 1 if self.new() or self.vocabulary_new or self.errors else 0


def _rows(items) -> list:
    return [f"- `{p}` ({s})" for s, p in items]


def _ids(prefix, ids) -> list:
    from verify.engine.baseline import describe

    return [f"  - {prefix}: {describe(i)}" for i in ids[:6]] + (
        [f"  - ... and {len(ids) - 6} more"] if len(ids) > 6 else [])


def render(r: Review) -> str:
    new = r.new()
    fixed = [o for o in r.outcomes if o.kind == "FIXED"]
    gone = [o for o in r.outcomes if o.kind == "GONE"]
    unproved = [o for o in r.outcomes if o.kind == "UNPROVED"]
    verdict = ("**new findings**" if new or r.vocabulary_new else
               "**errors**" if r.errors else "no new finding")
    same_n = len(r.outcomes) - len(new) - len(fixed) - len(gone) - len(unproved)
    lines = [f"## Pass verification: {verdict}", "",
             f"Checkout `{r.checkout}` against `{r.base[:12]}` ({r.base_how}): "
             f"{len(r.python_changed)} Python file(s) overlaid on the installed Paddle, "
             f"{len(r.affected)} affected pass(es), {len(r.outcomes)} application(s): "
             f"{len(new)} new, {len(fixed)} fixed, {len(gone)} with findings gone, "
             f"{len(unproved)} not reproduced but not proved, {same_n} "
             f"unchanged ({r.cache}; {r.seconds:.1f} s).", ""]
    if r.fallback:
        from .executed import fallback_line

        lines += [fallback_line(r.fallback), ""]
    for p in sorted(set(r.affected) | {o.pass_name for o in r.outcomes}):
        mine = [o for o in r.outcomes if o.pass_name == p]
        short = mine[0].short if mine else p
        lines.append(f"### `{p}` ({short})")
        reach = r.affected.get(p, [])
        if reach:
            lines.append("affected through: " + ", ".join(f"`{m}`" for m in reach))
        by = [r.selected_by.get(f"{p}::{o.case}") for o in mine]
        if mine:
            lines.append(f"selected: {by.count('executed')} by what their recorded run "
                         f"executed, {by.count('import graph')} by the import graph "
                         "(no record)")
        lines.append("")
        for o in sorted(mine, key=lambda o: o.case):
            if o.kind in ("NEW", "CHANGED CAUSE"):
                lines.append(f"- **{o.kind}** `{o.case}`: {o.now} (baseline {o.baseline})")
                lines += _ids("new", o.new_ids) + _ids("gone", o.gone_ids)
                if o.evidence:
                    lines.append(f"  - evidence: {o.evidence}")
                if o.reproducer:
                    lines.append(f"  - reproducer: `{o.reproducer}`")
        for o in sorted(mine, key=lambda o: o.case):
            if o.kind == "FIXED":
                lines.append(f"- **FIXED** `{o.case}`: {o.baseline} -> {o.now}")
        for o in sorted(mine, key=lambda o: o.case):
            if o.kind == "GONE":
                lines.append(f"- **GONE** `{o.case}`: {o.baseline} -> {o.now} "
                             "(some findings gone, others remain)")
                lines += _ids("gone", o.gone_ids)
        for o in sorted(mine, key=lambda o: o.case):
            if o.kind == "UNPROVED":
                lines.append(f"- not reproduced, not proved `{o.case}`: {o.baseline} -> "
                             f"{o.now}" + (f" ({o.evidence})" if o.evidence else ""))
        same = sorted(o.case for o in mine if o.kind == "unchanged")
        if same:
            lines.append(f"- unchanged ({len(same)}): " + ", ".join(f"`{c}`" for c in same))
        for q, fam, why in r.skipped:
            if q == p:
                lines.append(f"- skipped family `{fam}`: {why}")
        if not mine:
            lines.append("- no application ran" +
                         (f": {r.not_selected[p]}" if p in r.not_selected else ""))
        lines.append("")
    if r.planner:
        lines += ["### Planner family",
                  "changed modules the planner family's applications ran (or, "
                  "unrecorded, Paddle's planning code reaches by imports): "
                  + ", ".join(f"`{m}`" for m in r.planner),
                  ("ran: " + ", ".join(f"`{a}`" for a in r.planner_adapters))
                  if r.planner_adapters else "no planner-family adapter is installed: "
                  "nothing ran for it (not checked)", ""]
    if r.vocabulary_new or r.vocabulary_gone or r.vocabulary_error or \
            r.vocabulary_advisory:
        lines.append("### Vocabulary audit of the changed pass sources")
        for p, k, msg, where in r.vocabulary_new:
            lines.append(f"- **NEW** `{k}`: {msg}" + (f" at {where}" if where else ""))
        for p, k in r.vocabulary_gone:
            lines.append(f"- **FIXED** `{k}` (no longer read)")
        for p, k, msg, where in r.vocabulary_advisory:
            lines.append(f"- advisory (the op type is only the variable's name's guess; "
                         f"not gating) `{k}`: {msg}" + (f" at {where}" if where else ""))
        if r.vocabulary_error:
            lines.append(f"- not run: {r.vocabulary_error}")
        lines.append("")
    if r.native:
        lines += ["### Not checked (need a build)", *_rows(r.native), ""]
    if r.unreadable:
        lines += ["### Not checked (cannot be read as Python source)",
                  *[f"- `{p}`: {why}" for p, why in r.unreadable], ""]
    if r.unreached:
        lines += ["### Changed modules no pass under test reaches",
                  "(by imports within `paddle.distributed`; overlaid, nothing ran for them)",
                  *[f"- `{m}`" for m in r.unreached], ""]
    if r.not_selected:
        lines.append("### Passes not run")
        for p, why in sorted(r.not_selected.items()):
            if p not in r.affected:
                lines.append(f"- `{p}`: {why}")
        lines.append("")
    if r.errors:
        lines += ["### Errors", *[f"- {e}" for e in r.errors], ""]
    if r.python_changed:
        lines += ["<details><summary>Overlaid Python files</summary>", "",
                  *_rows(r.python_changed), "", "</details>", ""]
    if r.other:
        lines += ["<details><summary>Other changed files (ignored)</summary>", "",
                  *_rows(r.other), "", "</details>", ""]
    if r.reports:
        lines += ["Full reports: " + ", ".join(f"`{p}`" for p in r.reports), ""]
    lines += ["Rerun:", "", "```", r.rerun, "```", ""]
    return "\n".join(lines)
