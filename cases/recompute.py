"""Recompute (legacy Engine): serial MLP blocks for ``auto_parallel_recompute``.

The legacy planner marks the forward ops of each recompute segment with an
``op_namescope`` of ``/auto_parallel/rc_<i>`` (``set_recompute_segments``,
from ``strategy.recompute.checkpoints``) and applies the pass after the
backward, before the optimizer (``Parallelizer._apply_pre_optimization``).
These cases spell that program: one rank (mesh ``[0]``), every op and var
with dist attrs, every grad op registered in the dist context's
``grad_op_id_to_op_id`` as ``append_backward`` registers it (the pass finds
where to insert a segment by the grad op of the segment's last op)::

    for each block k:                    # segment rc_k where params["segments"] marks it
        h  = matmul_v2(a_{k-1}, W_k)     # [h = dropout(h)] with params["dropout"]
        h2 = elementwise_add(h, b_k)
        a_k = gelu(h2)             # gelu_grad reads h2: recomputed
    out  = matmul_v2(a_last, W_out)      # outside every segment
    loss = mean(square(out - target))    # the one loss op (role Forward|Loss)
    backward (no optimizer: the pass runs before it is appended)

``params``: ``blocks`` (default 2), ``segments`` (the blocks marked, default
all; ``()`` marks none: the Engine without checkpoints), ``dropout`` (a
dropout after the block's matmul, inside the segment, with ``fix_seed`` and
a seed so that both programs draw one mask).
"""
from __future__ import annotations

from .amp import _grad, _register_loss_grads
from .base import Case, Expect
from .program_builder import FORWARD, ProgramBuilder

RECOMPUTE = "auto_parallel_recompute"
B, H = 4, 8
RC_SCOPE = "/auto_parallel/rc_"  # the mark set_recompute_segments writes


def _block(b, k, a, marked, dropout):
    """One block's forward ops (and what its backward needs)."""
    w = b.param(f"linear_{k}.w_0", [H, H])
    bias = b.param(f"linear_{k}.b_0", [H])
    h = b.var(f"linear_{k}.tmp_0", [B, H])
    ops = [b.op("matmul_v2", {"X": [a], "Y": [w]}, {"Out": [h]},
                {"trans_x": False, "trans_y": False})]
    if dropout:  # inside the segment: its result and mask are recomputed
        d = b.var(f"dropout_{k}.tmp_0", [B, H])
        mask = b.var(f"dropout_{k}.tmp_1", [B, H], dtype="uint8")
        mask.stop_gradient = True
        ops.append(b.op("dropout", {"X": [h]}, {"Out": [d], "Mask": [mask]},
                        {"dropout_prob": 0.5, "is_test": False, "fix_seed": True,
                         "seed": 11 + k, "dropout_implementation": "upscale_in_train"}))
        h = d
    h2 = b.var(f"linear_{k}.tmp_1", [B, H])
    ops.append(b.op("elementwise_add", {"X": [h], "Y": [bias]}, {"Out": [h2]}, {"axis": -1}))
    out = b.var(f"gelu_{k}.tmp_0", [B, H])
    ops.append(b.op("gelu", {"X": [h2]}, {"Out": [out]}, {"approximate": False}))
    if marked:
        for op in ops:
            op._set_attr("op_namescope", f"{RC_SCOPE}{k}")
    return ops, (w, bias), out


def build(case: Case, rank: int):
    p = case.params
    blocks = int(p.get("blocks", 2))
    marked = set(p.get("segments", range(blocks)))
    b = ProgramBuilder(case, rank)
    a = b.data("x", [B, H], [B, H])
    fwd = []
    for k in range(blocks):
        ops, params, a = _block(b, k, a, k in marked, p.get("dropout", False))
        fwd.append((ops, params))
    w_out = b.param("linear_out.w_0", [H, H])
    out = b.var("linear_out.tmp_0", [B, H])
    mm_out = b.op("matmul_v2", {"X": [a], "Y": [w_out]}, {"Out": [out]},
                  {"trans_x": False, "trans_y": False})
    out_g = b.mse_loss(out)
    # one loss op, as append_backward marks it (the pass's get_loss_op asserts one)
    for op in [o for o in b.block.ops if o.attr("op_role") == 256][:-1]:
        op._set_attr("op_role", FORWARD)
    _register_loss_grads(b)
    b.grad_of(a)
    w_out_g = b.grad_of(w_out)
    _grad(b, mm_out, inputs={"Out@GRAD": [out_g]})
    b.params_grads.append((w_out, w_out_g))
    for k in reversed(range(blocks)):
        ops, (w, bias) = fwd[k]
        for op in reversed(ops):
            x = b.block.var(op.input("X")[0])
            if x.name != "x" and not b.block.has_var(x.name + "@GRAD"):
                b.grad_of(x)
            if op.type == "elementwise_add":
                bias_g = b.grad_of(bias)
            if op.type == "matmul_v2":  # the first block's X is the feed (no gradient)
                w_g = b.grad_of(w)
                _grad(b, op, outputs={"X@GRAD": []} if k == 0 else None)
            else:
                _grad(b, op)
        b.params_grads += [(w, w_g), (bias, bias_g)]
    b.fetches += [g.name for _, g in b.params_grads]
    return b.finish()


def _case(name, summary, expect, **params):
    # paired with the recompute pass only: the serial program after the
    # backward and before the optimizer is what the planner hands it
    return Case(name=name, family="recompute", summary=summary, mesh=[0], builder=build,
                expect={RECOMPUTE: expect}, rings={}, params={"only_pass": RECOMPUTE,
                                                               **params})


CASES = [
    _case("recompute_mlp2", "two gelu blocks, each a recompute segment, and an output linear",
          Expect(True, "EQUIVALENT", "each segment's intermediates are recomputed in the "
                 "backward and read there; every value kept")),
    _case("recompute_mlp2_no_checkpoints", "the same blocks with no segment marked",
          Expect(False, "EQUIVALENT", "no recompute segment: the pass must leave the "
                 "program alone"), segments=()),
    _case("recompute_mlp2_parallel_run", "recompute_mlp2 rewritten with "
          "FLAGS_new_executor_sequential_run off (outside the Engine, which sets it on)",
          Expect(True, "NOT_EQUIVALENT",
                 "the pass puts an ordering nop before each segment's copy, whose Out is the "
                 "copy's largest input (here the feed x and the first block's output): the "
                 "contract holds, the value proof proves every value and the simulated run "
                 "agrees, but the new executor with PIR (FLAGS_enable_pir_in_executor, which "
                 "the Engine turns on) cannot run the rewritten program",
                 evidence="numeric 'ranks run': the rewritten program no longer runs "
                 "(ValueError (InvalidArgument) The size of variable_list and var_name_2_id "
                 "map should be equal, pir_adaptor_util.cc; in one process: "
                 "PreconditionNotMetError Tensor holds no memory); the same program without "
                 "its nops runs"),
          sequential_run=False),
    _case("recompute_mlp2_dropout", "two matmul, dropout, add, gelu blocks, each a recompute segment",
          Expect(True, "EQUIVALENT", "the forward's dropout reads a seed op's output "
                 "(the seed it fixed) and the recomputed dropout reads the same one: one "
                 "mask; the value proof proves every gradient (the mask a function of the "
                 "seed's value) and the runs agree bitwise"),
          dropout=True),
]
