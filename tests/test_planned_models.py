"""The planned-models family (``cases/planned_models.py``): plans of the
example model files, cached by model source + params + planner, checked
against what each case states; and the DP x TP finding it records (the
promotion pass keys its pattern on the mesh, not on the program)."""
from __future__ import annotations

import dataclasses
import shutil
import time

import pytest

import cases
import passes
from cases import planned_models as pm

PROMOTION = "auto_parallel_fused_linear_promotion"


def _case(name):
    return cases.all_cases()[name]


def test_plan_key_follows_model_source_params_and_used_files(tmp_path, monkeypatch):
    base = {"model": "two_mlp.py", "ranks": 2, "mesh": None, "uses": []}
    k = pm.plan_key(base)
    assert k == pm.plan_key(dict(base))
    assert k != pm.plan_key({**base, "ranks": 4, "mesh": "2x2"})
    rep = {"model": "two_mlp_dp_replicated.py", "ranks": 4, "mesh": "2x2"}
    # the replicated variant loads two_mlp.py: its source is part of the key
    copy = tmp_path / "examples"
    shutil.copytree(pm.EXAMPLES, copy)
    monkeypatch.setattr(pm, "EXAMPLES", copy)
    before = pm.plan_key({**rep, "uses": ["two_mlp.py"]})
    (copy / "two_mlp.py").write_text((copy / "two_mlp.py").read_text() + "\n# edited\n")
    assert pm.plan_key({**rep, "uses": ["two_mlp.py"]}) != before
    assert pm.plan_key(base) != k


def test_every_case_plans_an_example_file_without_copying_it():
    fam = [c for c in cases.all_cases().values() if c.family == "planned_models"]
    assert {c.name for c in fam} >= {"planned_gpt_tp2", "planned_two_mlp_tp2",
                                     "planned_two_mlp_dp2_tp2"}
    for c in fam:
        assert (pm.EXAMPLES / c.params["model"]).is_file(), c.name
        assert c.builder is pm.build


def test_a_plan_is_made_once_and_then_read_from_the_cache():
    params = _case("planned_two_mlp_tp2").params
    first = pm.planned_dir(params)
    t0 = time.time()
    again = pm.planned_dir(params)
    assert again == first and time.time() - t0 < 2.0
    assert (first.parent / f"{first.name}.lock").exists()
    assert sorted(p.name for p in first.iterdir() if p.is_dir()) == ["rank0", "rank1"]


def test_the_builder_refuses_a_case_whose_rings_the_planner_does_not_make():
    case = _case("planned_two_mlp_dp2_tp2")
    wrong = dataclasses.replace(case, rings={12: [[0, 1, 2, 3]]})
    with pytest.raises(RuntimeError, match="planned_two_mlp_dp2_tp2: the planner's rings"):
        wrong.build(0)
    wrong = dataclasses.replace(case, sharded_params=frozenset({"linear_0.w_0"}))
    with pytest.raises(RuntimeError, match="the planner shards"):
        wrong.build(0)


def _types(rp):
    return [op.type for op in rp.main.global_block().ops]


def _bias_grad_backward(rp):
    """The op types after each elementwise_add_grad of a sharded-weight
    matmul_v2_grad's output, up to that matmul_v2_grad (the pass's backward
    segment)."""
    t = _types(rp)
    out = []
    for i, ty in enumerate(t):
        if ty == "elementwise_add_grad":
            j = next((j for j in range(i + 1, min(i + 6, len(t))) if t[j] == "matmul_v2_grad"),
                     None)
            if j is not None:
                out.append(tuple(t[i:j + 1]))
    return out


def test_promotion_keys_its_pattern_on_the_mesh_not_on_the_program():
    """Task finding: on a DP2 x TP2 mesh with the batch replicated there is no
    DP gradient all_reduce, so the row-parallel backward is the MP-only one;
    the pass (DP + MP pattern chosen from the mesh shape) does nothing on any
    rank although its documented pattern is there.  With the batch split
    over dp the same model has the DP + MP backward and the pass fires."""
    adapter = passes.adapters()[PROMOTION]
    rep = _case("planned_two_mlp_dp2_tp2_replicated")
    split = _case("planned_two_mlp_dp2_tp2")
    for rank in rep.ranks:
        run = adapter.apply_local(rep, rank)
        assert run.error is None, run.error
        from verify.ir.snapshot import from_programs

        assert adapter.pattern_present(from_programs(run.original.main, run.original.startup))
        assert _types(run.rewritten) == _types(run.original), rank  # did nothing
        assert ("elementwise_add_grad", "matmul_v2_grad") in _bias_grad_backward(run.original)
    run = adapter.apply_local(split, 1)
    assert ("elementwise_add_grad", "all_reduce", "scale", "matmul_v2_grad") in \
        _bias_grad_backward(run.original)
    assert len(_types(run.rewritten)) < len(_types(run.original))  # rank 1 loses the biases
