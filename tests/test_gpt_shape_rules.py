"""The shape rules of the GPT model's ops (``lookup_table_v2`` and its grad,
``softmax_grad``) evaluated on concrete shapes against the shapes Paddle's
own kernels produce, and fed a broken op (the precondition must fail)."""
from __future__ import annotations

import numpy as np
import pytest

from verify.checks.shape_rules import RULES, Shapes
from verify.ir.snapshot import Op


def _rule(op_type, ins, attrs=None):
    op = Op(0, op_type, {s: [f"{s}{i}" for i in range(len(v))] for s, v in ins.items()},
            {}, attrs or {})
    s = Shapes(op, {slot: [list(x) for x in v] for slot, v in ins.items()})
    out = RULES[op_type](s)
    return out, [why for cond, why in s.needs if cond is False]


def _pd(fn):
    import paddle
    with paddle.base.dygraph.guard():
        return fn(paddle)


@pytest.mark.parametrize("ids_shape", [(2, 8), (5,), (2, 3, 4)])
def test_lookup_table_v2_and_grad_shapes_are_paddles(ids_shape):
    def ref(paddle):
        w = paddle.to_tensor(np.zeros((32, 6), "float32"), stop_gradient=False)
        out = paddle.nn.functional.embedding(
            paddle.to_tensor(np.zeros(ids_shape, "int64")), w)
        out.sum().backward()
        return list(out.shape), list(w.grad.shape)
    out_ref, dw_ref = _pd(ref)
    out, bad = _rule("lookup_table_v2", {"Ids": [ids_shape], "W": [(32, 6)]})
    assert not bad and out["Out"] == [out_ref]
    out, bad = _rule("lookup_table_v2_grad", {"Ids": [ids_shape], "W": [(32, 6)],
                                              "Out@GRAD": [out_ref]})
    assert not bad and out["W@GRAD"] == [dw_ref]


def test_lookup_table_with_a_3d_table_is_refused():
    _, bad = _rule("lookup_table_v2", {"Ids": [(2, 8)], "W": [(4, 32, 6)]})
    assert bad and "rank 3" in bad[0]


def test_softmax_grad_shape_is_paddles_and_a_wrong_grad_is_caught():
    def ref(paddle):
        x = paddle.to_tensor(np.zeros((2, 3, 4), "float32"), stop_gradient=False)
        (dx,) = paddle.grad(paddle.nn.functional.softmax(x), x)
        return list(dx.shape)
    out, bad = _rule("softmax_grad", {"Out": [(2, 3, 4)], "Out@GRAD": [(2, 3, 4)]},
                     {"axis": -1})
    assert not bad and out["X@GRAD"] == [_pd(ref)]
    _, bad = _rule("softmax_grad", {"Out": [(2, 3, 4)], "Out@GRAD": [(2, 3, 5)]},
                   {"axis": -1})
    assert bad and "dim 2" in bad[0]


@pytest.mark.parametrize("axes,starts,ends,decrease", [
    ([2], [0], [4], []), ([1, 2], [1, -4], [3, 100], []), ([0], [1], [2], [0])])
def test_slice_and_grad_shapes_are_paddles(axes, starts, ends, decrease):
    def ref(paddle):
        x = paddle.to_tensor(np.zeros((2, 3, 8), "float32"), stop_gradient=False)
        out = paddle.slice(x, axes, starts, ends)
        if decrease:
            out = paddle.squeeze(out, decrease)
        (dx,) = paddle.grad(out, x, paddle.ones_like(out))
        return list(out.shape), list(dx.shape)
    out_ref, dx_ref = _pd(ref)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}
    out, bad = _rule("slice", {"Input": [(2, 3, 8)]}, attrs)
    assert not bad and out["Out"] == [out_ref]
    out, bad = _rule("slice_grad", {"Input": [(2, 3, 8)], "Out@GRAD": [out_ref]}, attrs)
    assert not bad and out["Input@GRAD"] == [dx_ref]


def test_slice_decreasing_a_dim_that_is_not_1_is_caught():
    _, bad = _rule("slice", {"Input": [(2, 3, 8)]},
                   {"axes": [2], "starts": [0], "ends": [4], "decrease_axis": [2]})
    assert bad and "decrease_axis 2" in bad[0]
