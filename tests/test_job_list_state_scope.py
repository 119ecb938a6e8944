"""A job-list run (``job_plan_runs.run_job_plans``) updates the rank's own
parameters: a job run in its micro-batch's scope whose pieces are prefix
stages (``pir_segments`` refuses the cut, here because an in-place
``share_data_`` reads a value a later segment reads) restores the step's
state before each re-run stage, and that restore once wrote through
``scope.var``: in a micro-batch scope that made a local shadow of every
parameter and accumulator, the job's update went to the shadow, and the
rank's parameter never changed (generated pp plans whose first stage holds a
reshard's ``share_data_`` were refuted with every gradient of that stage
wrong).  Now the state is written back where it lives (``_PirRank._restore``).

The twin: a program that really applies its update twice still shows it
doubled -- the restore undoes a stage's re-run of the prefix, never the
program's own writes."""
from __future__ import annotations

import numpy as np

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

RINGS = {0: [[0, 1]]}
K = 2  # micro-batches
LR = 0.5


def _program(updates=1):
    """``t = tanh(x)``, ``share_data_(t)`` all-reduced, ``g = allreduce(a^T a)
    + t^T t`` (``t`` read after the collective), then ``updates`` SGD
    updates of ``w`` by ``g``.  (main, startup, names, w)."""
    import paddle

    from verify.ir.pir_snapshot import value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 6], "float32")
            w = paddle.create_parameter([6, 6], "float32")
            lr = paddle.full([1], LR, "float32")
            t = paddle.tanh(x)
            a = paddle._C_ops.share_data_(t)
            s = paddle._C_ops.all_reduce(paddle.matmul(a, a, transpose_x=True), 0, 0)
            g = s + paddle.matmul(t, t, transpose_x=True)
            for _ in range(updates):
                paddle._C_ops.sgd_(w, lr, g, None, False)
        for op in main.global_block().ops:
            op.op_role = 1
        return main, startup, value_names(main), w.name


def _inputs():
    rng = np.random.default_rng(5)
    xs = {(r, m): rng.standard_normal((4, 6)).astype("float32") for r in (0, 1) for m in range(K)}
    return xs, rng.standard_normal((6, 6)).astype("float32")


def _run(updates):
    import paddle

    from verify.ir.pir_snapshot import export_programs
    from verify.numeric.job_plan_runs import run_job_plans

    xs, w0 = _inputs()
    ranks, wnames = {}, {}
    for r in (0, 1):
        main, startup, names, wname = _program(updates)
        wnames[r] = wname  # unique per program built
        with paddle.pir_utils.IrGuard():
            exported = export_programs(main, startup, names)
        ranks[r] = {"jobs": [("backward", m) for m in range(K)],
                    "programs": {"backward": exported}, "whole": exported,
                    "map": {"loss": None, "params": {wname: wname}, "grads": {}},
                    "params": {wname: w0.copy()},
                    "feeds": [{"x": xs[(r, m)]} for m in range(K)]}
    got = run_job_plans(ranks, RINGS, K, 1, "job list state test")
    return {r: got[r][0] for r in got}, wnames


def _expected(updates):
    """``{rank: [w after micro-batch 0, after 1]}`` by numpy."""
    xs, w0 = _inputs()
    out = {}
    for r in (0, 1):
        w, after = w0.astype(np.float64), []
        for m in range(K):
            ts = {q: np.tanh(xs[(q, m)].astype(np.float64)) for q in (0, 1)}
            g = sum(t.T @ t for t in ts.values()) + ts[r].T @ ts[r]
            w = w - updates * LR * g
            after.append(w)
        out[r] = after
    return out


def _assert(updates):
    got, wnames = _run(updates)
    want = _expected(updates)
    for r in (0, 1):
        wname = wnames[r]
        for m in range(K):
            np.testing.assert_allclose(got[r][f"{wname}@micro{m}"], want[r][m], rtol=1e-4,
                                       atol=1e-4, err_msg=f"rank {r} after micro-batch {m}")
        np.testing.assert_allclose(got[r][wname], want[r][-1], rtol=1e-4, atol=1e-4,
                                   err_msg=f"rank {r} after the job list")


def test_the_job_runs_as_prefix_stages():
    """The premise: the segment cut is refused, so the job restores state."""
    import paddle

    from verify.ir.collectives import exchanges
    from verify.numeric.pir_segments import plan

    main, _, _, _ = _program()
    with paddle.pir_utils.IrGuard():
        cuts = [i for i, op in enumerate(main.global_block().ops) if exchanges(op.name())]
        carried, why = plan(main, cuts, [])
    assert carried is None and "share_data_" in why


def test_each_micro_batch_updates_the_ranks_parameter():
    _assert(updates=1)


def test_an_update_applied_twice_is_still_seen_twice():
    _assert(updates=2)
