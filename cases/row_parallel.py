"""Row-parallel linear with bias: the family ``auto_parallel_fused_linear_promotion`` exists for.

One row-parallel layer per rank program, spelled op by op so that the op
sequence is exactly one of the pass's eight source patterns
(MP, MP+SP, DP+MP, DP+MP+SP; each for AMP O0/O2 and for O1 with a ``cast``)::

    x   : fed, [B/dp, S, K/tp]           # this rank's K-shard of the input
    [xt  = transpose2(x)]                # SP only: to Paddle's [S, B, H] layout
    [x16 = cast(x), W16 = cast(W)]       # AMP: low-precision matmul operands
    mm  = matmul_v2(x, W)                # W: [K/tp, N], row-sharded; mm partial
    r   = all_reduce(mm)                 # MP      (ring 0 = tensor parallel)
    r   = reduce_scatter(mm)             # MP+SP   (dim 0 = sequence)
    [b16 = cast(b)]                      # O1 only: the bias cast is in the pattern
    out = elementwise_add(r, b)          # b: [N], replicated
    [out32 = cast(out)]                  # AMP: the loss runs in fp32
    loss = reduce_mean(square(out - target))   # MSE against a seeded target

    backward (Paddle's own grad ops), e.g. DP+MP+SP:
    r@G, b@G = elementwise_add_grad(out@G)
    b@G = all_reduce(b@G) [ring 1]; b@G = scale(b@G, 1/dp)   # DP sync of the bias
    b@G = all_reduce(b@G) [ring 0]; b@G = scale(b@G, 1/tp)   # SP: seq split over tp
    mm@G = all_gather(r@G)                        # backward of reduce_scatter
    W@G  = matmul_v2_grad(x, W, mm@G)
    out@G.full = all_gather(out@G)                # the SP patterns' second gather
    W@G  = all_reduce(W@G) [ring 1]; scale(1/dp)  # DP sync of the weight
    [O1: b@G, W@G = cast(b16@G), cast(W16@G)]
    [global-norm clip], sgd / adamw per parameter

The pass's SP patterns hold a second ``all_gather`` (after matmul_v2_grad for
O0/O2 and DP+SP, before it for O1 MP+SP); here it gathers the output grad to
the full sequence for a fetch, off the grad path.

The startup program initialises every parameter and optimizer state and, as
Paddle's partitioner does, broadcasts each parameter along every mesh axis
along which it is replicated (b: TP ring 0 and DP ring 1; W: DP ring 1).

On the first rank of each TP group the pass must add the bias *before* the
collective; on the other TP ranks it must delete the bias, its grad ops, its
optimizer (and clip) ops and its startup initialisation.

Rings: 0 = tensor parallel (the last mesh axis), 1 = data parallel (mesh
axis 0 of a 2-D mesh).  Sizes are tiny so that numeric runs are instant.

Which dtype the AMP cases use: ``float16`` as on GPUs (case param
``amp_dtype``).  The CPU build has no float16 kernels for matmul_v2 (and
bfloat16 runs segfaulted here), so the O1/O2 cases cannot run numerically
on CPU as built; the pass ignores dtypes, so a twin built with ``amp_dtype="float32"``
(casts become fp32 -> fp32) runs and rewrites the same way.  The O0 cases are
all float32 and run anywhere.
"""
from __future__ import annotations

from .base import Case, Expect
from .program_builder import BACKWARD, FORWARD, OPTIMIZE, ProgramBuilder

PROMOTION = "auto_parallel_fused_linear_promotion"
B, S, K, N = 4, 4, 8, 6  # global batch, sequence, in (row-split) and out features
TP_RING = 0


def dp_ring(groups, rank):
    """The ring id of ``rank``'s data-parallel group.

    As in programs Paddle's planner makes, it is the id of that group in
    Paddle's process-group registry (``new_process_group`` returns the same
    group, and id, for the same ranks), which is what the pass compares a
    startup broadcast's ``ring_id`` with to decide it is a DP broadcast.
    """
    from paddle.distributed.auto_parallel.static.process_group import new_process_group

    group = next(g for g in groups if rank in g)
    return new_process_group(sorted(group)).id
AMP_DTYPE = "float16"


def _cast(b, x, out, role=FORWARD):
    return b.op("cast", {"X": [x]}, {"Out": [out]},
                {"in_dtype": x.dtype, "out_dtype": out.dtype}, role)


def _scale(b, x, factor):
    """In-place ``scale`` of a gradient (the planner's 1/group_size)."""
    b.op("scale", {"X": [x]}, {"Out": [x]},
         {"scale": float(factor), "bias": 0.0, "bias_after_scale": True}, BACKWARD)


def build(case: Case, rank: int):
    p = case.params
    b = ProgramBuilder(case, rank)
    dp, tp = p["dp"], p["tp"]
    sp, amp = case.enable_sp, case.amp_level
    mp_axis = 1 if dp > 1 else 0          # mesh axis of tensor parallelism
    dp_axis = 0 if dp > 1 else -1         # -1: no data-parallel axis
    low = p.get("amp_dtype", AMP_DTYPE) if amp in ("o1", "o2") else "float32"
    param_dtype = low if amp == "o2" else "float32"  # O2: low-precision params
    bl, kl = B // dp, K // tp
    dp_ring_id = dp_ring(p["dp_groups"], rank) if dp > 1 else None

    # -- parameters, in the partitioner's order: init, then broadcasts -----
    w = b.param("linear_0.w_0", [kl, N], dtype=param_dtype, mapping=[mp_axis, -1])
    bias = b.param("linear_0.b_0", [N], dtype=param_dtype, mapping=[-1])
    # one broadcast per mesh axis the parameter is replicated along
    if dp > 1:
        b.startup_broadcast(w.name, dp_ring_id)
        b.startup_broadcast(bias.name, dp_ring_id)
    b.startup_broadcast(bias.name, TP_RING)
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)
    masters = {}
    if amp == "o2":  # fp32 master weights, cast from the params in startup
        masters = {v.name: b.master_weight(v) for v in (w, bias)}

    # -- forward ------------------------------------------------------------
    x = b.data("x", [bl, S, kl], [bl, S, kl], mapping=[dp_axis, -1, mp_axis])
    h = x
    if sp:  # Paddle's sequence-parallel layout is [S, B, H]
        xt = b.var("x_t", [S, bl, kl], mapping=[-1, dp_axis, mp_axis])
        xshape = b.var("x_t.xshape", [0, bl, S, kl])
        xshape.stop_gradient = True
        b.op("transpose2", {"X": [x]}, {"Out": [xt], "XShape": [xshape]},
             {"axis": [1, 0, 2]})
        h = xt
    lead = [S, bl] if sp else [bl, S]
    lead_map = [-1, dp_axis] if sp else [dp_axis, -1]
    w_in, cast_w = w, None
    if amp != "o0":
        h16 = b.var(f"{h.name}.cast_{low}", h.shape, low,
                    mapping=b.mapping_of(h))
        _cast(b, h, h16)
        h = h16
    if amp == "o1":  # O1 keeps fp32 params and casts them where used
        w_in = b.var(f"{w.name}.cast_{low}", w.shape, low, mapping=[mp_axis, -1])
        cast_w = _cast(b, w, w_in)
    mm = b.var("linear_0.tmp_0", lead + [N], low, mapping=lead_map + [-1])
    mm_op = b.op("matmul_v2", {"X": [h], "Y": [w_in]}, {"Out": [mm]},
                 {"trans_x": False, "trans_y": False})
    if sp:  # the sequence dim (0) ends up split over the TP axis
        r = b.var("linear_0.tmp_1", [S // tp, bl, N], low,
                  mapping=[mp_axis, dp_axis, -1])
        b.reduce_scatter(mm, r, TP_RING, tp)
    else:
        r = b.var("linear_0.tmp_1", lead + [N], low, mapping=lead_map + [-1])
        b.all_reduce(mm, r, TP_RING)
    b_in, cast_b = bias, None
    if amp == "o1":
        b_in = b.var(f"{bias.name}.cast_{low}", [N], low, mapping=[-1])
        cast_b = _cast(b, bias, b_in)
    out = b.var("linear_0.tmp_2", r.shape, low, mapping=b.mapping_of(r))
    add_op = b.op("elementwise_add", {"X": [r], "Y": [b_in]}, {"Out": [out]},
                  {"axis": -1})
    h, cast_out = out, None
    if amp != "o0":
        out32 = b.var(f"{out.name}.cast_fp32", out.shape, "float32",
                      mapping=b.mapping_of(out))
        cast_out = _cast(b, out, out32)
        h = out32
    # MSE against a seeded target, so that every gradient depends on every
    # element of the forward output; the output is fetched on every rank
    # (where the pass renames it, the adapter maps it to its new name)
    b.mse_loss(h, "mean_0.tmp_0", split="tp" if sp else "dp")

    # -- backward -------------------------------------------------------------
    if cast_out is not None:
        b.grad_of(out)
        b.grad_op(cast_out)
    out_g = f"{out.name}@GRAD"
    r_g, b_in_g = b.grad_of(r), b.grad_of(b_in)
    b.grad_op(add_op)
    if dp > 1:  # data-parallel sync of the bias grad (sorted mesh dims: dp first)
        b.all_reduce(b_in_g, b_in_g, dp_ring_id, BACKWARD)
        _scale(b, b_in_g, 1.0 / dp)
    if sp:  # the bias saw only this rank's sequence chunk: sync over TP too
        b.all_reduce(b_in_g, b_in_g, TP_RING, BACKWARD)
        _scale(b, b_in_g, 1.0 / tp)
    if sp:
        mm_g = b.grad_of(mm)
        # the O1 SP pattern has a second all_gather before the matmul grad
        # (and the O0 ones one after it): a gather of the output grad to the
        # full sequence, for a fetch; it is not the grad path.
        gathered = b.var(f"{out_g}@full_seq", mm.shape, low, mapping=lead_map + [-1])
        if amp == "o1" and dp == 1:
            b.all_gather(out_g, gathered, TP_RING, tp, BACKWARD)
        b.all_gather(r_g, mm_g, TP_RING, tp, BACKWARD)  # backward of reduce_scatter
    else:
        mm_g = r_g  # backward of the row-parallel all_reduce is the identity
    w_in_g = b.grad_of(w_in)
    # x is fed data (stop_gradient): Paddle's grad maker leaves X@GRAD empty
    b.grad_op(mm_op, inputs={"Out@GRAD": [mm_g]}, outputs={"X@GRAD": []})
    if sp and not (amp == "o1" and dp == 1):
        b.all_gather(out_g, gathered, TP_RING, tp, BACKWARD)
    if sp:
        b.fetches.append(gathered.name)
    if dp > 1:
        b.all_reduce(w_in_g, w_in_g, dp_ring_id, BACKWARD)
        _scale(b, w_in_g, 1.0 / dp)
    # O1: the grads of the fp32 params are the grads of their casts, cast back
    w_g, b_g = w_in_g, b_in_g
    if amp == "o1":
        b_g = b.grad_of(bias)
        b.grad_op(cast_b)
        w_g = b.grad_of(w)
        b.grad_op(cast_w)
    b.params_grads += [(w, w_g), (bias, b_g)]
    b.fetches.append(w_g.name)

    # -- gradient clipping by global norm ---------------------------------
    clip = p.get("clip")
    if clip:
        _clip_by_global_norm(b, rank, case, clip)

    # -- optimizer ------------------------------------------------------------
    for param, grad in b.params_grads:
        master = masters.get(param.name)
        if p["opt"] == "adamw":
            b.adamw(param, grad, lr, master=master)
        else:
            b.sgd(param, grad, lr, master=master)
    return b.finish()


def _clip_by_global_norm(b, rank, case, form, clip_norm=0.05):
    """``ClipGradByGlobalNorm`` ops as Paddle's static clip appends them.

    ``form="local"``: the program as the promotion pass sees it in Paddle's
    pipeline (``auto_parallel_grad_clip`` runs *after* it): every rank sums
    the squared norms of all its local grads, the bias included, with no
    cross-rank reduction.  ``form="global"``: as ``auto_parallel_grad_clip``
    leaves it: a replicated grad is counted on the first rank only and the
    sum is all-reduced over ring 0 (the world group of a 1-D mesh).
    ``clip_norm`` is small so that the clip is active.
    """
    squares = []
    for i, (param, grad) in enumerate(b.params_grads):
        replicated = all(m == -1 for m in b.mapping_of(param))
        if form == "global" and replicated and case.tp_index(rank) != 0:
            continue
        sq = b.var(f"squared_l2_norm_{i}.tmp_0", [1], grad.dtype, mapping=[-1])
        b.op("squared_l2_norm", {"X": [grad]}, {"Out": [sq]}, role=OPTIMIZE)
        squares.append(sq)
    stacked = b.var("stack_0.tmp_0", [len(squares), 1], mapping=[-1, -1])
    b.op("stack", {"X": squares}, {"Y": [stacked]}, {"axis": 0}, OPTIMIZE)
    total = b.var("sum_0.tmp_0", [], mapping=[])
    b.op("reduce_sum", {"X": [stacked]}, {"Out": [total]},
         {"dim": [], "keep_dim": False, "reduce_all": True}, OPTIMIZE)
    if form == "global":
        b.all_reduce(total, total, TP_RING, OPTIMIZE)
    norm = b.var("sqrt_0.tmp_0", [], mapping=[])
    b.op("sqrt", {"X": [total]}, {"Out": [norm]}, role=OPTIMIZE)
    max_norm = b.var("fill_constant_0.tmp_0", [], mapping=[])
    b.op("fill_constant", {}, {"Out": [max_norm]},
         {"shape": [], "dtype": max_norm.dtype, "value": clip_norm}, OPTIMIZE)
    biggest = b.var("elementwise_max_0.tmp_0", [], mapping=[])
    b.op("elementwise_max", {"X": [max_norm], "Y": [norm]}, {"Out": [biggest]},
         {"axis": -1}, OPTIMIZE)
    factor = b.var("elementwise_div_0.tmp_0", [], mapping=[])
    b.op("elementwise_div", {"X": [max_norm], "Y": [biggest]}, {"Out": [factor]},
         {"axis": -1}, OPTIMIZE)
    for _, grad in b.params_grads:  # in place, as the static clip does
        b.op("elementwise_mul", {"X": [grad], "Y": [factor]}, {"Out": [grad]},
             {"axis": -1}, OPTIMIZE)


_GLOO_NO_REDUCE_SCATTER = "reduce_scatter has no CPU (gloo) implementation"
_GLOO_TWO_RINGS = ("DP+MP uses two rings (TP and DP); gloo honours only the "
                   "first communicator a process uses")
_GLOO_LOW_PRECISION = "no CPU kernels for float16 matmul_v2"


def _case(name, summary, expect, *, dp=1, tp=2, sp=False, amp="o0", opt="sgd",
          clip=None, amp_dtype=AMP_DTYPE):
    if dp > 1:
        mesh = [[r * tp + i for i in range(tp)] for r in range(dp)]
        dp_groups = [[row[i] for row in mesh] for i in range(tp)]
        rings = {TP_RING: [list(row) for row in mesh]}
        rings.update({dp_ring(dp_groups, g[0]): [g] for g in dp_groups})
    else:
        mesh = list(range(tp))
        rings = {TP_RING: [list(mesh)]}
        dp_groups = []
    reasons = []
    if sp:
        reasons.append(_GLOO_NO_REDUCE_SCATTER)
    if dp > 1:
        reasons.append(_GLOO_TWO_RINGS)
    if amp != "o0" and amp_dtype != "float32":
        reasons.append(_GLOO_LOW_PRECISION)
    return Case(name=name, family="row_parallel", summary=summary, mesh=mesh,
                builder=build, expect={PROMOTION: expect}, rings=rings,
                sharded_params=frozenset({"linear_0.w_0"}), enable_sp=sp,
                amp_level=amp, gloo_unfaithful="; ".join(reasons),
                params=dict(dp=dp, tp=tp, opt=opt, clip=clip, amp_dtype=amp_dtype,
                            dp_groups=dp_groups))


# Reasons record what the installed 3.3.1 pass was observed to do; numeric
# claims come from an in-process SPMD run (collectives done by hand) of the
# original and rewritten programs of all ranks, 3 steps, fp32 twins for AMP.
_MP_OK = ("fires on every rank: the first TP rank adds the bias before the "
          "all_reduce; the others drop elementwise_add(+_grad), the bias's "
          "optimizer op and its startup init/broadcast; the first rank drops "
          "its TP broadcast of the bias too (its peers no longer hold it); "
          "loss and parameters match the original")
_DP_OK = (_MP_OK + "; the first TP ranks (0, 2) keep the bias's DP broadcast, "
          "because the DP ring ids are the process-group registry ids the pass "
          "compares with (hand-numbered rings would lose that broadcast)")

_SP_FIRST_RANK = ("on the first TP rank the rewrite is broken: the rename of the "
                  "reduce_scatter output (r -> r@promote, [S/tp,B,N]) overwrites "
                  "r -> matmul_out@promote, so the moved elementwise_add_grad "
                  "reads X [S/tp,B,N] with the all_gathered Out@GRAD [S,B,N]; "
                  "its X@GRAD feeds matmul_v2_grad, which fails at run time "
                  "(\"Tensor's dimension is out of bound\"). With X fixed by hand "
                  "the bias still differs: the pass deletes the bias grad's TP "
                  "all_reduce *and* its scale(1/tp), so the bias grad is tp times "
                  "the original. The non-first rank's rewrite is correct")
_SP_O0_CRASH = ("the O0/O2 SP backward patterns end with all_gather, and the "
                "matcher indexes input_arg_names[1] of the pattern's last op "
                "(meant to be matmul_v2_grad): IndexError: list index out of "
                "range on every rank, before anything is rewritten")
_SP_O0_CRASH_EV = "the pass raises (IndexError traceback)"
_SP_FIRST_RANK_EV = ("Z3 shape precondition on rank 0 (`Out@GRAD` dim 0 is 2, the product's "
                     "is 4); the value proof's symbolic run stops at the same op; numeric runs "
                     "skipped because executing it would fail")
_CLIP_LOCAL_EV = ("value proof refutes `linear_0.w_0@GRAD` on rank 1 (exact values); numeric "
                  "run: rank 1's weight grad differs; reaching definitions (`reduce_sum` reads "
                  "a `stack` the pass changed). The stale declared `stack` shape is reported "
                  "beside it as CONTRACT_BROKEN; it no longer decides")

CASES = [
    # -- MP (pattern 0 / 4) ---------------------------------------------------
    _case("row_mp_o0_sgd_tp2", "MP, TP 2, fp32, SGD", Expect(True, "EQUIVALENT", _MP_OK)),
    _case("row_mp_o0_adamw_tp2", "MP, TP 2, fp32, AdamW",
          Expect(True, "EQUIVALENT", _MP_OK + "; the bias's four AdamW "
                 "accumulator inits leave startup on the non-first rank"),
          opt="adamw"),
    _case("row_mp_o1_sgd_tp2", "MP, TP 2, AMP O1 (bias cast in the pattern), SGD",
          Expect(True, "EQUIVALENT", _MP_OK + "; O1: the bias cast moves with the "
                 "add on rank 0 and is deleted with its grad cast on rank 1"),
          amp="o1"),
    _case("row_mp_o2_adamw_tp2", "MP, TP 2, AMP O2 (fp16 params, fp32 master weights), AdamW",
          Expect(True, "EQUIVALENT", _MP_OK + "; O2: the bias's fp32 master "
                 "weight cast leaves startup on the non-first rank"),
          amp="o2", opt="adamw"),
    _case("row_mp_o0_sgd_tp4", "MP, TP 4 (mesh [0,1,2,3]), fp32, SGD",
          Expect(True, "EQUIVALENT", _MP_OK + "; ranks 1-3 all lose the bias"),
          tp=4),
    _case("row_mp_o1_adamw_tp4", "MP, TP 4, AMP O1, AdamW",
          Expect(True, "EQUIVALENT", _MP_OK), tp=4, amp="o1", opt="adamw"),
    # -- MP with global-norm clipping -----------------------------------------
    _case("row_mp_o0_sgd_clip_tp2",
          "MP, TP 2, SGD, global-norm clip as the pass sees it in Paddle's pipeline",
          Expect(True, "NOT_EQUIVALENT",
                 "fires; on rank 1 it also deletes squared_l2_norm(b@GRAD) (and "
                 "drops it from the stack) and the bias's elementwise_mul, so "
                 "rank 1's norm loses the bias term: its clip factor goes from "
                 "0.117 to 0.403 and its W update differs (rank 0 then differs "
                 "through the forward all_reduce). Correct only if "
                 "auto_parallel_grad_clip rewrites the norm afterwards, as "
                 "Paddle's pipeline does. Evidence: value proof refutes "
                 "linear_0.w_0@GRAD on rank 1, numeric run (rank 1's weight "
                 "grad), reaching definitions; the stale declared stack shape "
                 "is CONTRACT_BROKEN beside it and no longer decides",
                 evidence=_CLIP_LOCAL_EV),
          clip="local"),
    _case("row_mp_o0_adamw_gclip_tp2",
          "MP, TP 2, AdamW, global-norm clip as auto_parallel_grad_clip leaves it",
          Expect(True, "EQUIVALENT", _MP_OK + "; the bias's norm is only on rank "
                 "0 and the norm is all-reduced, so deleting rank 1's clip "
                 "elementwise_mul of b@GRAD changes nothing"),
          opt="adamw", clip="global"),
    # -- MP + SP (pattern 1 / 5) ----------------------------------------------
    _case("row_mp_sp_o0_sgd_tp2", "MP+SP, TP 2, fp32, SGD",
          Expect(True, "PASS_CRASHED", _SP_O0_CRASH, evidence=_SP_O0_CRASH_EV), sp=True),
    _case("row_mp_sp_o1_sgd_tp2", "MP+SP, TP 2, AMP O1, SGD",
          Expect(True, "NOT_EQUIVALENT", "fires (22 -> 20 ops on rank 0, 22 -> 15 "
                 "on rank 1); " + _SP_FIRST_RANK, evidence=_SP_FIRST_RANK_EV),
          sp=True, amp="o1"),
    _case("row_mp_sp_o1_adamw_tp2", "MP+SP, TP 2, AMP O1, AdamW",
          Expect(True, "NOT_EQUIVALENT", "fires; " + _SP_FIRST_RANK, evidence=_SP_FIRST_RANK_EV),
          sp=True, amp="o1", opt="adamw"),
    # -- DP + MP (pattern 2 / 6) ----------------------------------------------
    _case("row_dp_mp_o0_sgd", "DP 2 x MP 2, fp32, SGD",
          Expect(True, "EQUIVALENT", _DP_OK), dp=2),
    _case("row_dp_mp_o0_adamw", "DP 2 x MP 2, fp32, AdamW",
          Expect(True, "EQUIVALENT", _DP_OK), dp=2, opt="adamw"),
    _case("row_dp_mp_o1_sgd", "DP 2 x MP 2, AMP O1, SGD",
          Expect(True, "EQUIVALENT", _DP_OK), dp=2, amp="o1"),
    # -- DP + MP + SP (pattern 3 / 7) -----------------------------------------
    _case("row_dp_mp_sp_o0_sgd", "DP 2 x MP 2 + SP, fp32, SGD",
          Expect(True, "PASS_CRASHED", _SP_O0_CRASH, evidence=_SP_O0_CRASH_EV), dp=2, sp=True),
    _case("row_dp_mp_sp_o1_sgd", "DP 2 x MP 2 + SP, AMP O1, SGD",
          Expect(True, "PASS_CRASHED", _SP_O0_CRASH.replace(
              "the O0/O2 SP backward patterns end", "both DP+MP+SP backward "
              "patterns (O0/O2 and O1) end"), evidence=_SP_O0_CRASH_EV),
          dp=2, sp=True, amp="o1"),
    # -- more of the matrix: optimizers, TP degrees, AMP levels ---------------
    _case("row_mp_o2_sgd_tp2", "MP, TP 2, AMP O2, SGD",
          Expect(True, "EQUIVALENT", _MP_OK), amp="o2"),
    _case("row_mp_o0_adamw_tp4", "MP, TP 4, fp32, AdamW",
          Expect(True, "EQUIVALENT", _MP_OK), tp=4, opt="adamw"),
    _case("row_mp_o2_adamw_tp4", "MP, TP 4, AMP O2, AdamW",
          Expect(True, "EQUIVALENT", _MP_OK), tp=4, amp="o2", opt="adamw"),
    _case("row_mp_o1_sgd_gclip_tp2", "MP, TP 2, AMP O1, SGD, global-norm clip after "
          "auto_parallel_grad_clip", Expect(True, "EQUIVALENT", _MP_OK), amp="o1",
          clip="global"),
    _case("row_mp_sp_o2_sgd_tp2", "MP+SP, TP 2, AMP O2, SGD",
          Expect(True, "PASS_CRASHED", _SP_O0_CRASH, evidence=_SP_O0_CRASH_EV), sp=True, amp="o2"),
    _case("row_dp_mp_o2_adamw", "DP 2 x MP 2, AMP O2, AdamW",
          Expect(True, "EQUIVALENT", _DP_OK), dp=2, amp="o2", opt="adamw"),
    _case("row_dp_mp_o1_adamw", "DP 2 x MP 2, AMP O1, AdamW",
          Expect(True, "EQUIVALENT", _DP_OK), dp=2, amp="o1", opt="adamw"),
    _case("row_dp_mp_sp_o0_adamw", "DP 2 x MP 2 + SP, fp32, AdamW",
          Expect(True, "PASS_CRASHED", _SP_O0_CRASH, evidence=_SP_O0_CRASH_EV),
          dp=2, sp=True, opt="adamw"),
]
