"""The value proof's model of ``coalesce_tensor`` views (verify/value/views.py)
against Paddle's own kernel and executor, and what it refuses.

Each program is built with Paddle's legacy static API, run by Paddle's
executor on CPU, and executed symbolically from its snapshot; the symbolic
values, evaluated at the fed values, must be the ones Paddle computed.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)
from verify.ir.snapshot import from_programs
from verify.value.proof import Evaluator
from verify.value.semantics import Unsupported
from verify.value.symbolic import ExecError, Store, execute

X = np.arange(6, dtype="float32").reshape(2, 3) / 4 - 0.5
Y = np.array([1.5, -2.0, 0.25, 3.0], dtype="float32")


def _program(coalesce_at, copy_data=False, set_constant=False, buffer_op="scale"):
    """x -> a = 2x, y -> b = y + 1 (the views' producers), then the buffer
    scaled by 3 in place; ``coalesce_at``: index among those three writes
    before which coalesce_tensor makes a and b views of ``fused``."""
    paddle = legacy_ir.paddle_module()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle.static.data("y", [4], "float32")
        blk = main.global_block()
        a = blk.create_var(name="a", shape=[2, 3], dtype="float32")
        b = blk.create_var(name="b", shape=[4], dtype="float32")
        fused = blk.create_var(name="fused", dtype="float32")
        writes = [
            dict(type="scale", inputs={"X": [x]}, outputs={"Out": [a]}, attrs={"scale": 2.0}),
            dict(type="scale", inputs={"X": [y]}, outputs={"Out": [b]},
                 attrs={"scale": 1.0, "bias": 1.0}),
            dict(type=buffer_op, inputs={"X": [fused]}, outputs={"Out": [fused]},
                 attrs={"scale": 3.0} if buffer_op == "scale" else {"dim": [0]})]
        coalesce = dict(type="coalesce_tensor", inputs={"Input": [a, b]},
                        outputs={"Output": [a, b], "FusedOutput": [fused]},
                        attrs={"copy_data": copy_data, "use_align": True,
                               "dtype": fused.dtype, "set_constant": set_constant,
                               "constant": 7.0, "concated_shapes": [2, 3, 4],
                               "concated_ranks": [2, 1]})
        for k, op in enumerate(writes):
            if k == coalesce_at:
                blk.append_op(**coalesce)
            blk.append_op(**op)
    return paddle, main, startup


def _by_paddle(paddle, main, startup, x=None, y=None):
    """``a`` and ``b`` as Paddle's executor computes them, fed ``x``, ``y``
    (this module's ``X``, ``Y`` by default)."""
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        a, b = exe.run(main, feed={"x": X if x is None else x, "y": Y if y is None else y},
                       fetch_list=["a", "b"])
    return np.asarray(a), np.asarray(b)


def _symbolic(main, startup):
    store = Store()
    envs, _ = execute({0: from_programs(main, startup)}, {}, store)
    feeds = {"x": X, "y": Y}

    def sym(name):  # "x@r0[1, 2]" -> x[1, 2]
        m = re.fullmatch(r"(\w+)@r0\[([\d, ]*)\]", name)
        return feeds[m.group(1)][tuple(int(i) for i in m.group(2).split(","))]

    ev = Evaluator(store, lambda n: __import__("fractions").Fraction(float(sym(n))),
                   lambda *a: None)
    return [np.array([float(ev.poly(t.i)) for t in envs[0][v].arr.reshape(-1)])
            .reshape(envs[0][v].arr.shape) for v in ("a", "b")]


def test_writes_through_views_and_the_buffer_as_paddle_computes_them():
    """coalesce (copy_data=False) before the producers: a producer's write is
    the buffer's, the buffer's in-place scale is every view's (6x, 3(y+1))."""
    paddle, main, startup = _program(coalesce_at=0)
    a, b = _by_paddle(paddle, main, startup)
    np.testing.assert_allclose(a, 6 * X, rtol=1e-6)
    np.testing.assert_allclose(b, 3 * (Y + 1), rtol=1e-6)
    sa, sb = _symbolic(main, startup)
    np.testing.assert_allclose(sa, a, rtol=1e-6)
    np.testing.assert_allclose(sb, b, rtol=1e-6)


def test_copy_data_keeps_the_views_values():
    """copy_data=True after the producers: the values are copied in, so the
    buffer's scale still reaches them (Paddle and the model agree)."""
    paddle, main, startup = _program(coalesce_at=2, copy_data=True)
    a, b = _by_paddle(paddle, main, startup)
    sa, sb = _symbolic(main, startup)
    np.testing.assert_allclose(a, 6 * X, rtol=1e-6)
    np.testing.assert_allclose(sa, a, rtol=1e-6)
    np.testing.assert_allclose(sb, b, rtol=1e-6)


def test_set_constant_fills_the_views():
    """set_constant after the producers: the views are the constant (7),
    scaled by 3, in Paddle and in the model."""
    paddle, main, startup = _program(coalesce_at=2, set_constant=True)
    a, b = _by_paddle(paddle, main, startup)
    np.testing.assert_allclose(a, np.full((2, 3), 21.0))
    sa, sb = _symbolic(main, startup)
    np.testing.assert_allclose(sa, a)
    np.testing.assert_allclose(sb, b)


def test_a_view_read_after_coalesce_dropped_its_value_is_an_error_naming_it():
    """A pass that coalesces after a producer (copy_data=False) loses the
    value: the buffer's scale reads uninitialised memory.  The executor
    names the rank, the op, the view and the coalesce op."""
    _, main, startup = _program(coalesce_at=1)  # after a's producer, before b's
    with pytest.raises(ExecError, match=r"rank 0 op 3 \(scale\) reads a, a view of a fused "
                                        r"buffer whose value coalesce_tensor op 1 dropped"):
        execute({0: from_programs(main, startup)}, {}, Store())


def test_an_op_that_splits_the_buffer_is_refused():
    """The model leaves out alignment padding, exact only for element-wise
    in-place ops on the buffer: anything else is INCONCLUSIVE, not a guess."""
    _, main, startup = _program(coalesce_at=0, buffer_op="reduce_sum")
    with pytest.raises(Unsupported, match="fused buffer fused"):
        execute({0: from_programs(main, startup)}, {}, Store())


def test_def_use_sees_the_dropped_value_and_the_buffer_read():
    """The dataflow check, on the same programs: coalescing after a producer
    leaves the buffer's reader reading view ``a`` before any write; the
    coalesce before every producer reads nothing undefined."""
    from verify.checks.def_use import first_undefined_reads

    _, main, startup = _program(coalesce_at=1)
    snap = from_programs(main, startup)
    bad = first_undefined_reads(snap.ops, set(snap.feeds) | snap.startup_writes())
    assert [(op.idx, op.type, var) for op, var in bad] == [(3, "scale", "a")]
    _, main, startup = _program(coalesce_at=0)
    snap = from_programs(main, startup)
    assert first_undefined_reads(snap.ops, set(snap.feeds) | snap.startup_writes()) == []
