"""A startup program that writes a parameter at its global shape while the
rank's main program reads its piece (Paddle's planner leaves the startup
unresharded): the value proof and the PIR numeric inputs take the piece the
placements name, on both programs alike; a rewrite that takes another piece
is caught naming rank and var; where no placement says which piece, the
check is INCONCLUSIVE naming rank, var and both shapes.

Two ranks of a hand-built PIR snapshot (no Paddle needed for the proof):
startup ``w = uniform([4, 8])`` with a dist attr ``Shard(1)`` over ranks
[0, 1] (local [4, 4]); main ``y = matmul(x [2, 4], w [4, 4])``."""
from __future__ import annotations

import numpy as np
import pytest

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.numeric import startup_pieces as sp
from verify.numeric.inputs import param_value
from verify.value.proof import prove_application
from verify.verdicts import Verdict

SHARD1 = ("mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,0], "
          "placements:[Shard(dim=1)]")


def _startup(rank, slice_cols=None, placeholder=False):
    """The startup ops; ``slice_cols``: a (start, end) column slice taken in
    the startup itself (a startup that writes the rank's piece);
    ``placeholder``: the planner's ``pd_op.full`` 0.0 instead of a draw."""
    ops = [Op(0, "pd_op.full", {}, {"out": ["startup%0"]},
              {"shape": [4, 8], "value": 0.0, "dtype": "float32"}) if placeholder else
           Op(0, "pd_op.uniform", {}, {"out": ["startup%0"]},
              {"shape": [4, 8], "min@value": -1.0, "max@value": 1.0, "seed": 0,
               "dtype": "float32"})]
    src = "startup%0"
    if slice_cols is not None:
        ops.append(Op(1, "pd_op.slice", {"input": ["startup%0"]}, {"out": ["startup%1"]},
                      {"axes": [1], "starts@value": [slice_cols[0]],
                       "ends@value": [slice_cols[1]], "decrease_axis": [],
                       "infer_flags": [1]}))
        src = "startup%1"
    ops.append(Op(len(ops), "builtin.set_parameter", {"operands": [src]},
                  {"parameter": ["w"]}, {"parameter_name": "w"}))
    return ops


def _snap(rank, slice_cols=None, dist=SHARD1, placements=None, placeholder=False,
          doubled=None):
    vars_ = {"w": Var("w", [4, 4], "float32", persistable=True, is_parameter=True),
             "x": Var("x", [2, 4], "float32", is_data=True),
             "y": Var("y", [2, 4], "float32"),
             "startup%0": Var("startup%0", [4, 8], "float32", persistable=True)}
    if slice_cols is not None:
        vars_["startup%1"] = Var("startup%1", [4, 4], "float32", persistable=True)
    meta = {"ir": "pir", "rank": rank}
    if dist and slice_cols is None:
        meta["dist_values"] = {"startup%0": {"dist_attr": dist, "local_shape": [4, 4]}}
    if placements:
        meta["placements"] = placements
    ops = [Op(0, "builtin.parameter", {}, {"results": ["w"]}, {"parameter_name": "w"}),
           Op(1, "pd_op.data", {}, {"out": ["x"]}, {"name": "x"})]
    weight = "w"
    if doubled is not None:  # a rewrite that scales the weight it multiplies by
        ops.append(Op(2, "pd_op.scale", {"x": ["w"]}, {"out": ["w2"]},
                      {"scale@value": doubled, "bias": 0.0, "bias_after_scale": True}))
        vars_["w2"] = Var("w2", [4, 4], "float32")
        weight = "w2"
    ops.append(Op(len(ops), "pd_op.matmul", {"x": ["x"], "y": [weight]}, {"out": ["y"]},
                  {"transpose_x": False, "transpose_y": False}))
    return ProgramSnapshot(ops=ops, vars=vars_,
                           startup_ops=_startup(rank, slice_cols, placeholder),
                           feeds=["x"], meta=meta)


def _prove(befores, afters):
    return prove_application("startup_pieces", [0, 1], {}, befores, afters,
                             {0: ["y"], 1: ["y"]}, feed_key=lambda r, n: "dp0",
                             sizes=(None,))


def test_take_by_dist_attr_by_recorded_placement_or_unresolved():
    """Concrete values: the startup value's dist attr gives the global
    value's column halves; a recorded placement over a 2 x 2 mesh gives a
    piece of a coarser piece (a moment written at the TP piece, split over
    dp too); nothing recorded raises naming rank, var and both shapes."""
    g = np.arange(32).reshape(4, 8)
    e = sp.spec(_snap(0))["w"]
    assert e["written"] == [4, 8] and e["main"] == [4, 4]
    assert sp.parse_dist_attr(SHARD1)["dims_mapping"] == [-1, 0]
    np.testing.assert_array_equal(sp.take(e, 0, "w", g), g[:, :4])
    np.testing.assert_array_equal(sp.take(e, 1, "w", g), g[:, 4:])
    p = sp.parse_dist_attr("mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1], "
                           "partial(0,SUM), placements:[Partial(reduce_type=SUM), Shard(dim=1)]")
    assert p["partial"] == {"0": "SUM"} and p["mesh_shape"] == [2, 2]
    moment = {"main": [2, 4], "written": [4, 4], "source": "s",
              "placement": {"process_ids": [0, 1, 2, 3], "mesh_shape": [2, 2],
                            "dims_mapping": [0, 1], "partial": {}}}
    tp_piece = g[:, 4:]  # rank 3 is tp 1: the TP piece the startup writes
    np.testing.assert_array_equal(sp.take(moment, 3, "m", tp_piece), tp_piece[2:, :])
    bare = sp.spec(_snap(0, dist=None))["w"]
    with pytest.raises(sp.Unresolved) as info:
        sp.take(bare, 1, "w", g)
    msg = str(info.value)
    assert "rank 1" in msg and "w" in msg and "[4, 8]" in msg and "[4, 4]" in msg


def test_value_proof_takes_the_rank_piece_and_catches_the_wrong_one():
    """The original (global init, piece by dist attr) against a rewrite whose
    startup writes each rank's piece itself: PROVED on both ranks; a rewrite
    that gives rank 1 rank 0's columns: REFUTED on rank 1, naming y or w;
    rank 0 still proved."""
    orig = {0: _snap(0), 1: _snap(1)}
    faithful = {0: _snap(0, (0, 4)), 1: _snap(1, (4, 8))}
    res = _prove(orig, faithful)
    assert [r.verdict for r in res] == [Verdict.EQUIVALENT] * 2, [r.message for r in res]
    broken = {0: _snap(0, (0, 4)), 1: _snap(1, (0, 4))}
    res = {r.rank: r for r in _prove(orig, broken)}
    assert res[0].verdict == Verdict.EQUIVALENT, res[0].message
    assert res[1].verdict == Verdict.NOT_EQUIVALENT, res[1].message
    assert res[1].counterexample["rank"] == 1 and res[1].counterexample["var"] in ("y", "w")


def test_value_proof_is_inconclusive_where_no_placement_says_which_piece():
    """No dist attr on the startup value, nothing recorded: INCONCLUSIVE on
    every rank, naming rank, var and both shapes (never a reshape, never
    EQUIVALENT); the planner's recorded placement resolves it."""
    orig = {r: _snap(r, dist=None) for r in (0, 1)}
    faithful = {0: _snap(0, (0, 4)), 1: _snap(1, (4, 8))}
    res = _prove(orig, faithful)
    assert all(r.verdict == Verdict.INCONCLUSIVE for r in res), [r.message for r in res]
    assert all("w at [4, 8]" in r.message and "[4, 4]" in r.message and "rank 0" in r.message
               for r in res)
    recorded = {"w": {"process_ids": [0, 1], "mesh_shape": [2], "dims_mapping": [-1, 0],
                      "partial": {}}}
    orig = {r: _snap(r, dist=None, placements=recorded) for r in (0, 1)}
    assert [r.verdict for r in _prove(orig, faithful)] == [Verdict.EQUIVALENT] * 2


class _Rp:
    feeds = []


def test_numeric_inputs_draw_the_global_value_and_take_each_rank_piece():
    """The PIR runners' parameters: one global draw (the shape the startup
    writes), each rank its piece by the placement; a rewrite whose dist attr
    names another rank order gives rank 0 the other half (the numeric runs
    then differ); unresolvable: ``Unresolved`` naming rank and var."""
    from verify.numeric.pir_runner import rank_inputs

    whole = param_value(3, "w", [4, 8], "float32")
    got = {r: rank_inputs(None, r, _Rp(), _snap(r), 3, 1)[0]["w"] for r in (0, 1)}
    np.testing.assert_array_equal(np.concatenate([got[0], got[1]], axis=1), whole)
    swapped = SHARD1.replace("process_ids:[0,1]", "process_ids:[1,0]")
    other = rank_inputs(None, 0, _Rp(), _snap(0, dist=swapped), 3, 1, _snap(0))[0]["w"]
    np.testing.assert_array_equal(other, got[1])
    with pytest.raises(sp.Unresolved, match=r"rank 1: .*w at \[4, 8\]"):
        rank_inputs(None, 1, _Rp(), _snap(1, dist=None), 3, 1)


def test_a_state_written_coarser_is_cut_in_the_real_scope():
    """A non-parameter state the startup wrote at the TP piece (a sharded
    optimizer's moment) is replaced in Paddle's scope by the rank's piece."""
    import paddle

    entry = {"main": [2, 4], "written": [4, 4], "source": "s",
             "placement": {"process_ids": [0, 1, 2, 3], "mesh_shape": [2, 2],
                           "dims_mapping": [0, 1], "partial": {}}}
    scope, place = paddle.static.Scope(), paddle.CPUPlace()
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    scope.var("m").get_tensor().set(value, place)
    sp.set_startup_states(scope, {"m": entry}, 2, place)  # rank 2: dp 1, tp 0
    np.testing.assert_array_equal(np.array(scope.find_var("m").get_tensor()), value[2:, :])


def test_a_planner_placeholder_parameter_is_an_input_not_zero():
    """The planner writes each parameter as ``pd_op.full`` 0.0 with its dist
    type (the real values come at run time): the proof takes it as an input,
    so a rewrite doubling the weight is refuted on every rank (over the
    constant it would be 0 == 0, a false proof); one scaling it by 1 proves."""
    orig = {r: _snap(r, placeholder=True) for r in (0, 1)}
    same = {r: _snap(r, placeholder=True, doubled=1.0) for r in (0, 1)}  # x @ (1 * w)
    assert [r.verdict for r in _prove(orig, same)] == [Verdict.EQUIVALENT] * 2
    doubled = {r: _snap(r, placeholder=True, doubled=2.0) for r in (0, 1)}
    res = _prove(orig, doubled)
    assert [r.verdict for r in res] == [Verdict.NOT_EQUIVALENT] * 2, [r.message for r in res]
    assert {r.counterexample["var"] for r in res} == {"y"}
