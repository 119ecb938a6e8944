"""The runners of the PIR passes' own numeric checks run each program's ops in
program order, as the planner relation's runners do
(``tests/test_wave_program_order.py``, ``tests/test_job_runners_program_order.py``):
``pir_ranks.run_exported_ranks`` (every rank in lock step, cut at its
collectives) and ``pir_runner.run_exported`` (one rank, one program; also the
planner relation's serial run).

A forward op reads a parameter through ``pd_op.share_data_`` (an alias a
reshard inserts), which Paddle's dependency analysis does not see; an SGD
update of the parameter whose gradient does not depend on that read (fed by
a collective's result on the ranks, or computed from the input alone in one
program) ran before the aliased read under ``serial_interpreter`` alone,
every step, so the forward read the updated parameter.  The twin: a program
whose forward really reads the updated parameter (the update placed before
the read) is still read updated.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.test_wave_program_order import CHAIN, RINGS, _program  # imports legacy_ir first

STEPS = 2
LR = 0.5


def _one_rank_program(update_first):
    """``y = chain(x) @ share_data_(w)`` and an SGD update of ``w`` by ``x^T x``
    (no collective), after the read in program order or before it.
    (main, startup, names, y, w)."""
    import paddle

    from verify.ir.pir_snapshot import value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 6], "float32")
            w = paddle.create_parameter([6, 6], "float32")
            lr = paddle.full([1], LR, "float32")
            g = paddle.matmul(x, x, transpose_x=True)

            def update():
                paddle._C_ops.sgd_(w, lr, g, None, False)

            if update_first:
                update()
            alias = paddle._C_ops.share_data_(w)
            t = x
            for _ in range(CHAIN):
                t = paddle.tanh(t)
            y = paddle.matmul(t, alias)
            if not update_first:
                update()
        names = value_names(main)
        return main, startup, names, names.name(y), w.name


def _inputs():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 6)).astype("float32") for _ in range(2)]
    return xs, rng.standard_normal((6, 6)).astype("float32")


def _exported(build, update_first):
    import paddle

    from verify.ir.pir_snapshot import export_programs

    main, startup, names, y, wname = build(update_first)
    with paddle.pir_utils.IrGuard():
        return export_programs(main, startup, names), y, wname


def _expected(xs, w0, grad, update_first):
    """``[y per step]`` of the rank fed ``xs[0]`` by numpy: ``w`` read as it
    is before the step's update, or after it (``update_first``)."""
    ws = [w0.astype(np.float64) - LR * n * grad for n in range(STEPS + 1)]
    t = xs[0].astype(np.float64)
    for _ in range(CHAIN):
        t = np.tanh(t)
    return [t @ ws[k + 1 if update_first else k] for k in range(STEPS)]


def _run_ranks(update_first):
    """Rank 0's ``y`` per step from ``run_exported_ranks`` (2 ranks, the
    gradient all-reduced), and numpy's."""
    from verify.numeric.pir_ranks import run_exported_ranks

    xs, w0 = _inputs()
    ranks = {}
    for r in (0, 1):
        exported, y, wname = _exported(_program, update_first)
        ranks[r] = {"exported": exported, "params": {wname: w0.copy()},
                    "feeds": [{"x": xs[r]}] * STEPS, "watch": [y]}
    got = run_exported_ranks(ranks, RINGS, STEPS, "pass runner order test")
    grad = sum(x.T.astype(np.float64) @ x for x in xs)
    return [s[y] for s in got[0]], _expected(xs, w0, grad, update_first)


def _run_one(update_first):
    """``y`` per step from ``run_exported`` (one program, no collective), and numpy's."""
    from verify.numeric.pir_runner import run_exported

    xs, w0 = _inputs()
    exported, y, wname = _exported(_one_rank_program, update_first)
    got = run_exported(exported, {wname: w0.copy()}, [{"x": xs[0]}] * STEPS, [y], 0, STEPS)
    grad = xs[0].T.astype(np.float64) @ xs[0]
    return [s[y] for s in got], _expected(xs, w0, grad, update_first)


def _assert(pair):
    got, want = pair
    for k in range(STEPS):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4, err_msg=f"step {k}")


@pytest.mark.parametrize("runner", [_run_ranks, _run_one], ids=["ranks", "one_rank"])
def test_the_forward_reads_the_parameter_before_its_update(runner):
    _assert(runner(update_first=False))


@pytest.mark.parametrize("runner", [_run_ranks, _run_one], ids=["ranks", "one_rank"])
def test_an_update_before_the_read_is_still_read_updated(runner):
    _assert(runner(update_first=True))
