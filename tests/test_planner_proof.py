"""The value proof of the planner relation (``verify/value/relation.py``): the
serial program against every rank's final program through placements, for
all inputs, at the real shapes.

* the state a program leaves follows the in-place writes (an optimizer's
  outputs, ``assign_out_`` of a sharded optimizer's gathered update);
* a faithful plan is PROVED on every rank (the application "proved");
* planner mutants (applied as a user's changed Paddle module, the same files
  as ``tests/test_planner.py``) are REFUTED by the proof with a replayed
  counterexample naming the rank, the value and the stage: the partition
  mutant is of a class the proof was not written for (a missing reshard,
  not a reshard function's wrong piece).

Plans are cached (``cases/planner_models.py``); the proofs are memoized in
the plan dir keyed by the proof's modules (``passes/planner.py``).
"""
from __future__ import annotations

import pytest

from test_planner import _apply  # noqa: E402


def _proofs(app):
    return [c for c in app.checks if c.name == "planner relation proof"]


def test_final_states_follow_in_place_writes():
    from verify.ir.snapshot import Op, ProgramSnapshot
    from verify.value.relation import final_states

    ops = [Op(0, "pd_op.slice", {"input": ["w"]}, {"out": ["s"]}, {}),
           Op(1, "pd_op.adamw_", {"param": ["s"], "moment1": ["m"]},
              {"param_out": ["s2"], "moment1_out": ["m2"]}, {}),
           Op(2, "pd_op.all_gather", {"x": ["s2"]}, {"out": ["g"]}, {}),
           Op(3, "pd_op.assign_out_", {"x": ["g"], "output": ["w"]}, {"out": ["w2"]}, {}),
           Op(4, "pd_op.sgd_", {"param": ["b"], "grad": ["gb"]}, {"param_out": ["b2"]}, {})]
    snap = ProgramSnapshot(ops=ops, vars={}, feeds=[])
    assert final_states(snap, {"w", "m", "b", "lr"}) == {"w": "w2", "m": "m2", "b": "b2",
                                                        "lr": "lr"}


def test_a_faithful_plan_is_proved_on_every_rank():
    app = _apply("planner_tp2")
    proofs = _proofs(app)
    assert app.verdict.value == "EQUIVALENT"
    assert len(proofs) == 2 and all(c.verdict.value == "EQUIVALENT" for c in proofs), \
        [c.message for c in proofs]
    assert app.proof == "proved"
    assert "loss" in proofs[0].details["proved"]


def test_a_plan_with_swiglu_is_proved_and_shape_checked():
    """examples/planner_fused_ffn_qkv.py (the fused gate|up projection into
    ``pd_op.swiglu`` without y, its grad ``pd_op.swiglu_grad``): every stage's
    program has a shape rule for every op, and the relation is PROVED on both
    ranks (the swiglu rows: ``tests/test_kernel_differential.py``)."""
    app = _apply("planner_dp2_fused_ffn_qkv")
    proofs = _proofs(app)
    assert app.verdict.value == "EQUIVALENT" and app.proof == "proved", \
        [c.message for c in proofs]
    assert len(proofs) == 2 and all(c.verdict.value == "EQUIVALENT" for c in proofs)
    text = " ".join(c.message for c in app.checks)
    assert "no shape rule" not in text and "no semantics row" not in text


def _refuted(app):
    bad = [c for c in _proofs(app) if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in _proofs(app)]
    cex = bad[0].counterexample
    assert cex["rank"] == bad[0].rank and cex["value"] and cex["replayed"]
    assert cex["feed"], "the refutation names no inputs"  # global arrays a user can feed
    return cex


def test_a_partition_that_reads_a_partial_operand_is_refuted(monkeypatch):
    """Not a reshard function's wrong piece (what the proof was written
    against): partition forgets the reshard of a Partial operand."""
    app = _apply("planner_tp2", ["partition_keeps_partial"], monkeypatch)
    cex = _refuted(app)
    assert cex["stage"] == "partition", cex.get("first_divergence")


@pytest.mark.parametrize("case_name,mutant,op_type", [
    ("planned_row_sp_pir", "s_to_r_reversed", "pd_op.concat"),
    ("planned_row_sp_pir", "r_to_s_neighbour", "pd_op.slice"),
    ("planner_dp2_tp2", "p_to_r_world", "pd_op.all_reduce"),
])
def test_a_reshard_making_the_wrong_piece_is_refuted(monkeypatch, case_name, mutant,
                                                     op_type):
    app = _apply(case_name, [mutant], monkeypatch)
    cex = _refuted(app)
    assert cex["stage"] == "reshard", cex.get("first_divergence")
    assert cex["first_divergence"]["stage_op"]["op_type"].startswith(op_type)


def test_a_plan_over_the_proofs_size_is_inconclusive_not_proved():
    """Past the input size the proof is not attempted: INCONCLUSIVE saying
    so on every rank, never a proof (the application is then "witnessed")."""
    from verify.value.relation import prove_relation

    rel = {"parameters": {"w": {"shape": [64, 64], "dtype": "float32"}}, "feeds": {}}
    out = prove_relation("planner on x", None, {0: None, 1: None}, rel, {}, {}, {},
                         max_inputs=4095, by_segments=False)
    assert [c.verdict.value for c in out] == ["INCONCLUSIVE"] * 2
    assert all("not attempted" in c.message and "4096 elements" in c.message for c in out)


def test_a_plan_the_proof_cannot_decide_is_witnessed_not_proved():
    """The sequence-parallel plan: its loss (a Partial(AVG) of each rank's
    mean over its sequence piece) is not decided within the proof's budget:
    the proof is INCONCLUSIVE and advisory, the numeric relation decides."""
    app = _apply("planned_row_sp_pir")
    assert app.verdict.value == "EQUIVALENT"
    proofs = _proofs(app)
    undecided = [c for c in proofs if c.verdict.value != "EQUIVALENT"]
    assert all(c.advisory for c in undecided)
    assert app.proof == ("witnessed" if undecided else "proved")


def test_s_to_s_all_to_all_is_proved_where_dim_0_is_a_side_and_refuted_between_two():
    """``pd_op.all_to_all`` (no CPU kernel in 3.3.1; the proof exchanges by the
    GPU kernel's definition): 3.3.1's s_to_s from Shard(1) to Shard(0) (its
    gradient back) is PROVED on both ranks with the all_to_all in each rank's
    program; from Shard(1) to Shard(2) both of the function's branches run
    and each rank's loss is refuted with a replayed counterexample naming the
    rank, the value and the reshard stage."""
    app = _apply("planner_gen_s_to_s_dim0")
    proofs = _proofs(app)
    assert app.proof == "proved" and len(proofs) == 2 and all(
        c.verdict.value == "EQUIVALENT" for c in proofs), [c.message for c in proofs]
    text = " ".join(c.message for c in app.checks)
    assert "no shape rule" not in text and "no semantics row" not in text
    bad = _apply("planner_gen_s_to_s")
    assert bad.verdict.value == "NOT_EQUIVALENT"
    cex = _refuted(bad)
    assert cex["value"] == "loss" and cex["stage"] == "reshard"
    assert {c.rank for c in _proofs(bad) if c.verdict.value == "NOT_EQUIVALENT"} == {0, 1}
