"""Hand-built single-rank PIR programs with a linear (``matmul`` + 1-D bias
``add``) and its backward: the pattern of the C++ ``fused_gemm_epilogue_pass``
(``strategy.fused_passes``)::

    x [4, 8], w [8, 16] (parameter), b [16] (parameter), dtype D
    out = pd_op.add(pd_op.matmul(x, w), b); loss = mean(out)
    backward: pd_op.add_grad, pd_op.matmul_grad; SGD on w and b

The pass leaves float32/float64 matmuls alone by its own dtype guard; in
bfloat16 it fuses the forward pair into ``pd_op.fused_gemm_epilogue`` and
the backward pair into ``pd_op.fused_gemm_epilogue_grad``.
"""
from __future__ import annotations

from .base import Expect, FeedSpec
from .pir_matmul_grad import PirCase, PirRankProgram

GEMM = "fused_gemm_epilogue_pass"


def build_programs(params):
    import paddle

    dtype = params.get("dtype", "float32")
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 8], dtype)
            x.stop_gradient = False
            init = paddle.nn.initializer.Constant(0.5)
            w = paddle.create_parameter([8, 16], dtype, name="w", default_initializer=init)
            bias_shape = [4, 16] if params.get("bias_2d") else [16]
            b = paddle.create_parameter(bias_shape, dtype, name="b", default_initializer=init)
            loss = paddle.mean(paddle.add(paddle.matmul(x, w), b))
            paddle.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, loss


def build(case, rank):
    import paddle

    from verify.ir.pir_snapshot import value_names

    main, startup, loss = build_programs(case.params)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        watched = [names.name(op.result(0)) for op in main.global_block().ops
                   if op.name() == "pd_op.sgd_"]
        loss_name = names.name(loss)
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=[], feeds=[FeedSpec("x", (4, 8),
                                                           case.params.get("dtype",
                                                                           "float32"))],
                          loss=loss_name, fetches=[n for n in watched if n], names=names)


def _case(name, summary, expect, **params):
    return PirCase(name=name, family="pir_gemm_epilogue", summary=summary, mesh=[0],
                   builder=build, expect={GEMM: expect}, symbols={},
                   params={**params, "only_pass": GEMM}, ir="pir")


_NO_VALUES = ("values not decided on this CPU build: the fused ops have no CPU kernel "
              "(The kernel `fused_gemm_epilogue` is not registered) and no value row; and "
              "the harness feeds float32 data, so even the bfloat16 original does not run")

CASES = [
    _case("pir_gemm_bf16", "bfloat16 x [4,8] @ w [8,16] + b [16], backward, SGD",
          Expect(True, "INCONCLUSIVE", "fires: the matmul + add become one "
                 "fused_gemm_epilogue, add_grad + matmul_grad one fused_gemm_epilogue_grad "
                 "(same operands, trans_x/trans_y false, activation none): the contract holds; "
                 + _NO_VALUES), dtype="bfloat16"),
    _case("pir_gemm_fp32", "float32 x [4,8] @ w [8,16] + b [16], backward, SGD",
          Expect(False, "EQUIVALENT", "float32: the pass's own dtype guard leaves the linear "
                 "alone (every CPU program of the suite is float32)")),
    _case("pir_gemm_bf16_bias2d", "bfloat16 x [4,8] @ w [8,16] + b [4,16] (a 2-D addend)",
          Expect(False, "EQUIVALENT", "the addend is 2-D, not an epilogue bias (rank 1): "
                 "left alone"), dtype="bfloat16", bias_2d=True),
]
