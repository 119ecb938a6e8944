"""Mixed precision (AMP O1): a small serial MLP for ``auto_parallel_amp``.

One rank (mesh ``[0]``), every op and var with dist attrs, every grad op
registered in the dist context's ``grad_op_id_to_op_id`` as the planner's
``append_backward`` does (the pass reads it to give a grad op its forward
op's precision)::

    h1   = matmul_v2(x, W1)            # white: x, W1 rounded to the low dtype
    h2   = elementwise_add(h1, b1)     # gray after a white op: b1 rounded
    a    = tanh(h2)                    # gray (smooth: params["act"] = "relu" for a kink)
    out  = matmul_v2(a, W2)            # white
    loss = mean(square(out - target))  # black / unlisted: fp32
    backward, then sgd on every parameter

``params["white_ops"] = False`` gives ``mean((exp(x) + b - target)^2)`` (with
``first="black"``): no op on the white list, so nothing to cast (and loss
scale 1: nothing to scale), which the pass must leave alone; without the
``exp`` the bias add is a gray op with no producer, which 3.3.1's pass
leaves unclassified and then raises on (an assertion at its grad op).
"""
from __future__ import annotations

from .base import Case, Expect
from .program_builder import ProgramBuilder

AMP = "auto_parallel_amp"
B, H, F = 4, 8, 8


def _grad(b, fwd, **kw):
    """A grad op of ``fwd``, registered as the planner's backward registers it."""
    g = b.grad_op(fwd, **kw)
    b.ctx.dist_op_context.grad_op_id_to_op_id[g.desc.original_id()] = fwd.desc.original_id()
    return g


def build(case: Case, rank: int):
    p = case.params
    b = ProgramBuilder(case, rank)
    x = b.data("x", [B, H], [B, H])
    if not p.get("white_ops", True):  # no op on the white list: nothing to cast
        b1 = b.param("linear_0.b_0", [H])
        first = x
        if p.get("first") == "black":  # exp: black-listed, so the add after it is fp32
            first = b.var("exp_0.tmp_0", [B, H])
            b.op("exp", {"X": [x]}, {"Out": [first]})
        h = b.var("add_0.tmp_0", [B, H])
        add = b.op("elementwise_add", {"X": [first], "Y": [b1]}, {"Out": [h]}, {"axis": -1})
        h_g = b.mse_loss(h)
        _register_loss_grads(b)
        b1_g = b.grad_of(b1)
        _grad(b, add, inputs={"Out@GRAD": [h_g]}, outputs={"X@GRAD": []})
        b.params_grads.append((b1, b1_g))
        b.fetches.append(b1_g.name)
        return b.finish()
    w1 = b.param("linear_0.w_0", [H, F])
    b1 = b.param("linear_0.b_0", [F])
    w2 = b.param("linear_1.w_0", [F, H])
    h1 = b.var("linear_0.tmp_0", [B, F])
    mm1 = b.op("matmul_v2", {"X": [x], "Y": [w1]}, {"Out": [h1]},
               {"trans_x": False, "trans_y": False})
    h2 = b.var("linear_0.tmp_1", [B, F])
    add = b.op("elementwise_add", {"X": [h1], "Y": [b1]}, {"Out": [h2]}, {"axis": -1})
    act = p.get("act", "tanh")
    a = b.var(f"{act}_0.tmp_0", [B, F])
    act_op = b.op(act, {"X": [h2]}, {"Out": [a]})
    out = b.var("linear_1.tmp_0", [B, H])
    mm2 = b.op("matmul_v2", {"X": [a], "Y": [w2]}, {"Out": [out]},
               {"trans_x": False, "trans_y": False})
    out_g = b.mse_loss(out)
    _register_loss_grads(b)
    b.grad_of(a)
    w2_g = b.grad_of(w2)
    _grad(b, mm2, inputs={"Out@GRAD": [out_g]})
    b.grad_of(h2)
    _grad(b, act_op)
    b.grad_of(h1)
    b1_g = b.grad_of(b1)
    _grad(b, add)
    w1_g = b.grad_of(w1)
    _grad(b, mm1, outputs={"X@GRAD": []})
    b.params_grads += [(w1, w1_g), (b1, b1_g), (w2, w2_g)]
    b.fetches += [g.name for _, g in b.params_grads]
    return b.finish()


def _register_loss_grads(b):
    """Pair the loss's grad ops (appended by ``mse_loss``) with their forward ops."""
    ops = b.block.ops
    fwd = {o.type: o for o in ops if not o.type.endswith("_grad")}
    for o in ops:
        if o.type.endswith("_grad") and o.type[:-5] in fwd:
            b.ctx.dist_op_context.grad_op_id_to_op_id[o.desc.original_id()] = \
                fwd[o.type[:-5]].desc.original_id()


def _case(name, summary, expect, **params):
    # paired with the AMP pass only: the serial, pre-partition program is
    # what the planner hands it, and no other pass under test meets
    return Case(name=name, family="amp", summary=summary, mesh=[0], builder=build,
                expect={AMP: expect}, rings={}, params={"only_pass": AMP, **params})


CASES = [
    _case("amp_mlp_fp16", "serial MLP, AMP O1 float16, dynamic loss scaling 2^15",
          Expect(True, "EQUIVALENT", "round_float16 exactly where the lists imply; "
                 "the loss scale cancels"), amp_dtype="float16"),
    _case("amp_mlp_bf16", "serial MLP, AMP O1 bfloat16, static loss scale 1",
          Expect(True, "EQUIVALENT", "round_bfloat16 exactly where the lists imply"),
          amp_dtype="bfloat16", init_loss_scaling=1.0, use_dynamic_loss_scaling=False),
    _case("amp_mlp_fp16_black_act", "serial MLP whose activation is exp (black-listed), "
          "AMP O1 float16: the second matmul rounds an fp32 value",
          Expect(True, "EQUIVALENT", "a white op after a black one rounds its input; the "
                 "black op widens the white one's output (the identity)"),
          amp_dtype="float16", act="exp"),
    _case("amp_no_white_op", "exp, bias add and MSE loss: no op on the white list",
          Expect(False, "EQUIVALENT", "nothing computes in the low dtype: the pass must "
                 "leave the program alone"),
          amp_dtype="float16", white_ops=False, first="black", init_loss_scaling=1.0,
          use_dynamic_loss_scaling=False),
    _case("amp_gray_first", "bias add of the feed first (a gray op with no producer)",
          Expect(False, "PASS_CRASHED",
                 "3.3.1 leaves a gray op whose inputs are all feeds or parameters "
                 "unclassified (no entry in _op_fp16_dict) and then asserts its grad "
                 "op's forward op has one",
                 evidence="the pass raises AssertionError at elementwise_sub_grad "
                 "(traceback); Paddle's own planner raises the same way: a legacy "
                 "auto.Engine with strategy.amp (O1, float16) planning fc(x + b) on one "
                 "CPU rank raises AssertionError at elementwise_add_grad in "
                 "engine.prepare (reproduced on 3.3.1), while fc(x) + b plans"),
          amp_dtype="float16", white_ops=False, init_loss_scaling=1.0,
          use_dynamic_loss_scaling=False),
]
