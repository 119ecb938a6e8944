"""The pipeline job-list relation proof over the relation proof's input cap
(``relation_input_elements``): ``merged_relation.prove_merged_relation``
attempts it up to ``relation.compositional_limit()`` inputs within
``BOUNDED_WORK_UNITS`` (deterministic; INCONCLUSIVE past them), which is
how the zoo two-stage pipelines (18783 inputs) are proved in the default
run.  Here the cap is lowered below the small ``planner_pp2`` plans' inputs
(353 with both micro-batches' feeds), so the same route is taken:

* the faithful FThenB and 1F1B job lists are PROVED on every rank, saying
  the bounded budget they ran in;
* the last stage's backward jobs out of step with the first stage's, and a
  first-stage forward job that sends the wrong value (its pre-activation),
  are REFUTED, the counterexample naming rank, value and the job and op
  that stored it;
* a bounded attempt past its work units is INCONCLUSIVE saying so, and a
  plan over the compositional limit is not attempted.
"""
from __future__ import annotations

import dataclasses
import json

import pytest

import cases
from verify.value import proof

CAP = 100  # below planner_pp2's 353 inputs (321 + a second micro-batch's feeds)


@pytest.fixture
def low_cap():
    proof.configure_budget(relation_input_elements=CAP)
    try:
        yield
    finally:
        proof.configure_budget(relation_input_elements=proof.DEFAULT_BUDGET[
            "relation_input_elements"])


def _records(name):
    from passes.planner import planner_dir

    case = cases.all_cases()[name]
    folder = planner_dir(case)
    return case, folder, {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
                          for r in case.ranks}


def _proof(name, edit=None):
    """Through the gate's own route (``passes.planner.job_list_proof``)."""
    from passes.planner import job_list_proof

    case, folder, records = _records(name)
    if edit is not None:
        for r in case.ranks:
            records[r]["pipeline"]["jobs"] = edit(r, records[r]["pipeline"]["jobs"])
    gm = records[case.ranks[0]]["gradient_merge"]
    return {c.rank: c for c in job_list_proof(case, folder, records, [], gm)}


def _direct(name, edit_snaps=None):
    """``prove_job_list_relation`` itself (no memo): ``edit_snaps(job_snaps)``
    may edit the ranks' job programs."""
    from passes.planner import _job_list_inputs, _relation_snapshots
    from verify.value.job_list_relation import prove_job_list_relation

    case, folder, records = _records(name)
    r0 = case.ranks[0]
    serial, snaps = _relation_snapshots(folder, case.ranks, r0)
    rank_rels = {r: records[r]["relation"] for r in case.ranks}
    inputs = _job_list_inputs(folder, records, case.ranks, rank_rels)
    if edit_snaps is not None:
        edit_snaps(inputs["job_snaps"])
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    gm = records[r0]["gradient_merge"]
    out = prove_job_list_relation(f"planner on {name}", serial, snaps,
                                  records[r0]["serial_relation"], rank_rels, rings,
                                  int(gm["k_steps"]), bool(gm["avg"]), **inputs)
    return {c.rank: c for c in out}


@pytest.mark.parametrize("name", ["planner_pp2", "planner_pp2_1f1b"])
def test_faithful_job_lists_over_the_input_cap_are_proved(low_cap, name):
    from verify.value.merged_relation import BOUNDED_WORK_UNITS

    out = _proof(name)
    assert [c.verdict.value for c in out.values()] == ["EQUIVALENT"] * len(out), \
        [c.message for c in out.values()]
    for c in out.values():
        assert c.details["input_elements"] > CAP
        assert c.details["bounded_work_units"] == BOUNDED_WORK_UNITS
        assert c.details["work_units"] <= BOUNDED_WORK_UNITS
        assert "PROVED at the real shapes" in c.message


def test_backward_jobs_out_of_step_over_the_input_cap_are_refuted(low_cap):
    def edit(r, jobs):
        if r != 1:
            return jobs
        jobs = [list(j) for j in jobs]
        back = [i for i, (t, _) in enumerate(jobs) if t == "backward"]
        for i, m in zip(back, reversed([jobs[i][1] for i in back])):
            jobs[i] = ["backward", m]
        return jobs

    out = _proof("planner_pp2", edit)
    c = out[0]
    assert c.verdict.value == "NOT_EQUIVALENT", [c.message for c in out.values()]
    cex = c.counterexample
    assert cex["rank"] == 0 and cex["value"].endswith("@GRAD") and "element" in cex, cex
    assert cex["job"].startswith("rank 0 job ") and " op " in cex["job"], cex["job"]
    assert "as stored by rank 0 job" in c.message


def _send_pre_activation(job_snaps):
    """Rank 0's forward job sends the relu's operand, not its result."""
    snap = job_snaps[0]["forward"]
    ops = list(snap.ops)
    (i,) = [i for i, op in enumerate(ops) if op.type == "pd_op.send_v2"]
    (sent,) = ops[i].inputs["x"]
    (relu,) = [op for op in ops[:i] if sent in op.outputs.get("out", [])]
    assert relu.type.startswith("pd_op.relu"), relu.type
    ops[i] = dataclasses.replace(ops[i], inputs={**ops[i].inputs, "x": relu.inputs["x"]})
    job_snaps[0]["forward"] = snap.with_ops(ops)


def test_a_send_of_the_wrong_value_over_the_input_cap_is_refuted(low_cap):
    out = _direct("planner_pp2", _send_pre_activation)
    c = out[1]  # the last stage computes its loss on what it received
    assert c.verdict.value == "NOT_EQUIVALENT", [c.message for c in out.values()]
    cex = c.counterexample
    assert cex["rank"] == 1 and "element" in cex and cex["inputs"], cex
    # the first micro-batch's loss, named with the job and op that computed it
    assert cex["value"] == "loss (micro-step 1)", cex["value"]
    assert cex["job"].startswith("rank 1 job ") and \
        "(forward, micro-batch 0) op " in cex["job"], cex["job"]
    assert out[0].verdict.value == "NOT_EQUIVALENT"  # its gradients came back wrong too


def test_a_bounded_attempt_past_its_work_units_is_inconclusive(low_cap, monkeypatch):
    from verify.value import merged_relation

    monkeypatch.setattr(merged_relation, "BOUNDED_WORK_UNITS", 1000)
    out = _direct("planner_pp2")
    for c in out.values():
        assert c.verdict.value == "INCONCLUSIVE", c.message
        assert "over budget" in c.message and "attempted within 1000 work units" in c.message


def test_a_plan_over_the_compositional_limit_is_not_attempted(low_cap, monkeypatch):
    from verify.value import merged_relation

    monkeypatch.setattr(merged_relation, "compositional_limit", lambda: CAP + 1)
    out = _direct("planner_pp2")
    for c in out.values():
        assert c.verdict.value == "INCONCLUSIVE" and "not attempted" in c.message, c.message


# -- the real model: LLaMA (2 decoder layers) as two pipeline stages, cached plan ----
from cases import zoo  # noqa: E402

_ZOO = {"all": False}


@pytest.fixture(scope="module", autouse=True)
def _zoo_option(request):
    """``--zoo all`` plans every zoo model; the default only those the tests plan."""
    _ZOO["all"] = request.config.getoption("verify_zoo", default="sample") == "all"


def _zoo_case(name):
    if zoo.UNAVAILABLE:
        pytest.skip(f"zoo: {zoo.UNAVAILABLE}")
    case = next(c for c in zoo.DECLARED if c.name == name)
    if not _ZOO["all"] and zoo.left_to_the_benchmark(case):  # a cold plan: minutes
        pytest.skip(zoo.left_to_the_benchmark(case))
    return case


def test_zoo_pipeline_job_lists_are_proved_and_out_of_step_ones_are_not():
    """At the default cap (18783 inputs over 4096): the job lists PROVED on
    both ranks within the bounded work units; the last stage's backward jobs
    out of step with the first stage's: REFUTED on the first stage, its
    gradients replayed through the LLaMA's real kernels (rsqrt, arange, tril,
    the cross entropy...: ``verify/value/kernels.py``; without those
    references the probes could not replay and it was INCONCLUSIVE past the
    bounded work units)."""
    from passes.planner import job_list_proof

    case = _zoo_case("zoo_llama_pp2")
    folder = zoo.planner_dir(case)

    def proof(edit=None):
        records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
                   for r in case.ranks}
        if edit is not None:
            for r in case.ranks:
                records[r]["pipeline"]["jobs"] = edit(r, records[r]["pipeline"]["jobs"])
        return {c.rank: c for c in job_list_proof(case, folder, records, [],
                                                  records[0]["gradient_merge"])}

    out = proof()
    assert [c.verdict.value for c in out.values()] == ["EQUIVALENT"] * 2, \
        [c.message for c in out.values()]
    assert all(c.details["input_elements"] > proof_cap() for c in out.values())

    def edit(r, jobs):
        if r != 1:
            return jobs
        jobs = [list(j) for j in jobs]
        back = [i for i, (t, _) in enumerate(jobs) if t == "backward"]
        for i, m in zip(back, reversed([jobs[i][1] for i in back])):
            jobs[i] = ["backward", m]
        return jobs

    bad = proof(edit)[0]
    assert bad.verdict.value == "NOT_EQUIVALENT", bad.message
    assert any(lb.endswith("@GRAD") for lb in bad.details["refuted"]), bad.details
    assert bad.counterexample["job"].startswith("rank 0 job "), bad.counterexample
    assert {"rsqrt", "arange"} <= set(bad.counterexample["kernels"]), bad.counterexample


def proof_cap():
    from verify.value.relation import input_limit

    return input_limit()
