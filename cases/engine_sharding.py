"""Data-parallel programs planned by Paddle's ``Engine`` for the sharding pass.

The ``engine_planned`` model (LN -> linear -> act -> linear, MSE loss;
planned per rank in a subprocess and cached by ``cases/engine_planned.py``)
on a DP2 mesh ``[0, 1]`` (dim ``dp``, every parameter replicated, the batch
of ``x`` split along ``dp``), with ``sharding.enable`` left at its default
(False) so the planner does not shard: the suite applies
``auto_parallel_sharding`` itself.  The programs are taken where the
Parallelizer would hand them to the sharding pass: after partition and
reshard, before the post-partition passes (``post=False``; the passes the
Parallelizer runs before sharding -- SP optimization, promotion, master
grad, DP optimization -- are all off in this strategy, so the programs are
the same)::

    forward on the local batch [1, 4, 8]
    backward: per parameter grad  all_reduce(g, SUM) [ring 12, /data_parallel]
                                  -> scale(g, 1/2)
    sgd | adamw per parameter (AdamW: moments and beta pows, optimizer states)

The sharding stage is a case param (``stage``: 1 or 2), read by the adapter
(``passes/auto_parallel_sharding.py``): the registry holds one adapter per
pass name, so the stage is chosen per case.  ``degree`` is the DP degree, 2.

Grad clip: ``ClipGradByGlobalNorm`` cannot be built in legacy mode on 3.3.1
(see ``CLIP_NOTE``); the clip cases (``clip_norm``) get the ops it would
append inserted by ``cases/engine_dp.insert_global_norm_clip`` (each rank's
local global norm, before the optimizer), as the program the Parallelizer
hands to sharding (the grad-clip pass runs after sharding).
"""
from __future__ import annotations

from dataclasses import replace

from .base import Case, Expect
from .engine_dp import insert_global_norm_clip
from .engine_pipeline import PIPELINE, _case as _pipeline_case
from .engine_planned import MESH, build as _planned_build

SHARDING = "auto_parallel_sharding"
DEPS = "auto_parallel_supplement_explicit_dependencies"
RING = 12  # the planner's process group [0, 1] (id 0: the world group)

CLIP_NOTE = (
    "ClipGradByGlobalNorm: in legacy mode 3.3.1's clip builds its global norm "
    "with paddle.sum / paddle.sqrt on legacy Variables, which raise, so a "
    "program with clip cannot be planned on this version")


_SHARDING_EV = ("contract (owner updates, broadcast root = owner, stage-2 `reduce`); every "
                "parameter proved and run equal on every rank after 3 steps (a non-owner's "
                "stale local grad is dropped only where `verify/ir/dead_values.py` confirms it "
                "dead). Mutants (wrong root, broadcasts dropped) are refuted on the parameter "
                "and rank. Grad clip cannot be planned in legacy mode on 3.3.1 (the Engine's "
                "clip sums with `paddle.stack(...).sum()`, a PIR-only API)")

_S1 = Expect(True, "EQUIVALENT",
             "the Engine's DP2 program is the pass's pattern (every parameter updated by "
             "an optimizer op from a gradient all-reduced over the DP ring 12); stage 1 "
             "keeps the all-reduces, keeps each optimizer op (and its states) on the "
             "parameter's owner only (greedy_even by numel: rank 0 owns layer_norm_0.b_0, "
             "linear_0.w_0, linear_1.b_0; rank 1 the others) and appends a broadcast of "
             "every parameter from its owner on ring 12; every parameter, gradient, the "
             "loss and the activation proved equal on both ranks and equal after 3 "
             "steps (simulator and real gloo ranks)",
             evidence=_SHARDING_EV)
_S2 = Expect(True, "EQUIVALENT",
             "stage 2: as stage 1, and each gradient's all_reduce becomes a reduce "
             "(root_id = the owner) over ring 12; a rank keeps the unreduced local "
             "gradient of a parameter it does not own, read by nothing (dropped from the "
             "comparison as dead, verify/ir/dead_values.py); every parameter after the "
             "owner's broadcast is proved equal on both ranks and equal after 3 "
             "steps in the simulator (real gloo ranks, which run reduce, agree on every "
             "parameter too, but the case is marked gloo-unfaithful for the "
             "dependencies pass's nop ops, so the suite runs the simulator only)",
             evidence=_SHARDING_EV)


_DEPS_S1 = Expect(True, "PASS_CRASHED",
                  "after sharding stage 1 (installed pass, same PassContext, as the "
                  "Parallelizer applies them) the gradients are still all_reduce'd; the pass "
                  "asks every op is_amp_flag_sync_op, which reads attr op_type of an "
                  "all_reduce (its attr is reduce_type): RuntimeError (NotFound) Attribute "
                  "op_type is not found, on both ranks, before any dependency is added",
                  evidence="the pass raises `(NotFound) Attribute op_type is not found` on "
                  "both ranks of the Engine's DP2 program. Stage 2 (`engine_shard_dp2_adamw_s2`) "
                  "turns every all-reduce into a `reduce`, so the read is never reached: "
                  "EQUIVALENT (nops only; simulator only, the PIR executor of real CPU ranks "
                  "does not run a legacy `nop` as a no-op). With the read mended "
                  "(`tests/fixed_passes/deps_op_type_mended.py`) stage 1 is proved and run "
                  "equivalent")
# the clip case's entry: the same defect, but the README named no evidence for
# it (the mended pass was checked on the two cases without a clip)
_DEPS_CLIP_S1 = replace(_DEPS_S1, evidence="")
_DEPS_S2 = Expect(True, "EQUIVALENT",
                  "after sharding stage 2 every all_reduce has become a reduce, so the "
                  "op_type read of is_amp_flag_sync_op is never reached: the pass adds one "
                  "nop before each optimizer op but the first (optimizer order, prior var = "
                  "the previous ParamOut) and changes nothing else; proved equal and equal "
                  "in the simulator (legacy executor). Real CPU ranks need the PIR "
                  "executor, which does not run those nops as no-ops (NOP_UNFAITHFUL)")


_CLIP_S1 = Expect(True, "EQUIVALENT",
                  "stage 1 keeps every gradient all-reduced on every rank, so each rank's "
                  "global norm (squared_l2_norm of all six grads, stack, reduce_sum, sqrt) "
                  "and clip factor are the unsharded program's; the owner's optimizer op and "
                  "the broadcast from it keep every parameter equal (proved, 3 simulated steps)",
                  evidence=_SHARDING_EV)
_CLIP_S2 = Expect(True, "NOT_EQUIVALENT",
                  "stage 2 reduces each grad to its owner only, but leaves the clip (computed "
                  "on every rank over all six grads) alone: a rank's global norm now mixes the "
                  "reduced grads it owns with its local unreduced grads of the others, so the "
                  "clip factor and the owner's update differ (value proof refutes the clipped "
                  "grads and the parameters on both ranks; simulated runs differ from step 0). "
                  "In the Engine's pipeline auto_parallel_grad_clip runs right after sharding "
                  "to make the norm consistent; sharding alone does not keep the values",
                  evidence="value proof refutes the clipped grads and every parameter on both "
                  "ranks; simulated runs differ from step 0. Stage 1 + clip is EQUIVALENT. In "
                  "the Engine the grad-clip pass follows sharding to make the norm consistent, "
                  "but then the dependencies pass raises (engine_pipeline_shard_s1_clip, "
                  "engine_pipeline_shard_s2_clip)")
_DEPS_CLIP_S2 = Expect(True, "EQUIVALENT",
                       "as on engine_shard_dp2_adamw_s2: no all_reduce left after stage 2 (the "
                       "clip's norm is local, no global-norm sync collective), so the pass only "
                       "orders the optimizer ops with nops")
_OVERLAP = Expect(True, "PASS_CRASHED",
                  "stage 2 with sharding.enable_overlap: after replacing each grad "
                  "all_reduce by a reduce (slot out), _overlap_grad_comm reads "
                  "op.output(\"Out\") of that reduce: RuntimeError (NotFound) Output Out "
                  "cannot be found in operator reduce, on both ranks. With the read mended "
                  "(tests/fixed_passes/sharding_reduce_out_mended.py) the pass goes on",
                  evidence="`(NotFound) Output Out cannot be found in operator reduce`, both "
                  "ranks. With the slot read as `out` "
                  "(`tests/fixed_passes/sharding_reduce_out_mended.py`) the overlap rewrite is "
                  "proved and run equivalent")
_FUSE = Expect(True, "PASS_CRASHED",
               "stage 2 with sharding.param_bucket_size_numel > 1 (fused parameter "
               "broadcasts) and enable_overlap at its default (False): "
               "_fuse_overlap_parameter_comm_stage_two indexes "
               "self.param_comm_group_stream_pairs, which only the enable_overlap branch "
               "sets: AttributeError, on both ranks",
               evidence="`AttributeError`, both ranks")

_PIPELINE_CLIP_EV = ("stage \"after auto_parallel_supplement_explicit_dependencies\": "
                     "`(NotFound) Attribute op_type is not found`, both ranks: a user "
                     "enabling sharding with a grad clip cannot plan on 3.3.1")


def build(case, rank):
    rp = _planned_build(case, rank)
    if case.params.get("clip_norm"):
        # the ops ClipGradByGlobalNorm would append (engine_dp's builder: the
        # Engine cannot build them in legacy mode, see CLIP_NOTE)
        insert_global_norm_clip(rp, float(case.params["clip_norm"]))
    return rp


# Real CPU ranks run programs with FLAGS_enable_pir_in_executor (gloo needs
# it), whose translation of a legacy ``nop`` that names a var as its Out does
# not keep that var's value (its reader sees an empty or another var's
# tensor; tests/test_sharding.py shows it on a 3-op program).  The legacy
# executor, the Engine's default in legacy mode, runs it as the no-op it is.
NOP_UNFAITHFUL = (
    "the dependencies pass's nop ops (stage 2, where it runs): the PIR executor real CPU "
    "ranks need does not run a legacy nop naming a var as Out as a no-op (the next "
    "adamw then sees Param [8] with Moment1 [8, 16]); the legacy executor does")


def _case(name, summary, expect, unfaithful="", **params):
    return Case(name=name, family="engine_sharding", summary=summary,
                mesh=[[r] for r in MESH], builder=build, expect=expect,
                rings={RING: [list(MESH)], 0: [list(MESH)]}, symbols={},
                sharded_params=frozenset(), enable_sp=False, amp_level="o0",
                gloo_unfaithful=unfaithful,
                params={"parallel": "dp", "post": False, **params})


CASES = [
    _case("engine_shard_dp2_sgd_s1",
          "Engine-planned LN -> linear -> relu -> linear, MSE, SGD, DP2 (x [2,4,8] "
          "split by batch); sharding stage 1 applied by the suite",
          {SHARDING: _S1, DEPS: _DEPS_S1}, act="relu", optimizer="sgd", stage=1),
    _case("engine_shard_dp2_adamw_s1",
          "as engine_shard_dp2_sgd_s1 with AdamW (moments, beta pows: the optimizer "
          "states sharding partitions); stage 1",
          {SHARDING: _S1, DEPS: _DEPS_S1}, act="relu", optimizer="adamw", stage=1),
    _case("engine_shard_dp2_adamw_s2",
          "as engine_shard_dp2_adamw_s1, stage 2 (gradients reduced to their owner)",
          {SHARDING: _S2, DEPS: _DEPS_S2}, unfaithful=NOP_UNFAITHFUL, act="relu", optimizer="adamw", stage=2),
    _case("engine_shard_dp2_sgd_clip_s1",
          "as engine_shard_dp2_sgd_s1 with a global-norm grad clip (clip_norm 0.01) "
          "before the optimizer; stage 1",
          {SHARDING: _CLIP_S1, DEPS: _DEPS_CLIP_S1}, act="relu", optimizer="sgd", stage=1,
          clip_norm=0.01),
    _case("engine_shard_dp2_sgd_clip_s2",
          "as engine_shard_dp2_sgd_clip_s1, stage 2",
          {SHARDING: _CLIP_S2, DEPS: _DEPS_CLIP_S2}, unfaithful=NOP_UNFAITHFUL, act="relu",
          optimizer="sgd", stage=2, clip_norm=0.01),
    _case("engine_shard_dp2_adamw_s2_overlap",
          "as engine_shard_dp2_adamw_s2 with sharding.enable_overlap (grad and param "
          "communication on their own streams)",
          {SHARDING: _OVERLAP}, act="relu", optimizer="adamw", stage=2,
          sharding={"enable_overlap": True}),
    _case("engine_shard_dp2_adamw_s2_fuse",
          "as engine_shard_dp2_adamw_s2 with sharding.param_bucket_size_numel = 1e6 "
          "(parameter broadcasts fused into coalesced buckets)",
          {SHARDING: _FUSE}, act="relu", optimizer="adamw", stage=2,
          sharding={"param_bucket_size_numel": 1000000}),
    # The Engine's own post-partition pipeline (passes/engine_pipeline.py) with
    # sharding on, on the DP2 + clip model: what a user enabling sharding gets.
    _pipeline_case(
        "engine_pipeline_shard_s1_clip",
        "DP2 model with a global-norm clip, strategy: sharding stage 1, degree 2 "
        "(sp_optimization off)",
        Expect(True, "PASS_CRASHED",
               "stages: sharding (shapes and def-use hold), grad clip (each rank now sums "
               "the squared norms of the grads it owns and all_reduces the norm over the "
               "sharding group; its stack is declared [6, 1] but holds 3: the stale shape "
               "of engine_pipeline_dp2_clip), then explicit dependencies raises on the "
               "clip's all_reduce (and the grads' ones): is_amp_flag_sync_op reads attr "
               "op_type, (NotFound) Attribute op_type is not found, both ranks. A user who "
               "enables sharding with a grad clip cannot plan on 3.3.1",
               evidence=_PIPELINE_CLIP_EV),
        dp=True, pipeline={"sharding.enable": True, "sharding.stage": 1, "sharding.degree": 2,
                           "sp_optimization.enable": False},
        act="relu", optimizer="sgd", clip_norm=0.01),
    _pipeline_case(
        "engine_pipeline_shard_s2_clip",
        "as engine_pipeline_shard_s1_clip with sharding stage 2",
        Expect(True, "PASS_CRASHED",
               "as engine_pipeline_shard_s1_clip: stage 2 leaves no gradient all_reduce, "
               "but the grad-clip pass adds one for the global norm, so the dependencies "
               "pass raises (NotFound) Attribute op_type is not found on it, both ranks",
               evidence=_PIPELINE_CLIP_EV),
        dp=True, pipeline={"sharding.enable": True, "sharding.stage": 2, "sharding.degree": 2,
                           "sp_optimization.enable": False},
        act="relu", optimizer="sgd", clip_norm=0.01),
]
