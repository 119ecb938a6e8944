"""The command line: exit codes, one clear line on bad input, --pass-file."""
import io
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import cli_in_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANTS = os.path.join(ROOT, "tests", "mutants")


def run(*args, cwd=ROOT):
    p = subprocess.run([sys.executable, "-m", "verify", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args,needle", [
    (["run", "--pass", "no_such_pass"], "unknown pass 'no_such_pass'"),
    (["run", "--case", "no_such_case*"], "no case matches 'no_such_case*'"),
    (["run", "--pass-file", "/nonexistent/pass.py"], "does not exist"),
    (["run", "--pass-file", os.path.join(MUTANTS, "registers_nothing.py")], "registers no pass"),
])
def test_bad_input_is_one_clear_line_and_exit_2(args, needle, tmp_path):
    """In process (``cli.main``): what it prints and returns; the real
    process's whole stderr is the test below."""
    code, out, err = cli_in_process(*args, "--report-dir", tmp_path / "r")
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], err


def test_bad_input_in_a_real_process_is_its_only_stderr_line_and_exit_2(tmp_path):
    """``python -m verify`` itself: exit 2 through ``sys.exit``, and nothing
    else on stderr (no traceback, no start-up noise)."""
    code, out, err = run("run", "--pass", "no_such_pass", "--report-dir", str(tmp_path / "r"))
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unknown pass 'no_such_pass'" in lines[0], err
    assert lines[0].startswith("error: "), err


def test_unwritable_report_dir_is_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli_in_process("run", "--case", "col_3d_static",
                                  "--report-dir", blocker / "sub")
    assert code == 2 and "cannot write report directory" in err


def test_run_writes_the_report_and_exits_0(tmp_path):
    # the default backends (simulator and real ranks) on one EQUIVALENT case
    # and one a glob picks (the world-4 and in-place twins: the gate's)
    code, out, err = run("run", "--pass", "overlap", "--case", "col_3d_static",
                         "--case", "col_3d_d*", "--report-dir", str(tmp_path / "r"))
    assert code == 0, out + err
    rep = json.load(open(tmp_path / "r" / "report.json"))
    assert rep["schema"] == "pass-equivalence-report/1"
    assert rep["environment"]["paddle"].startswith("3.")
    assert rep["seed"] == 20261130
    names = {(a["pass"], a["case"]): a for a in rep["applications"]}
    assert names[("allreduce_matmul_grad_overlapping", "col_3d_dynamic_batch")]["verdict"] \
        == "PASS_CRASHED"
    assert "col_3d_static" in out and "PASS_CRASHED" in out


def test_pass_file_mutant_is_caught_and_exits_1(tmp_path):
    code, out, err = run("run", "--case", "col_3d_static", "--pass-file",
                         os.path.join(MUTANTS, "overlap_stream_dropped.py"),
                         "--report-dir", str(tmp_path / "r"))
    assert code == 1, out + err
    assert "NEW: " in out and "auto_parallel_mp" in out
    rep = json.load(open(tmp_path / "r" / "report.json"))
    assert rep["applications"][0]["source"].endswith("overlap_stream_dropped.py")


def test_pass_that_raises_is_pass_crashed_with_half_rewritten_program(tmp_path):
    code, out, _ = run("run", "--case", "col_3d_static", "--pass-file",
                       os.path.join(MUTANTS, "overlap_raises.py"), "--backend", "none",
                       "--report-dir", str(tmp_path / "r"))
    assert code == 1
    app = json.load(open(tmp_path / "r" / "report.json"))["applications"][0]
    assert app["verdict"] == "PASS_CRASHED"
    crash = [c for c in app["checks"] if c["kind"] == "pass"][0]
    assert "injected failure" in crash["message"]
    assert app["rank_outcomes"][0]["ops_after"] == app["rank_outcomes"][0]["ops_before"] - 1


def test_case_that_fails_to_build_does_not_stop_the_others():
    from cases.base import Case
    import cases
    import passes
    from verify.engine.matrix_runner import run_matrix

    def boom(case, rank):
        raise RuntimeError("builder broke")

    bad = Case(name="broken_case", family="test", summary="raises", mesh=[0, 1],
               builder=boom, expect={})
    good = cases.all_cases()["col_3d_static"]
    apps, _ = run_matrix([passes.get("overlap")], [bad, good], backend="none", out=None)
    assert apps[0].verdict.value == "INCONCLUSIVE"
    assert "builder broke" in apps[0].checks[0].message and apps[0].checks[0].rank == 0
    assert apps[1].verdict.value == "EQUIVALENT"


class _Terminal(io.StringIO):
    """Captured output that says it is a terminal."""

    def isatty(self):
        return True


def test_progress_and_summary_plain_in_logs_coloured_on_a_terminal():
    """Piped (CI, tests) every line prints as composed: no colour codes, no
    wrapping, ``[...]`` in messages kept; on a terminal the same text comes
    with colour and a progress bar."""
    import cases
    import passes
    from cases.base import Case
    from verify.engine.matrix_runner import line, run_matrix
    from verify.report.terminal import print_summary

    def boom(case, rank):
        raise RuntimeError("builder broke [bold]x[/bold] :smile:")

    long_name = "broken_case_" + "x" * 150  # wider than any terminal default
    bad = Case(name=long_name, family="test", summary="raises", mesh=[0, 1],
               builder=boom, expect={})
    good = cases.all_cases()["col_3d_static"]
    plain = io.StringIO()
    apps, _ = run_matrix([passes.get("overlap")], [bad, good], backend="none", out=plain)
    print_summary(apps, "/x/report.json", 1.0, plain)
    text = plain.getvalue()
    assert "\x1b" not in text
    lines = text.splitlines()
    assert lines[:2] == [f"[{i + 1}/2] {line(a)}" for i, a in enumerate(apps)]
    assert not apps[0].as_expected and lines[0].startswith("[1/2] BAD ")
    assert "builder broke [bold]x[/bold] :smile:" in text  # no markup, no emoji codes
    assert any(ln.startswith("    [") and "rank 0]" in ln for ln in lines)
    header = next(ln for ln in lines if ln.startswith("pass "))
    assert [c.strip() for c in header.split("|")][1:3] == ["EQUIVALENT", "LEFT_ALONE"]
    row = next(ln for ln in lines if ln.startswith("allreduce_matmul_grad_overlapping "))
    assert [c.strip() for c in row.split("|")][-1] == "1"  # one unexpected
    assert lines[-1] == "1 as expected, 1 unexpected"

    tty = _Terminal()
    run_matrix([passes.get("overlap")], [bad], backend="none", out=tty)
    print_summary(apps, "/x/report.json", 1.0, tty)
    shown = tty.getvalue()
    assert "\x1b[" in shown  # coloured
    bare = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    assert "[1/1] BAD " in bare and "1 as expected, 1 unexpected" in bare
