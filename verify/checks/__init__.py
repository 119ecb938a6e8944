"""Static checks on snapshots: each module's ``run(ctx)`` returns CheckResults.

A check never imports a case or a pass: it sees a :class:`CheckContext`
made of plain data.  Adding a check is adding a module and one line below.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CheckContext:
    """Everything a static check may look at for one rank."""

    pass_name: str
    case_name: str
    rank: int
    before: object  # ProgramSnapshot of the original
    after: object  # ProgramSnapshot of the rewritten program
    symbols: dict = field(default_factory=dict)  # fed var -> dim symbol names
    intended: dict = field(default_factory=dict)  # var -> reason (reaching defs)
    renames: dict = field(default_factory=dict)  # original var -> its rewritten name
    # ring_id -> groups of ranks (the case's rings); None: unknown, the ring,
    # root and peer checks of collective_validity are skipped
    rings: dict | None = None

    def where(self) -> str:
        return f"{self.pass_name} on {self.case_name} rank {self.rank}"


def static_checks() -> list:
    """The static checks, in the order they run."""
    from . import collective_validity, def_use, reaching_defs, shape_check, streams

    return [shape_check.run, def_use.run, streams.run, reaching_defs.run,
            collective_validity.run]


def run_static_checks(ctx: CheckContext) -> list:
    results = []
    for check in static_checks():
        results += check(ctx)
    return results
