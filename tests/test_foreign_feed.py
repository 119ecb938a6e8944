"""A feed placed on a sub-mesh without the rank (a generated model whose first
block moves the input onto the sub-mesh of process 0: Paddle keeps the
``pd_op.data`` on rank 1, typed on the mesh [0], and reads it nowhere).

* placement coverage: rank 1 holds no piece of it (Paddle's dist tensor
  outside its mesh); rank 0's whole piece tiles it.  The twins: the same feed
  that no rank in its mesh holds is still not tiled, and a persistable state
  so placed is still a problem;
* the numeric relation's inputs: rank 1 is fed a poison of its recorded shape
  (NaN; the least integer for ids), so a read of it shows;
* the numeric relation: a rank holding no parameter whose loss relates is
  EQUIVALENT for its loss; a wrong loss there is still refuted, and a rank
  with neither loss nor parameters stays INCONCLUSIVE.
"""
from __future__ import annotations

import numpy as np

from verify.checks.placement_coverage import coverage_checks, tiling_problems
from verify.numeric.placements import feed_piece, holds


def _p(ids, shape, dm, partial=None):
    return {"process_ids": ids, "mesh_shape": shape, "dims_mapping": dm,
            "partial": partial or {}}


SUB = _p([0], [1], [-1, -1])  # the sub-mesh of process 0, replicated
FULL = _p([0, 1], [2], [])


def _rel(feed_plc, params=(), persistable=False, loss="loss"):
    plc = _p([0], [1], [-1])
    return {"parameters": {n: {"shape": [4], "dtype": "float32", "placement": plc}
                           for n in params},
            "params": {n: {"param": n, "grad": f"{n}@g", "shape": [4], "placement": plc,
                           "grad_placement": plc} for n in params},
            "feeds": {"x": {"shape": [2, 4], "dtype": "float32", "placement": feed_plc,
                            "persistable": persistable}},
            "loss": loss, "loss_placement": FULL if feed_plc else None}


def test_a_feed_on_a_mesh_without_the_rank_is_held_by_the_ranks_of_its_mesh():
    serial = _rel(None, ["w"])
    ranks = {0: _rel(SUB, ["w"]), 1: _rel(SUB)}
    out = coverage_checks("planner on x", serial, ranks, [0, 1])
    assert [c.verdict.value for c in out] == ["EQUIVALENT"], out[0].message


def test_that_feed_held_by_no_rank_of_its_mesh_is_not_tiled():
    serial = _rel(None, ["w"])
    ranks = {0: _rel(None, ["w"]), 1: _rel(SUB)}
    ranks[0]["feeds"] = {}  # rank 0 dropped it: only rank 1, outside the mesh, has it
    out = coverage_checks("planner on x", serial, ranks, [0, 1])
    assert out[0].verdict.value == "NOT_EQUIVALENT"
    assert out[0].counterexample["value"] == "feed x"
    assert "no rank of [0, 1] holds it" in out[0].message


def test_a_state_on_a_mesh_without_the_rank_is_still_a_problem():
    serial = _rel(None, ["w"], persistable=True)
    ranks = {0: _rel(SUB, ["w"], persistable=True), 1: _rel(SUB, persistable=True)}
    out = coverage_checks("planner on x", serial, ranks, [0, 1])
    assert out[0].verdict.value == "NOT_EQUIVALENT"
    assert "which does not hold rank 1" in out[0].message
    # the rule itself is unchanged for any value held by a rank outside its mesh
    problems, _ = tiling_problems([2, 4], {1: (SUB, [2, 4])}, [0, 1])
    assert any("does not hold rank 1" in p["why"] for p in problems)


def test_a_rank_outside_a_feeds_mesh_is_fed_a_poison():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert holds(SUB, 0) and not holds(SUB, 1) and holds(None, 1)
    np.testing.assert_array_equal(feed_piece(x, SUB, 0, [2, 4], "float32"), x)
    bad = feed_piece(x, SUB, 1, [2, 4], "float32")
    assert bad.shape == (2, 4) and np.isnan(bad).all()
    ids = feed_piece(np.zeros((2, 3), np.int64), SUB, 1, [2, 3], "int64")
    assert ids.dtype == np.int64 and (ids == np.iinfo(np.int64).min).all()


def test_the_relation_inputs_feed_the_poison():
    from verify.numeric.planner_runs import relation_inputs

    serial = _rel(None, ["w"])
    _, sfeeds, ranks = relation_inputs(serial, {0: _rel(SUB, ["w"]), 1: _rel(SUB)}, 0, 1)
    np.testing.assert_array_equal(ranks[0][1][0]["x"], sfeeds[0]["x"])
    assert np.isnan(ranks[1][1][0]["x"]).all()


def _compare(rank1_loss, rank1_has_loss=True):
    from verify.numeric.planner_runs import compare_runs

    serial = _rel(None, ["w"])
    ranks = {0: _rel(SUB, ["w"]), 1: _rel(SUB, loss="loss" if rank1_has_loss else None)}
    w = np.arange(4, dtype=np.float32)
    sout = [{"loss": np.float32(1.5), "w": w, "w@g": w + 1}]
    routs = {0: [{"loss": np.float32(1.5), "w": w, "w@g": w + 1}],
             1: [{"loss": np.float32(rank1_loss)}]}
    return {c.rank: c for c in compare_runs("planner on x", serial, ranks, {}, sout, routs, 1)}


def test_a_rank_holding_no_parameter_relates_its_loss():
    got = _compare(1.5)
    assert got[0].verdict.value == "EQUIVALENT"
    assert got[1].verdict.value == "EQUIVALENT", got[1].message
    assert "holds none of the serial program's 1 parameters" in got[1].message


def test_its_wrong_loss_is_refuted_and_no_loss_no_parameter_stays_inconclusive():
    got = _compare(1.25)
    assert got[1].verdict.value == "NOT_EQUIVALENT"
    assert got[1].counterexample["value"] == "loss"
    got = _compare(1.5, rank1_has_loss=False)
    assert got[1].verdict.value == "INCONCLUSIVE"
    assert "updates none of the serial program's parameters" in got[1].message


def _partial_loss(rank1_loss):
    """Rank 0's loss is ``%12``, rank 1's ``%11`` (their programs differ); rank
    1 also has an unrelated ``%12`` of another shape.  Partial(AVG) losses."""
    from verify.numeric.planner_runs import compare_runs

    plc = _p([0, 1], [2], [], {"0": "AVG"})
    serial = {**_rel(None), "loss": "loss"}
    ranks = {0: {**_rel(SUB), "loss": "%12", "loss_placement": plc},
             1: {**_rel(SUB), "loss": "%11", "loss_placement": plc}}
    sout = [{"loss": np.float32(1.5)}]
    routs = {0: [{"%12": np.float32(1.0)}],
             1: [{"%11": np.float32(rank1_loss), "%12": np.zeros([4, 3], np.float32)}]}
    return {c.rank: c for c in compare_runs("planner on x", serial, ranks, {}, sout, routs, 1)}


def test_a_partial_loss_is_assembled_from_each_ranks_own_loss():
    got = _partial_loss(2.0)  # (1.0 + 2.0) / 2 = 1.5
    assert [got[r].verdict.value for r in (0, 1)] == ["EQUIVALENT", "EQUIVALENT"], \
        [got[r].message for r in (0, 1)]
    got = _partial_loss(2.5)  # the twin: rank 1's own loss is wrong
    assert [got[r].verdict.value for r in (0, 1)] == ["NOT_EQUIVALENT", "NOT_EQUIVALENT"]


def test_peer_view_names_a_peers_values_by_label():
    from verify.numeric.peer_names import peer_view

    r0 = {"loss": "%12", "params": {"w": {"grad": "%3", "param": "w"}}}
    r1 = {"loss": "%11", "params": {}}
    view = peer_view({"%11": 1, "%12": 2, "%3": 3, "%11@micro0": 4}, r1, r0)
    assert view["%12"] == 1 and view["%12@micro0"] == 4
    assert "%3" not in view  # rank 1 has no gradient of w: not its unrelated %3
