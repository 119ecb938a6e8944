"""The PIR simulator's segments (``verify/numeric/pir_segments.py``): each op
runs once per step, values crossing a collective are carried; on concrete
values they give numpy's answer and the prefix stages' answer, an in-place
parameter update before the last collective included (which the prefix
stages refuse unless they restore state); an in-place write a later segment
would miss is refused, and the run falls back to the prefix stages."""
from __future__ import annotations

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

RINGS = {0: [[0, 1]]}


def _program(update_param=False, inplace_carried=False):
    """Two all_reduces; ``h`` is computed before the first and read after
    both; optionally ``w`` is overwritten in place (in the scope) between
    them, or ``h`` is relu'd in place before the first (a later reader would
    see the write).  (main, startup, names, watched name, param name)."""
    import paddle

    from verify.ir.pir_snapshot import value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 6], "float32")
            w = paddle.create_parameter([6, 6], "float32")
            h = paddle.matmul(x, w)
            if inplace_carried:
                paddle._C_ops.relu_(h)
            a = paddle._C_ops.all_reduce(h * 0.5, 0, 0)
            if update_param:
                paddle.assign(w * 2.0, output=w)  # in place, in the scope
            b = paddle._C_ops.all_reduce(paddle.matmul(a, w) + h, 0, 0)
            out = b - h
        names = value_names(main)
        return main, startup, names, names.name(out), w.name


def _payload(**kw):
    import paddle

    from verify.ir.pir_snapshot import export_programs

    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((4, 6)).astype("float32") for _ in range(2)]
    w0 = rng.standard_normal((6, 6)).astype("float32")
    ranks = {}
    for r in (0, 1):
        main, startup, names, out, wname = _program(**kw)
        with paddle.pir_utils.IrGuard():
            ranks[r] = {"exported": export_programs(main, startup, names),
                        "params": {wname: w0}, "feeds": [{"x": xs[r]}] * 2, "watch": [out]}
    return ranks, xs, w0, out


def _numpy(xs, w0, update_param, steps=2):
    outs, w = [], w0.astype(np.float64)
    for _ in range(steps):
        hs = [x @ w for x in xs]
        a = sum(h * 0.5 for h in hs)
        if update_param:
            w = w * 2.0
        b = sum(a @ w + h for h in hs)
        outs.append([b - h for h in hs])
    return outs


@pytest.mark.parametrize("update_param", [False, True], ids=["pure", "param_updated_between"])
def test_segments_give_numpys_answer_and_the_prefix_stages_answer(update_param):
    from verify.numeric.pir_ranks import run_exported_ranks

    ranks, xs, w0, out = _payload(update_param=update_param)
    seg = run_exported_ranks(ranks, RINGS, steps=2, segments=True)
    pre = run_exported_ranks(ranks, RINGS, steps=2, segments=False, restore_state=True)
    want = _numpy(xs, w0, update_param)
    for r in (0, 1):
        for k in range(2):
            np.testing.assert_allclose(seg[r][k][out], want[k][r], rtol=1e-4, atol=1e-4)
            np.testing.assert_array_equal(seg[r][k][out], pre[r][k][out])


def test_prefix_stages_refuse_a_parameter_update_before_a_collective_segments_run_it():
    from verify.numeric.pir_ranks import run_exported_ranks
    from verify.numeric.run_spec import BackendError

    ranks, *_ = _payload(update_param=True)
    with pytest.raises(BackendError, match="in place before the last collective"):
        run_exported_ranks(ranks, RINGS, steps=1, segments=False)
    run_exported_ranks(ranks, RINGS, steps=1, segments=True)


def test_each_op_runs_in_exactly_one_segment():
    import paddle

    from verify.ir.collectives import communicates
    from verify.numeric.pir_segments import SOURCES, plan, stage

    main, _, names, out, _ = _program(update_param=True)
    with paddle.pir_utils.IrGuard():
        ops = list(main.global_block().ops)
        cuts = [i for i, op in enumerate(ops) if communicates(op.name())]
        pos = {names.name(op.result(k)): (i, k) for i, op in enumerate(ops)
               for k in range(op.num_results())}
        carried, why = plan(main, cuts, [pos[out]])
        assert why is None and carried
        work = [op.name() for op in ops if op.name() not in SOURCES and
                not communicates(op.name())]
        ran = []
        for j in range(len(cuts) + 1):
            prog = stage(main, cuts, j, [pos[out]], carried)[0]
            ran += [op.name() for op in prog.global_block().ops
                    if op.name() not in SOURCES and not communicates(op.name())]
        assert sorted(ran) == sorted(work)


def test_an_inplace_write_a_later_segment_reads_is_refused_and_the_prefix_runs():
    import paddle

    from verify.ir.collectives import communicates
    from verify.numeric.pir_ranks import run_exported_ranks
    from verify.numeric.pir_segments import plan

    main, *_ = _program(inplace_carried=True)
    with paddle.pir_utils.IrGuard():
        ops = list(main.global_block().ops)
        cuts = [i for i, op in enumerate(ops) if communicates(op.name())]
        carried, why = plan(main, cuts, [])
    assert carried is None and "relu_" in why and "in place" in why
    ranks, *_ = _payload(inplace_carried=True)
    seg = run_exported_ranks(ranks, RINGS, steps=1, segments=True)  # fell back
    pre = run_exported_ranks(ranks, RINGS, steps=1, segments=False)
    out = ranks[0]["watch"][0]
    np.testing.assert_array_equal(seg[0][0][out], pre[0][0][out])
