"""Shared helpers for the checker's own tests."""
from __future__ import annotations

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.checks import CheckContext  # noqa: E402
from verify.ir.snapshot import from_programs  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402


def live_processes_marked(marker: str) -> set:
    """PIDs of live (not zombie) processes whose environment holds the
    ``NAME=value`` entry ``marker`` (how the suite tags the worker processes
    it starts on behalf of a parent)."""
    import os

    mine = marker.encode()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if mine in env and state not in (b"Z", b"X"):
            found.add(int(entry))
    return found


def snapshots(pass_name, case_name, rank):
    """(case, before, after) snapshots of the real pass on a real case."""
    case = cases.all_cases()[case_name]
    run = run_pass(passes.get(pass_name), case, rank)
    before = from_programs(run.original.main, run.original.startup)
    after = from_programs(run.rewritten.main, run.rewritten.startup)
    before.feeds = after.feeds = sorted(f.name for f in run.original.feeds)
    return case, before, after, run


def context(case, before, after, rank, pass_name="test", adapter=None):
    """A CheckContext; with ``adapter`` (a pass's short name) it carries what
    that adapter declares (values its pass recomputes, renames), as
    ``run_application`` gives it."""
    intended, renames = {}, {}
    if adapter is not None:
        import passes

        a = passes.get(adapter)
        intended = a.intended_changes(case, rank, before, after)
        renames = a.renames(case, rank, before, after)
    return CheckContext(pass_name=pass_name, case_name=case.name, rank=rank,
                        before=before, after=after, symbols=dict(case.symbols),
                        intended=intended, renames=renames)


@pytest.fixture
def col_static():
    return snapshots("overlap", "col_3d_static", 0)
