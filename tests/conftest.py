"""Shared helpers for the checker's own tests."""
from __future__ import annotations

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.checks import CheckContext  # noqa: E402
from verify.ir.snapshot import from_programs  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402


def pytest_addoption(parser):
    group = parser.getgroup("checker tests")
    group.addoption("--sweep", dest="sweep", default="sample", choices=["sample", "all"],
                    help="the checker tests' large sweeps (every finding's reproducer in "
                         "tests/test_repro.py, every case's identity rewrite and rename in "
                         "tests/test_no_false_alarms.py): a stratified sample whose "
                         "coverage a test asserts (default), or all")


def built_once(tmp_path_factory, name: str, build):
    """``<dir>/<name>``, filled by ``build(path)`` once per test session
    however many xdist workers ask (a module-scoped fixture runs once per
    worker that runs one of the module's tests: both, on 2 cores).  The dir
    lives under the session's temp root, which the workers share; an
    exclusive ``flock`` makes the others wait for the first build and reuse
    it.  A build that fails leaves no mark, so every asker tries (and
    reports) it itself.  Callers must treat the dir as read-only."""
    import fcntl
    import os
    import shutil

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path, done = root / f"built-once-{name}", root / f"built-once-{name}.done"
    with open(root / f"built-once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            build(path)
            done.write_text("built\n")
    return path


def cli_in_process(*args):
    """``python -m verify <args>`` as ``verify.cli.main`` in this process:
    (exit code, stdout, stderr).  For tests of what the command line says
    and returns on bad input, where a fresh interpreter (8-11 s of Paddle
    import under CI load) adds nothing; each such file keeps one test that
    spawns the real ``python -m verify`` and asserts its whole stderr."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from verify import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


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
