"""``python -m verify plan`` and ``--program-dir``: a model in plain Paddle,
planned by Paddle's Engine for every rank, checked from its program dir; a
dir saved by a script of one's own; bad input."""
import json
import os
import subprocess
import sys

import pytest

from conftest import cli_in_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "tiny_mlp.py")
OVERLAP = "allreduce_matmul_grad_overlapping"
PROMOTION = "auto_parallel_fused_linear_promotion"


def run(*args, cwd=ROOT):
    p = subprocess.run([sys.executable, "-m", "verify", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def one_error_line(err, needle):
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    return len(lines) == 1 and needle in lines[0]


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """tiny_mlp planned for 2 ranks, once per session (read-only)."""
    from conftest import built_once

    def plan(path):
        code, stdout, err = run("plan", MODEL, "--ranks", "2", "--out", str(path / "tiny"))
        assert code == 0, stdout + err

    return built_once(tmp_path_factory, "plan-tiny_mlp", plan) / "tiny"


def test_plan_writes_the_documented_format(planned):
    from verify.plan.program_format import FORMAT, VERSION

    plan = json.loads((planned / "plan.json").read_text())
    assert plan["format"] == FORMAT and plan["version"] == VERSION
    assert plan["mesh"] == [0, 1] and plan["name"] == "tiny_mlp"
    assert list(plan["rings"].values()) == [[[0, 1]]]
    assert "linear_1.w_0" in plan["sharded_params"]
    assert plan["symbols"]["x"] == ["B", None, None]
    for r in (0, 1):
        meta = json.loads((planned / f"rank{r}" / "meta.json").read_text())
        assert meta["rank"] == r and meta["params_grads"] and meta["loss"]
        assert {f["name"] for f in meta["feeds"]} == {"x", "y"}
        assert (planned / f"rank{r}" / "main.pdmodel").stat().st_size > 0


def test_run_on_a_planned_dir(planned, tmp_path):
    code, out, err = run("run", "--program-dir", str(planned), "--backend", "simulated",
                         "--report-dir", str(tmp_path / "r"))
    # 3.3.1's overlap pass does nothing on planned programs (all_reduce spelling)
    assert code == 1, out + err
    rep = json.load(open(tmp_path / "r" / "report.json"))
    got = {a["pass"]: a for a in rep["applications"]}
    assert {a["case"] for a in rep["applications"]} == {"tiny_mlp"}  # the dir alone
    assert got[OVERLAP]["verdict"] == "NOT_APPLIED"
    assert got[PROMOTION]["verdict"] == "EQUIVALENT"
    assert got[PROMOTION]["rank_outcomes"][1]["fired"]
    assert got[PROMOTION]["case_file"] == str(planned)


def test_repro_of_a_planned_dir(planned, tmp_path):
    out = tmp_path / "r.py"
    code, stdout, err = run("repro", "--pass", "overlap", "--case", "tiny_mlp",
                            "--program-dir", str(planned), "--out", str(out))
    assert code == 0, stdout + err
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-I", str(out)], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1 and "did nothing" in p.stdout, p.stdout + p.stderr


def test_a_dir_saved_by_ones_own_script(tmp_path):
    """Programs written with ``verify.plan.program_format.save`` (the same format a
    user's script writes) run like a planned dir."""
    script = f"""
import sys
sys.path.insert(0, {ROOT!r})
from verify.ir import legacy_ir
import cases
from verify.plan.program_format import save
case = cases.all_cases()["row_mp_o0_sgd_tp2"]
save({{r: case.build(r) for r in case.ranks}}, case.mesh, {str(tmp_path / 'mine')!r},
     "my_saved_row", rings=case.rings)
"""
    p = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    code, out, err = run("run", "--program-dir", str(tmp_path / "mine"), "--pass",
                         "promotion", "--backend", "simulated",
                         "--report-dir", str(tmp_path / "r"))
    assert code == 0, out + err
    rep = json.load(open(tmp_path / "r" / "report.json"))
    (app,) = rep["applications"]
    assert app["case"] == "my_saved_row" and app["verdict"] == "EQUIVALENT"
    assert app["rank_outcomes"][1]["fired"]


def test_bad_program_dirs_are_one_line_and_exit_2(tmp_path):
    """In process (``cli.main``: the message and the code; the real
    process's stderr: the last bad plan input below)."""
    code, _, err = cli_in_process("run", "--program-dir", str(tmp_path / "nope"))
    assert code == 2 and one_error_line(err, "does not exist"), err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cli_in_process("run", "--program-dir", str(empty))
    assert code == 2 and one_error_line(err, "no plan.json"), err
    (empty / "plan.json").write_text(json.dumps({"format": "other", "version": 1}))
    code, _, err = cli_in_process("run", "--program-dir", str(empty))
    assert code == 2 and one_error_line(err, "not a paddle-pass-verify/program-dir"), err
    (empty / "plan.json").write_text(json.dumps({
        "format": "paddle-pass-verify/program-dir", "version": 1, "name": "x",
        "mesh": [0, 1], "rings": {}}))
    code, _, err = cli_in_process("run", "--program-dir", str(empty))
    assert code == 2 and one_error_line(err, "rank0/main.pdmodel is missing"), err


def test_bad_plan_input_is_one_line_and_exit_2(tmp_path):
    # what the command line checks itself: in process (cli.main)
    code, _, err = cli_in_process("plan", str(tmp_path / "none.py"), "--ranks", "2",
                                  "--out", str(tmp_path / "o"))
    assert code == 2 and one_error_line(err, "does not exist"), err
    code, _, err = cli_in_process("plan", MODEL, "--ranks", "2", "--mesh", "3x3",
                                  "--out", str(tmp_path / "o"))
    assert code == 2 and one_error_line(err, "holds ranks"), err
    code, _, err = cli_in_process("plan", MODEL, "--ranks", "2", "--strategy",
                                  str(tmp_path / "none.json"), "--out", str(tmp_path / "o"))
    assert code == 2 and one_error_line(err, "strategy file"), err
    bad = tmp_path / "bad_model.py"
    bad.write_text("import paddle\ndef build_model(mesh):\n    return None\n")
    # the planner's own failure, through a real ``python -m verify``
    code, _, err = run("plan", str(bad), "--ranks", "2", "--out", str(tmp_path / "o"))
    assert code == 2 and one_error_line(err, "defines no 'loss'"), err


def test_plan_a_dp_x_tp_mesh(tmp_path):
    """``--mesh 2x2``: four ranks planned, DP and TP rings recorded, the
    promotion pass fires on every rank and keeps every value."""
    model = os.path.join(ROOT, "examples", "two_mlp.py")
    out = tmp_path / "two4"
    code, stdout, err = run("plan", model, "--ranks", "4", "--mesh", "2x2", "--out", str(out))
    assert code == 0, stdout + err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["mesh"] == [[0, 1], [2, 3]]
    groups = sorted(g for gs in plan["rings"].values() for g in gs)
    assert [0, 1] in groups and [0, 2] in groups and [2, 3] in groups and [1, 3] in groups
    code, stdout, err = run("run", "--program-dir", str(out), "--pass", "promotion",
                            "--backend", "simulated", "--report-dir", str(tmp_path / "r"))
    assert code == 0, stdout + err
    (app,) = json.load(open(tmp_path / "r" / "report.json"))["applications"]
    assert app["verdict"] == "EQUIVALENT"
    assert all(o["fired"] for o in app["rank_outcomes"])


def test_gate_takes_a_program_dir(planned, tmp_path):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "verify/test_gate.py", "--program-dir", str(planned), "-k",
                        "promotion and tiny_mlp", "--backend", "none",
                        "--report-dir", str(tmp_path / "g")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
