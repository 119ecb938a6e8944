"""The planner relation compares the loss, found as the value the backward
is seeded from (``verify/ir/loss_seed.py``), whatever computes it: a scalar
mean (the built-in planner cases) or paddleformers' masked ``sum / count``
(the zoo), which a search for a 0-D ``pd_op.mean`` never found (so no zoo
relation compared a loss).

* the records of every planned case name the loss, on the serial program
  and on every rank, with a placement;
* hand-edited rank programs whose loss alone is reduced wrongly (divided by
  its count + 1 on every rank, as one stage's code would: the gradients,
  read from the backward's own operands, are unchanged) is NOT_EQUIVALENT naming the loss and the stage, on a built-in
  case and on the zoo's sampled LLaMA (neither written for it); the faithful
  plans hold;
* records older than the format version that records the loss this way are
  not reused: INCONCLUSIVE saying to re-plan.

The edit (:func:`divide_the_loss_by_a_wrong_count`) finds the loss on its own
(the 0-D operand of the ``full_like(., 1.0)`` a grad op reads), rewires the
loss op's count (``divide``: its denominator + 1; ``mean``: its input scaled
by n / (n + 1)) and records the inserted op in ``final_ops`` as made by
``stage`` (a hand edit is no stage's: the test says which it stands for).
"""
from __future__ import annotations

import json
import shutil

import pytest

import cases
from cases import zoo

needs_models = pytest.mark.skipif(bool(zoo.UNAVAILABLE), reason=f"zoo: {zoo.UNAVAILABLE}")


def _loss_op(main):
    """The op computing the loss: the 0-D operand of a ``full_like(x, 1.0)``
    whose result a ``*_grad`` op reads (the backward's seed)."""
    for op in main.global_block().ops:
        if op.name() != "pd_op.full_like":
            continue
        x = op.operand_source(0)
        if list(x.shape) == [] and any(u.name().endswith("_grad")
                                       for u in op.result(0).all_used_ops()):
            return x.get_defining_op()
    raise AssertionError("no loss seed in the rank's program")


def divide_the_loss_by_a_wrong_count(src, dst, ranks, stage="reshard"):
    """A copy of the plan dir ``src`` at ``dst`` whose ranks ``ranks`` compute
    their loss divided by the wrong count (see the module docstring), as one
    stage's code would on every rank; returns ``{rank: the loss value's name}``."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("relation-*", "stage-checks"))
    return {r: _edit_rank(dst / f"rank{r}", stage) for r in ranks}


WRONG = "%wrong_count"  # the inserted value's name, the same on every rank


def _edit_rank(folder, stage):
    import paddle

    from verify.ir.pir_snapshot import export_programs
    from verify.plan.pir_rank import load_rank

    main, startup, names, meta = load_rank(folder)
    with paddle.pir_utils.IrGuard():
        op = _loss_op(main)
        assert op.name() in ("pd_op.divide", "pd_op.mean"), op.name()
        slot = 1 if op.name() == "pd_op.divide" else 0
        count = op.operand_source(slot)
        n = 1
        for d in count.shape:
            n *= int(d)
        with paddle.static.program_guard(main, startup):
            paddle.pir.set_insertion_point(op)  # before the loss op
            if slot == 1:  # sum / (count + 1)
                wrong = paddle._C_ops.scale(count, 1.0, 1.0, True)
            else:  # mean(x * n / (n + 1)) = sum(x) / (n + 1)
                wrong = paddle._C_ops.scale(count, n / (n + 1.0), 0.0, True)
            paddle.pir.reset_insertion_point_to_end()
        op.operand(slot).set_source(wrong)
        names.table[(wrong.get_defining_op().id(), 0)] = WRONG
        loss, operand = names.name(op.result(0)), names.name(count)
        exported = export_programs(main, startup, names)
    (folder / "main.json").write_bytes(exported["main"])
    (folder / "names.json").write_text(json.dumps(exported["names"]))
    meta["counter"] = exported["counter"]
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    rec = json.loads((folder / "planner.json").read_text())
    ops = rec["final_ops"]
    at = next(i for i, o in enumerate(ops) if loss in o["results"])
    made = next(o for o in ops if operand in o["results"])
    plc = made["placements"][made["results"].index(operand)]
    ops.insert(at, {"type": "pd_op.scale", "origin": stage, "serial_op": None,
                    "results": [WRONG], "placements": [plc], "serial": None,
                    "operands": [operand, None]})
    (folder / "planner.json").write_text(json.dumps(rec))
    return loss


def _apply_dir(folder):
    from cases.program_dirs import load_program_dir
    from passes.planner import ADAPTER
    from verify.engine.application import run_application

    case = load_program_dir(str(folder))
    assert ADAPTER.handles(case)
    return run_application(ADAPTER, case, numeric=lambda *a: [])


def _planned(name):
    from passes.planner import planner_dir

    return planner_dir(cases.all_cases()[name])


@pytest.mark.parametrize("name", ["planner_tp2", "planner_dp2"])
def test_the_records_name_the_loss_on_the_serial_program_and_every_rank(name):
    folder = _planned(name)
    case = cases.all_cases()[name]
    for r in case.ranks:
        rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
        meta = json.loads((folder / f"rank{r}" / "meta.json").read_text())
        assert rec["serial_relation"]["loss"] and rec["relation"]["loss"] == meta["loss"]
        assert rec["relation"]["loss_placement"] is not None


def _caught_on_the_loss(app, rank, loss, stage):
    rel = [c for c in app.checks if c.name == "planner relation"]
    bad = {c.rank: c for c in rel if c.verdict.value == "NOT_EQUIVALENT"}
    assert rank in bad, [c.message for c in rel]
    cex = bad[rank].counterexample
    # the loss, named, is what differs (the gradients are the backward's own)
    assert cex["value"] == "loss" and cex["rank_value_name"] == loss, cex
    assert cex["stage"] == stage, cex
    assert cex["first_divergence"]["op_type"] == "pd_op.scale", cex
    assert "loss" in bad[rank].message and f"stage {stage}" in bad[rank].message
    assert app.verdict.value == "NOT_EQUIVALENT"
    return cex


def test_a_rank_dividing_its_mean_loss_by_a_wrong_count_is_caught(tmp_path):
    """planner_dp2: the loss is each rank's mean over its half of the batch,
    Partial(AVG) over dp; rank 1's mean divides by n + 1."""
    losses = divide_the_loss_by_a_wrong_count(_planned("planner_dp2"), tmp_path / "edited",
                                              [0, 1])
    app = _apply_dir(tmp_path / "edited")
    for r, loss in losses.items():
        _caught_on_the_loss(app, r, loss, "reshard")
    proof = {c.rank: c for c in app.checks if c.name == "planner relation proof"
             and c.verdict.value == "NOT_EQUIVALENT"}
    assert proof and all(c.counterexample["value"] == "loss" and
                         c.counterexample["stage"] == "reshard" for c in proof.values()), \
        [c.message for c in app.checks if c.name == "planner relation proof"]


def test_the_faithful_plan_of_that_case_compares_the_loss():
    app = _apply_dir(_planned("planner_dp2"))
    rel = [c for c in app.checks if c.name == "planner relation"]
    assert app.verdict.value == "EQUIVALENT" and rel
    assert all(c.ok and "loss" in c.details["values"] for c in rel), [c.message for c in rel]


@needs_models
def test_a_rank_dividing_the_zoo_loss_by_a_wrong_count_is_caught(tmp_path):
    """The sampled zoo LLaMA (DP2 x TP2): paddleformers' loss is
    all_reduce(sum(masked token losses)) / all_reduce(sum(mask)); every
    rank's divide reads the count + 1.  Before the loss was found by its seed, no
    zoo relation compared a loss, and this plan passed."""
    src = zoo.planner_dir(cases.all_cases()[zoo.TEST_SAMPLE])
    from types import SimpleNamespace

    from cases.program_dirs import load_program_dir
    from passes.planner import relation_run

    case = cases.all_cases()[zoo.TEST_SAMPLE]
    losses = divide_the_loss_by_a_wrong_count(src, tmp_path / "edited", case.ranks)
    # the relation alone (the stage checks of 4 ranks x 6 stages are the faithful
    # plan's, test_zoo.py; a hand edit of the final program changes none of them)
    edited = load_program_dir(str(tmp_path / "edited"))
    records = {r: json.loads((tmp_path / "edited" / f"rank{r}" / "planner.json").read_text())
               for r in edited.ranks}
    checks = relation_run(edited, tmp_path / "edited", records, [])
    for r, loss in losses.items():
        _caught_on_the_loss(SimpleNamespace(checks=checks, verdict=SimpleNamespace(
            value="NOT_EQUIVALENT" if any(c.verdict.value == "NOT_EQUIVALENT"
                                          for c in checks) else "other")), r, loss, "reshard")


def test_records_older_than_the_loss_by_its_seed_are_not_reused(tmp_path):
    from passes.planner import ADAPTER, stale_records

    case = cases.all_cases()["planner_tp2"]
    old = tmp_path / "v2"
    shutil.copytree(_planned("planner_tp2"), old, ignore=shutil.ignore_patterns(
        "relation-*", "stage-checks"))
    for r in case.ranks:
        f = old / f"rank{r}" / "planner.json"
        rec = json.loads(f.read_text())
        del rec["version"]  # as version 2 wrote them
        f.write_text(json.dumps(rec))
    app = _apply_dir(old)
    assert app.verdict.value == "INCONCLUSIVE"
    (stale,) = [c for c in app.checks if c.name == "planner records"]
    assert "version 2" in stale.message and "re-plan" in stale.message
    assert not [c for c in app.checks if c.name == "planner relation"]
    assert ADAPTER.handles(cases.program_dirs.load_program_dir(str(old)))
    records = {r: json.loads((_planned("planner_tp2") / f"rank{r}" / "planner.json")
                             .read_text()) for r in case.ranks}
    assert stale_records(case, _planned("planner_tp2"), records) is None


def test_a_pipeline_plan_without_job_lists_is_related_through_its_jobs_not_proved():
    """A merged rank program runs as [forward, backward] * k + [optimize]: the
    records' merge settings send the relation to the job-schedule driver
    (``merged_plan``).  Without a pipeline that schedule is proved
    (``tests/test_merged_relation_proof.py``), a pipeline's job lists too
    (``tests/test_job_list_relation_proof.py``); records of a pipeline that
    name no job lists leave the proof nothing to model, which it says
    (INCONCLUSIVE, advisory: never a proof); records without a merge are
    related and proved as before."""
    from types import SimpleNamespace

    from passes.planner import merged_plan, merged_proof

    case = SimpleNamespace(name="x", ranks=[0, 1])
    gm = {"k_steps": 2, "avg": True}
    merge = merged_plan(case, {0: {"gradient_merge": gm}, 1: {"gradient_merge": gm}})
    assert merge == (0, gm, None)
    pipe = {"pass": "pipeline_scheduler_FThenB"}
    merge = merged_plan(case, {0: {"gradient_merge": gm, "pipeline": pipe},
                               1: {"gradient_merge": gm, "pipeline": pipe}})
    no_jobs = {0: {"pipeline": pipe}, 1: {"pipeline": pipe}}  # records without job lists
    (proof,) = merged_proof(case, None, no_jobs, [], merge)
    assert (proof.name, proof.verdict.value, proof.advisory) == (
        "planner relation proof", "INCONCLUSIVE", True)
    assert "k_steps 2" in proof.message and "pipeline_scheduler_FThenB" in \
        proof.message and proof.details["not_proved"]
    assert merged_plan(case, {0: {"gradient_merge": None}, 1: {}}) is None


@needs_models
def test_the_zoo_gradient_merge_case_plans_through_the_strategy_hook():
    """``configure(strategy)`` of ``examples/zoo/llama_gm.py`` reaches the
    planner: the records say gradient merge k=2 ran (read from a cached plan
    only: a cold plan costs minutes, left to ``--zoo all`` and bench_zoo)."""
    case = cases.all_cases()["zoo_llama_tp2_gm"]
    folder = zoo.cache_root() / zoo.plan_key(case.params)
    if not (folder / "plan.json").is_file():
        pytest.skip(f"zoo_llama_tp2_gm is not planned here ({zoo.left_to_the_benchmark(case)})")
    for r in case.ranks:
        rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
        assert rec["gradient_merge"] == {"k_steps": 2, "avg": True}
        types = [o["type"] for o in rec["final_ops"]]
        assert "pd_op.adamw_" in types and "pd_op.set_value_with_tensor_" in types
