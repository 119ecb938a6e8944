"""Code a user hands in cannot end a run green (issue 33, point 1).

A case file, a builder or a pass file that calls ``sys.exit(0)`` or
``os._exit(0)``, raises ``KeyboardInterrupt`` or loops is loaded first in an
isolation worker (``verify/engine/input_probe.py``): bad input is one line
and exit 2, a builder that cannot build is INCONCLUSIVE in a written report,
and an ``os._exit(0)`` that still reaches the run's process is exit 2
(``verify/exit_guard.py``).  Each was exit 0 with no report, a hang, or
exit 130 before."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTILE = os.path.join(ROOT, "tests", "hostile_inputs")

AT_IMPORT = {
    "os_exit": "import os\nos._exit(0)\n",
    "sys_exit": "import sys\nsys.exit(0)\n",
    "keyboard_interrupt": "raise KeyboardInterrupt\n",
    "loops": "while True:\n    pass\n",
}


def _verify(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "verify", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _one_error_line(proc, *words):
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind", sorted(AT_IMPORT))
def test_a_case_file_ending_at_import_is_bad_input(kind, tmp_path):
    f = tmp_path / f"case_{kind}.py"
    f.write_text(AT_IMPORT[kind])
    proc = _verify("run", "--case-file", str(f), "--pass", "overlap", "--timeout", "8",
                   "--report-dir", str(tmp_path / "rep"))
    _one_error_line(proc, str(f))
    if kind == "loops":
        assert "timed out after 8 s" in proc.stderr
    if kind == "os_exit":
        assert "exited with code 0" in proc.stderr


@pytest.mark.parametrize("command", ["list", "coverage"])
def test_list_and_coverage_load_case_files_in_a_worker(command, tmp_path):
    f = tmp_path / "case_exit.py"
    f.write_text(AT_IMPORT["os_exit"])
    _one_error_line(_verify(command, "--case-file", str(f)), "exited with code 0")


def test_a_pass_file_ending_at_import_is_bad_input(tmp_path):
    f = tmp_path / "pass_exit.py"
    f.write_text(AT_IMPORT["os_exit"])
    proc = _verify("run", "--pass-file", str(f), "--pass", "overlap", "--case",
                   "col_3d_static", "--report-dir", str(tmp_path / "rep"))
    _one_error_line(proc, "pass file", "exited with code 0")


def test_a_builder_ending_the_process_is_inconclusive_in_a_written_report(tmp_path):
    rep = tmp_path / "rep"
    proc = _verify("run", "--case-file", os.path.join(HOSTILE, "builder_exits_on_rank1.py"),
                   "--pass", "overlap", "--case", "hostile_*", "--report-dir", str(rep))
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    apps = json.loads((rep / "report.json").read_text())["applications"]
    assert [(a["case"], a["verdict"]) for a in apps] == [("hostile_exit_col", "INCONCLUSIVE")]
    build = [c for c in apps[0]["checks"] if c["name"] == "build"]
    assert [c["rank"] for c in build] == [1]
    assert "exited with code 0" in build[0]["message"]


def test_an_exit_zero_that_reaches_the_runs_process_is_exit_2(tmp_path):
    proc = _verify("run", "--case-file",
                   os.path.join(HOSTILE, "builder_exits_outside_workers.py"),
                   "--pass", "overlap", "--case", "hostile_*",
                   "--report-dir", str(tmp_path / "rep"))
    _one_error_line(proc, "called os._exit(0)", "builder_exits_outside_workers.py")
