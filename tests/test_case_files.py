"""``--case-file``: a user's cases from outside the package, and bad input."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import cli_in_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "my_cases.py")


def run(*args, cwd=ROOT):
    p = subprocess.run([sys.executable, "-m", "verify", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def _file(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


GOOD_HEAD = textwrap.dedent("""
    from verify.case_api import Case, Expect, OVERLAP, tp_mesh, tp_rings

    def build(case, rank):
        raise RuntimeError("never built here")

    def case(**kw):
        args = dict(name="mine", family="f", summary="s", mesh=tp_mesh(2),
                    builder=build, rings=tp_rings(tp_mesh(2)),
                    expect={OVERLAP: Expect(False)})
        args.update(kw)
        return Case(**args)
""")

BAD = {
    "syntax": ("x = (\n", "does not import: line 1: SyntaxError"),
    "raises": ("import os\nraise ValueError('boom here')\n",
               "does not import: line 2: ValueError: boom here"),
    "no_cases": ("X = 1\n", "defines no CASES"),
    "empty": ("CASES = []\n", "defines no cases (CASES is empty)"),
    "not_a_case": ("CASES = [{'name': 'x'}]\n", "CASES[0] is a dict, not a Case"),
    "bad_mesh": (GOOD_HEAD + "\nCASES = [case(mesh='ab')]\n", "case 'mine': field 'mesh'"),
    "bad_pass": (GOOD_HEAD + "\nCASES = [case(expect={'nopass': Expect(True)})]\n",
                 "field 'expect' names unknown pass 'nopass'"),
    "bad_verdict": (GOOD_HEAD + "\nCASES = [case(expect={OVERLAP: Expect(True, 'EQUAL')})]\n",
                    "field 'expect' [" + repr("allreduce_matmul_grad_overlapping")
                    + "] verdict 'EQUAL'"),
    "bad_ring": (GOOD_HEAD + "\nCASES = [case(rings={0: [[0, 7]]})]\n",
                 "field 'rings' ring 0 names rank(s) [7] outside the mesh"),
    "bad_builder": (GOOD_HEAD + "\nCASES = [case(builder=3)]\n", "field 'builder'"),
    "clash": (GOOD_HEAD + "\nCASES = [case(name='col_3d_static')]\n",
              "has the name of a built-in case"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_case_file_is_one_line_and_exit_2(kind, tmp_path):
    """In process (``cli.main``); the real process: the test below."""
    body, needle = BAD[kind]
    path = _file(tmp_path, f"{kind}.py", body)
    code, out, err = cli_in_process("run", "--case-file", path,
                                    "--report-dir", tmp_path / "r")
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: case file "), err
    assert needle in lines[0], err


def test_bad_case_file_in_a_real_process_is_its_only_stderr_line_and_exit_2(tmp_path):
    """``python -m verify`` itself, on a file whose import raises (the kind
    most likely to leak a traceback): exit 2, one line on stderr."""
    body, needle = BAD["raises"]
    path = _file(tmp_path, "raises.py", body)
    code, out, err = run("run", "--case-file", path, "--report-dir", str(tmp_path / "r"))
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: case file "), err
    assert needle in lines[0], err


def test_missing_case_file_is_exit_2(tmp_path):
    code, out, err = cli_in_process("run", "--case-file", tmp_path / "nope.py")
    assert code == 2 and err.strip().endswith("does not exist"), err


def test_same_case_in_two_files_is_exit_2(tmp_path):
    a = _file(tmp_path, "a.py", GOOD_HEAD + "\nCASES = [case()]\n")
    b = _file(tmp_path, "b.py", GOOD_HEAD + "\nCASES = [case()]\n")
    code, _, err = cli_in_process("run", "--case-file", a, "--case-file", b)
    assert code == 2 and "case 'mine' is also defined in" in err, err


def test_example_cases_run_and_are_reported_with_their_file(tmp_path):
    code, out, err = run("run", "--case-file", EXAMPLE, "--case", "my_*",
                         "--backend", "simulated", "--report-dir", str(tmp_path / "r"))
    assert code == 0, out + err
    rep = json.load(open(tmp_path / "r" / "report.json"))
    got = {(a["pass"], a["case"]): a for a in rep["applications"]}
    # every pass on both cases, no built-in case
    assert {c for _, c in got} == {"my_column_parallel", "my_row_parallel"}
    col = got[("allreduce_matmul_grad_overlapping", "my_column_parallel")]
    row = got[("auto_parallel_fused_linear_promotion", "my_row_parallel")]
    assert col["status"] == row["status"] == "EQUIVALENT"
    assert col["rank_outcomes"][0]["fired"] and row["rank_outcomes"][1]["fired"]
    assert all(a["case_file"] == EXAMPLE for a in got.values())
    html = open(tmp_path / "r" / "index.html").read()
    assert f"--case-file {EXAMPLE}" in html


def test_a_case_that_fails_to_build_is_reported_and_others_go_on(tmp_path):
    path = _file(tmp_path, "mixed.py", f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location("ex", {EXAMPLE!r})
        ex = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ex)
        from verify.case_api import Case, Expect, OVERLAP

        def broken(case, rank):
            raise KeyError("no such layer")

        good = ex.CASES[0]
        CASES = [Case(name="my_broken", family="f", summary="s", mesh=[0, 1],
                      builder=broken, rings={{0: [[0, 1]]}},
                      expect={{OVERLAP: Expect(True)}}),
                 Case(**{{**good.__dict__, "name": "my_good"}})]
    """)
    code, out, err = run("run", "--case-file", path, "--case", "my_*", "--pass", "overlap",
                         "--backend", "none", "--report-dir", str(tmp_path / "r"))
    assert code == 1, out + err  # the broken case is not as expected
    rep = json.load(open(tmp_path / "r" / "report.json"))
    got = {a["case"]: a for a in rep["applications"]}
    assert got["my_broken"]["verdict"] == "INCONCLUSIVE"
    assert "failed to build" in json.dumps(got["my_broken"]["checks"])
    assert "no such layer" in json.dumps(got["my_broken"]["checks"])
    assert got["my_good"]["verdict"] == "EQUIVALENT"


def test_gate_runs_case_file_cases_against_their_own_expect(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "verify/test_gate.py", "--case-file", EXAMPLE, "-k", "my_",
                        "--backend", "none", "--report-dir", str(tmp_path / "g")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " passed" in p.stdout and "failed" not in p.stdout, p.stdout
    rep = json.load(open(tmp_path / "g" / "report.json"))
    assert {a["case_file"] for a in rep["applications"]} == {EXAMPLE}
    assert {a["case"] for a in rep["applications"]} == {"my_column_parallel",
                                                        "my_row_parallel"}


def test_gate_refuses_a_bad_case_file(tmp_path):
    path = _file(tmp_path, "none.py", "X = 1\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "verify/test_gate.py", "--case-file", path, "--collect-only"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode != 0 and "defines no CASES" in p.stdout + p.stderr
