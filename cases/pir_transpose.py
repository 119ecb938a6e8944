"""Hand-built single-rank PIR programs with a dim-0/dim-1 transpose, the
pattern of ``eliminate_transpose_by_reshape`` (``strategy.fused_passes``
``eliminate_transpose``; ``auto_parallel/static/pir_pass.py``).

Sequence parallelism transposes hidden states ``[bs, seq, hidden]`` to
``[seq, bs, hidden]`` to split and gather along dim 0; with ``bs == 1`` that
transpose moves no element, so the pass replaces it (and its grad) by a
reshape.  Per program (built under ``paddle.pir_utils.IrGuard()``)::

    x  = pd_op.data [b, s, 8], stop_gradient False
    h  = pd_op.matmul(x, w0)                 # [b, s, 8]
    t  = pd_op.transpose(h, perm)            # [s, b, 8] for perm [1, 0, 2]
    o  = pd_op.matmul(t, w1)
    loss = mean(square(o)); backward (pd_op.transpose_grad); SGD on w0, w1

Watched: the loss, the transpose's output and its grad's output, the
parameters after the step.  Only ``eliminate_transpose_by_reshape`` is
paired with these cases (``only_pass``): they exist for its question (the
matmul grads and the non-dist programs are pir_matmul_grad's).
"""
from __future__ import annotations

from .base import Expect, FeedSpec
from .pir_matmul_grad import PirCase, PirRankProgram

ELIMINATE = "eliminate_transpose_by_reshape"
H = 8


def build_programs(params):
    """``(main, startup, loss, x_fed_shape)``, built under PIR (plain Paddle)."""
    import paddle

    b, s, heads = params.get("b", 1), params.get("s", 4), params.get("heads")
    dyn = params.get("dynamic", "")
    perm = list(params.get("perm", (1, 0, 2)))
    declared = [-1 if "b" in dyn else b, -1 if "s" in dyn else s, H]
    fed = [b, s, H]
    if heads:  # [b, s, heads, H]: a per-head layout, heads maybe dynamic too
        declared[2:2] = [-1 if "n" in dyn else heads]
        fed[2:2] = [heads]
        perm = list(params.get("perm", (1, 0, 2, 3)))
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", declared, "float32")
            x.stop_gradient = False
            w0 = paddle.create_parameter([H, H], "float32", name="w0")
            w1 = paddle.create_parameter([H, H], "float32", name="w1")
            t = paddle.transpose(paddle.matmul(x, w0), perm)
            loss = paddle.mean(paddle.square(paddle.matmul(t, w1)))
            paddle.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, loss, fed


def build(case, rank):
    import paddle

    from verify.ir.pir_snapshot import value_names

    main, startup, loss, fed = build_programs(case.params)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        watched = [names.name(op.result(0)) for op in main.global_block().ops
                   if op.name() in ("pd_op.transpose", "pd_op.transpose_grad", "pd_op.sgd_")]
        loss_name = names.name(loss)
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=[], feeds=[FeedSpec("x", tuple(fed))],
                          loss=loss_name, fetches=[n for n in watched if n], names=names)


def _case(name, summary, expect, **params):
    dyn = params.get("dynamic", "")
    dims = [("B", "b"), ("S", "s")] + ([("N", "n")] if params.get("heads") else []) + \
        [(None, None)]
    symbols = {"x": tuple(sym if flag and flag in dyn else None for sym, flag in dims)} \
        if dyn else {}
    return PirCase(name=name, family="pir_transpose", summary=summary, mesh=[0],
                   builder=build, expect={ELIMINATE: expect}, symbols=symbols,
                   params={**params, "only_pass": ELIMINATE}, ir="pir")


CASES = [
    _case("pir_transpose_bs1", "x [1,4,8]: transpose(h, [1,0,2]) with bs = 1",
          Expect(True, "EQUIVALENT", "the transpose and its grad (dims 0 and 1 swapped, "
                 "one of them 1) become reshapes to the same shapes: no element moves")),
    _case("pir_transpose_seq1", "x [2,1,8]: transpose(h, [1,0,2]) with seq = 1",
          Expect(True, "EQUIVALENT", "dim 1 is 1: the swap moves no element; both "
                 "become reshapes"), b=2, s=1),
    _case("pir_transpose_bs1_dynamic_seq", "x [1,-1,8] (seq dynamic): transpose(h, "
          "[1,0,2]) with bs = 1",
          Expect(True, "EQUIVALENT", "dim 0 is 1: the reshape's target is the transpose's "
                 "declared [-1, 1, 8], one dynamic dim, as reshape allows"), dynamic="s"),
    _case("pir_transpose_bs1_two_dynamic", "x [1,-1,-1,8] (seq and heads dynamic): "
          "transpose(h, [1,0,2,3]) with bs = 1",
          Expect(True, "PASS_CRASHED", "the pass builds the reshape's target from the "
                 "transpose's declared output shape, [-1, 1, -1, 8]: two dynamic dims, "
                 "which PIR's reshape rejects inside the pass (ValueError (InvalidArgument) "
                 "Only one dimension value of 'shape' in ReshapeOp can be -1): with the "
                 "flag on, the Engine raises on such a program",
                 evidence="the pass raises (traceback); reshape's shape inference"),
          heads=2, dynamic="sn"),
    _case("pir_transpose_bs2", "x [2,4,8]: transpose(h, [1,0,2]) with bs = 2",
          Expect(False, "EQUIVALENT", "neither swapped dim is 1 (the swap moves "
                 "elements): left alone"), b=2),
    _case("pir_transpose_perm021", "x [1,8,8]: transpose(h, [0,2,1])",
          Expect(False, "EQUIVALENT", "a swap of dims 1 and 2, not the pass's [1,0,...] "
                 "(which moves elements even with bs = 1): left alone"), perm=(0, 2, 1),
          s=8),
]
