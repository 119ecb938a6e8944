"""A gradient whose terms cancel, on a real plan: ``verify generate`` seed 0,
plan 182 (an MLP, two linears and an attention on a 1-D mesh of 2, all
replicated but the MLP's down projection).  The attention's softmax saturates,
so its q and k weight gradients are ~1e-9 where the others are ~1e-3; their
float32 rounding is that of the cancelled terms, 20 times the old floor
``rtol * rms(gradient)``: the relation was a false NOT_EQUIVALENT while the
value proof held.  With the floor measured by the serial program's float64 run
(``verify/numeric/float64_reference.py``, ``compare.py``) the plan relates,
and the same gradient 1% or 2x off on the ranks is still refuted.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

SPEC = {"batch": 4, "blocks": [
    {"down": ["S0"], "ffn": 4, "kind": "mlp", "up": ["R"], "up_bias": ["R"]},
    {"bias": None, "kind": "linear", "out": 8, "relu": True, "weight": ["R"]},
    {"bias": ["S0"], "kind": "linear", "out": 8, "relu": True, "weight": ["R"]},
    {"k": ["R"], "kind": "attention", "o": ["R"], "q": ["R"], "v": ["R"]}],
    "gradient_merge": None, "hidden": 5, "index": 182, "mesh": [0, 1], "mesh_dims": ["mp"],
    "optimizer": "sgd", "pipeline": None, "seed": 0, "seq": 4, "shard_optimizer": 0,
    "version": 1}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from passes.planner import ADAPTER, planner_dir
    from verify.engine.application import run_application
    from verify.generate.run import make_case, write_plan

    case = make_case(write_plan(SPEC, tmp_path_factory.mktemp("plan") / "cancelled"), SPEC,
                     "cancelled_gradient", trace=False)
    return case, run_application(ADAPTER, case, numeric=lambda *a: []), planner_dir(case)


def test_the_plan_relates_with_the_measured_floor(plan):
    _, app, _ = plan
    rel = [c for c in app.checks if c.name == "planner relation"]
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    assert len(rel) == 2 and all(c.details["measured"] == c.details["compared"] for c in rel)


def test_the_old_floor_refutes_it_and_a_real_defect_of_that_gradient_is_refuted(plan):
    from passes.planner import STEPS, _run_memo
    from verify.numeric import planner_runs
    from verify.numeric.compare import compare
    from verify.numeric.float64_reference import SUFFIX

    case, _, folder = plan
    runs = _run_memo(folder, case.ranks, 0, STEPS).load()
    if runs is None:
        pytest.skip("the relation's runs were not memoized (VERIFY_PLANNER_RUN_MEMO=0)")
    serial_out, rank_outs = runs
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    serial_rel = records[0]["serial_relation"]
    rank_rels = {r: records[r]["relation"] for r in case.ranks}
    depth = planner_runs._depth(serial_rel, len(case.ranks), STEPS)

    def judge(s_out, r_out):
        return {c.rank: c for c in planner_runs.compare_runs(
            "t", serial_rel, rank_rels, {}, s_out, r_out, STEPS)}

    # the cancelled gradient: of the replicated ones, the furthest outside the old floor
    def replicated(p):
        plc = rank_rels[0]["params"][p]["grad_placement"]
        return not plc["partial"] and set(plc["dims_mapping"]) == {-1}

    def excess(p):
        s, g = serial_rel["params"][p]["grad"], rank_rels[0]["params"][p]["grad"]
        d = compare(p, 0, serial_out[0][s], rank_outs[0][0][g], depth)
        return d.max_abs / d.tol
    worst = max(filter(replicated, serial_rel["params"]), key=excess)
    assert excess(worst) > 5, excess(worst)
    grad = serial_out[0][serial_rel["params"][worst]["grad"]]
    others = [np.abs(serial_out[0][v["grad"]]).max() for v in serial_rel["params"].values()]
    assert np.abs(grad).max() < 1e-3 * max(others)  # tiny beside its neighbours
    # without the measurement (the old floor): refuted on that gradient
    unmeasured = [{n: v for n, v in step.items() if not n.endswith(SUFFIX)}
                  for step in serial_out]
    old = judge(unmeasured, rank_outs)
    assert {c.verdict.value for c in old.values()} == {"NOT_EQUIVALENT"}
    outside = {f"{p}@GRAD" for p in filter(replicated, serial_rel["params"]) if excess(p) > 1}
    assert {c.counterexample["value"] for c in old.values()} <= outside  # the q and k weights
    assert {c.verdict.value for c in judge(serial_out, rank_outs).values()} == {"EQUIVALENT"}
    for factor in (1.01, 2.0):  # that gradient off on every rank: refuted on it
        broken = {r: [dict(step) for step in outs] for r, outs in rank_outs.items()}
        for r, outs in broken.items():
            g = rank_rels[r]["params"][worst]["grad"]
            for step in outs:
                step[g] = (np.asarray(step[g]) * np.float32(factor)).astype(np.float32)
        got = judge(serial_out, broken)
        assert {c.verdict.value for c in got.values()} == {"NOT_EQUIVALENT"}, factor
        assert {c.counterexample["value"] for c in got.values()} == {f"{worst}@GRAD"}
