"""Pipelines planned by Paddle's PIR planner (``examples/pipeline_of.py``):
sends and recvs in the lock-step simulator, each rank's job list as the
scheduler made it (``verify/numeric/job_plan_runs.py``), and broken
schedulers (mutants of the installed scheduler passes) caught."""
from __future__ import annotations

import json

import numpy as np
import pytest

from verify.numeric.run_spec import ScheduleError
from verify.numeric.simulated_ranks import _lockstep


class _Op:
    def __init__(self, kind, ring, peer, x=None, out=None, shape=None, dtype="float32"):
        self.kind, self.ring, self.peer, self.x, self.out = kind, ring, peer, x, out
        self.type, self.index = f"pd_op.{kind}_v2", 0
        self.shape, self.dtype, self.root = shape, dtype, 0


class _Script:
    """A rank that meets its sends and recvs in order (``_lockstep``'s interface)."""

    def __init__(self, ops, values=None):
        self.ops, self.pos, self.values = ops, 0, dict(values or {})

    def advance(self):
        return self.ops[self.pos] if self.pos < len(self.ops) else None

    def get(self, name):
        return self.values.get(name)

    def set(self, name, value):
        self.values[name] = value


def test_a_send_reaches_the_peer_its_ring_names():
    """Ring 13's group is [1, 0] as recorded: rank 1's peer 1 is rank 0."""
    a, g = np.arange(4, dtype="float32"), np.ones(4, "float32")
    r0 = _Script([_Op("send", 12, 1, x="a"), _Op("recv", 13, 0, out="g", shape=[4])], {"a": a})
    r1 = _Script([_Op("recv", 12, 0, out="a", shape=[4]), _Op("send", 13, 1, x="g")], {"g": g})
    _lockstep({0: r0, 1: r1}, {12: [[0, 1]], 13: [[1, 0]]}, "t")
    assert np.array_equal(r1.values["a"], a) and np.array_equal(r0.values["g"], g)


def test_a_recv_nobody_sends_is_a_schedule_error():
    r0 = _Script([_Op("recv", 13, 0, out="g", shape=[4])])
    r1 = _Script([])
    with pytest.raises(ScheduleError, match="rank 0 in pd_op.recv_v2"):
        _lockstep({0: r0, 1: r1}, {13: [[1, 0]]}, "t")


def test_a_send_nobody_receives_is_a_schedule_error():
    r0 = _Script([_Op("send", 12, 1, x="a")], {"a": np.ones(2, "float32")})
    with pytest.raises(ScheduleError, match="rank 0 sent 1 tensor.*rank 1 never received"):
        _lockstep({0: r0, 1: _Script([])}, {12: [[0, 1]]}, "t")


def test_a_recv_of_another_shape_than_sent_is_a_schedule_error():
    r0 = _Script([_Op("send", 12, 1, x="a")], {"a": np.ones([2, 8], "float32")})
    r1 = _Script([_Op("recv", 12, 0, out="a", shape=[4, 8])])
    with pytest.raises(ScheduleError, match=r"declares it receives \[4, 8\].*sent \[2, 8\]"):
        _lockstep({0: r0, 1: r1}, {12: [[0, 1]]}, "t")


def _apply(case_name, overlay=None, monkeypatch=None):
    from tests.test_planner import _apply as apply

    return apply(case_name, overlay, monkeypatch)


def _checks(app, name):
    return [c for c in app.checks if c.name == name]


@pytest.mark.parametrize("case_name", ["planner_pp2", "planner_pp2_1f1b", "planner_pp2_vpp",
                                       "planner_pp2_tp2"])
def test_pipeline_job_lists_relate(case_name):
    """Every rank's job list, as the scheduler made it, relates to the serial
    micro-steps (the loss of each micro-step on the last stage, the merged
    gradients, the deferred updates), and so do the whole rank programs; on
    PP2 x TP2 with the all-reduces of each stage's row-parallel block."""
    import cases

    app = _apply(case_name)
    jobs = _checks(app, "job plan relation")
    assert sorted(c.rank for c in jobs) == cases.all_cases()[case_name].ranks, \
        [c.message for c in app.checks]
    assert all(c.verdict.value == "EQUIVALENT" for c in jobs), [c.message for c in jobs]
    assert any("loss (micro-step 2)" in c.details["values"] for c in jobs)
    assert all(c.verdict.value == "EQUIVALENT" for c in _checks(app, "planner relation"))


def test_a_1f1b_plan_interleaves_differently_per_stage():
    """1F1B's job lists are the stage's own: the last stage alternates forward
    and backward, the first runs its forwards first (what the runner must
    match sends and recvs across)."""
    import cases
    from passes.planner import planner_dir

    folder = planner_dir(cases.all_cases()["planner_pp2_1f1b"])
    jobs = {r: [tuple(j) for j in json.loads((folder / f"rank{r}" / "planner.json")
                                             .read_text())["pipeline"]["jobs"]]
            for r in (0, 1)}
    kinds = {r: [t for t, _ in j if t in ("forward", "backward")] for r, j in jobs.items()}
    assert kinds[0] == ["forward", "forward", "backward", "backward"]
    assert kinds[1] == ["forward", "backward", "forward", "backward"]


def test_a_scheduler_that_runs_every_backward_on_one_micro_batch_is_caught(monkeypatch):
    """FThenB's backward jobs all on micro-batch 0: the sends and recvs still
    pair and the whole programs relate (the scheduler's input is the same),
    but micro-batch 0's gradients would be merged twice and micro-batch 1's
    never: NOT_EQUIVALENT naming the job type and micro-batch, the
    pipeline_scheduler stage blamed."""
    app = _apply("planner_pp2", ["fthenb_backward_micro0"], monkeypatch)
    assert all(c.verdict.value == "EQUIVALENT" for c in _checks(app, "planner relation"))
    bad = [c for c in _checks(app, "job plan relation") if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in _checks(app, "job plan relation")]
    assert bad[0].counterexample["stage"] == "pipeline_scheduler"
    assert "backward job on micro-batch 0 2 times" in bad[0].message, bad[0].message
    assert app.verdict.value == "NOT_EQUIVALENT"
    # the proof of the job lists refutes the real mutant's plan too
    proofs = _checks(app, "planner relation proof")
    assert proofs and all(c.verdict.value == "NOT_EQUIVALENT" for c in proofs), \
        [c.message for c in proofs]
    assert all(c.counterexample["stage"] == "pipeline_scheduler" for c in proofs)


def test_job_list_coverage_rule():
    """The rule the runner holds a job list to, on concrete lists: each type
    once per micro-batch, the optimizer once; a list of the FThenB shape
    passes, one micro-batch twice or never fails, naming it."""
    from verify.numeric.job_plan_runs import JobPlanError, _check_coverage

    good = [("forward", 0), ("forward", 1), ("backward", 0), ("backward", 1), ("optimizer", 0)]
    _check_coverage(good, 2, "t", 0)
    with pytest.raises(JobPlanError, match="forward job never on micro-batch 1"):
        _check_coverage([("forward", 0)] + good[2:], 2, "t", 0)
    with pytest.raises(JobPlanError, match="optimizer job 2 times"):
        _check_coverage(good + [("optimizer", 0)], 2, "t", 0)


def test_a_scheduler_that_drops_a_send_is_caught(monkeypatch):
    """1F1B without its cool-down send_backward jobs: the last stage would
    never send those gradients back (the stage before would wait for them
    forever): NOT_EQUIVALENT naming the job never run, the
    pipeline_scheduler stage blamed."""
    app = _apply("planner_pp2_1f1b", ["1f1b_no_cooldown_send"], monkeypatch)
    bad = [c for c in _checks(app, "job plan relation") if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in _checks(app, "job plan relation")]
    assert bad[0].counterexample["stage"] == "pipeline_scheduler"
    assert "send_backward job never on micro-batch 1" in bad[0].message, bad[0].message
    # the proof: the job lists cannot complete (a recv waits for ever)
    proofs = [c for c in _checks(app, "planner relation proof")
              if c.verdict.value == "NOT_EQUIVALENT"]
    assert proofs and "does not run" in proofs[0].message, \
        [c.message for c in _checks(app, "planner relation proof")]


def test_job_lists_out_of_step_across_ranks_are_caught(monkeypatch):
    """Each job list covers every micro-batch, but the last stage runs its
    backward jobs in the order 1, 0 while the first stage receives in the
    order 0, 1: each gradient sent lands in the other micro-batch's backward
    (sends and recvs pair first in, first out), so the first stage's merged
    gradients are not the serial ones: NOT_EQUIVALENT on rank 0 at the first
    step; the faithful lists relate (``test_pipeline_job_lists_relate``)."""
    import cases
    from passes.planner import ADAPTER, merged_plan, planner_dir, relation_run

    monkeypatch.setenv("VERIFY_PLANNER_RUN_MEMO", "0")
    case = cases.all_cases()["planner_pp2"]
    ADAPTER.whole_application(case, numeric=False)  # planned, records written
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    jobs = records[1]["pipeline"]["jobs"]
    back = [i for i, (t, _) in enumerate(jobs) if t == "backward"]
    for i, m in zip(back, reversed([jobs[i][1] for i in back])):
        jobs[i] = ["backward", m]
    out = relation_run(case, folder, records, [], merge=merged_plan(case, records), jobs=True)
    by_rank = {c.rank: c for c in out}
    assert by_rank[0].verdict.value == "NOT_EQUIVALENT", [c.message for c in out]
    cex = by_rank[0].counterexample
    assert cex["step"] == 0 and cex["value"].endswith("@GRAD"), cex
    # the last stage's own gradients are right; its loss moves only once the
    # first stage's wrong update feeds it (the second step)
    assert by_rank[1].verdict.value == "EQUIVALENT" or by_rank[1].counterexample["step"] == 1


def test_a_witness_whose_gradients_are_all_zero_decides_nothing():
    """Runs whose every gradient is zero (a ReLU on the head clipping every
    output: how this family's first pipeline model related vacuously) agree
    with any backward: INCONCLUSIVE, not EQUIVALENT; the same runs with a
    live gradient relate."""
    from verify.numeric.planner_runs import compare_runs

    rep = {"process_ids": [0, 1], "mesh_shape": [2], "dims_mapping": [-1], "partial": {}}
    serial_rel = {"loss": None, "params": {"w": {"param": "w", "grad": "g", "shape": [2]}}}
    rank_rels = {r: {"params": {"w": {"param": "w", "grad": "g", "placement": rep,
                                      "grad_placement": rep}}} for r in (0, 1)}

    def runs(g):
        return [{"w": np.ones(2, "float32"), "g": np.full(2, g, "float32")}]

    dead = compare_runs("t", serial_rel, rank_rels, {}, runs(0.0), {0: runs(0.0), 1: runs(0.0)}, 1)
    assert [c.verdict.value for c in dead] == ["INCONCLUSIVE"] * 2, [c.message for c in dead]
    assert "every gradient compared is zero" in dead[0].message
    live = compare_runs("t", serial_rel, rank_rels, {}, runs(0.5), {0: runs(0.5), 1: runs(0.5)}, 1)
    assert [c.verdict.value for c in live] == ["EQUIVALENT"] * 2, [c.message for c in live]


def _stage_snapshots(case_name, stage):
    import cases
    from passes.planner import _snap, planner_dir

    case = cases.all_cases()[case_name]
    folder = planner_dir(case)
    out = {}
    for r in case.ranks:
        rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
        st = next(s for s in rec["stages"] if s["stage"] == stage)
        out[r] = _snap(folder, r, st["snapshot"])
    return out


def _with_rank0_send(snaps, edit):
    import copy

    ops = [copy.deepcopy(o) for o in snaps[0].ops]
    edit(next(o for o in ops if o.type == "pd_op.send_v2"))
    return {**snaps, 0: snaps[0].with_ops(ops)}


def test_the_value_proof_runs_sends_and_recvs():
    """The symbolic executor matches a send with its peer's recv (the ring's
    group in its recorded order): an attr edit that changes no value is
    proved on both ranks by executing them (not by identity); rank 0 sending
    its pre-activation instead of the ReLU's output is refuted on both ranks
    (rank 1 computes on what it received, rank 0 on the gradients it gets
    back)."""
    from verify.value.proof import prove_application

    snaps = _stage_snapshots("planner_pp2", "remove")  # before the merge: no kwargs
    watched = {r: [o.outputs["param_out"][0] for o in s.ops if o.type == "pd_op.sgd_"]
               for r, s in snaps.items()}
    rings = {12: [[0, 1]], 13: [[1, 0]]}

    def flip(op):
        op.attrs["dynamic_shape"] = not op.attrs.get("dynamic_shape", False)

    same = prove_application("t", [0, 1], rings, snaps, _with_rank0_send(snaps, flip), watched)
    assert [c.verdict.value for c in same] == ["EQUIVALENT"] * 2, [c.message for c in same]
    assert all("are the original ones" not in c.message for c in same)
    relu_in = [o.inputs["x"][0] for o in snaps[0].ops if o.type == "pd_op.relu"][-1]

    def wrong(op):
        op.inputs["x"] = [relu_in]

    bad = prove_application("t", [0, 1], rings, snaps, _with_rank0_send(snaps, wrong), watched)
    assert [c.verdict.value for c in bad] == ["NOT_EQUIVALENT"] * 2, [c.message for c in bad]


def test_recv_shape_rule_is_what_the_peer_sends():
    """The recv_v2 rule (its out is its out_shape attr), evaluated on the
    planned programs: each recv's out_shape is the shape of the tensor its
    peer's matching send reads (sends and recvs on a ring paired in order);
    a recv whose declared result disagrees with its out_shape is a shape
    finding."""
    import copy

    from verify.checks import CheckContext, shape_check

    snaps = _stage_snapshots("planner_pp2", "remove_comm")
    rings = {12: [0, 1], 13: [1, 0]}
    sent, got = {}, {}
    for r, s in snaps.items():
        for o in s.ops:
            ring = int(o.attrs.get("ring_id", -1))
            if o.type == "pd_op.send_v2":
                peer = rings[ring][o.attrs["peer"]]
                sent.setdefault((ring, r, peer), []).append(list(s.vars[o.inputs["x"][0]].shape))
            elif o.type == "pd_op.recv_v2":
                peer = rings[ring][o.attrs["peer"]]
                got.setdefault((ring, peer, r), []).append(list(o.attrs["out_shape"]))
    assert sent and sent == got, (sent, got)

    def checked(snap):
        ctx = CheckContext(pass_name="t", case_name="planner_pp2", rank=1, before=snap,
                           after=snap, symbols={})
        return [c for c in shape_check.run(ctx) if not c.ok and not c.advisory]

    assert not checked(snaps[1])
    ops = [copy.deepcopy(o) for o in snaps[1].ops]
    recv = next(o for o in ops if o.type == "pd_op.recv_v2")
    recv.attrs["out_shape"] = [4, 8]
    bad = checked(snaps[1].with_ops(ops))
    assert bad and "recv_v2" in bad[0].message, [c.message for c in bad]


def test_a_send_addressed_to_its_own_rank_is_caught_before_any_run(monkeypatch):
    """The same-status reshard's send names the sender itself as its peer
    (mutant of the installed module): each rank's programs as run are checked
    as the backend reads them (``passes/planner.py:backend_validity``), so
    the send that would wait for ever is NOT_EQUIVALENT naming the op, the
    ring's group and the rank, with no run needed (``_apply`` runs none)."""
    app = _apply("planner_pp2", ["p2p_send_to_itself"], monkeypatch)
    bad = [c for c in app.checks if c.kind == "dataflow" and c.name == "collective peer"
           and c.verdict.value == "NOT_EQUIVALENT" and not c.advisory]
    assert bad, [(c.name, c.verdict.value, c.message[:160]) for c in app.checks]
    assert bad[0].counterexample["op_type"] == "pd_op.send_v2", bad[0].counterexample
    assert f"rank {bad[0].rank} itself, which waits for ever" in bad[0].message, bad[0].message
    assert app.verdict.value == "NOT_EQUIVALENT"


def test_the_installed_pipeline_passes_the_backend_checks():
    """Twin: the installed planner's pipeline programs hold every check of
    the backend: rings, peers, dtypes and the startup's initialisation."""
    app = _apply("planner_pp2")
    got = [c for c in app.checks if c.kind == "dataflow" and c.name == "backend validity"]
    assert sorted(c.rank for c in got) == [0, 1], [(c.name, c.message[:160]) for c in app.checks]
    assert all(c.verdict.value == "EQUIVALENT" for c in got)


def test_rings_unknown_where_another_rank_could_not_plan():
    """A rank whose planning raised (zoo_llama_pp2_vpp's rank 1 in its
    scheduler) records no rings (``plan.json`` holds none): the other ranks'
    sends and recvs are then checked for dtypes and the startup only, never
    reported on a ring "no group declares" (a false NOT_EQUIVALENT the
    default run showed)."""
    import cases
    from passes.planner import backend_validity, planner_dir

    case = cases.all_cases()["planner_pp2"]
    folder = planner_dir(case)
    rec = json.loads((folder / "rank0" / "planner.json").read_text())
    [got] = backend_validity(case, folder, 0, rec.get("relation"), rings_known=False)
    assert got.verdict.value == "EQUIVALENT" and "rings unknown" in got.message, got.message
