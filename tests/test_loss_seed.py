"""The loss of a PIR training program is the value its backward is seeded
from (``verify/ir/loss_seed.py``): a mean, a sum over a count (as
paddleformers' criterion computes it), none in a forward-only program."""
from __future__ import annotations

import pytest


def _program(loss_of, backward=True):
    from verify.ir import legacy_ir  # noqa: F401  (legacy IR before paddle)
    import paddle

    from verify.ir.pir_snapshot import value_names
    from verify.ir.loss_seed import seeded_loss

    paddle.enable_static()
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2, 4], "float32")
            w = paddle.create_parameter([4, 3], "float32")
            y = paddle.matmul(x, w)
            # a forward full_like(., 1.0) that seeds nothing
            ones = paddle.full_like(paddle.sum(y), 1.0)
            loss = loss_of(y) + ones * 0.0
            if backward:
                paddle.static.append_backward(loss)
        names = value_names(main)
        return names.name(loss), seeded_loss(main, names)


@pytest.mark.parametrize("loss_of", [
    lambda y: paddle_mean(y),
    lambda y: paddle_sum(y) / paddle_sum(paddle_ones_like(y)),  # criterion's sum / count
], ids=["mean", "sum_over_count"])
def test_the_loss_is_the_value_the_backward_starts_from(loss_of):
    want, got = _program(loss_of)
    assert want is not None and got == want


def test_a_forward_only_program_has_no_loss():
    _, got = _program(lambda y: paddle_mean(y), backward=False)
    assert got is None


def paddle_mean(y):
    import paddle

    return paddle.mean(y)


def paddle_sum(y):
    import paddle

    return paddle.sum(y)


def paddle_ones_like(y):
    import paddle

    return paddle.ones_like(y)
