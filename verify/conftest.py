"""pytest plumbing for the gate: options, and one report directory per run.

Every gate test writes its application as a JSON fragment into
``<run dir>/fragments/``; the controlling process (the xdist controller, or
the only process without xdist) merges the fragments into ``report.json``,
``junit.xml`` and ``index.html`` at the end, and lists the gate tests that
ran but left no fragment (a crashed worker, an interrupted test) as
unfinished.  Fragments are written as each test ends, so a worker that
crashes loses none of the applications it finished.
"""
from __future__ import annotations

import json
import os
import re
import sys

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)


def pytest_addoption(parser):
    from verify.arguments import megabytes_arg, seconds_arg, seed_arg  # finite, in range

    group = parser.getgroup("pass verification")
    group.addoption("--pass-file", default=None, metavar="PATH",
                    help="verify the pass defined in this source file instead of "
                         "the installed one (pre-merge use)")
    group.addoption("--paddle-file", dest="verify_paddle_files", action="append",
                    default=[], metavar="PATH",
                    help="a changed module of Paddle's Python source, loaded in place of "
                         "the installed one in every process the gate starts "
                         "(the premerge overlay, verify/premerge/paddle_files.py; repeatable)")
    group.addoption("--case-file", dest="verify_case_files", action="append", default=[],
                    metavar="PATH",
                    help="a Python file defining CASES with the public case API "
                         "(verify/case_api.py); its cases join the gate, judged against "
                         "their own Expect (repeatable)")
    group.addoption("--program-dir", dest="verify_program_dirs", action="append",
                    default=[], metavar="DIR",
                    help="a program dir (python -m verify plan; verify/plan/program_format.py) as "
                         "one more gate case, judged against its plan.json expectations "
                         "(default: every pass EQUIVALENT) (repeatable)")
    group.addoption("--zoo", dest="verify_zoo", default="sample", choices=["sample", "all"],
                    help="zoo cases in the gate (cases/zoo.py): the one its tests plan "
                         "(default sample: a cold plan costs 1.5-4.5 min per model) or all")
    group.addoption("--backend", default="both",
                    choices=["none", "simulated", "ranks", "both"],
                    help="numeric backend of the gate (default: both = simulator + real ranks, cross-checked)")
    group.addoption("--seed", type=seed_arg, default=None,
                    help="seed of parameters and inputs (default: the report's)")
    group.addoption("--report-dir", default=None, metavar="DIR",
                    help="report directory of this run (default reports/pytest-<time>)")
    # --timeout is also pytest-timeout's option: where that plugin is
    # installed, ours is only --pass-timeout.
    for names in (("--timeout", "--pass-timeout"), ("--pass-timeout",)):
        try:
            group.addoption(*names, dest="verify_timeout", type=seconds_arg, default=None,
                            metavar="S", help="wall-clock limit per pass application / "
                            "numeric run in its isolation worker (default 120)")
            break
        except ValueError:
            continue
    group.addoption("--memory", dest="verify_memory", type=megabytes_arg, default=None,
                    metavar="MB",
                    help="memory a pass application / numeric run may add in its "
                         "isolation worker (default 4096; 0: no limit)")
    group.addoption("--no-isolation", dest="verify_no_isolation", action="store_true",
                    help="apply passes in the test process (no worker processes)")


_CONFIG = {}  # the session's config, for hooks that are not handed it


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config):
    _CONFIG["config"] = config
    import passes

    for adapter in passes.adapters().values():  # one marker per pass, by short name
        config.addinivalue_line("markers", f"{adapter.short}: applications of {adapter.name}")
    from verify.engine import isolation

    isolation.configure(
        enabled=False if config.getoption("verify_no_isolation", default=False) else None,
        timeout=config.getoption("verify_timeout", default=None),
        memory_mb=config.getoption("verify_memory", default=None))
    overlay = config.getoption("verify_paddle_files", default=None) or []
    config._verify_overlay_label = ""
    if overlay:
        from verify.ir.paddle_overlay import OverlayError, source_label
        from verify.premerge.paddle_files import export

        try:  # the processes the gate starts load them (xdist workers at start)
            config._verify_overlay_label = source_label(export(overlay))
        except OverlayError as exc:
            pytest.exit(str(exc), returncode=2)
    path = config.getoption("--pass-file", default=None)
    if path:
        from passes.base import pass_file_refusal
        from verify.ir.pass_files import PassFileError, load_pass_file

        try:
            config._verify_pass_file = load_pass_file(path)
        except PassFileError as exc:
            pytest.exit(str(exc), returncode=2)
        every = list(passes.adapters().values())
        why = pass_file_refusal(config._verify_pass_file, every, every)
        if why:  # a pass file the gate would accept and never run
            config._verify_pass_file.restore()
            pytest.exit(why, returncode=2)
    config._verify_case_files = []
    paths = (config.getoption("verify_case_files", default=None) or []) + \
        (config.getoption("verify_program_dirs", default=None) or [])
    if paths:
        from cases.case_files import CaseFileError, load_case_files

        try:
            config._verify_case_files = load_case_files(paths)
        except CaseFileError as exc:
            raise pytest.UsageError(str(exc)) from None
    if _is_worker(config):
        config._verify_run_dir = config.workerinput.get("verify_run_dir")
        return
    from verify.report.write import run_dir_name  # time, pid, random: one per run

    run_dir = config.getoption("--report-dir", default=None) or run_dir_name("pytest")
    config._verify_run_dir = os.path.abspath(run_dir)
    config._verify_seen = {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: tell each worker where the run's fragments go."""
    node.workerinput["verify_run_dir"] = node.config._verify_run_dir


def pytest_unconfigure(config):
    loaded = getattr(config, "_verify_pass_file", None)
    if loaded is not None:
        loaded.restore()


def run_memo_dir(config) -> str:
    """Where this run's gate tests share their legacy numeric runs
    (``verify/numeric/run_memo.py``, ``session``): under the run directory,
    removed when the run ends."""
    return os.path.join(config._verify_run_dir, "run-memo")


def fragment_path(config, nodeid: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)
    return os.path.join(config._verify_run_dir, "fragments", safe + ".json")


def write_fragment(config, nodeid: str, app_dict: dict) -> None:
    path = fragment_path(config, nodeid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"nodeid": nodeid, "application": app_dict}, f, default=str)
    os.replace(tmp, path)


def pytest_runtest_logreport(report):
    """Controller side: remember which gate tests ran, however they ended."""
    if "test_gate.py::" not in report.nodeid:
        return
    config = _CONFIG.get("config")
    if config is None or _is_worker(config):
        return
    if report.when == "call" or report.outcome == "failed":
        config._verify_seen[report.nodeid] = report.outcome


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if _is_worker(config):
        return
    import shutil

    shutil.rmtree(run_memo_dir(config), ignore_errors=True)  # nothing outlives the run
    seen = getattr(config, "_verify_seen", {})
    frag_dir = os.path.join(config._verify_run_dir, "fragments")
    if not seen and not os.path.isdir(frag_dir):
        return  # no gate test in this run
    from verify.report import write as report_mod

    apps, done = [], set()
    if os.path.isdir(frag_dir):
        for name in sorted(os.listdir(frag_dir)):
            if name.endswith(".json"):
                with open(os.path.join(frag_dir, name)) as f:
                    frag = json.load(f)
                apps.append(frag["application"])
                done.add(frag["nodeid"])
    unfinished = sorted(n for n in seen if n not in done)
    loaded = getattr(config, "_verify_pass_file", None)
    seed = config.getoption("--seed")
    rep = report_mod.build_report(
        apps, seed=report_mod.DEFAULT_SEED if seed is None else seed,
        backend=config.getoption("--backend"),
        source=getattr(config, "_verify_overlay_label", "") or (
            loaded.path if loaded else "installed"),
        command="pytest " + " ".join(config.invocation_params.args))
    rep["unfinished"] = unfinished
    report_mod.write_report(rep, config._verify_run_dir)
    # the gate's report is reports/last, never reports/latest (the last full
    # ``verify run``); default folders past $VERIFY_KEEP_REPORTS are pruned
    report_mod.point_reports(config._verify_run_dir, full=False)
    if not config.getoption("--report-dir", default=None):
        try:
            report_mod.prune_reports(os.path.dirname(config._verify_run_dir),
                                     report_mod.keep_reports(), config._verify_run_dir)
        except ValueError as exc:
            print(f"warning: reports not pruned: {exc}", file=sys.stderr)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"equivalence report: {config._verify_run_dir}/report.json "
                      f"({len(apps)} applications, {len(unfinished)} unfinished)")
