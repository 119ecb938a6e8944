"""Mixed precision (AMP O1): a small serial MLP for ``auto_parallel_amp``.

One rank (mesh ``[0]``), every op and var with dist attrs, every grad op
registered in the dist context's ``grad_op_id_to_op_id`` as the planner's
``append_backward`` does (the pass reads it to give a grad op its forward
op's precision)::

    h1   = matmul_v2(x, W1)            # white: x, W1 rounded to the low dtype
    h2   = elementwise_add(h1, b1)     # gray after a white op: b1 rounded
    a    = relu(h2)                    # gray
    out  = matmul_v2(a, W2)            # white
    loss = mean(square(out - target))  # black / unlisted: fp32
    backward, then sgd on every parameter

``params["float_ops"] = False`` gives a program with nothing to cast
(integer ops only), which the pass must leave alone.
"""
from __future__ import annotations

from .base import Case, Expect
from .program_builder import FORWARD, ProgramBuilder

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
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)
    if not p.get("float_ops", True):
        ids = b.data("ids", [B, H], [B, H], dtype="int64")
        k = b.param("counter", [B, H], dtype="float32", init_value=0.0)
        one = b.var("ids.plus", [B, H], dtype="int64")
        b.op("scale", {"X": [ids]}, {"Out": [one]},
             {"scale": 1.0, "bias": 1.0, "bias_after_scale": True}, FORWARD)
        b.fetches.append(one.name)
        return b.finish()
    x = b.data("x", [B, H], [B, H])
    w1 = b.param("linear_0.w_0", [H, F])
    b1 = b.param("linear_0.b_0", [F])
    w2 = b.param("linear_1.w_0", [F, H])
    h1 = b.var("linear_0.tmp_0", [B, F])
    mm1 = b.op("matmul_v2", {"X": [x], "Y": [w1]}, {"Out": [h1]},
               {"trans_x": False, "trans_y": False})
    h2 = b.var("linear_0.tmp_1", [B, F])
    add = b.op("elementwise_add", {"X": [h1], "Y": [b1]}, {"Out": [h2]}, {"axis": -1})
    a = b.var("relu_0.tmp_0", [B, F])
    relu = b.op("relu", {"X": [h2]}, {"Out": [a]})
    out = b.var("linear_1.tmp_0", [B, H])
    mm2 = b.op("matmul_v2", {"X": [a], "Y": [w2]}, {"Out": [out]},
               {"trans_x": False, "trans_y": False})
    out_g = b.mse_loss(out)
    _register_loss_grads(b)
    a_g, w2_g = b.grad_of(a), b.grad_of(w2)
    _grad(b, mm2, inputs={"Out@GRAD": [out_g]})
    h2_g = b.grad_of(h2)
    _grad(b, relu)
    h1_g, b1_g = b.grad_of(h1), b.grad_of(b1)
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
    return Case(name=name, family="amp", summary=summary, mesh=[0], builder=build,
                expect={AMP: expect}, rings={}, params=params)


CASES = [
    _case("amp_mlp_bf16", "serial MLP, AMP O1 bfloat16",
          Expect(True, "EQUIVALENT", "casts at the points the lists imply"),
          amp_dtype="bfloat16"),
]
