"""Placement coverage of the planner relation (``verify/checks/placement_coverage.py``):
every value the relation compares is tiled exactly by the ranks' pieces,
else the relation could pass vacuously on what no rank holds.

* tiling on concrete placements: Shard pieces, replicas, partial addends,
  a 2-D mesh and process ids that are not 0..n-1 tile; a dropped value, a
  mesh naming a process that is no rank, a mesh coordinate whose rank holds
  nothing, a placement claiming the wrong mesh order (two ranks on one
  chunk) and a piece of the wrong shape do not;
* zero compared values is never a pass (coverage, the value proof, the
  numeric relation);
* a planner mutant (a remove stage that drops the sub-mesh's optimizer
  updates on every rank, applied as a user's changed Paddle module) is
  NOT_EQUIVALENT naming the value, the ranks and the stage; the faithful
  plan of the same case is tiled.
"""
from __future__ import annotations

import pytest

from verify.checks.placement_coverage import compared_values, coverage_checks, tiling_problems


def _p(ids, shape, dm, partial=None):
    return {"process_ids": ids, "mesh_shape": shape, "dims_mapping": dm,
            "partial": partial or {}}


def _why(problems):
    return [p["why"] for p in problems]


@pytest.mark.parametrize("shape,held,ranks", [
    ([4, 6], {0: (_p([0, 1], [2], [-1, 0]), [4, 3]), 1: (_p([0, 1], [2], [-1, 0]), [4, 3])},
     [0, 1]),
    ([4, 6], {2: (_p([2, 3], [2], [0, -1]), [2, 6]), 3: (_p([2, 3], [2], [0, -1]), [2, 6])},
     [2, 3]),
    ([4], {0: (_p([0, 1], [2], [-1]), [4]), 1: (_p([0, 1], [2], [-1]), [4])}, [0, 1]),
    ([], {r: (_p([0, 1, 2, 3], [2, 2], [], {"1": "SUM"}), None) for r in range(4)},
     [0, 1, 2, 3]),
    ([4, 8], {r: (_p([0, 1, 2, 3], [2, 2], [0, 1]), [2, 4]) for r in range(4)},
     [0, 1, 2, 3]),
    ([3], {0: (None, [3])}, [0, 1]),  # a dense value on one rank
    ([2], {2: (_p([2], [1], [-1]), [2])}, [2, 3]),  # a sub-mesh's value
])
def test_faithful_pieces_tile(shape, held, ranks):
    assert tiling_problems(shape, held, ranks) == ([], None)


def test_a_value_no_rank_holds_is_not_tiled():
    problems, _ = tiling_problems([4], {}, [0, 1])
    assert problems and "no rank of [0, 1] holds it" in problems[0]["why"]
    assert problems[0]["ranks"] == [0, 1]


def test_a_mesh_naming_a_process_that_is_no_rank_is_not_tiled():
    plc = _p([2, 5], [2], [0])  # the plan's ranks are 2 and 3: coordinate 1 is nobody's
    problems, _ = tiling_problems([4], {2: (plc, [2])}, [2, 3])
    why = _why(problems)
    assert any("coordinate [1] on process 5, no rank of the plan" in w for w in why), why
    assert any("2 of its 4 elements are in no rank's piece" in w for w in why), why


def test_a_mesh_coordinate_whose_rank_holds_nothing_is_not_tiled():
    plc = _p([0, 1], [2], [-1, 0])
    problems, _ = tiling_problems([4, 6], {0: (plc, [4, 3])}, [0, 1])
    assert any(p["ranks"] == [1] and "rank 1 (coordinate [1]" in p["why"] for p in problems)


def test_a_placement_claiming_the_wrong_mesh_order_is_not_tiled():
    """Rank 1 records the mesh [1, 0]: it claims chunk 0, as rank 0 does;
    chunk 1 is nobody's (and rank 0's piece is doubled, not replicated)."""
    held = {0: (_p([0, 1], [2], [0]), [2]), 1: (_p([1, 0], [2], [0]), [2])}
    problems, _ = tiling_problems([4], held, [0, 1])
    why = _why(problems)
    assert any("2 of its 4 elements are in no rank's piece (first: element [2])" in w
               for w in why), why


def test_overlapping_pieces_that_are_not_replicas_are_not_tiled():
    held = {0: (_p([0, 1], [2], [-1]), [4]), 1: (_p([0, 1], [2], [0]), [2])}
    problems, _ = tiling_problems([4], held, [0, 1])
    assert any("overlaps rank 0's without being a replica" in w for w in _why(problems))


def test_a_piece_of_another_shape_than_its_placement_names_is_not_tiled():
    held = {r: (_p([0, 1], [2], [0]), [4]) for r in (0, 1)}
    problems, _ = tiling_problems([4], held, [0, 1])
    assert any("holds a [4] piece, its placement [Shard(0)] names a [2] slice" in w
               for w in _why(problems))


def test_an_uneven_split_is_undecided_not_tiled():
    held = {r: (_p([0, 1], [2], [0]), None) for r in (0, 1)}
    problems, why = tiling_problems([5], held, [0, 1])
    assert why and "does not split evenly" in why


def _rel(params, loss="%1", plc=None):
    return {"parameters": {n: {"shape": [4], "dtype": "float32", "placement": plc}
                           for n in params},
            "params": {n: {"param": n, "grad": f"{n}@g", "shape": [4], "placement": plc,
                           "grad_placement": plc} for n in params},
            "feeds": {}, "loss": loss,
            "loss_placement": plc and {**plc, "dims_mapping": []}}


def test_the_compared_values_and_a_dropped_parameter():
    serial = _rel(["w", "b"])
    plc = _p([0, 1], [2], [-1])
    ranks = {0: _rel(["w"], plc=plc), 1: _rel(["w"], plc=plc)}
    labels = [lb for lb, *_ in compared_values(serial, ranks)]
    assert labels == ["parameter b", "parameter w", "b (after the step)", "b@GRAD",
                      "w (after the step)", "w@GRAD", "loss"]
    out = coverage_checks("planner on x", serial, ranks, [0, 1],
                          lambda key, ranks: f"stage-of-{key[1]}")
    assert [c.verdict.value for c in out] == ["NOT_EQUIVALENT"]
    cex = out[0].counterexample
    assert cex["value"] == "parameter b" and cex["ranks"] == [0, 1]
    assert cex["stage"] == "stage-of-b" and "stage blamed: stage-of-b" in out[0].message
    assert len(out[0].details["problems"]) == 3  # b, its update, its gradient
    ok = coverage_checks("planner on x", serial, {0: _rel(["w", "b"], plc=plc),
                                                  1: _rel(["w", "b"], plc=plc)}, [0, 1])
    assert ok[0].verdict.value == "EQUIVALENT"
    assert "1 loss, 2 parameters, 2 updates" in ok[0].message


def test_zero_compared_values_is_never_a_pass():
    from verify.ir.snapshot import ProgramSnapshot
    from verify.numeric.planner_runs import compare_runs
    from verify.value.relation import compared_text, prove_relation

    empty = {"parameters": {}, "params": {}, "feeds": {}, "loss": None,
             "loss_placement": None}
    assert coverage_checks("planner on x", empty, {0: empty}, [0])[0].verdict.value == \
        "INCONCLUSIVE"
    got = compare_runs("planner on x", empty, {0: empty}, {}, [{}], {0: [{}]}, 1)
    assert [c.verdict.value for c in got] == ["INCONCLUSIVE"], got[0].message
    snap = ProgramSnapshot(ops=[], vars={}, feeds=[])
    proof = prove_relation("planner on x", snap, {0: snap}, empty, {0: empty}, {}, {})
    assert [c.verdict.value for c in proof] == ["INCONCLUSIVE"], proof[0].message
    assert "no value compared" in proof[0].message
    assert compared_text(["loss", "w@GRAD", "w (after the step)", "lr (after the step)"]) \
        == "the loss, 1 gradient and 2 states after the step (4 values)"


def test_a_planner_dropping_the_sub_meshs_updates_is_not_tiled(monkeypatch):
    from test_planner import _apply

    app = _apply("planner_sub_mesh_ids23", ["remove_drops_sub_mesh_updates"], monkeypatch)
    cov = [c for c in app.checks if c.name == "placement coverage"]
    assert [c.verdict.value for c in cov] == ["NOT_EQUIVALENT"], [c.message for c in cov]
    cex = cov[0].counterexample
    assert cex["stage"] == "remove" and cex["ranks"] == [2, 3], cex
    assert cex["value"].startswith("linear_1."), cex  # the head's, on the sub-mesh [2]
    assert app.verdict.value == "NOT_EQUIVALENT"


def test_the_faithful_plan_of_that_case_is_tiled():
    from test_planner import _apply

    app = _apply("planner_sub_mesh_ids23")
    cov = [c for c in app.checks if c.name == "placement coverage"]
    assert [c.verdict.value for c in cov] == ["EQUIVALENT"], [c.message for c in cov]
