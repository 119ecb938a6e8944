"""Hand-built single-rank PIR *dist* programs for the PIR gradient merge
(``auto_parallel_gradient_merge_pass``, ``passes/pir_gradient_merge.py``).

Each program is built the way ``Engine._parallel_pir`` builds its own before
the merge: a forward program with its parameters and input marked on a
one-rank ``ProcessMesh`` (``dist.shard_tensor``, ``Replicate``), Paddle's
``apply_mix2dist_pass``, every op marked forward, then
``ir_backward.append_backward`` under ``auto_complete_op_role(Backward)``
and the optimizer's ``_apply_optimize`` under ``auto_complete_op_role(
Optimize)``, then ``apply_mix2dist_pass`` again (the optimizer states)::

    x [-1, 8], y [-1, 4] (data; the batch is dynamic so one program takes a
    micro-batch of B rows and the concatenation of k of them)
    o    = matmul(x, w[8, 4]) + b[4]
    loss = mean(square(o - y))     (avg=True cases)
         | sum(square(o - y))      (avg=False cases)
    backward; sgd_ | momentum_ | adam_ | adamw_ on w and b

The loss reduction pairs with ``avg`` so that the merge oracle
(``verify/numeric/micro_steps.py``) has an exact reference in the original
program itself: one step on the concatenation of the k micro-batches has,
in real arithmetic, the gradient ``mean_i g_i`` for a mean loss and
``sum_i g_i`` for a sum loss (the gradient is linear in the per-row losses;
floats differ only by summation order).

``params``: ``opt`` (sgd/momentum/adam/adamw), ``avg``, ``k`` (the pass's
``k_steps``).  The RankProgram carries the pass's attrs' ``params_grads``
(Values of this build's ``main``) and ``merge`` = ``{"k_steps", "avg"}``.
"""
from __future__ import annotations

from .base import Case, Expect, FeedSpec
from .pir_matmul_grad import PirCase, PirRankProgram

MERGE = "auto_parallel_gradient_merge_pass"
SPLIT = "_pir_split_matmul_grad_to_matmul"
B, K, N = 2, 8, 4
LR = 0.1
# what a reproducer (verify/repro/pir_script.py, verify/repro/micro_step_script.py) embeds besides build_programs
REPRO_CONSTANTS = {"B": B, "K": K, "N": N, "LR": LR}


def build_programs(params):
    """``(main, startup, loss, params_grads, x_shape)``: a dist PIR program as
    the Engine builds it before its gradient merge (see the module docstring);
    ``x_shape`` is one micro-batch's (a reproducer embeds this function)."""
    import paddle
    import paddle.distributed as dist
    from paddle.base.framework import auto_complete_op_role
    from paddle.distributed.auto_parallel.static.mix_to_dist_pass import apply_mix2dist_pass
    from paddle.distributed.auto_parallel.static.utils import set_all_ops_op_role
    from paddle.distributed.fleet.meta_optimizers.common import OpRole

    opt_name, avg = params["opt"], params["avg"]
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        mesh = dist.ProcessMesh([0], dim_names=["dp"])
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, K], "float32")
            y = paddle.static.data("y", [-1, N], "float32")
            w = paddle.create_parameter([K, N], "float32", name="w")
            b = paddle.create_parameter([N], "float32", name="b", is_bias=True)
            w = dist.shard_tensor(w, mesh, [dist.Replicate()])
            b = dist.shard_tensor(b, mesh, [dist.Replicate()])
            xs = dist.shard_tensor(x, mesh, [dist.Replicate()])
            err = paddle.square(paddle.matmul(xs, w) + b - y)
            loss = paddle.mean(err) if avg else paddle.sum(err)
        apply_mix2dist_pass(main)
        set_all_ops_op_role(main.global_block(), OpRole.Forward)
        with paddle.static.program_guard(main, startup):
            opt = {"sgd": lambda: paddle.optimizer.SGD(LR),
                   "momentum": lambda: paddle.optimizer.Momentum(LR, 0.9),
                   "adam": lambda: paddle.optimizer.Adam(LR),
                   "adamw": lambda: paddle.optimizer.AdamW(LR, weight_decay=0.01)}[opt_name]()
            with auto_complete_op_role(main, OpRole.Backward):
                params_grads = paddle.autograd.ir_backward.append_backward(loss)
            with auto_complete_op_role(main, OpRole.Optimize):
                opt._apply_optimize(loss, startup, params_grads=params_grads)
        apply_mix2dist_pass(main)
    return main, startup, loss, params_grads, [B, K]


def build(case: Case, rank: int):
    import paddle

    from verify.ir.pir_snapshot import value_names

    main, startup, loss, params_grads, _ = build_programs(case.params)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        upd = [names.name(op.result(0)) for op in main.global_block().ops
               if op.name() in ("pd_op.sgd_", "pd_op.momentum_", "pd_op.adam_", "pd_op.adamw_")]
        loss_name = names.name(loss)
    rp = PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                        params_grads=params_grads,
                        feeds=[FeedSpec("x", (B, K)), FeedSpec("y", (B, N))],
                        loss=loss_name, fetches=[n for n in upd if n], names=names)
    rp.merge = {"k_steps": case.params["k"], "avg": case.params["avg"]}
    return rp


_SPLIT_2D = Expect(True, "PASS_CRASHED", "an untransposed pd_op.matmul_grad with a 2-D, "
                   "dynamic-batch x: the split folds x to 1-D ([-8]) and raises (the same "
                   "defect as pir_mm_2d_dynamic)")


def _case(opt, avg, k, expect):
    name = f"pir_gm_{opt}_{'avg' if avg else 'sum'}_k{k}"
    summary = (f"linear 8->4 + bias, {'mean' if avg else 'sum'} MSE loss, {opt}, "
               f"gradient merge k_steps={k}, avg={avg}")
    return PirCase(name=name, family="pir_gradient_merge", summary=summary, mesh=[0],
                   builder=build, expect={MERGE: expect, SPLIT: _SPLIT_2D},
                   symbols={"x": ("B", None), "y": ("B", None)},
                   params={"opt": opt, "avg": avg, "k": k,
                           "reduction": "mean" if avg else "sum"}, ir="pir")


_OK = "k micro-steps of the merged program (the Engine's job split: forward+backward k times, " \
      "optimize once) equal one step of the original on the concatenated micro-batches"
_MOMENTUM_AVG = ("avg=True with a momentum_ optimizer: the pass finds no optimizer whose name "
                 "holds 'sgd'/'adam', so it takes _append_scale_op_before_comm, which appends "
                 "its 1/k scale_ ops at the block end, after the momentum_ and after the "
                 "zeroing set_value_with_tensor_: the optimizer reads the raw sum of the k "
                 "gradients (and the scales rescale a zeroed accumulator); the zeroing and "
                 "the scales are also unordered in-place writes of the accumulator")

_RACE = ("avg=True: the 1/k scale_ and the zeroing set_value_with_tensor_ both write the "
         "accumulator's block argument in place in the optimize job, and no data dependence "
         "orders them (the optimizer reads the scale's result; the zeroing reads the raw "
         "argument), so the executor may zero before it scales (3.3.1 CPU's default "
         "scheduler gave run-to-run different parameters); in program order the merge is "
         "right: the micro-step oracle agrees with one step on the mean")

_MOMENTUM_AVG_EV = ("micro-step oracle (`verify/numeric/micro_steps.py`: k merged micro-steps "
                    "driven as the Engine's jobs vs one step of the original on the "
                    "concatenated micro-batches): parameters and velocities differ (tensor, "
                    "optimizer step, index in the report); contract: the optimizer's op index "
                    "and the scale and zeroing op indices; value proof of the schedule "
                    "(`verify/value/merged_application.py`): the gradient the optimizer reads "
                    "is k times the mean (element and inputs, replayed). With the loop moved "
                    "out of the walk (`tests/fixed_passes/gradient_merge_scale_mended.py`) the "
                    "oracle holds (numeric EQUIVALENT) and the value proof proves it; the "
                    "in-place order finding (as on the avg=True SGD/Adam/AdamW cases) remains")
_RACE_EV = ("dataflow check \"in-place order\" (the two op indices and the accumulator); on "
            "3.3.1 CPU the default asynchronous scheduler gave run-to-run different parameters "
            "(SGD 2 of 6 runs, Adam 5 of 6), never under `FLAGS_new_executor_sequential_run`, "
            "where the micro-step oracle agrees with one step on the mean. avg=False (SGD, "
            "Momentum, Adam, AdamW): EQUIVALENT")

CASES = [
    _case("sgd", True, 2, Expect(True, "NOT_EQUIVALENT", _RACE, evidence=_RACE_EV)),
    _case("sgd", True, 4, Expect(True, "NOT_EQUIVALENT", _RACE, evidence=_RACE_EV)),
    _case("sgd", False, 2, Expect(True, "EQUIVALENT", _OK + " (sum)")),
    _case("momentum", True, 2, Expect(True, "NOT_EQUIVALENT", _MOMENTUM_AVG,
                                       evidence=_MOMENTUM_AVG_EV)),
    _case("momentum", True, 4, Expect(True, "NOT_EQUIVALENT", _MOMENTUM_AVG,
                                       evidence=_MOMENTUM_AVG_EV)),
    _case("momentum", False, 2, Expect(True, "EQUIVALENT", _OK + " (sum; no scale)")),
    _case("adam", True, 2, Expect(True, "NOT_EQUIVALENT", _RACE, evidence=_RACE_EV)),
    _case("adam", False, 4, Expect(True, "EQUIVALENT", _OK + " (sum)")),
    _case("adamw", True, 4, Expect(True, "NOT_EQUIVALENT", _RACE, evidence=_RACE_EV)),
    _case("adamw", False, 2, Expect(True, "EQUIVALENT", _OK + " (sum)")),
]
