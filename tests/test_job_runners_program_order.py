"""The gradient-merge runner (``merged_relation.run_schedule``, the merged
planner relation's ranks) and the pipeline job-list runner
(``job_plan_runs.run_job_plans``) run each job's ops in program order, as the
wave runner does (``tests/test_wave_program_order.py``).

Both cut a job at its collectives into segments (``pir_segments.py``) and
feed each segment the collective's result, which frees an in-place update
that reads it from the reads before it in the program.  A read through
``pd_op.share_data_`` (an alias a reshard inserts) is invisible to the
executor's dependency analysis, so under ``serial_interpreter`` alone (one
thread, dependency order) the update of ``w`` ran before the forward's
aliased read of ``w`` -- deterministically, every step, on both runners.
The twin: a program whose forward really reads the updated parameter (the
update placed before the read) is still read updated: program order does
not hide a real read-after-write."""
from __future__ import annotations

import numpy as np
import pytest

from tests.test_wave_program_order import CHAIN, RINGS, _program  # imports legacy_ir first

STEPS = 2
LR = 0.5


def _inputs():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 6)).astype("float32") for _ in range(2)]
    return xs, rng.standard_normal((6, 6)).astype("float32")


def _exported(update_first):
    """The wave test's program (``y = chain(x) @ share_data_(w)``, an SGD
    update of ``w`` by an all-reduced gradient), every op of role forward so
    the update stays in the job that reads ``w`` (the accumulate job of a
    merged program; one forward job of a job list).  (exported, y, w)."""
    import paddle

    from verify.ir.pir_snapshot import export_programs

    main, startup, names, y, wname = _program(update_first)
    with paddle.pir_utils.IrGuard():
        for op in main.global_block().ops:
            op.op_role = 0
        return export_programs(main, startup, names), y, wname


def _run_merged(update_first):
    from verify.numeric.merged_relation import run_schedule

    xs, w0 = _inputs()
    ranks = {}
    for r in (0, 1):
        exported, y, wname = _exported(update_first)
        ranks[r] = {"exported": exported, "params": {wname: w0.copy()},
                    "feeds": [{"x": xs[r]}] * STEPS, "watch": [y]}
    got = run_schedule(ranks, RINGS, STEPS, 1, "merged order test")
    return {r: [s[y] for s in got[r]] for r in got}


def _run_job_lists(update_first):
    from verify.numeric.job_plan_runs import run_job_plans

    xs, w0 = _inputs()
    ranks = {}
    for r in (0, 1):
        exported, y, wname = _exported(update_first)
        ranks[r] = {"jobs": [("forward", 0)], "programs": {"forward": exported},
                    "whole": exported,
                    # y read as a job's watched value (the map's gradient slot)
                    "map": {"loss": None, "params": {}, "grads": {"forward": {y: y}}},
                    "params": {wname: w0.copy()}, "feeds": [{"x": xs[r]}] * STEPS}
    got = run_job_plans(ranks, RINGS, 1, STEPS, "job list order test")
    return {r: [s[y] for s in got[r]] for r in got}


def _expected(update_first):
    """``{rank: [y per step]}`` by numpy: the forward reads ``w`` as it is
    before the step's update, or after it (``update_first``)."""
    xs, w0 = _inputs()
    g = sum(x.T.astype(np.float64) @ x for x in xs)
    ws = [w0.astype(np.float64) - LR * n * g for n in range(STEPS + 1)]
    out = {}
    for r in (0, 1):
        t = xs[r].astype(np.float64)
        for _ in range(CHAIN):
            t = np.tanh(t)
        out[r] = [t @ ws[k + 1 if update_first else k] for k in range(STEPS)]
    return out


def _assert(got, want):
    for r in want:
        for k in range(STEPS):
            np.testing.assert_allclose(got[r][k], want[r][k], rtol=1e-4, atol=1e-4,
                                       err_msg=f"rank {r} step {k}")


@pytest.mark.parametrize("runner", [_run_merged, _run_job_lists], ids=["merged", "job_lists"])
def test_the_forward_reads_the_parameter_before_its_update(runner):
    _assert(runner(update_first=False), _expected(update_first=False))


@pytest.mark.parametrize("runner", [_run_merged, _run_job_lists], ids=["merged", "job_lists"])
def test_an_update_before_the_read_is_still_read_updated(runner):
    _assert(runner(update_first=True), _expected(update_first=True))
