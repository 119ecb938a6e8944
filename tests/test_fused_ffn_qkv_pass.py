"""``fuse_attention_ffn_qkv_pass`` (``passes/fuse_attention_ffn_qkv_pass.py``):
the model planned with ``FLAGS_enable_fused_ffn_qkv_pass`` related to the
same model planned with it off, through the fusion recorded in the planning
process.

* where it fires (``planner_dp2_fused_ffn_qkv``): each rank's fused program
  relates to the flag-off serial program, the fused parameters made of its
  parameters by the recorded layout (q|k|v per head group, gate|up), for
  the loss, every gradient and every update; the contract holds;
* where the pattern is absent (``planner_dp2_fused_ffn_qkv_absent``): nothing
  fused, each rank the flag-off plan op for op;
* a pass handing ``fuse_param_func`` the parts as q, v, k (a test-time edit
  of the installed ``pir_pass.py``, ``tests/planner_mutant_edits.py``, in the
  planning processes as ``--paddle-file`` does): the record says so (v's
  columns where the split hands out k) and the relation refutes the ranks,
  with the step and value named and the first divergence at q * k;
* without its relation records (the fusion not recorded) the application is
  INCONCLUSIVE, never EQUIVALENT.

The relations run the numeric backend only (``relation_proof`` is measured
in docs/passes.md; it takes minutes here).  Plans are cached
(``cases/planner_models.py``); the mutant plans apart.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from planner_mutant_edits import write as write_mutant  # noqa: E402

CASE, ABSENT = "planner_dp2_fused_ffn_qkv", "planner_dp2_fused_ffn_qkv_absent"
Q, K, V = (f"linear_{i}.w_0.dist" for i in range(3))
QKV = f"fused_{Q}_{K}_{V}"


def _case(name):
    import cases

    return cases.all_cases()[name]


def _apply(case, monkeypatch, overlay=None):
    import passes.planner as planner
    from passes.fuse_attention_ffn_qkv_pass import ADAPTER
    from verify.engine.application import run_application

    # the value proof is slow on this model (minutes): the numeric relation decides here
    monkeypatch.setattr(planner, "relation_proof", lambda *a, **k: [])
    if overlay:  # as --paddle-file does, for the planning processes started
        from verify.ir.paddle_overlay import installed_rel, installed_root, module_of
        from verify.premerge import overlay as ov

        mod, path = module_of(str(write_mutant(overlay, Path(tempfile.mkdtemp()))))
        manifest = ov.write(tempfile.mkdtemp(prefix="fused-ffn-qkv-mutant-"),
                            {installed_rel(mod): Path(path).read_text()}, installed_root())
        env = ov.child_env(manifest)
        monkeypatch.setenv(ov.ENV, env[ov.ENV])
        monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    return run_application(ADAPTER, case, numeric=lambda *a: [])


def _by(app, name):
    return [c for c in app.checks if c.name == name]


def test_fires_and_relates_to_the_plan_with_the_flag_off(monkeypatch):
    from passes.fuse_attention_ffn_qkv_pass import fusion_record
    from passes.planner import planner_dir

    case = _case(CASE)
    app = _apply(case, monkeypatch)
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    rel = _by(app, "planner relation")
    assert {c.rank for c in rel} == {0, 1} and all(c.verdict.value == "EQUIVALENT" for c in rel)
    for c in rel:  # the fused parameters' gradients and updates among them
        assert f"{QKV}@GRAD" in c.details["values"], c.details["values"]
    contract = _by(app, "fused_ffn_qkv")
    assert {c.rank for c in contract} == {0, 1}
    assert all(c.verdict.value == "EQUIVALENT" for c in contract)
    rec = {r["name"]: r for r in fusion_record(planner_dir(case), 0)}
    assert rec[QKV]["blocks"] == [[Q, 0, 4, 0], [K, 0, 4, 4], [V, 0, 4, 8],
                                  [Q, 4, 8, 12], [K, 4, 8, 16], [V, 4, 8, 20]]
    # the reference is the other plan: six matmuls in its forward, three here
    for o in app.outcomes:
        assert o.before.op_types().count("pd_op.matmul") == 6
        assert o.after.op_types().count("pd_op.matmul") == 3


def test_left_alone_where_no_input_meets_two_parameters(monkeypatch):
    app = _apply(_case(ABSENT), monkeypatch)
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    alone = _by(app, "left alone")
    assert {c.rank for c in alone} == {0, 1}
    assert all(c.verdict.value == "EQUIVALENT" for c in alone)


def test_fused_k_and_v_parts_swapped_are_refuted(monkeypatch):
    app = _apply(_case(CASE), monkeypatch, overlay="ffn_qkv_fused_k_v_parts_swapped")
    assert app.verdict.value == "NOT_EQUIVALENT", [c.message for c in app.checks][:4]
    wrong = [c for c in _by(app, "planner relation") if c.verdict.value == "NOT_EQUIVALENT"]
    assert {c.rank for c in wrong} == {0, 1}, [c.message for c in app.checks if not c.ok]
    cex = wrong[0].counterexample
    assert cex["step"] == 0 and cex["value"] == "loss", cex
    # localised to the first op reading the split's misfilled part: q * k (k holds v)
    assert cex["first_divergence"]["op_type"] == "pd_op.multiply", cex["first_divergence"]
    # the contract holds: the fusion is a permutation, read in place of the parts --
    # it is the layout the program reads that differs, which only the relation sees
    assert all(c.verdict.value == "EQUIVALENT" for c in _by(app, "fused_ffn_qkv"))


def test_a_plan_without_its_fusion_record_is_inconclusive(monkeypatch, tmp_path):
    import shutil

    import passes.fuse_attention_ffn_qkv_pass as mod
    from passes.planner import planner_dir

    case = _case(CASE)
    copy = tmp_path / "plan"
    shutil.copytree(planner_dir(case), copy)
    for f in copy.glob("rank*/fusion.json"):
        f.unlink()
    monkeypatch.setattr(mod, "planner_dir", lambda c: copy)
    app = _apply(case, monkeypatch)
    assert app.verdict.value == "INCONCLUSIVE", [c.message for c in app.checks]
    assert any("recorded no fusion" in c.message for c in app.checks)
