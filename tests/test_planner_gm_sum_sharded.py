"""Gradient merge summing (``avg`` off) a tensor-parallel parameter's
gradient: the optimizer reads the accumulator itself, a keyword block
argument with no defining op, so the planner's relation table must take its
placement by keyword (``verify/plan/stages.py`` records them before
dist2dense).  Without it the merged gradient of a column-sharded weight was
related as a dense value: a rank's ``[4, 2]`` piece against the serial
``[4, 4]``, a false NOT_EQUIVALENT (``verify generate`` seed 0, plans 143
and 147).

The plan: one column-parallel linear (no bias) on a 1-D mesh of 2, gradient merge k=2
summed (the model file ``examples/generated_model.py`` of ``verify
generate``).  It holds but for 3.3.1's zeroing defect (the Known
``gm_zeroing_global_shape``: CONTRACT_BROKEN); its twin, the accumulator
never zeroed after the update (a mutant of the installed pass), is caught by
the relation at the second optimizer step on the merged gradient.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from planner_mutant_edits import write as write_mutant  # noqa: E402

SPEC = {"batch": 4, "blocks": [{"bias": None, "kind": "linear", "out": 4, "relu": True,
                                "weight": ["S1"]}],
        "gradient_merge": {"avg": False, "k_steps": 2}, "hidden": 4, "index": 147,
        "mesh": [0, 1], "mesh_dims": ["mp"], "optimizer": "sgd", "pipeline": None,
        "seed": 0, "seq": 3, "shard_optimizer": 0, "version": 1}


def _apply(tmp_path, overlay=None, monkeypatch=None):
    from passes.planner import ADAPTER
    from verify.engine.application import run_application
    from verify.generate.run import make_case, write_plan

    if overlay:  # as tests/test_planner.py's _apply: the premerge overlay of a mutant
        from verify.ir.paddle_overlay import installed_rel, installed_root, module_of
        from verify.premerge import overlay as ov

        files = {}
        for name in overlay:
            mod, path = module_of(str(write_mutant(name, Path(tempfile.mkdtemp()))))
            files[installed_rel(mod)] = Path(path).read_text()
        manifest = ov.write(tempfile.mkdtemp(prefix="planner-mutant-"), files,
                            installed_root())
        env = ov.child_env(manifest)
        monkeypatch.setenv(ov.ENV, env[ov.ENV])
        monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    case = make_case(write_plan(SPEC, tmp_path / "gm_sum_tp2"), SPEC, "gm_sum_tp2",
                     trace=False)
    return case, run_application(ADAPTER, case, numeric=lambda *a: [])


def _relation(app):
    return [c for c in app.checks if c.name == "planner relation"]


def test_a_summed_merge_of_a_sharded_weight_relates_through_its_placement(tmp_path):
    from cases.planner_models import planned_dir

    case, app = _apply(tmp_path)
    rel = _relation(app)
    assert len(rel) == 2 and all(c.verdict.value == "EQUIVALENT" for c in rel), \
        [c.message for c in rel]
    # only 3.3.1's zeroing defect is left (the generator's Known gm_zeroing_global_shape)
    assert app.verdict.value == "CONTRACT_BROKEN", [c.message for c in app.checks if not c.ok]
    assert {c.name for c in app.checks if not c.ok} == {"after gradient_merge"}
    record = json.loads((planned_dir(case) / "rank0" / "planner.json").read_text())
    merged = [p for p in record["relation"]["params"].values()
              if p["grad"].endswith("@GRAD@MERGE") and len(p["shape"]) == 2]
    assert merged and merged[0]["grad_placement"]["dims_mapping"] == [-1, 0], merged


def test_an_accumulator_never_zeroed_is_still_caught_on_the_sharded_gradient(
        tmp_path, monkeypatch):
    _, app = _apply(tmp_path, ["gm_never_zeroed"], monkeypatch)
    bad = [c for c in _relation(app) if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in _relation(app)]
    cex = bad[0].counterexample
    assert cex["step"] == 1 and cex["value"].endswith("@GRAD"), cex
    assert cex["placement"] != "dense", cex
