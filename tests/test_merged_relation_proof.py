"""The value proof of a gradient-merge plan's job schedule
(``verify/value/merged_relation.py``): each rank's program run as
``[forward, backward] * k + [optimize]`` against the serial program's k
micro-steps, for all inputs, at the real shapes.

The faithful plans (``planner_tp2_gm``: TP2, avg; ``planner_dp2_gm_sum``:
DP2, summed) are proved on every rank; broken merges fed as the rank
programs are refuted with a counterexample naming rank, value, element and
the stage blamed: the 1/k scale left out (the optimizer reads the sum where
the strategy asks for the mean), and the accumulators never zeroed (each is
not back at its start value after the step, so a second optimizer step is
run: it merges the first step's gradients again).  The mutants are edits of
the planned rank programs (the planner's records and serial program kept),
so each test costs one cached plan, not a re-plan.
"""
from __future__ import annotations

import json

import pytest

import cases
from passes.planner import _relation_snapshots, planner_dir
from verify.ir.snapshot import Op
from verify.value.merged_relation import prove_merged_relation


def _plan(name):
    case = cases.all_cases()[name]
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    serial, snaps = _relation_snapshots(folder, case.ranks, case.ranks[0])
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    return case, records, serial, snaps, rings


def _prove(name, edit=None):
    case, records, serial, snaps, rings = _plan(name)
    if edit is not None:
        snaps = {r: s.with_ops(edit(list(s.ops))) for r, s in snaps.items()}
    gm = records[case.ranks[0]]["gradient_merge"]
    return gm, prove_merged_relation(
        f"planner on {name}", serial, snaps, records[case.ranks[0]]["serial_relation"],
        {r: records[r]["relation"] for r in case.ranks},
        {r: records[r].get("final_ops", []) for r in case.ranks}, rings,
        int(gm["k_steps"]), bool(gm["avg"]))


def _optimize(op):
    return op.role == 2


def _scaled_by_one(ops):
    """The merge's scale (an Optimize op scaling what the optimizer reads)
    made 1: its constant operand and the constant the snapshot records."""
    scales = {o.inputs["scale"][0] for o in ops
              if o.type == "pd_op.scale_" and _optimize(o) and o.inputs.get("scale")}
    out = []
    for o in ops:
        if o.type == "pd_op.full" and o.outputs["out"][0] in scales:
            o = Op(o.idx, o.type, o.inputs, o.outputs, {**o.attrs, "value": 1.0}, o.role,
                   o.stream)
        elif o.type == "pd_op.scale_" and _optimize(o):
            o = Op(o.idx, o.type, o.inputs, o.outputs, {**o.attrs, "scale@value": 1.0},
                   o.role, o.stream)
        out.append(o)
    return out


def _never_zeroed(ops):
    """The Optimize ops that write a constant into an accumulator dropped."""
    return [o for o in ops if not (_optimize(o) and o.type == "pd_op.set_value_with_tensor_")]


@pytest.mark.parametrize("name", ["planner_tp2_gm", "planner_dp2_gm_sum"])
def test_a_faithful_merged_plan_is_proved(name):
    gm, out = _prove(name)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * len(out), \
        [c.message for c in out]
    for c in out:
        k = gm["k_steps"]
        assert f"[forward, backward] * {k} + [optimize]" in c.message
        assert "PROVED at the real shapes" in c.message and "for every optimizer step" in \
            c.message
        proved = c.details["proved"]
        assert {f"loss (micro-step {i + 1})" for i in range(k)} <= set(proved)
        assert any(lb.endswith("@GRAD") for lb in proved)
        assert any("back to its start value" in lb for lb in proved)
        assert not c.details["unknown"] and not c.details.get("not_proved")


def test_a_merge_without_the_average_scale_is_refuted():
    _, out = _prove("planner_tp2_gm", _scaled_by_one)
    assert all(c.verdict.value == "NOT_EQUIVALENT" for c in out), [c.message for c in out]
    for c in out:
        cex = c.counterexample
        assert cex["rank"] == c.rank and cex["value"].endswith("@GRAD"), cex
        assert cex["stage"] == "gradient_merge" and cex["replayed"], cex
        assert cex["inputs"] and "element" in cex
        # the rank's optimizer reads twice the serial mean (k = 2)
        from fractions import Fraction

        assert Fraction(cex["rank_piece_value"]) == 2 * Fraction(cex["serial_value"])


def test_accumulators_never_zeroed_are_refuted_at_the_second_step():
    _, out = _prove("planner_tp2_gm", _never_zeroed)
    assert all(c.verdict.value == "NOT_EQUIVALENT" for c in out), [c.message for c in out]
    for c in out:
        cex = c.counterexample
        assert cex["rank"] == c.rank and cex["value"].endswith("(step 2)"), cex
        assert "@GRAD" in cex["value"] and cex["stage"] == "gradient_merge", cex
        assert any("@GRAD@MERGE" in lb for lb in c.details["rank_only_not_back"])
