"""Streams as PIR's executor reads them (``verify/ir/executor_streams.py``)
and races across a pipeline rank's job list (``verify/checks/job_streams.py``):
the real 1F1B scheduler's job programs (Paddle planned, cached) are ordered;
the same programs with the scheduler's stream/event attrs where the executor
does not read them are judged as what runs."""
from __future__ import annotations

import json

import pytest

from verify.checks import CheckContext
from verify.checks import job_streams, streams
from verify.ir.executor_streams import executed_stream
from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.verdicts import Verdict

CASE = "planner_pp2_1f1b"


def _job_programs(case_name, rank):
    """``(jobs, {type: (main, names)})`` of a planned rank (PIR mode outside)."""
    import cases
    from passes.planner import planner_dir
    from verify.ir.pir_snapshot import import_programs
    from verify.plan.stages import read_job

    folder = planner_dir(cases.all_cases()[case_name])
    pipe = json.loads((folder / f"rank{rank}" / "planner.json").read_text())["pipeline"]
    progs = {}
    for kind, fname in pipe["programs"].items():
        main, _, names = import_programs(read_job(folder / f"rank{rank}", fname))
        progs[kind] = (main, names)
    return [tuple(j) for j in pipe["jobs"]], progs


def _judge(jobs, progs, rank):
    from verify.ir.pir_snapshot import from_pir_programs

    snaps = {k: from_pir_programs(m, None, n) for k, (m, n) in progs.items()}
    return job_streams.run_job_list(jobs, snaps, f"{CASE} rank {rank}", rank)


@pytest.fixture(scope="module")
def last_stage():
    """Rank 1 of the 1F1B pp2 plan: recv_forward jobs receive on
    ``send_recv_stream`` what the forward jobs read on the default stream."""
    import paddle

    guard = paddle.pir_utils.IrGuard()
    guard.__enter__()
    yield 1
    guard.__exit__(None, None, None)


def _ops(progs, kind):
    return list(progs[kind][0].global_block().ops)


def test_the_real_schedulers_job_lists_are_ordered(last_stage):
    for rank in (0, 1):
        jobs, progs = _job_programs(CASE, rank)
        res = _judge(jobs, progs, rank)
        assert [c.verdict for c in res] == [Verdict.EQUIVALENT], res[0].message
        assert "send_recv_stream" in res[0].message and "cross-stream conflicts" in res[0].message


def test_a_wait_on_an_op_the_executor_does_not_build_is_no_wait(last_stage):
    """The scheduler's wait moved from the forward job's first reader of the
    received value to the op defining that reader's other operand (a
    ``builtin.parameter`` or ``pd_op.data``: ops PIR's interpreter builds no
    instruction for).  Read as written, the wait would order the reader
    through that op; the executor never waits, and the read races the recv."""
    jobs, progs = _job_programs(CASE, last_stage)
    moved = 0
    for kind in progs:
        for o in _ops(progs, kind):
            names = dict(o.attrs()).get("events_to_wait")
            if not names:
                continue
            for i in range(o.num_operands()):
                d = o.operand_source(i).get_defining_op()
                if d is not None and d.name() in ("builtin.parameter", "pd_op.data"):
                    o.erase_attr("events_to_wait")
                    d.set_str_array_attr("events_to_wait", list(names))
                    moved += 1
                    break
    assert moved
    res = _judge(jobs, progs, last_stage)
    bad = [c for c in res if c.verdict == Verdict.NOT_EQUIVALENT and
           c.counterexample["first"]["op_type"] == "pd_op.recv_v2"]
    assert bad, res[0].message
    ce = bad[0].counterexample
    assert (ce["first"]["job_type"], ce["second"]["job_type"]) == ("recv_forward", "forward")
    assert (ce["first"]["stream"], ce["second"]["stream"]) == ("send_recv_stream", "default")
    assert ce["first"]["job"] < ce["second"]["job"]
    assert ce["first"]["start"] < ce["first"]["end"] and \
        ce["second"]["start"] < ce["first"]["end"]
    assert ce["first"]["micro_batch"] == ce["second"]["micro_batch"]


def test_a_record_without_force_record_event_is_no_record(last_stage):
    """``event_to_record`` set but ``force_record_event`` false: PIR's
    interpreter records nothing under the name, the wait is for nothing."""
    jobs, progs = _job_programs(CASE, last_stage)
    n = 0
    for kind in progs:
        for o in _ops(progs, kind):
            if dict(o.attrs()).get("force_record_event") is True:
                o.set_bool_attr("force_record_event", False)
                n += 1
    assert n
    res = _judge(jobs, progs, last_stage)
    assert any(c.verdict == Verdict.NOT_EQUIVALENT for c in res)


def test_the_comm_stream_on_a_builtin_op_is_not_credited(last_stage):
    """The scheduler's stream set on the ops that only name the received
    value (``builtin.shadow_output``) and not on the recv: everything runs
    on the default stream, so no overlap is credited and nothing races."""
    jobs, progs = _job_programs(CASE, last_stage)
    for kind in progs:
        for o in _ops(progs, kind):
            if dict(o.attrs()).get("execution_stream") == "send_recv_stream":
                o.set_execution_stream("DefaultStream")
            if o.name() == "builtin.shadow_output":
                o.set_execution_stream("send_recv_stream")
    res = _judge(jobs, progs, last_stage)
    assert [c.verdict for c in res] == [Verdict.EQUIVALENT]
    assert "streams ['default']" in res[0].message


# -- the executor's reading, on plain snapshots ------------------------------------
def test_executed_stream_is_the_executors_reading():
    assert executed_stream("pd_op.send_v2", {"execution_stream": "send_recv_stream"}) == \
        "send_recv_stream"
    assert executed_stream("pd_op.reduce_scatter", {"execution_stream": "DefaultStream"}) == \
        "default"
    assert executed_stream("pd_op.all_reduce_", {"execution_stream": "default"}) == \
        "CustomStream-default"
    assert executed_stream("builtin.combine", {"execution_stream": "s"}) == "default"
    assert executed_stream("pd_op.if", {"execution_stream": "s"}) == "default"
    assert executed_stream("pd_op.matmul", {}) == "default"


def _pir(ops):
    vars_ = {n: Var(n, [4], "float32") for o in ops for n in o.reads() + o.writes()}
    return ProgramSnapshot(ops=ops, vars=vars_, meta={"ir": "pir"})


def _ctx(snap):
    return CheckContext(pass_name="p", case_name="c", rank=0, before=snap, after=snap)


def test_streams_check_reads_pir_streams_as_the_executor():
    """``DefaultStream`` is the default stream: one stream, program order;
    ``default`` is a stream of its own: the check sees two."""
    def prog(value):
        return _pir([
            Op(0, "pd_op.matmul", {"x": ["a"], "y": ["b"]}, {"out": ["%0"]}),
            Op(1, "pd_op.all_reduce", {"x": ["%0"]}, {"out": ["%1"]},
               attrs={"execution_stream": value}, stream=value),
            Op(2, "pd_op.scale", {"x": ["%1"]}, {"out": ["%2"]})])
    one = streams.run(_ctx(prog("DefaultStream")))
    assert [c.verdict for c in one] == [Verdict.EQUIVALENT]
    assert "all ops on one stream (default)" in one[0].message
    two = streams.run(_ctx(prog("default")))
    assert [c.verdict for c in two] == [Verdict.EQUIVALENT]
    assert "CustomStream-default" in two[0].message and "2 cross-stream conflicts" in \
        two[0].message


def test_the_planner_checks_each_pipeline_ranks_job_list():
    """``passes/planner.py`` runs the check on the planned job programs: one
    result per pipeline rank, none for a plan without a pipeline."""
    import cases
    from passes.planner import job_stream_checks, planner_dir

    for name, n in ((CASE, 2), ("planner_tp2_gm", 0)):
        case = cases.all_cases()[name]
        folder = planner_dir(case)
        records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
                   for r in case.ranks}
        res = job_stream_checks(case, folder, records)
        assert len(res) == n and all(c.verdict == Verdict.EQUIVALENT for c in res), \
            [c.message for c in res]
        assert all(c.name == job_streams.NAME and "pipeline_scheduler" in c.message
                   for c in res)


def test_a_scheduler_that_does_not_force_its_event_is_caught(monkeypatch):
    """Paddle's 1F1B scheduler with ``force_record_event`` false on the ops it
    names an event on (mutant ``sched_record_not_forced``): the values are the
    same (the job plan relation cannot see it), but the executor records no
    event, and the last stage's forward job reads what its recv_forward job
    receives on ``send_recv_stream`` unordered: NOT_EQUIVALENT, the
    pipeline_scheduler stage blamed."""
    from tests.test_planner import _apply

    app = _apply(CASE, ["sched_record_not_forced"], monkeypatch)
    res = [c for c in app.checks if c.name == job_streams.NAME]
    bad = [c for c in res if c.verdict == Verdict.NOT_EQUIVALENT]
    assert bad, [c.message for c in res]
    ce = bad[0].counterexample
    assert ce["stage"] == "pipeline_scheduler" and ce["rank"] == 1
    assert ce["first"]["op_type"] == "pd_op.recv_v2" and \
        ce["first"]["stream"] == "send_recv_stream" and ce["second"]["stream"] == "default"
    assert app.verdict == Verdict.NOT_EQUIVALENT


def test_which_ops_the_executor_builds():
    from verify.ir.executor_streams import runs_as_kernel, runs_at_all

    assert runs_at_all("pd_op.matmul") and runs_as_kernel("pd_op.matmul")
    assert runs_at_all("builtin.combine") and not runs_as_kernel("builtin.combine")
    assert runs_at_all("pd_op.if") and not runs_as_kernel("pd_op.if")
    for skipped in ("builtin.shadow_output", "builtin.parameter", "builtin.split",
                    "builtin.slice", "pd_op.data", "pd_op.feed", "cf.stack_create"):
        assert not runs_at_all(skipped) and not runs_as_kernel(skipped), skipped
