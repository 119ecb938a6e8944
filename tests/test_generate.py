"""``python -m verify generate`` (``verify/generate/``): seeded specs that
are reproducible, a tiny run that plans and judges them with the planner
family, the greedy shrinker, and the coverage trace of the planning
processes (``verify/plan/coverage_trace.py``)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from verify.generate import models
from verify.generate.shrink import candidates, shrink

SEED = 21  # its first two specs: 2-rank plans on the mesh [2, 3] (an MLP; a reshard, a linear)


def test_the_same_seed_draws_the_same_specs():
    a = [models.spec(7, i) for i in range(30)]
    assert a == [models.spec(7, i) for i in range(30)]
    assert json.loads(json.dumps(a)) == a  # plain data
    assert a != [models.spec(8, i) for i in range(30)]


def test_the_specs_reach_every_block_mesh_and_strategy():
    specs = [models.spec(0, i) for i in range(300)]
    kinds = {b["kind"] for s in specs for b in s["blocks"]}
    assert kinds == {"linear", "mlp", "attention", "norm", "embedding", "reshard", "sub"}
    assert {json.dumps(s["mesh"]) + "".join(s["mesh_dims"]) for s in specs} == {
        json.dumps(m) + "".join(d) for m, d, _ in models.MESHES}
    assert any(s["gradient_merge"] for s in specs) and any(s["pipeline"] for s in specs)
    assert {s["shard_optimizer"] for s in specs} == {0, 1, 2, 3}
    assert {s["pipeline"]["schedule"] for s in specs if s["pipeline"]} == {"FThenB", "1F1B"}
    placed = {c for s in specs for b in s["blocks"] if b["kind"] == "reshard"
              for c in b["placements"]}
    assert {"R", "P", "S0", "S1", "S2"} <= placed
    assert any(s["hidden"] % 2 for s in specs)  # uneven over two ranks
    for s in specs:  # every plan trains a parameter, every pipeline stage holds one
        assert any(b["kind"] != "reshard" for b in s["blocks"])
        if s["pipeline"]:
            for stage in (0, 1):
                assert any(b["kind"] != "reshard" for b in s["blocks"] if b["stage"] == stage)


def test_the_shrinker_keeps_the_failure_and_drops_the_rest():
    """A failure that needs an attention block on an uneven width: the
    greedy walk drops every other block and the strategy, keeps both."""
    big = {**models.spec(0, 0), "hidden": 5, "gradient_merge": {"k_steps": 2, "avg": True},
           "pipeline": None, "mesh": [0, 1], "mesh_dims": ["mp"]}
    big["blocks"] = [{"kind": "norm", "weight": ["R"], "bias": ["R"]},
                     {"kind": "attention", "q": ["S1"], "k": ["R"], "v": ["R"], "o": ["S0"]},
                     {"kind": "linear", "out": 6, "relu": True, "weight": ["S1"],
                      "bias": None}]

    def fails(s):
        return s["hidden"] % 2 == 1 and any(b["kind"] == "attention" for b in s["blocks"])
    small, tries = shrink(big, fails, budget=50, log=lambda *a: None)
    assert [b["kind"] for b in small["blocks"]] == ["attention"] and small["hidden"] == 5
    assert small["gradient_merge"] is None and 0 < tries <= 50
    assert small["blocks"][0] == {"kind": "attention", **{n: ["R"] for n in "qkvo"}}
    # and a failure nothing smaller keeps is left as it is
    assert shrink(big, lambda s: s == big, budget=50, log=lambda *a: None)[0] == big
    assert all(c != big for c in candidates(big))


def test_a_tiny_generate_run_gives_verdicts_and_replays(tmp_path, capsys):
    from verify.generate.cli import main

    out = tmp_path / "gen"
    code = main(["--count", "2", "--seed", str(SEED), "--out", str(out),
                 "--no-shrink"])
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert [p["spec"] for p in summary["plans"]] == [models.spec(SEED, i) for i in range(2)]
    assert sum(summary["outcomes"].values()) == 2 and sum(summary["verdicts"].values()) == 2
    assert code == (1 if summary["outcomes"].get("finding") else 0)
    assert "2 plans (seed 21)" in printed and "plans/minute" in printed
    assert "planner coverage" in printed and "PToRReshardFunction" in printed
    for p in summary["plans"]:  # the spec beside a verbatim copy of the generic model file
        folder = out / p["name"]
        assert json.loads((folder / "model.json").read_text()) == p["spec"]
        assert (folder / "model.py").read_bytes() == models_file().read_bytes()
    # --coverage reprints the run's table from its traces
    assert main(["--coverage", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "PToRReshardFunction" in table and "reshard functions run:" in table
    # the same spec replayed alone: the same verdict (its plan comes from the cache)
    first = summary["plans"][0]
    assert main(["--replay", str(out / first["name"] / "model.json"), "--out", str(out)]) \
        == (1 if first["status"] == "finding" else 0)
    assert f"{first['status']:<12} {first['verdict']}" in capsys.readouterr().out


def models_file():
    from verify.generate.run import MODEL

    return MODEL


def test_the_coverage_trace_records_what_ran():
    """planner_tp2 traced: its row-parallel partial sums are p_to_r reshards
    (PToRReshardFunction.reshard ran); no value of it is made Partial from
    Replicate (RToPReshardFunction did not)."""
    import cases
    from cases.planner_models import full_key, planned_dir
    from verify.generate.coverage import merge_traces, report, traces_under

    case = cases.all_cases()["planner_tp2"]
    traced = dataclasses.replace(case, params={**case.params, "trace": True})
    assert full_key(traced.params) != full_key(case.params)  # a traced plan is cached apart
    folder = planned_dir(traced)
    files = traces_under([folder])
    assert len(files) == 2  # one per rank
    rows = {r["function"]: r for r in report(merge_traces(files))["reshard"]}
    assert rows["PToRReshardFunction"]["ran"] and rows["PToRReshardFunction"]["lines_run"] > 5
    assert not rows["RToPReshardFunction"]["ran"]
    assert rows["RToPReshardFunction"]["lines_run"] == 0


def test_every_drawn_spec_is_valid_and_a_hostile_replay_file_is_refused(tmp_path, capsys):
    from verify.generate.cli import main

    assert all(models.problems(models.spec(3, i)) == [] for i in range(200))
    examples = Path(__file__).resolve().parents[1] / "examples"
    for f in [examples / "generated_model.json", *examples.glob("planner_gen_*.json")]:
        assert models.problems(json.loads(f.read_text())) == [], f
    bad = {**models.spec(3, 0), "blocks": [{"kind": "linear", "out": "__import__('os')",
                                            "weight": ["S0); import os"]}]}
    f = tmp_path / "model.json"
    f.write_text(json.dumps(bad))
    assert main(["--replay", str(f), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a spec" in err and "'out' is not an integer in 1..64" in err and "'weight'" in err
    f.write_text("[1, 2")
    assert main(["--replay", str(f), "--out", str(tmp_path)]) == 2
