"""The value proof of a pipeline plan's job lists
(``verify/value/job_list_relation.py``, through ``passes.planner.
job_list_proof``): each rank's job list in order, per micro-batch scopes,
sends and recvs paired through one mailbox, against the serial program's
micro-steps, for all inputs, at the real shapes.

The faithful FThenB and 1F1B plans are proved on every rank.  Broken job
lists (the records' lists edited: the sub-programs are the scheduler's) are
refuted: every backward job on micro-batch 0 (micro-batch 0's gradients
merged twice, the pipeline_scheduler stage blamed: the whole programs'
merged schedule is proved), the last stage's backward jobs out of step with
the first stage's receives (each gradient lands in the other micro-batch's
backward), and a send job dropped (the schedule cannot complete).
"""
from __future__ import annotations

import json

import pytest

import cases
from passes.planner import job_list_proof, planner_dir


def _proof(name, edit=None):
    case = cases.all_cases()[name]
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    if edit is not None:
        for r in case.ranks:
            records[r]["pipeline"]["jobs"] = edit(r, records[r]["pipeline"]["jobs"])
    gm = records[case.ranks[0]]["gradient_merge"]
    return {c.rank: c for c in job_list_proof(case, folder, records, [], gm)}


@pytest.mark.parametrize("name,scheduler", [("planner_pp2", "FThenB"),
                                            ("planner_pp2_1f1b", "1F1B")])
def test_faithful_job_lists_are_proved(name, scheduler):
    out = _proof(name)
    assert [c.verdict.value for c in out.values()] == ["EQUIVALENT"] * len(out), \
        [c.message for c in out.values()]
    for c in out.values():
        assert f"job lists pipeline_scheduler_{scheduler} made" in c.message, c.message
        assert "for every optimizer step" in c.message
        assert any(lb.endswith("@GRAD") for lb in c.details["proved"])
    # the last stage holds the loss: each micro-batch's is proved
    last = out[max(out)]
    assert {"loss (micro-step 1)", "loss (micro-step 2)"} <= set(last.details["proved"])


def test_every_backward_on_micro_batch_0_is_refuted():
    def edit(r, jobs):
        return [[t, 0 if t == "backward" else m] for t, m in jobs]

    out = _proof("planner_pp2", edit)
    bad = [c for c in out.values() if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in out.values()]
    for c in bad:
        cex = c.counterexample
        assert cex["rank"] == c.rank and cex["value"].endswith("@GRAD"), cex
        assert cex["stage"] == "pipeline_scheduler" and cex["inputs"], cex
        assert "pipeline_scheduler stage's job lists made the difference" in c.message


def test_backward_jobs_out_of_step_across_ranks_are_refuted():
    def edit(r, jobs):
        if r != 1:
            return jobs
        jobs = [list(j) for j in jobs]
        back = [i for i, (t, _) in enumerate(jobs) if t == "backward"]
        for i, m in zip(back, reversed([jobs[i][1] for i in back])):
            jobs[i] = ["backward", m]
        return jobs

    out = _proof("planner_pp2", edit)
    assert out[0].verdict.value == "NOT_EQUIVALENT", [c.message for c in out.values()]
    cex = out[0].counterexample
    assert cex["rank"] == 0 and cex["value"].endswith("@GRAD") and "element" in cex, cex


def test_a_dropped_send_job_is_refuted():
    def edit(r, jobs):
        if r != 1:
            return jobs
        i = max(i for i, (t, _) in enumerate(jobs) if t == "send_backward")
        return jobs[:i] + jobs[i + 1:]

    out = _proof("planner_pp2_1f1b", edit)
    bad = [c for c in out.values() if c.verdict.value == "NOT_EQUIVALENT"]
    assert len(bad) == 1, [c.message for c in out.values()]
    assert "does not run" in bad[0].message and bad[0].counterexample["error"], bad[0].message


def test_a_job_reading_what_no_earlier_job_of_its_micro_batch_stored_is_refuted():
    """The last stage runs micro-batch 1's backward before its forward: the
    backward reads the activations the forward hands over by name, which its
    micro-batch's scope does not hold yet (another micro-batch's would not
    do): the job list cannot run, named by rank, job and value."""
    def edit(r, jobs):
        if r != 1:
            return jobs
        fwd1 = jobs.index(["forward", 1])
        bwd1 = jobs.index(["backward", 1])
        jobs = [list(j) for j in jobs]
        jobs[fwd1], jobs[bwd1] = jobs[bwd1], jobs[fwd1]
        return jobs

    out = _proof("planner_pp2", edit)
    assert out[1].verdict.value == "NOT_EQUIVALENT", [c.message for c in out.values()]
    msg = out[1].message
    assert "(backward, micro-batch 1) reads" in msg and \
        "which no earlier job of its micro-batch stored" in msg, msg
