"""Data-parallel programs planned by Paddle's own ``Engine`` (DP2).

The ``engine_planned`` model (LN -> linear -> act -> linear, MSE; planned
per rank in a subprocess and cached by ``cases/engine_planned.py``) on a
1-D mesh ``[0, 1]`` named ``dp``: every parameter replicated, the batch of
``x`` sharded along ``dp`` (``params["parallel"] = "dp"``).  The programs
are taken *before* the post-partition passes (``post=False``), as partition
and reshard leave them, since the passes under test run after that point::

    forward on the local batch [1, 4, 8]
    backward: per parameter grad,  all_reduce(g, SUM) [ring 12, namescope
              /data_parallel/...] -> scale(g, 1/2) [namescope /data_parallel]
    sgd per parameter

Case mesh ``[[0], [1]]`` (DP2 x TP1): the two ranks get different batches
(the value proof and the numeric runs key the feeds by the DP index).
"""
from __future__ import annotations

from .base import Case, Expect
from .engine_planned import MESH, build as _planned_build

DP_OPT = "auto_parallel_data_parallel_optimization"
GRAD_CLIP = "auto_parallel_grad_clip"
PROMOTION = "auto_parallel_fused_linear_promotion"
OVERLAP = "allreduce_matmul_grad_overlapping"
FUSE_AR = "fuse_all_reduce"
RING = 12  # the planner's process group [0, 1] (id 0: the world group)


CLIP_NAMESCOPE = "/gradient_clip/"
OPTIMIZE = 2


# params that change what is done to the planned program, not the plan: the
# planner's cache key leaves them out (engine_dp2_sgd_c_allreduce reuses
# engine_dp2_sgd's plan)
_AFTER_PLANNING = ("respell_syncs",)


def build(case, rank):
    import dataclasses

    if any(k in case.params for k in _AFTER_PLANNING):
        planned = {k: v for k, v in case.params.items() if k not in _AFTER_PLANNING}
        if case.params.get("respell_syncs"):
            planned.pop("only_pass", None)
        case = dataclasses.replace(case, params=planned)
        rp = _planned_build(case, rank)
        respell_grad_syncs(rp)
    else:
        rp = _planned_build(case, rank)
    if case.params.get("clip_norm"):
        insert_global_norm_clip(rp, float(case.params["clip_norm"]))
    return rp


def respell_grad_syncs(rp):
    """Spell each gradient's data-parallel sync ``c_allreduce_sum(X -> Out)``
    (in place, same ring, ``use_calc_stream`` true, ``use_model_parallel``
    false), the vocabulary of the planners before 3.x that ``fuse_all_reduce``
    was written for; 3.3.1's planner spells it ``all_reduce(reduce_type=SUM)``.
    Each op keeps its place, role, name scope and dist attr."""
    from verify.ir.legacy_ir import REDUCE_SUM

    block = rp.main.global_block()
    grads = {g.name for _, g in rp.params_grads}
    for op in block.ops:
        if op.type != "all_reduce" or op.attr("reduce_type") != REDUCE_SUM:
            continue
        x, out = op.input("x"), op.output("out")
        if x != out or x[0] not in grads:
            continue
        desc = op.desc
        desc.set_type("c_allreduce_sum")
        desc.set_input("X", x)
        desc.set_output("Out", out)
        desc.remove_input("x")
        desc.remove_output("out")
        desc.remove_attr("reduce_type")
        desc._set_attr("use_calc_stream", True)
        desc._set_attr("use_model_parallel", False)
    block._sync_with_cpp()


def insert_global_norm_clip(rp, clip_norm):
    """Insert, before the first optimizer op, the ops 3.3.1's
    ``ClipGradByGlobalNorm._static_clip`` appends (``paddle/nn/clip.py``):
    ``squared_l2_norm`` per grad, ``stack`` + ``reduce_sum`` (its ``_add_n``),
    ``sqrt``, ``fill_constant`` (``paddle.full``), ``elementwise_max``,
    ``elementwise_div`` and an in-place ``elementwise_mul`` per grad, all in
    name scope ``/gradient_clip`` with the Optimize role, each grad's local
    norm included (no cross-rank reduction: ``auto_parallel_grad_clip``
    adds that after partitioning).

    Why by hand: the Engine cannot build this clip in legacy mode on 3.3.1
    -- ``_static_clip``'s ``_add_n`` calls ``paddle.stack(...).sum()``, which
    raises "sum(): argument (position 1) must be Value, but got None"
    (``engine_planned`` with ``grad_clip`` fails the same way).
    """
    from paddle.distributed.auto_parallel.static.utils import (
        naive_set_dist_op_attr_for_program_by_mesh,
        set_var_dist_attr,
    )

    block = rp.main.global_block()
    ctx = rp.dist_context
    mesh = ctx.process_meshes[0]
    at = next(i for i, op in enumerate(block.ops)
              if op.has_attr("op_role") and op.attr("op_role") == OPTIMIZE
              and "Param" in op.input_names)
    pos = [at]

    def var(name, shape):
        v = block.create_var(name=name, shape=shape, dtype="float32")
        set_var_dist_attr(ctx, v, [-1] * len(shape), mesh)
        return v

    def op(type, inputs, outputs, attrs=None):
        attrs = dict(attrs or {}, op_role=OPTIMIZE)
        o = block._insert_op(pos[0], type=type, inputs=inputs, outputs=outputs, attrs=attrs)
        o._set_attr("op_namescope", CLIP_NAMESCOPE)  # the constructor sets the current scope
        naive_set_dist_op_attr_for_program_by_mesh(o, mesh, ctx)
        pos[0] += 1
        return o

    squares = []
    for i, (_, grad) in enumerate(rp.params_grads):
        sq = var(f"squared_l2_norm_{i}.tmp_0", [1])
        op("squared_l2_norm", {"X": [grad]}, {"Out": [sq]})
        squares.append(sq)
    stacked = var("stack_0.tmp_0", [len(squares), 1])
    op("stack", {"X": squares}, {"Y": [stacked]}, {"axis": 0})
    total = var("sum_0.tmp_0", [])
    op("reduce_sum", {"X": [stacked]}, {"Out": [total]},
       {"dim": [], "keep_dim": False, "reduce_all": True})
    norm = var("sqrt_0.tmp_0", [])
    op("sqrt", {"X": [total]}, {"Out": [norm]})
    max_norm = var("full_0.tmp_0", [1])
    op("fill_constant", {}, {"Out": [max_norm]},
       {"shape": [1], "dtype": max_norm.dtype, "value": clip_norm})
    biggest = var("maximum_0.tmp_0", [1])
    op("elementwise_max", {"X": [max_norm], "Y": [norm]}, {"Out": [biggest]}, {"axis": -1})
    factor = var("divide_0.tmp_0", [1])
    op("elementwise_div", {"X": [max_norm], "Y": [biggest]}, {"Out": [factor]}, {"axis": -1})
    for _, grad in rp.params_grads:
        op("elementwise_mul", {"X": [grad], "Y": [factor]}, {"Out": [grad]}, {"axis": -1})
    block._sync_with_cpp()


# Why real ranks do not run the DP cases: the rank worker marks every var of
# main persistable (to read it after the run), and the PIR executor then wants
# every persistable input in the scope when it is built -- which the grads
# dp_opt's coalesce_tensor declares (copy_data=False) before their writers are
# not.  A plain run (grads not persistable) builds; the simulator runs it.
_GLOO_COALESCE = ("dp_opt's coalesce_tensor declares the grads before their writers; "
                  "the rank worker makes every var persistable, and the PIR executor "
                  "then refuses to build (Cannot find linear_1.b_0@GRAD in scope)")
TP_SHARDED = frozenset({"linear_0.w_0", "linear_0.b_0", "linear_1.w_0"})


def _case(name, summary, expect, parallel="dp", **params):
    dp = parallel == "dp"
    return Case(name=name, family="engine_dp", summary=summary,
                mesh=[[r] for r in MESH] if dp else list(MESH), builder=build,
                expect=expect,
                rings={RING: [list(MESH)], 0: [list(MESH)]}, symbols={},
                sharded_params=frozenset() if dp else TP_SHARDED, enable_sp=False,
                amp_level="o0", gloo_unfaithful=_GLOO_COALESCE if dp else "",
                params={"parallel": parallel, "post": False, **params})


_DP_OPT_EV = ("contract (each grad summed once over its DP ring, same factor), shapes and "
              "def-use hold; the simulator's run is bitwise equal; the value proof proves every "
              "watched value (the buffer's views modelled, verify/value/views.py); not run "
              "on real ranks: the rank "
              "worker makes every var persistable, and the PIR executor then refuses the "
              "declared grads (a plain run builds)")

_DP_OPT_COALESCE = Expect(
    True, "EQUIVALENT",
    "fires on both ranks: the six scale(1/2) ops go, the loss seed fill_constant "
    "becomes 0.5; the six grads become views of one coalesce_tensor buffer "
    "(copy_data=False, inserted before their producers) summed by one all_reduce on "
    "ring 12 (gradient_sync_stream, nop dependencies around it). Contract holds (each "
    "grad summed once over ring 12 with the same factor); shapes and def-use hold "
    "(coalesce_tensor's inputs are declared, not read); the simulator's run matches "
    "bitwise over 3 steps. Proved by the value proof, every watched value by canonical "
    "form: the coalesce_tensor views are modelled (verify/value/views.py), layer_norm_grad "
    "and relu_grad are linear in their incoming gradient, and a cut multiple of a "
    "polynomial is the same cut atom, so 1/2 moved into the seed keeps equal forms. "
    "Real ranks are not run (see the case's "
    "gloo note: the rank worker's all-persistable scope makes the PIR executor refuse "
    "the declared grads)",
    evidence=_DP_OPT_EV)
_DP_OPT_2X2 = Expect(
    True, "EQUIVALENT",
    "DP2 x TP2: the pass takes the DP syncs (ring 12, the rank's DP group) and leaves "
    "the TP all_reduces (ring 13) alone; as on DP2 it moves 1/2 into the seed and sums "
    "the six grads once through a coalesce_tensor buffer: contract, shapes and def-use "
    "hold on all four ranks, the simulator's run matches bitwise; the value proof "
    "proves every watched value on all four ranks (the coalesce_tensor views modelled, "
    "verify/value/views.py), no real ranks (two rings). Only dp_opt is paired "
    "with this case (params only_pass): the value proofs of grad_clip and promotion on "
    "four ranks take ~55 s and ~28 s (Z3 through sqrt/max); grad_clip's global norm "
    "on it is checked in tests/test_dp_opt_grad_clip.py",
    evidence=_DP_OPT_EV)
_CLIP_DP = Expect(
    True, "CONTRACT_BROKEN",
    "pure data parallel: the pass splits the six squared norms between the ranks by "
    "size (rank 0: layer_norm w, linear_0 w, linear_1 b; rank 1: the rest) and sums "
    "the partial norms with all_reduce ring 0 (all ranks) before sqrt: the global "
    "norm is each grad counted once (contract holds), and the values are proved equal "
    "(the grads were already synced, so every rank's local norm was already global). "
    "It leaves stack_0.tmp_0 declared [6, 1] where the stack now makes [3, 1] "
    "(stale declared shape: CONTRACT_BROKEN)",
    evidence="shape check (declared vs inferred), contract \"global norm\"")
_CLIP_TP = Expect(
    True, "NOT_EQUIVALENT",
    "the pass does what it exists for: rank 0 keeps every squared norm, rank 1 drops "
    "the replicated grads' (layer_norm w/b, linear_1.b_0), the partial sums are "
    "all_reduced over ring 0 (contract: 9 gradient pieces, each counted once). The "
    "values differ from the original BY DESIGN: the original (as partitioning leaves "
    "it, what the Engine hands the pass) clips each rank with its local norm, so "
    "value proof and numeric run refute equality with it (linear_1.b_0@GRAD, "
    "layer_norm_0.b_0@GRAD). The right reference is the serial program, not built "
    "here; the contract is the evidence. Rank 1's stack_0.tmp_0 keeps its stale "
    "declared [6, 1] (CONTRACT_BROKEN beside it)",
    evidence="value proof and numeric run differ from the local-norm original; the serial "
    "reference is not built, so the contract is the evidence")

_PROMOTION_CLIP = Expect(
    True, "NOT_EQUIVALENT",
    "the row_mp_o0_sgd_clip_tp2 finding on the planner's own program: the promotion "
    "fires (rank 1 loses b2 = linear_1.b_0, its grad op, sgd and init) and on rank 1 it "
    "also deletes squared_l2_norm(linear_1.b_0@GRAD) from the clip, so rank 1's local "
    "norm changes (stack 6 -> 5 norms) and so do its clip factor and updates (numeric "
    "run: rank 1 linear_1.w_0@GRAD at step 1). In the Engine's order "
    "auto_parallel_grad_clip runs next and counts replicated grads on rank 0 only, so "
    "the pair is judged by the engine_pipeline case engine_pipeline_tp2_clip",
    evidence="numeric run (rank 1 `linear_1.w_0@GRAD`), reaching definitions, stale `stack` "
    "shape; in the Engine's order `auto_parallel_grad_clip` follows and restores the global "
    "norm (engine_pipeline_tp2_clip)")
_OVERLAP_TP = Expect(
    True, "NOT_APPLIED",
    "as on engine_mlp_*: the column-parallel dX all_reduce is spelled all_reduce; the "
    "pass matches only c_allreduce_sum")

_FUSE_AR_DEAD = Expect(
    True, "NOT_APPLIED",
    "six gradients, each summed in place over ring 12, independent of each other: "
    "the coalescable syncs the pass exists for. It does nothing: its validity test "
    "takes only op type c_allreduce_sum (3.3.1's planner spells the syncs all_reduce), "
    "and its collective filter lists c_broadcast, broadcast, all_gather and all_reduce, "
    "never c_allreduce_sum, so no op can pass both: the pass is dead on every program",
    evidence="contract \"fired\" (NOT_APPLIED); with the filter mended "
    "(tests/fixed_passes/fuse_all_reduce_filter_mended.py) it fuses the respelled syncs "
    "of engine_dp2_sgd_c_allreduce")
_FUSE_AR_RESPELLED = Expect(
    True, "NOT_APPLIED",
    "engine_dp2_sgd with the six gradient syncs spelled c_allreduce_sum, the op type "
    "the pass's validity test takes: it still does nothing, because the collective "
    "filter the groups are drawn from omits c_allreduce_sum. With that filter mended "
    "(tests/fixed_passes/fuse_all_reduce_filter_mended.py) it fires: the six grads "
    "become views of one coalesce_tensor buffer summed by one all_reduce on ring 12; "
    "the contract (each grad summed once over ring 12, same factor) holds",
    evidence="contract \"fired\" (NOT_APPLIED); tests/test_fuse_all_reduce.py runs the "
    "mended pass")
_FUSE_AR_ABSENT = Expect(
    False, "EQUIVALENT",
    "TP2: no parameter gradient is summed over a ring (the two all_reduces sum the "
    "column-parallel dX and the row-parallel output): nothing to coalesce, and the "
    "pass leaves the program alone")

MESH_2X2 = [[0, 1], [2, 3]]
RINGS_2X2 = {12: [[0, 2], [1, 3]], 13: [[0, 1], [2, 3]], 0: [[0, 1, 2, 3]]}


def _case_2x2(name, summary, expect, **params):
    """DP2 x TP2 on 4 ranks: the planner's ring 12 is each rank's DP group,
    13 its TP group, 0 the world."""
    return Case(name=name, family="engine_dp", summary=summary, mesh=MESH_2X2,
                builder=build, expect=expect, rings=RINGS_2X2, symbols={},
                sharded_params=TP_SHARDED, enable_sp=False, amp_level="o0",
                gloo_unfaithful="DP x TP uses two rings; gloo honours only the first "
                                "communicator a process uses",
                params={"mesh": MESH_2X2, "post": False, "only_pass": DP_OPT, **params})


CASES = [
    _case("engine_dp2_sgd",
          "Engine-planned LN -> linear -> relu -> linear, MSE, SGD, DP2 (x [2,4,8] "
          "split by batch), before the post-partition passes",
          {DP_OPT: _DP_OPT_COALESCE, FUSE_AR: _FUSE_AR_DEAD}, act="relu",
          optimizer="sgd"),
    _case("engine_dp2_sgd_c_allreduce",
          "engine_dp2_sgd with each gradient's DP sync respelled c_allreduce_sum (X -> Out, "
          "in place, ring 12), the vocabulary fuse_all_reduce matches",
          {FUSE_AR: _FUSE_AR_RESPELLED}, act="relu", optimizer="sgd", respell_syncs=True,
          only_pass=FUSE_AR),
    _case("engine_dp2_sgd_clip",
          "engine_dp2_sgd with a global-norm clip (0.05) inserted as 3.3.1's static "
          "clip emits it (the Engine cannot build it in legacy mode)",
          {DP_OPT: _DP_OPT_COALESCE, GRAD_CLIP: _CLIP_DP},
          act="relu", optimizer="sgd",
          clip_norm=0.05),
    _case("engine_tp2_sgd_clip",
          "engine_mlp_tp2_sgd (TP2, gelu, SGD) before the post-partition passes, "
          "with a global-norm clip (0.05) inserted as 3.3.1's static clip emits it",
          {GRAD_CLIP: _CLIP_TP, PROMOTION: _PROMOTION_CLIP, OVERLAP: _OVERLAP_TP,
           FUSE_AR: _FUSE_AR_ABSENT}, parallel="mp", act="gelu", optimizer="sgd", clip_norm=0.05),
    _case_2x2("engine_dp2_tp2_sgd_clip",
              "the TP model on a DP2 x TP2 mesh (4 ranks; batch split on dp, weights "
              "on mp), relu, SGD, global-norm clip (0.05) inserted as 3.3.1's static "
              "clip emits it; before the post-partition passes",
              {DP_OPT: _DP_OPT_2X2}, act="relu", optimizer="sgd", clip_norm=0.05),
]
