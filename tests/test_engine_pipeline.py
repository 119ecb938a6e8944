"""The ``engine_pipeline`` adapter: the Engine's post-partition pass list,
checked after every stage (``passes/engine_pipeline.py``).

Each stage check is shown passing on a stage that keeps the program sound
and catching a broken stage (a pass file that deletes a var's writer, a
mutant clip pass) at that stage, with the right counterexample, while the
stages before it stay clean and the stages after it do not take the blame.
"""
from __future__ import annotations

import os

import pytest

import cases
import passes
from passes.engine_pipeline import stages, strategy_of
from verify.ir.pass_files import load_pass_file
from verify.engine.application import run_application
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANTS = os.path.join(ROOT, "tests", "dp_clip_mutants")


def _run(case_name, mutant=None):
    adapter = passes.get("pipeline")
    loaded = load_pass_file(os.path.join(MUTANTS, mutant)) if mutant else None
    try:
        return run_application(adapter, cases.all_cases()[case_name], value=False)
    finally:
        if loaded:
            loaded.restore()


def _stages(app, rank):
    return [(c.name, c.verdict) for c in app.checks
            if c.kind == "contract" and c.rank == rank]


def _stage(app, rank, name):
    (c,) = [c for c in app.checks if c.kind == "contract" and c.rank == rank
            and c.name == f"after {name}"]
    return c


def test_stage_list_follows_the_parallelizer():
    """Default 3.3.1 strategy: SP optimization first, grad clip, dependencies;
    the promotion switch adds the promotion and the fused passes."""
    sp = cases.all_cases()["engine_pipeline_sp_default"]
    rp = sp.build(0)
    assert [n for n, _ in stages(strategy_of(sp), rp, [])] == [
        "auto_parallel_sequence_parallel_optimization", "auto_parallel_grad_clip",
        "auto_parallel_supplement_explicit_dependencies"]
    tp = cases.all_cases()["engine_pipeline_tp2_clip"]
    names = [n for n, _ in stages(strategy_of(tp), tp.build(0), [])]
    assert names == ["auto_parallel_fused_linear_promotion", "auto_parallel_grad_clip",
                     "auto_parallel_supplement_explicit_dependencies", "fuse_gemm_epilogue"]


def test_default_strategy_stops_at_the_sp_stage_and_never_reports_later_stages_passing():
    app = _run("engine_pipeline_sp_default")
    assert app.verdict == Verdict.PASS_CRASHED
    for rank in (0, 1):
        crashed = _stage(app, rank, "auto_parallel_sequence_parallel_optimization")
        assert crashed.verdict == Verdict.PASS_CRASHED
        assert "Input X cannot be found in operator all_reduce" in crashed.message
        assert "Traceback" in crashed.details["traceback"]
        for later in ("auto_parallel_grad_clip",
                      "auto_parallel_supplement_explicit_dependencies"):
            c = _stage(app, rank, later)
            assert c.verdict == Verdict.INCONCLUSIVE and c.message.startswith("not run")


def test_sound_stages_pass_and_the_clip_stage_restores_the_global_norm():
    app = _run("engine_pipeline_tp2_clip")
    for rank in (0, 1):
        clip = _stage(app, rank, "auto_parallel_grad_clip")
        norm = [c for c in clip.details["checks"] if c["name"] == "global norm"]
        assert norm and norm[0]["verdict"] == "EQUIVALENT"
        deps = _stage(app, rank, "auto_parallel_supplement_explicit_dependencies")
        assert deps.verdict == Verdict.EQUIVALENT
    # rank 0 keeps the bias: every stage before the CPU-less fused pass is clean
    assert _stage(app, 0, "auto_parallel_fused_linear_promotion").verdict == Verdict.EQUIVALENT
    assert _stage(app, 0, "fuse_gemm_epilogue").verdict == Verdict.PASS_CRASHED


def test_a_stage_deleting_a_writer_is_caught_at_that_stage():
    app = _run("engine_pipeline_tp2_clip", "deps_deletes_a_writer.py")
    for rank in (0, 1):
        clip = _stage(app, rank, "auto_parallel_grad_clip")
        assert clip.verdict in (Verdict.EQUIVALENT, Verdict.CONTRACT_BROKEN)  # as without it
        bad = _stage(app, rank, "auto_parallel_supplement_explicit_dependencies")
        assert bad.verdict == Verdict.NOT_EQUIVALENT
        cex = bad.counterexample
        assert cex["var"] == "sqrt_0.tmp_0" and cex["op_type"] == "elementwise_max"
        assert cex["rank"] == rank
        # the next stage inherits the broken read; it is not blamed for it
        assert _stage(app, rank, "fuse_gemm_epilogue").verdict == Verdict.PASS_CRASHED


def test_a_mutant_clip_stage_is_caught_by_the_global_norm_check():
    app = _run("engine_pipeline_tp2_clip", "grad_clip_every_rank_first.py")
    clip = _stage(app, 0, "auto_parallel_grad_clip")
    assert clip.verdict == Verdict.CONTRACT_BROKEN
    twice = {c["counterexample"]["var"] for c in clip.details["checks"]
             if c["name"] == "global norm" and c["verdict"] != "EQUIVALENT"}
    assert "layer_norm_0.w_0@GRAD" in twice
    # the promotion stage before it is unaffected
    assert _stage(app, 0, "auto_parallel_fused_linear_promotion").verdict == Verdict.EQUIVALENT


def test_pipeline_cases_pair_with_the_pipeline_only():
    for case in cases.all_cases().values():
        if case.family != "engine_pipeline":
            assert not passes.get("pipeline").handles(case)
            continue
        paired = [a.short for a in passes.adapters().values() if a.handles(case)]
        assert paired == ["pipeline"]


def test_the_dp_opt_stage_carries_its_contract():
    """The dp_opt stage is judged by its own contract too: the real pass keeps
    every grad synced once; a mutant that leaves one grad out of the fused
    sum is caught at that stage with the grad and the optimizer reading it."""
    def sync(app, rank):
        stage = _stage(app, rank, "auto_parallel_data_parallel_optimization")
        return [c for c in stage.details["checks"]
                if c["name"] == "each gradient synced once"]

    real = _run("engine_pipeline_dp2_clip")
    assert [c["verdict"] for c in sync(real, 0)] == ["EQUIVALENT"]
    bad = _run("engine_pipeline_dp2_clip", "dp_opt_one_grad_unsynced.py")
    (c,) = [c for c in sync(bad, 1) if c["verdict"] != "EQUIVALENT"]
    assert c["counterexample"]["var"] == "linear_1.b_0@GRAD"
    assert c["counterexample"]["op_type"] == "sgd" and c["counterexample"]["rank"] == 1


def test_a_mended_sp_pass_through_the_default_strategy_is_no_false_alarm():
    """engine_pipeline_sp_default with the sequence-parallel pass mended
    (tests/fixed_passes): the model has no clip, so the grad-clip stage's
    global-norm rule has nothing to speak of (it said "0 global-norm sqrt
    op(s) ..., not one"), and the case, like engine_sp, says gloo cannot run
    the reduce_scatter the mended pass makes (real ranks called it
    NOT_EQUIVALENT).  The application is judged on what the stages did."""

    case = cases.all_cases()["engine_pipeline_sp_default"]
    assert case.gloo_unfaithful  # the real ranks are not asked
    loaded = load_pass_file(os.path.join(ROOT, "tests", "fixed_passes",
                                         "sp_optimization_x_slot_mended.py"))
    try:
        app = run_application(passes.get("pipeline"), case, value=False)
    finally:
        loaded.restore()
    for rank in case.ranks:
        sp = _stage(app, rank, "auto_parallel_sequence_parallel_optimization")
        assert sp.verdict != Verdict.PASS_CRASHED, sp.message
        clip = _stage(app, rank, "auto_parallel_grad_clip")
        assert "global-norm" not in clip.message and clip.verdict == Verdict.EQUIVALENT, \
            clip.message
