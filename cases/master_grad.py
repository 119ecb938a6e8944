"""Master gradients (legacy AMP O2): hand-built low-precision programs for
``auto_parallel_master_grad_pass``.

On a CPU build the legacy O2 pass (``auto_parallel_fp16``) casts nothing
(docs/passes.md), so these programs are spelled as O2 leaves them on a GPU:
parameters, activations and gradients in ``params["amp_dtype"]`` (bfloat16
or float16), and the optimizer the planner appends after it
(``Parallelizer._generate_optimizer``: a copy of the serial optimizer,
``apply_gradients`` under the ``opt_`` name generator), AdamW with
``multi_precision`` (float32 master weights initialised in the startup by a
cast of the parameter) and a gradient clip.  The serial optimizer is left,
unapplied, in the dist context (``_serial_optimizer``), where the pass
takes it to build the optimizer again.  One rank (mesh ``[0]``)::

    h    = matmul_v2(x, W)                 # params["amp_dtype"] throughout
    out  = elementwise_add(h, b)
    loss = mean(out)
    backward; clip (ClipGradByValue, or none with params["clip"] = None); adamw

``params["amp_dtype"] = "float32"``: nothing in low precision, the pattern is
absent.  ``params["embedding"]``: the input is token ids looked up in a
parameter table (``lookup_table_v2``), so the matmul's input has a gradient;
``params["optimizer"] = "sgd"``: SGD (``multi_precision``) in place of AdamW.
Together they make a program whose every op has a bfloat16 CPU kernel
(AdamW has none; oneDNN's bfloat16 ``matmul_v2_grad`` crashes when the
input's gradient is not asked for, as for a fed input).
"""
from __future__ import annotations

import contextlib
import copy

from .amp import _grad
from .base import Case, Expect
from .program_builder import BACKWARD, LOSS, ProgramBuilder

MASTER_GRAD = "auto_parallel_master_grad_pass"
B, H = 4, 8
VOCAB = 16
# the clip bound: 2^-4 is exact in float16 and bfloat16 (phi's clip casts
# its bound to the input's dtype: 0.05 would clip the low-precision gradient
# at 0.0500488 and the float32 master gradient at 0.05)
CLIP = 0.0625


@contextlib.contextmanager
def fresh_name_scopes():
    """Paddle's name scopes numbered from scratch while inside: the optimizer
    appends its clip under ``name_scope("gradient_clip")``, whose suffix
    counts every earlier use in the process, so two builds (or a build in a
    worker and one here) would differ in ``op_namescope``; the master-grad
    pass rebuilds the optimizer the same way."""
    from paddle.base import framework

    saved = framework._name_scope
    framework._name_scope = framework.NameScope()
    try:
        yield
    finally:
        framework._name_scope = saved


def build(case: Case, rank: int):
    with fresh_name_scopes():
        return _build(case, rank)


def _build(case: Case, rank: int):
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    p = case.params
    dtype = p.get("amp_dtype", "bfloat16")
    b = ProgramBuilder(case, rank)
    emb = p.get("embedding")
    if emb:  # token ids through a lookup table: the matmul's input has a gradient
        ids = b.data("ids", [B], [B], dtype="int64")
        table = b.param("embedding_0.w_0", [VOCAB, H], dtype=dtype)
        x = b.var("embedding_0.tmp_0", [B, H], dtype=dtype)
        look = b.op("lookup_table_v2", {"Ids": [ids], "W": [table]}, {"Out": [x]},
                    {"padding_idx": -1})
    else:
        x = b.data("x", [B, H], [B, H], dtype=dtype)
    w = b.param("linear_0.w_0", [H, H], dtype=dtype)
    bias = b.param("linear_0.b_0", [H], dtype=dtype)
    h = b.var("linear_0.tmp_0", [B, H], dtype=dtype)
    mm = b.op("matmul_v2", {"X": [x], "Y": [w]}, {"Out": [h]},
              {"trans_x": False, "trans_y": False})
    out = b.var("linear_0.tmp_1", [B, H], dtype=dtype)
    add = b.op("elementwise_add", {"X": [h], "Y": [bias]}, {"Out": [out]}, {"axis": -1})
    # a mean, not the builder's MSE: on CPU, bfloat16 square_grad raises
    # (InvalidArgumentError: float32 retrieved from a bfloat16 tensor)
    loss = b.var("loss", [], dtype)
    mean = b.op("reduce_mean", {"X": [out]}, {"Out": [loss]},
                {"dim": [], "keep_dim": False, "reduce_all": True}, LOSS)
    b.loss = loss.name
    loss_g = b.grad_of(loss)
    b.op("fill_constant", {}, {"Out": [loss_g]},
         {"shape": [], "dtype": loss.dtype, "value": 1.0}, BACKWARD | LOSS)
    out_g = b.grad_of(out)
    _grad(b, mean, role=BACKWARD | LOSS)
    h_g = b.grad_of(h)
    bias_g = b.grad_of(bias)
    _grad(b, add, inputs={"Out@GRAD": [out_g]})
    w_g = b.grad_of(w)
    if emb:
        x_g = b.grad_of(x)
        _grad(b, mm, inputs={"Out@GRAD": [h_g]})
        table_g = b.grad_of(table)
        _grad(b, look, inputs={"Out@GRAD": [x_g]})
        b.params_grads += [(table, table_g)]
        b.fetches += [table_g.name]
    else:
        _grad(b, mm, inputs={"Out@GRAD": [h_g]}, outputs={"X@GRAD": []})
    b.params_grads += [(w, w_g), (bias, bias_g)]
    b.fetches += [w_g.name, bias_g.name, w.name, bias.name]
    clip = p.get("clip", "value")
    make = {"adamw": paddle.optimizer.AdamW, "sgd": paddle.optimizer.SGD}[
        p.get("optimizer", "adamw")]
    serial = make(0.1, multi_precision=True,
                  grad_clip=paddle.nn.ClipGradByValue(CLIP) if clip == "value" else None)
    applied = copy.deepcopy(serial)  # as the planner does: the serial one stays unapplied
    applied._learning_rate = serial._learning_rate
    with paddle.static.program_guard(b.main, b.startup), \
            b.main.switch_name_generator_guard("opt_"):
        applied.apply_gradients(list(b.params_grads))
    b.ctx._serial_optimizer = serial
    return b.finish()


def _case(name, summary, expect, **params):
    # paired with the master-grad pass only: an O2 program with its optimizer
    # amp_level o2 with amp_dtype: numeric runs use the float32 twin
    # (Case.numeric_twin), as this build has no float16 matmul kernels
    return Case(name=name, family="master_grad", summary=summary, mesh=[0], builder=build,
                expect={MASTER_GRAD: expect}, rings={}, amp_level="o2",
                params={"only_pass": MASTER_GRAD, **params})


_VALUES = ("the value proof proves every watched value (the widening cast is the identity "
           "on values, the clip bound 2^-4 exact in both dtypes, the rebuilt optimizer's state "
           "compared under its new names); no run witnesses it: the case's own programs do not "
           "run on this CPU build (Paddle registers no {dtype} CPU kernel for {missing}), and "
           "the float32 twin the numeric runs take instead gives the pass nothing to cast: "
           "not the same rewrite")
CASES = [
    _case("master_grad_bf16", "bfloat16 linear + mean, AdamW (multi_precision) with a "
          "value clip", Expect(True, "INCONCLUSIVE", "fires: each bfloat16 gradient is cast "
                               "to a float32 master gradient that the clip and AdamW read, "
                               "and AdamW updates the float32 master copy: the contract "
                               "holds; " + _VALUES.format(dtype="bfloat16", missing="adamw")),
          amp_dtype="bfloat16"),
    _case("master_grad_fp16", "float16 linear + mean, AdamW (multi_precision) with a "
          "value clip", Expect(True, "INCONCLUSIVE", "as master_grad_bf16 in float16: the "
                               "contract holds; " + _VALUES.format(
                                   dtype="float16", missing="matmul_v2 nor adamw")),
          amp_dtype="float16"),
    _case("master_grad_fp32", "the same program in float32", Expect(
        False, "EQUIVALENT", "no low-precision gradient: nothing to cast; the pass still "
        "deletes and rebuilds the optimizer with its state renamed, the same update for each "
        "parameter (left alone holds); proved and run bitwise equal"),
        amp_dtype="float32"),
    _case("master_grad_bf16_no_clip", "master_grad_bf16 without a gradient clip",
          Expect(True, "PASS_CRASHED",
                 "the pass deletes the optimizer from the first optimize op in the "
                 "/gradient_clip name scope and asserts there is one: without a gradient "
                 "clip it raises before rebuilding the optimizer, after casting the "
                 "gradients",
                 evidence="AssertionError: The first optimizer op is not found! "
                 "(auto_parallel_master_grad.py, _regenerate_optimizer); the legacy "
                 "planner applies the pass whenever AMP is O2 with use_master_grad, "
                 "whether or not the optimizer clips"),
          amp_dtype="bfloat16", clip=None),
    _case("master_grad_bf16_sgd", "bfloat16 embedding + linear + mean, SGD "
          "(multi_precision) with a value clip: every op has a bfloat16 CPU kernel",
          Expect(True, "PASS_CRASHED",
                 "the pass lists sgd among the optimizers it rebuilds, yet reads every "
                 "one's SkipUpdate input, which only adam, adamw and lamb declare: with "
                 "SGD (or momentum, adamax, ...) it raises while deleting the optimizer, "
                 "after casting the gradients; Paddle's CPU executor runs the original "
                 "bfloat16 program (SGD is the only optimizer with a bfloat16 CPU kernel)",
                 evidence="RuntimeError: (NotFound) Input SkipUpdate cannot be found in "
                 "operator sgd (auto_parallel_master_grad.py, _regenerate_optimizer: "
                 "op.input(\"SkipUpdate\") for each op in _supported_optimizer_type, which "
                 "holds sgd, momentum, adamax, lars_momentum, ... without that input); the "
                 "legacy planner applies the pass whenever AMP is O2 with use_master_grad, "
                 "whatever the optimizer; mended in "
                 "tests/fixed_passes/master_grad_skip_update_mended.py, the contract holds "
                 "and the value proof proves it, yet no run decides it: 3.3.1's bfloat16 "
                 "CPU SGD kernel reads the float32 master gradient as bfloat16 and raises"),
          amp_dtype="bfloat16", embedding=True, optimizer="sgd"),
]
