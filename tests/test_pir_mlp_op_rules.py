"""The shape rules of the PIR ops the planner's built-in models bring
(``examples/tiny_mlp_pir.py`` and friends: LayerNorm, ReLU, the sharded
optimizer's ``share_data_``), each evaluated on concrete shapes against
Paddle's own CPU kernels (dygraph) with the slots and attrs
``verify/ir/pir_snapshot.py`` records; and fed broken ops, whose
preconditions must fail."""
from __future__ import annotations

import numpy as np
import pytest

from verify.checks.shape_rules import RULES, Shapes
from verify.ir.snapshot import Op

RNG = np.random.default_rng(5)


def _rule(op_type, ins, attrs=None):
    op = Op(0, op_type, {k: [f"{k}{i}" for i in range(len(v))] for k, v in ins.items()}, {},
            attrs or {})
    s = Shapes(op, {k: [list(x) if x is not None else None for x in v] for k, v in ins.items()})
    out = RULES[op_type](s)
    return out, [why for cond, why in s.needs if cond is False]


def _pd(fn):
    import paddle

    with paddle.base.dygraph.guard():
        return fn(paddle)


@pytest.mark.parametrize("shape,axis", [((2, 3, 8), 2), ((4, 6), 1), ((2, 3, 4), 1),
                                        ((2, 3, 8), -1)])
def test_layer_norm_and_its_grad_are_the_kernels(shape, axis):
    pos = axis + len(shape) if axis < 0 else axis
    inner = int(np.prod(shape[pos:]))

    def ref(paddle):
        x = paddle.to_tensor(RNG.standard_normal(shape).astype("float32"), stop_gradient=False)
        w = paddle.ones([inner], "float32")
        b = paddle.zeros([inner], "float32")
        w.stop_gradient = b.stop_gradient = False
        out = paddle._C_ops.layer_norm(x, w, b, 1e-5, pos)  # dygraph: out only
        dx, dw, db = paddle.grad(out, [x, w, b], paddle.ones_like(out))
        return [list(t.shape) for t in (out, dx, dw, db)]

    out, dx, dw, db = _pd(ref)
    mean, var = _static_stats(shape, inner, pos)
    fwd, bad = _rule("pd_op.layer_norm", {"x": [shape], "scale": [(inner,)],
                                          "bias": [(inner,)]}, {"begin_norm_axis": axis})
    assert not bad and (fwd["out"], fwd["mean"], fwd["variance"]) == ([out], [mean], [var])
    grad, bad = _rule("pd_op.layer_norm_grad",
                      {"x": [shape], "scale": [(inner,)], "bias": [(inner,)],
                       "mean": [tuple(mean)], "variance": [tuple(var)], "out_grad": [shape]},
                      {"begin_norm_axis": axis})
    assert not bad and (grad["x_grad"], grad["scale_grad"], grad["bias_grad"]) == (
        [dx], [dw], [db])


def _static_stats(shape, inner, axis):
    """The mean and variance shapes Paddle's own inference gives a PIR
    ``pd_op.layer_norm`` (dygraph returns ``out`` only)."""
    import paddle

    with paddle.pir_utils.IrGuard():
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            x = paddle.static.data("x", list(shape), "float32")
            w = paddle.static.data("w", [inner], "float32")
            b = paddle.static.data("b", [inner], "float32")
            paddle._C_ops.layer_norm(x, w, b, 1e-5, axis)
        (op,) = [o for o in main.global_block().ops if o.name() == "pd_op.layer_norm"]
        return [list(op.result(i).shape) for i in (1, 2)]


def test_layer_norm_without_bias_and_broken_ones():
    out, bad = _rule("pd_op.layer_norm", {"x": [(2, 3, 8)], "scale": [(8,)], "bias": [None]},
                     {"begin_norm_axis": 2})
    assert not bad and out["out"] == [[2, 3, 8]]
    grad, bad = _rule("pd_op.layer_norm_grad", {"x": [(2, 3, 8)], "scale": [(8,)],
                                                "bias": [None], "out_grad": [(2, 3, 8)]},
                      {"begin_norm_axis": 2})
    assert not bad and "bias_grad" not in grad and grad["scale_grad"] == [[8]]
    _, bad = _rule("pd_op.layer_norm", {"x": [(2, 3, 8)], "scale": [(6,)]},
                   {"begin_norm_axis": 2})
    assert bad and "6 elements" in bad[0]
    _, bad = _rule("pd_op.layer_norm", {"x": [(2, 3, 8)], "scale": [(2, 4)]},
                   {"begin_norm_axis": 2})
    assert bad and "1-D" in bad[0]
    _, bad = _rule("pd_op.layer_norm_grad", {"x": [(2, 3, 8)], "out_grad": [(2, 8, 3)]},
                   {"begin_norm_axis": 2})
    assert bad


def test_relu_its_grad_and_share_data_are_the_kernels():
    def ref(paddle):
        x = paddle.to_tensor(RNG.standard_normal((2, 3, 8)).astype("float32"),
                             stop_gradient=False)
        y = paddle.nn.functional.relu(x)
        (dx,) = paddle.grad(y, [x], paddle.ones_like(y))
        return [list(y.shape), list(dx.shape)]

    y, dx = _pd(ref)
    out, bad = _rule("pd_op.relu", {"x": [(2, 3, 8)]})
    assert not bad and out["out"] == [y]
    out, bad = _rule("pd_op.relu_grad", {"out": [tuple(y)], "out_grad": [(2, 3, 8)]})
    assert not bad and out["x_grad"] == [dx]
    _, bad = _rule("pd_op.relu_grad", {"out": [(2, 3, 8)], "out_grad": [(2, 8, 3)]})
    assert bad
    out, bad = _rule("pd_op.share_data_", {"x": [(4, 8)]})  # a view of x: x's shape
    assert not bad and out["out"] == [[4, 8]]


@pytest.mark.parametrize("shape,with_y", [((2, 4, 32), False), ((3, 6), True), ((8,), False),
                                          ((2, 3, 5), True)])
def test_swiglu_and_its_grad_are_the_kernels(shape, with_y):
    """``pd_op.swiglu`` (y given: x's shape; none: x's last dim halved) and
    its grad against Paddle's kernels; broken ops (an odd last dim without
    y, a y of another shape, an out_grad of x's shape without y) fail a
    precondition."""
    def ref(paddle):
        x = paddle.to_tensor(RNG.standard_normal(shape).astype("float32"), stop_gradient=False)
        y = paddle.to_tensor(RNG.standard_normal(shape).astype("float32"),
                             stop_gradient=False) if with_y else None
        out = paddle._C_ops.swiglu(x, y)
        grads = paddle.grad(out, [x] + ([y] if with_y else []), paddle.ones_like(out))
        return [list(out.shape)] + [list(g.shape) for g in grads]

    got = _pd(ref)
    ins = {"x": [shape]} if not with_y else {"x": [shape], "y": [shape]}
    fwd, bad = _rule("pd_op.swiglu", ins)
    assert not bad and fwd["out"] == [got[0]]
    grad, bad = _rule("pd_op.swiglu_grad", {**ins, "out_grad": [tuple(got[0])]})
    assert not bad and grad["x_grad"] == [got[1]]
    assert grad.get("y_grad") == ([got[2]] if with_y else None)
    if with_y:
        other = tuple(shape[:-1]) + (shape[-1] + 1,)
        _, bad = _rule("pd_op.swiglu", {"x": [shape], "y": [other]})
        assert bad and "y dim" in bad[0]
    else:
        odd = tuple(shape[:-1]) + (shape[-1] + 1,)
        _, bad = _rule("pd_op.swiglu", {"x": [odd]})
        assert bad and "odd" in bad[0]
        _, bad = _rule("pd_op.swiglu_grad", {"x": [shape], "out_grad": [shape]})
        assert bad and "out_grad dim" in bad[0]
