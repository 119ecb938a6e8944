"""Tensor + sequence parallel: the pattern ``auto_parallel_sequence_parallel_optimization`` exists for.

A row-parallel linear whose output goes to sequence-parallel layout, as
Paddle's planner writes it before the pass: the dist op sums the partial
products over the tensor-parallel ring (``all_reduce``) and reshard then
splits the sum along the sequence dim (``split``, op_namescope
``/auto_parallel/reshard``), each rank keeping its own chunk.  The pass
fuses the two into one ``reduce_scatter``.  One program per rank::

    x    : fed, [S, B, K/tp]             # sequence-first, this rank's K-shard
    mm   = matmul_v2(x, W)               # W: [K/tp, N], row-sharded; mm partial
    r    = all_reduce(mm)  [ring 0]      # (in place in some cases: r is mm)
    r_0, ..., r_{tp-1} = split(r, axis=0, num=tp)    # reshard
    out  = elementwise_add(r_k, b)       # k: this rank's chunk (tp index)
    loss = reduce_mean(square(out - target))

    backward:
    r_k@G, b@G = elementwise_add_grad(out@G)
    b@G  = all_reduce(b@G) [ring 0]      # the bias saw only this chunk
    mm@G = all_gather(r_k@G) [ring 0]    # backward of all_reduce + split
    W@G  = matmul_v2_grad(x, W, mm@G)
    sgd / adamw per parameter

``sp_opt_tp2_other_chunk`` is the same program except that each rank keeps
the *other* rank's chunk (``r_{1-k}``): a sum followed by a split is then
not a reduce-scatter (which gives each rank its own chunk), so the pattern
is absent and a pass that fuses it anyway changes the values.

Rings: 0 = tensor parallel (each row of the mesh); with DP, each column's
data-parallel ring has its process-group registry id, as in
``cases/row_parallel.py``.  Numeric runs: the simulator only, since
``reduce_scatter`` (the rewritten program's) has no gloo implementation.

On 3.3.1 the pass raises on every program where it finds its pattern:
``allreduce_op.input("X")`` of an ``all_reduce``, whose input slot is ``x``.
"""
from __future__ import annotations

from .base import Case, Expect
from .program_builder import BACKWARD, ProgramBuilder
from .row_parallel import _scale, dp_ring

SP_OPT = "auto_parallel_sequence_parallel_optimization"
S, B, K, N = 4, 2, 8, 6  # sequence, batch, in (row-split) and out features
TP_RING = 0
RESHARD_SCOPE = "/auto_parallel/reshard"


def build(case: Case, rank: int):
    p = case.params
    b = ProgramBuilder(case, rank)
    tp, dp = p["tp"], p.get("dp", 1)
    mp_axis, dp_axis = (1, 0) if dp > 1 else (0, -1)
    k = case.tp_index(rank)
    kept = (k + 1) % tp if p.get("other_chunk") else k
    kl, bl = K // tp, B // dp
    batch = -1 if p.get("dynamic_batch") else bl
    dp_ring_id = dp_ring(p["dp_groups"], rank) if dp > 1 else None

    w = b.param("linear_0.w_0", [kl, N], mapping=[mp_axis, -1])
    bias = b.param("linear_0.b_0", [N], mapping=[-1])
    if dp > 1:  # one broadcast per mesh axis a parameter is replicated along
        b.startup_broadcast(w.name, dp_ring_id)
        b.startup_broadcast(bias.name, dp_ring_id)
    b.startup_broadcast(bias.name, TP_RING)
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)

    # -- forward ------------------------------------------------------------
    x = b.data("x", [S, batch, kl], [S, bl, kl], mapping=[-1, dp_axis, mp_axis])
    b.feeds[-1].split = "tp"  # every rank holds another K-shard of x
    mm = b.var("linear_0.tmp_0", [S, batch, N], mapping=[-1, dp_axis, -1])
    mm_op = b.op("matmul_v2", {"X": [x], "Y": [w]}, {"Out": [mm]},
                 {"trans_x": False, "trans_y": False})
    r = mm if p.get("inplace") else b.var("linear_0.tmp_1", [S, batch, N],
                                          mapping=[-1, dp_axis, -1])
    b.all_reduce(mm, r, TP_RING)
    chunks = [b.var(f"{r.name}.split_{i}", [S // tp, batch, N],
                    mapping=[mp_axis, dp_axis, -1]) for i in range(tp)]
    split = b.op("split", {"X": [r]}, {"Out": chunks}, {"axis": 0, "num": tp, "sections": []})
    split._set_attr("op_namescope", RESHARD_SCOPE)  # as reshard marks its ops
    out = b.var("linear_0.tmp_2", [S // tp, batch, N], mapping=[mp_axis, dp_axis, -1])
    add_op = b.op("elementwise_add", {"X": [chunks[kept]], "Y": [bias]}, {"Out": [out]},
                  {"axis": -1})
    b.mse_loss(out, "mean_0.tmp_0", split="tp")

    # -- backward -------------------------------------------------------------
    chunk_g, bias_g = b.grad_of(chunks[kept]), b.grad_of(bias)
    b.grad_op(add_op)
    b.all_reduce(bias_g, bias_g, TP_RING, BACKWARD)
    if dp > 1:  # data-parallel sync of the bias grad
        b.all_reduce(bias_g, bias_g, dp_ring_id, BACKWARD)
        _scale(b, bias_g, 1.0 / dp)
    mm_g = b.grad_of(mm)
    b.all_gather(chunk_g, mm_g, TP_RING, tp, BACKWARD)
    w_g = b.grad_of(w)
    b.grad_op(mm_op, inputs={"Out@GRAD": [mm_g]}, outputs={"X@GRAD": []})
    if dp > 1:  # data-parallel sync of the weight grad
        b.all_reduce(w_g, w_g, dp_ring_id, BACKWARD)
        _scale(b, w_g, 1.0 / dp)
    b.params_grads += [(w, w_g), (bias, bias_g)]
    b.fetches += [w_g.name, bias_g.name]

    # -- optimizer ------------------------------------------------------------
    for param, grad in b.params_grads:
        if p["opt"] == "adamw":
            b.adamw(param, grad, lr)
        else:
            b.sgd(param, grad, lr)
    return b.finish()


_GLOO = "reduce_scatter (the rewritten program's) has no CPU (gloo) implementation"

_CRASH = ("the pass finds the all_reduce + reshard split and raises before "
          "rewriting anything: it reads allreduce_op.input(\"X\") of an all_reduce, "
          "whose input slot is x (RuntimeError: (NotFound) Input X cannot be found in operator all_reduce); every rank, "
          "program unchanged. With the slot read as x (tests/fixed_passes/"
          "sp_optimization_x_slot_mended.py) the rewrite is proved equivalent")
# what shows it, on these cases and on the Engine's own program (engine_sp)
SP_OPT_EV = ("the pass raises `(NotFound) Input X cannot be found in operator all_reduce` on "
             "every rank, also on the Engine's own TP+SP program (`cases/engine_sp.py`), where "
             "with the default `sp_optimization.enable=True` it stops `engine.prepare` itself. "
             "With that read mended (`tests/fixed_passes/sp_optimization_x_slot_mended.py`) the "
             "fusion is proved (value proof, simulator) on the real pattern (the planner's "
             "included), and on `sp_opt_tp2_other_chunk` (a rank keeps another rank's chunk, so "
             "the sum + split is not a reduce-scatter) the mended pass fuses anyway: "
             "NOT_EQUIVALENT, refuted on both ranks")


def _case(name, summary, expect, *, tp=2, dp=1, opt="sgd", **params):
    if dp > 1:  # rows: tensor-parallel groups; columns: data-parallel ones
        mesh = [[r * tp + i for i in range(tp)] for r in range(dp)]
        dp_groups = [[row[i] for row in mesh] for i in range(tp)]
        rings = {TP_RING: [list(row) for row in mesh]}
        rings.update({dp_ring(dp_groups, g[0]): [g] for g in dp_groups})
    else:
        mesh, dp_groups = list(range(tp)), []
        rings = {TP_RING: [list(mesh)]}
    symbols = {"x": (None, "B", None)} if params.get("dynamic_batch") else {}
    return Case(name=name, family="sequence_parallel", summary=summary, mesh=mesh,
                builder=build, expect={SP_OPT: expect}, rings=rings,
                symbols=symbols, sharded_params=frozenset({"linear_0.w_0"}),
                enable_sp=True,
                gloo_unfaithful=_GLOO + ("; DP+TP uses two rings, gloo honours only the "
                                         "first communicator a process uses" if dp > 1 else ""),
                params=dict(tp=tp, dp=dp, opt=opt, dp_groups=dp_groups, **params))


CASES = [
    _case("sp_opt_tp2_sgd", "TP2+SP: all_reduce -> reshard split(axis 0) -> add, SGD",
          Expect(True, "PASS_CRASHED", _CRASH, evidence=SP_OPT_EV)),
    _case("sp_opt_tp2_inplace_adamw_dyn",
          "TP2+SP, in-place all_reduce as the planner emits it, AdamW, x [4, -1, 4]",
          Expect(True, "PASS_CRASHED", _CRASH, evidence=SP_OPT_EV), opt="adamw", inplace=True,
          dynamic_batch=True),
    _case("sp_opt_dp2_tp2_sgd",
          "DP2 x TP2+SP (mesh [[0,1],[2,3]]): the sum and split on each TP ring, "
          "grads synced over the DP rings, SGD",
          Expect(True, "PASS_CRASHED", _CRASH, evidence=SP_OPT_EV), dp=2),
    _case("sp_opt_tp2_other_chunk",
          "TP2: all_reduce -> split, each rank keeps the OTHER rank's chunk (not a "
          "reduce-scatter)",
          Expect(False, "PASS_CRASHED",
                 "the documented pattern is absent (a rank keeps another rank's chunk, "
                 "which a reduce_scatter does not give it), but the pass does not look "
                 "at which chunk is kept: it matches and raises on input(\"X\") as on "
                 "the real pattern; mended (slot x), it fuses anyway and the value "
                 "proof refutes the forward output on every rank",
                 evidence=SP_OPT_EV),
          other_chunk=True),
]
