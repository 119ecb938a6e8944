"""The sequence-parallel optimization adapter: its documented-pattern
matcher against the cases' declared ``fires``, the reported 3.3.1 crash,
and the suite's judgement of the pass with that crash mended (proved where
the pattern is real, refuted where a rank keeps another rank's chunk)."""
import os

import pytest

import cases
import passes
from verify.ir.pass_files import load_pass_file
from verify.engine.application import run_application
from verify.engine.matrix_runner import pick_backend
from verify.ir.snapshot import from_programs
from verify.verdicts import Verdict

_, SIM = pick_backend("simulated", 11)
HERE = os.path.dirname(__file__)
MENDED = os.path.join(HERE, "fixed_passes", "sp_optimization_x_slot_mended.py")
SP_CASES = [n for n, c in cases.all_cases().items()
            if c.family in ("sequence_parallel", "engine_sp")]


def _bad(app, kind=None):
    return [c for c in app.checks if not c.ok and not c.advisory
            and (kind is None or c.kind == kind)]


@pytest.mark.parametrize("name", SP_CASES)
def test_matcher_agrees_with_declared_fires(name):
    case = cases.all_cases()[name]
    adapter = passes.get("sp_opt")
    for rank in case.ranks:
        rp = case.build(rank)
        snap = from_programs(rp.main, rp.startup, meta={"case": name, "rank": rank})
        assert adapter.pattern_present(snap) == case.expectation(adapter.name).fires


def test_matcher_needs_the_ranks_own_chunk():
    """Without the case (ring sizes, rank) the matcher cannot tell whose chunk
    is kept; with it, keeping another rank's chunk is not the pattern."""
    from passes.auto_parallel_sequence_parallel_optimization import fused_pairs

    case = cases.all_cases()["sp_opt_tp2_other_chunk"]
    rp = case.build(0)
    snap = from_programs(rp.main, rp.startup)
    assert fused_pairs(snap) and not fused_pairs(snap, case, 0)


@pytest.mark.parametrize("name", ["sp_opt_tp2_sgd", "engine_mlp_sp_tp2_sgd"])
def test_installed_pass_crashes_on_the_x_slot(name):
    app = run_application(passes.get("sp_opt"), cases.all_cases()[name])
    assert app.verdict == Verdict.PASS_CRASHED
    crashed = [c for c in app.checks if c.kind == "pass"]
    assert {c.rank for c in crashed} == {0, 1}
    assert all("Input X cannot be found in operator all_reduce" in c.message for c in crashed)


@pytest.fixture
def mended():
    loaded = load_pass_file(MENDED)
    yield loaded
    loaded.restore()


@pytest.mark.parametrize("name", ["sp_opt_tp2_inplace_adamw_dyn", "sp_opt_dp2_tp2_sgd"])
def test_mended_pass_is_proved_equivalent(mended, name):
    case = cases.all_cases()[name]
    app = run_application(passes.get("sp_opt"), case, source=mended.path, numeric=SIM)
    assert app.fired_ranks == case.ranks
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in _bad(app)]
    assert any(c.name == "fused" and c.ok for c in app.checks)
    assert any(c.kind == "numeric" and c.ok for c in app.checks)
    assert any(c.kind == "value" and c.ok for c in app.checks)


def test_mended_pass_on_the_planners_program_is_proved_equivalent(mended):
    """The Engine's own TP+SP program (cases/engine_sp.py): the installed
    pass crashes on it, the mended one fuses it, proved and run."""
    case = cases.all_cases()["engine_mlp_sp_tp2_sgd"]
    app = run_application(passes.get("sp_opt"), case, source=mended.path, numeric=SIM)
    assert app.fired_ranks == [0, 1]
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in _bad(app)]
    assert any(c.kind == "value" and c.ok for c in app.checks)


def test_mended_pass_fusing_another_ranks_chunk_is_refuted(mended):
    """The pass never checks which chunk a rank keeps: where it is not the
    rank's own, reduce_scatter hands it the wrong one."""
    case = cases.all_cases()["sp_opt_tp2_other_chunk"]
    app = run_application(passes.get("sp_opt"), case, source=mended.path, numeric=SIM)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    refuted = _bad(app, "value")
    assert refuted and all(c.verdict == Verdict.NOT_EQUIVALENT for c in refuted)
    assert any(c.counterexample for c in refuted)
    left = [c for c in app.checks if c.name == "left alone"]
    assert left and all(c.verdict == Verdict.CONTRACT_BROKEN for c in left)


def test_contract_catches_a_wrong_ring(tmp_path, mended):
    """A fused reduce_scatter on another ring than the sum's is a contract finding."""
    src = open(MENDED).read().replace(
        "_mended = _src.replace(",
        "_src = _src.replace(\"'ring_id': ring_id,\", \"'ring_id': ring_id + 7,\")\n"
        "_mended = _src.replace(")
    path = tmp_path / "sp_wrong_ring.py"
    path.write_text(src)
    loaded = load_pass_file(str(path))
    try:
        app = run_application(passes.get("sp_opt"), cases.all_cases()["sp_opt_tp2_sgd"],
                              source=loaded.path, value=False)
    finally:
        loaded.restore()
    wrong = [c for c in app.checks if c.name == "reduce_scatter replaces the sum"]
    assert wrong and all(c.verdict == Verdict.CONTRACT_BROKEN for c in wrong)
    assert "ring 7" in wrong[0].message


def test_default_strategy_stops_the_planner():
    """What 3.3.1 does to a user who marks sequence parallelism and changes
    nothing else: sp_optimization.enable defaults to True, the planner runs
    the pass inside engine.prepare, and planning fails on the X slot."""
    from cases import engine_planned

    with pytest.raises(RuntimeError) as err:
        engine_planned.planned_dir({"act": "gelu", "optimizer": "sgd", "sp": True,
                                    "sp_default": True})
    assert "Input X cannot be found in operator all_reduce" in str(err.value)
    assert "auto_parallel_sequence_parallel_optimization" in str(err.value)
