"""``python -m verify plan --ir pir``: a model in Paddle 3.x's PIR style,
planned for every rank by ``dist.to_static``, written as a PIR program dir and
checked from it; bad input gives one line and exit 2."""
import json
import os

import pytest

from conftest import cli_in_process
from test_program_dir import ROOT, one_error_line, run

MODEL = os.path.join(ROOT, "examples", "tiny_mlp_pir.py")
LEGACY_MODEL = os.path.join(ROOT, "examples", "tiny_mlp.py")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """tiny_mlp_pir planned for 2 ranks, once per session (read-only)."""
    from conftest import built_once

    def plan(path):
        code, stdout, err = run("plan", MODEL, "--ir", "pir", "--ranks", "2",
                                "--out", str(path / "tiny_pir"))
        assert code == 0, stdout + err

    return built_once(tmp_path_factory, "plan-tiny_mlp_pir", plan) / "tiny_pir"


def test_pir_plan_writes_a_pir_program_dir(planned):
    plan = json.loads((planned / "plan.json").read_text())
    assert plan["ir"] == "pir" and plan["mesh"] == [0, 1]
    assert list(plan["rings"].values()) == [[[0, 1]]]  # the planner's TP group
    for r in (0, 1):
        meta = json.loads((planned / f"rank{r}" / "meta.json").read_text())
        assert meta["ir"] == "pir" and meta["rank"] == r and meta["loss"]
        assert [f["concrete_shape"] for f in meta["feeds"]] == [[2, 4, 8], [2, 4, 8]]


def test_the_planned_programs_load_as_a_pir_case(planned):
    from verify.ir import legacy_ir  # noqa: F401
    from verify.ir.pir_snapshot import snapshot_rank
    from cases.program_dirs import load_program_dir

    case = load_program_dir(str(planned))
    assert case.ir == "pir" and case.ranks == [0, 1]
    snap = snapshot_rank(case.build(1))
    types = [o.type for o in snap.ops]
    assert "pd_op.all_reduce" in types and types.count("pd_op.matmul_grad") == 2
    # the dense per-rank program: the column-parallel weight has its local shape
    local = {n: v.shape for n, v in snap.vars.items() if v.is_parameter}
    assert [8, 8] in local.values(), local
    # a pass with its pattern on these programs is expected to fire
    assert case.expectation("_pir_split_matmul_grad_to_matmul").fires


def test_vpp_split_on_planned_pir_programs_keeps_roles(planned):
    """The planner sets op roles (backward 1, optimizer 2): the optimizer
    that now reads the split's dW keeps its role and is not an op the pass
    'inserted' with a wrong one (a false alarm that hand-built programs,
    whose ops carry no role, could not show)."""
    from verify.ir import legacy_ir  # noqa: F401
    import passes
    from verify.engine.application import run_application
    from cases.program_dirs import load_program_dir

    app = run_application(passes.get("vpp_split"), load_program_dir(str(planned)),
                          value=False)
    contract = [c for c in app.checks if c.kind == "contract"]
    assert contract and all(c.ok for c in contract), [c.message for c in contract if not c.ok]


def test_inserted_ops_are_told_from_kept_ops_with_redirected_operands():
    from passes.pir_split_matmul_grad import _inserted
    from verify.ir.snapshot import Op, ProgramSnapshot, Var

    vars_ = {n: Var(n, [2], "float32") for n in ("g", "g2", "w", "w2", "d")}
    before = ProgramSnapshot([
        Op(0, "pd_op.matmul_grad", {"x": ["d"]}, {"y_grad": ["g"]}, {"op_role": 1}, 1),
        Op(1, "pd_op.sgd_", {"param": ["w"], "grad": ["g"]}, {"param_out": ["w2"]},
           {"op_role": 2}, 2)], vars_)
    after = ProgramSnapshot([
        Op(0, "pd_op.matmul", {"x": ["d"]}, {"out": ["g2"]}, {"op_role": 1}, 1),
        Op(1, "pd_op.sgd_", {"param": ["w"], "grad": ["g2"]}, {"param_out": ["w2"]},
           {"op_role": 2}, 2)], vars_)
    assert [o.type for o in _inserted(before, after)] == ["pd_op.matmul"]
    # an optimizer the pass really adds is inserted, role and all
    extra = Op(2, "pd_op.sgd_", {"param": ["w"], "grad": ["g"]}, {"param_out": ["w2"]},
               {"op_role": 2}, 2)
    after2 = ProgramSnapshot(after.ops + [extra], vars_)
    assert [o.type for o in _inserted(before, after2)] == ["pd_op.matmul", "pd_op.sgd_"]


def test_bad_pir_plan_inputs_give_one_line(tmp_path):
    code, _, err = cli_in_process("plan", MODEL, "--ir", "pir", "--ranks", "2", "--out",
                                  str(tmp_path / "a"), "--strategy", str(tmp_path / "s.json"))
    assert code == 2 and one_error_line(err, "--strategy applies to the legacy Engine"), err
    # a legacy model file (auto.shard_tensor) cannot be planned by dist.to_static
    code, _, err = run("plan", LEGACY_MODEL, "--ir", "pir", "--ranks", "2", "--out",
                       str(tmp_path / "b"))
    assert code == 2 and one_error_line(err, "planning failed: rank 0"), err
    assert not (tmp_path / "b").exists()
