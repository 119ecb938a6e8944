"""The engine's recompute pass (``passes/auto_parallel_recompute_pir.py``),
checked where Paddle's planner applies it: the planner stage ``recompute``
(``verify/plan/stages.py``), the serial program taken before it.

* the correct pass holds on ``planner_tp2_recompute`` (stage recorded, the
  relation proved and run, the contract's four checks);
* a pass whose backward reads the recomputed pre-activation where the
  relu's output was read (``recompute_reads_pre_activation``, a test-time
  edit of the installed pass: ``tests/planner_mutant_edits.py``) is caught
  NOT_EQUIVALENT by the relation, naming the stage ``recompute``, the rank,
  the op and the value, and by the contract;
* a pass that clones the segment but leaves the backward reading the forward
  activations (``recompute_keeps_activations``: right values, no memory
  saved) relates, and is CONTRACT_BROKEN by ``activations released``;
* the contract both ways on the stage programs: where no op is marked the
  contract says nothing (and the pass refuses such a program: it raises);
  an op outside the segments changed is named.
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest


CASE = "planner_tp2_recompute"
STAGE = "recompute"


def _apply(mutants=None, monkeypatch=None):
    import cases
    from passes.auto_parallel_recompute_pir import ADAPTER
    from verify.engine.application import run_application

    if mutants:
        _overlay(mutants, monkeypatch)
    return run_application(ADAPTER, cases.all_cases()[CASE], numeric=lambda *a: [])


def _overlay(names, monkeypatch):
    """As ``--paddle-file`` does (``tests/test_planner.py``'s ``_apply``)."""
    import tempfile

    from planner_mutant_edits import write as write_mutant

    from verify.ir.paddle_overlay import installed_rel, installed_root, module_of
    from verify.premerge import overlay as ov

    files = {}
    for name in names:
        mod, path = module_of(str(write_mutant(name, Path(tempfile.mkdtemp()))))
        files[installed_rel(mod)] = Path(path).read_text()
    manifest = ov.write(tempfile.mkdtemp(prefix="recompute-mutant-"), files, installed_root())
    env = ov.child_env(manifest)
    monkeypatch.setenv(ov.ENV, env[ov.ENV])
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])


def _by(app, name):
    return [c for c in app.checks if c.name == name]


def test_the_recompute_pass_holds_and_is_a_stage_of_its_own():
    app = _apply()
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    r0 = app.ranks[0]
    assert [c.name for c in app.checks if c.name.startswith("after ") and c.rank == r0] == [
        "after serial", "after recompute", "after partition", "after reshard",
        "after remove", "after dist2dense", "after remove_comm"]
    for name in ("planner relation", "planner relation proof", "reads the recomputed value",
                 "activations released", "dropout seeds", "outside the segments"):
        got = _by(app, name)
        assert len(got) == 2 and all(c.ok for c in got), (name, [c.message for c in got])
    assert "cloned into the backward" in _by(app, "reads the recomputed value")[0].message


def test_the_serial_program_is_the_model_without_recompute():
    """The relation's reference has no clone: it is the program before the pass."""
    import json

    import cases
    from passes.planner import planner_dir

    folder = planner_dir(cases.all_cases()[CASE])
    rec = json.loads((folder / "rank0" / "planner.json").read_text())
    from passes.planner import _snap

    by = {s["stage"]: s for s in rec["stages"]}
    serial, after = _snap(folder, 0, by["serial"]["snapshot"]), \
        _snap(folder, 0, by["recompute"]["snapshot"])
    assert not any("bwd_recompute_id" in op.attrs for op in serial.ops)
    assert sum("bwd_recompute_id" in op.attrs for op in after.ops) == 5
    # each clone's values are compared with the forward op it clones
    clones = [op for op in rec["final_ops"] if op["origin"] == "recompute"]
    assert len(clones) == 5 and all(op["serial"] for op in clones)


def test_a_backward_reading_the_wrong_recomputed_value_is_caught(monkeypatch):
    app = _apply(["recompute_reads_pre_activation"], monkeypatch)
    assert app.verdict.value == "NOT_EQUIVALENT", [c.message for c in app.checks if not c.ok]
    bad = [c for c in _by(app, "planner relation") if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in _by(app, "planner relation")]
    cex = bad[0].counterexample
    assert cex["rank"] == bad[0].rank and cex["value"] and cex["stage"] == "recompute", cex
    first = cex["first_divergence"]
    # the first op that no longer relates reads the recomputed pre-activation (the
    # clone of the bias add) where the relu's output was read
    assert first["stage_op"]["stage"] == "recompute"
    assert first["stage_op"]["op_type"] == "pd_op.add", first
    # the contract names the backward op reading an add's clone for a relu's value
    reads = [c for c in _by(app, "reads the recomputed value") if not c.ok]
    assert reads and all(c.counterexample["stage"] == "recompute" for c in reads)
    assert "not the value op" in reads[0].message and "pd_op.relu" in reads[0].message


def test_a_backward_keeping_the_activations_is_contract_broken(monkeypatch):
    app = _apply(["recompute_keeps_activations"], monkeypatch)
    assert app.verdict.value == "CONTRACT_BROKEN", [c.message for c in app.checks if not c.ok]
    assert all(c.ok for c in _by(app, "planner relation"))  # the values are right
    bad = [c for c in _by(app, "activations released") if not c.ok]
    assert len(bad) == 2, [c.message for c in _by(app, "activations released")]
    cex = bad[0].counterexample
    assert cex["stage"] == "recompute" and cex["rank"] == bad[0].rank and cex["value"]
    assert "kept alive into the backward" in bad[0].message
    assert {c.name for c in app.checks if not c.ok and not c.advisory} <= {
        "activations released", "reads the recomputed value"}


# -- the contract both ways, on the recorded stage programs ---------------------
@pytest.fixture(scope="module")
def stage_programs():
    import json

    import cases
    from passes.planner import _snap, planner_dir

    folder = planner_dir(cases.all_cases()[CASE])
    rec = json.loads((folder / "rank0" / "planner.json").read_text())
    by = {s["stage"]: s for s in rec["stages"]}
    return _snap(folder, 0, by["serial"]["snapshot"]), _snap(folder, 0,
                                                              by["recompute"]["snapshot"])


def _contract(before, after):
    from passes.auto_parallel_recompute_pir import ADAPTER

    import cases

    return {c.name: c for c in ADAPTER.contract(cases.all_cases()[CASE], 0, before, after)}


def test_no_segment_marked_is_no_pattern(stage_programs):
    """Where no op is marked the pattern is absent: the program unchanged
    passes, a changed one is CONTRACT_BROKEN (``left alone``)."""
    before, _ = stage_programs
    plain = copy.deepcopy(before)
    for op in plain.ops:
        op.attrs.pop("fwd_recompute_id", None)
    got = _contract(plain, copy.deepcopy(plain))
    assert set(got) == {"left alone"} and got["left alone"].ok
    changed = copy.deepcopy(plain)
    changed.ops.pop(len(changed.ops) - 1)
    assert _contract(plain, changed)["left alone"].verdict.value == "CONTRACT_BROKEN"


def test_an_op_outside_the_segments_changed_is_named(stage_programs):
    before, after = stage_programs
    broken = copy.deepcopy(after)
    j = next(i for i, op in enumerate(broken.ops) if op.type == "pd_op.sgd_")
    broken.ops[j].inputs["learning_rate"] = ["input0"]
    c = _contract(before, broken)["outside the segments"]
    assert c.verdict.value == "CONTRACT_BROKEN" and c.counterexample["op_index"] == j
    assert c.counterexample["stage"] == "recompute" and c.counterexample["value"] == "input0"


def test_a_clone_of_a_seed_op_is_named(stage_programs):
    """A recomputed random op must draw the forward's seed: a clone of a
    ``pd_op.seed`` (the pass's own guard compares op names with "seed",
    which no PIR op is called) re-draws it."""
    before, after = stage_programs
    b, a = copy.deepcopy(before), copy.deepcopy(after)
    i = next(k for k, op in enumerate(b.ops) if op.attrs.get("fwd_recompute_id") == 0
             and op.type == "pd_op.relu")
    j = next(k for k, op in enumerate(a.ops) if op.attrs.get("bwd_recompute_id") == 0
             and op.type == "pd_op.relu")
    b.ops[i].type = a.ops[j].type = "pd_op.seed"
    c = _contract(b, a)["dropout seeds"]
    assert c.verdict.value == "CONTRACT_BROKEN" and c.counterexample["op_index"] == j


def test_a_recomputed_dropout_draws_another_mask(tmp_path):
    """Paddle 3.3.1's defect: a dropout inside a recomputed block
    (``examples/planner_recompute_dropout.py``) is cloned into the backward
    with no seed tensor and ``fix_seed`` False (the pass keeps a seed op out
    of the clones only when its name is "seed", which no PIR op is called,
    and ``to_static`` makes none), so the recomputed dropout draws a new
    mask and ``dropout_grad`` reads it.  The contract names the clone; the
    planned program run by Paddle's executor confirms the two masks differ."""
    import json

    import numpy as np
    import paddle

    import cases
    from cases.planner_models import EXAMPLES, plan_model
    from passes.auto_parallel_recompute_pir import ADAPTER, stage_contract
    from verify.plan.pir_rank import load_rank

    folder = plan_model(EXAMPLES / "planner_recompute_dropout.py", [0], tmp_path / "plan",
                        "planner_recompute_dropout")
    rec = json.loads((folder / "rank0" / "planner.json").read_text())
    got = {c.name: c for c in stage_contract(ADAPTER, cases.all_cases()[CASE], 0, folder, rec)}
    seeds = got["dropout seeds"]
    assert seeds.verdict.value == "CONTRACT_BROKEN", seeds.message
    assert seeds.counterexample["op"] == "pd_op.dropout" and seeds.counterexample["stage"] == STAGE
    assert "drawn again" in seeds.message
    assert all(got[n].ok for n in ("reads the recomputed value", "activations released",
                                   "outside the segments"))
    main, startup, _, meta = load_rank(folder / "rank0")
    with paddle.pir_utils.IrGuard():
        drops = [op for op in main.global_block().ops if op.name() == "pd_op.dropout"]
        assert [op.attrs()["op_role"] for op in drops] == [0, 1]  # forward, its recomputation
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        rng = np.random.default_rng(0)
        feed = {f["name"]: rng.standard_normal(f["concrete_shape"]).astype(f["dtype"])
                for f in meta["feeds"]}
        fwd, again = exe.run(main, feed=feed, fetch_list=[op.result(1) for op in drops])
    assert not np.array_equal(np.asarray(fwd), np.asarray(again))


def test_no_segment_marked_is_refused_by_the_pass_in_its_stage(tmp_path):
    """The other way through the engine: recompute on, no ``recompute()`` in
    the model (``examples/tiny_mlp_pir.py``): the installed pass refuses the
    program (``AssertionError: No segment found``) inside the planner's
    ``recompute`` stage, recorded there with the serial program before it; the
    later stages are not run and the contract claims nothing."""
    import json

    import cases
    from cases.planner_models import EXAMPLES, plan_model
    from passes.auto_parallel_recompute_pir import ADAPTER, stage_contract

    model = tmp_path / "mlp_recompute_on.py"
    model.write_text(
        "import importlib.util, os\n"
        f"_s = importlib.util.spec_from_file_location('_b', {str(EXAMPLES / 'tiny_mlp_pir.py')!r})\n"
        "_b = importlib.util.module_from_spec(_s)\n_s.loader.exec_module(_b)\n"
        "build_model, loss, optimizer = _b.build_model, _b.loss, _b.optimizer\n"
        "inputs, labels, BATCH = _b.inputs, _b.labels, _b.BATCH\n\n\n"
        "def configure(strategy):\n    strategy._recompute.enable = True\n")
    folder = plan_model(model, [0], tmp_path / "plan", "mlp_recompute_on")
    rec = json.loads((folder / "rank0" / "planner.json").read_text())
    by = {s["stage"]: s for s in rec["stages"]}
    assert list(by) == ["serial", STAGE] and not by["serial"]["error"]
    assert "No segment found" in by[STAGE]["error"]
    assert rec["not_run"][:2] == ["partition", "reshard"]
    got = stage_contract(ADAPTER, cases.all_cases()[CASE], 0, folder, rec)
    assert len(got) == 1 and got[0].verdict.value == "INCONCLUSIVE" and "raised" in got[0].message
