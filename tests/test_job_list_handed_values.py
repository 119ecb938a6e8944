"""A value a job is handed (a keyword argument an earlier job of its
micro-batch stored) stays readable in every piece of the job
(``job_plan_runs.values_kept``).

The job-list runner cuts a job at its collectives into pieces, each a
program of its own; Paddle's interpreter freed a handed value after its last
read in the first piece, and a second piece reading it again raised
"Tensor holds no memory" (a generated pp x mp plan's backward job, whose
softmax_grad reads the forward's stored softmax after an all-reduce).  In
Paddle the job is one program: the value lives until its last read in the
job.  The twin: a job reading a value that no earlier job stored is still a
``JobPlanError`` naming it (raised through the lock step)."""
from __future__ import annotations

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

RINGS = {0: [[0, 1]]}
STORED = "h_stored"


def _forward(store=True):
    """``h = tanh(x)``, stored under ``STORED`` for a later job (``store``)."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 6], "float32")
            h = paddle.tanh(x)
            if store:
                paddle._C_ops.set_persistable_value(h, STORED)
            else:
                paddle._C_ops.set_persistable_value(h, "something_else")
        return export_programs(main, startup, value_names(main))


def _backward():
    """``out = all_reduce(h * h) + h`` on the handed ``h`` (a keyword
    argument): ``h`` read before the collective and after it.  (exported, out)."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            like = paddle.static.data("like", [4, 6], "float32")
            h = main.global_block().add_kwarg(STORED, like.type())
            h.persistable = False
            like.get_defining_op().erase()
            s = paddle._C_ops.all_reduce(h * h, 0, 0)
            out = s + h
        names = value_names(main)
        return export_programs(main, startup, names), names.name(out)


def _inputs():
    rng = np.random.default_rng(7)
    return {r: rng.standard_normal((4, 6)).astype("float32") for r in (0, 1)}


def _run(store=True):
    from verify.numeric.job_plan_runs import run_job_plans

    xs = _inputs()
    ranks = {}
    for r in (0, 1):
        fwd = _forward(store)
        bwd, out = _backward()
        ranks[r] = {"jobs": [("forward", 0), ("backward", 0)],
                    "programs": {"forward": fwd, "backward": bwd}, "whole": fwd,
                    # out read as the backward job's watched value (a gradient's slot)
                    "map": {"loss": None, "params": {}, "grads": {"backward": {out: out}}},
                    "params": {}, "feeds": [{"x": xs[r]}]}
    got = run_job_plans(ranks, RINGS, 1, 1, "handed values test")
    return {r: got[r][0][out] for r in got}


def test_a_handed_value_read_in_two_pieces_of_a_job():
    xs = _inputs()
    hs = {r: np.tanh(xs[r].astype(np.float64)) for r in xs}
    s = sum(h * h for h in hs.values())
    got = _run()
    for r in (0, 1):
        np.testing.assert_allclose(got[r], s + hs[r], rtol=1e-5, atol=1e-5,
                                   err_msg=f"rank {r}")


def test_a_value_no_earlier_job_stored_is_still_a_job_plan_error():
    from verify.numeric.job_plan_runs import JobPlanError
    from verify.numeric.run_spec import BackendError

    with pytest.raises(BackendError, match=f"reads {STORED}, which no earlier job") as err:
        _run(store=False)
    assert isinstance(err.value.__cause__, JobPlanError)
