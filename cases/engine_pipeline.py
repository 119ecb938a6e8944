"""The Engine's post-partition pipeline on planned programs (``engine_pipeline``).

Each case is a model planned per rank by Paddle's ``Engine`` and taken
before the post-partition passes (``post=False``; built by
``cases/engine_dp.py``, which also inserts the static global-norm clip the
Engine cannot build in legacy mode), plus the strategy under which the
``engine_pipeline`` adapter (``passes/engine_pipeline.py``) runs the
Parallelizer's post-partition pass list on it (``params["pipeline"]``:
dotted overrides of ``auto.Strategy()``).  Only that adapter is paired
with this family.
"""
from __future__ import annotations

from .base import Case, Expect
from .engine_dp import _GLOO_COALESCE, RING, TP_SHARDED, build
from .engine_planned import MESH

PIPELINE = "engine_pipeline"


# what engine_sp says of the same model: a sequence-parallel program (once the
# SP pass is mended) holds reduce_scatter, which gloo cannot run on CPU ranks
_GLOO_REDUCE_SCATTER = ("reduce_scatter (the rewritten program's, once the pass is mended) "
                        "has no CPU (gloo) implementation")


def _case(name, summary, expect, *, dp, pipeline, **params):
    return Case(name=name, family="engine_pipeline", summary=summary,
                mesh=[[r] for r in MESH] if dp else list(MESH), builder=build,
                expect={PIPELINE: expect},
                rings={RING: [list(MESH)], 0: [list(MESH)]}, symbols={},
                sharded_params=frozenset() if dp else TP_SHARDED,
                enable_sp=bool(params.get("sp")), amp_level="o0",
                gloo_unfaithful=_GLOO_COALESCE if dp and pipeline.get(
                    "dp_optimization.enable") else _GLOO_REDUCE_SCATTER if params.get("sp")
                else "",
                params={"parallel": "dp" if dp else "mp", "post": False,
                        "pipeline": pipeline, "only_pass": PIPELINE, **params})


CASES = [
    _case("engine_pipeline_sp_default",
          "the TP+SP model of engine_sp (LN -> column -> gelu -> row -> all_reduce -> "
          "reshard split -> relu, TP2, SGD) through 3.3.1's default strategy",
          Expect(True, "PASS_CRASHED",
                 "what today's planner does to a user who marks sequence parallelism "
                 "and changes nothing else: the default strategy runs sp_optimization "
                 "first, and the stage raises on both ranks: RuntimeError (NotFound) "
                 "Input X cannot be found in operator all_reduce (it reads "
                 "input(\"X\"); the slot is x). Stage results: after "
                 "auto_parallel_sequence_parallel_optimization PASS_CRASHED; after "
                 "auto_parallel_grad_clip and after "
                 "auto_parallel_supplement_explicit_dependencies not run",
                 evidence="per-stage results in the contract checks"),
          dp=False, pipeline={}, act="gelu", optimizer="sgd", sp=True),
    _case("engine_pipeline_dp2_clip",
          "DP2 model with a global-norm clip, strategy: default + dp_optimization.enable",
          Expect(True, "CONTRACT_BROKEN",
                 "stages: sequence parallel optimization (nothing to do), data parallel "
                 "optimization, grad clip, explicit dependencies. 'after "
                 "auto_parallel_data_parallel_optimization' holds (shapes, def-use, its "
                 "contract: each grad synced once with its factor); 'after "
                 "auto_parallel_grad_clip' leaves stack_0.tmp_0 declared [6, 1] where "
                 "the stack now makes [3, 1] (its global norm holds); the dependency "
                 "stage adds nothing. The final program runs bitwise equal on the "
                 "simulator; the value proof proves every watched value (the coalesce_tensor "
                 "views modelled); no real ranks "
                 "(see the gloo note)",
                 evidence="per-stage results; simulator bitwise equal; value proof "
                 "PROVED on both ranks"),
          dp=True, pipeline={"dp_optimization.enable": True}, act="relu",
          optimizer="sgd", clip_norm=0.05),
    _case("engine_pipeline_dp2_clip_default",
          "DP2 model with a global-norm clip through 3.3.1's default strategy",
          Expect(True, "CONTRACT_BROKEN",
                 "what a DP user who changes nothing gets: sequence parallel "
                 "optimization (nothing to do), grad clip, explicit dependencies "
                 "(nothing to do). The clip stage splits the squared norms between the "
                 "ranks and all-reduces them (global norm holds); the final program is "
                 "proved equal to the original on both ranks and agrees over 3 steps on "
                 "the simulator and on real gloo ranks. Only finding: 'after "
                 "auto_parallel_grad_clip' leaves stack_0.tmp_0 declared [6, 1] where "
                 "the stack makes [3, 1]",
                 evidence="per-stage results, value proof, numeric runs"),
          dp=True, pipeline={}, act="relu", optimizer="sgd", clip_norm=0.05),
    _case("engine_pipeline_tp2_clip",
          "TP2 model with a global-norm clip, strategy: promotion switched on "
          "(fused_linear_promotion, fused_passes with fuse_gemm_epilogue), "
          "sp_optimization off: the promotion + grad clip pair in the Engine's order",
          Expect(True, "PASS_CRASHED",
                 "the promotion + grad clip pair in the Engine's order: the promotion "
                 "stage drops linear_1.b_0's squared norm on rank 1 (its stack keeps a "
                 "stale declared [6, 1]); the grad clip stage then counts replicated "
                 "grads on rank 0 only and all-reduces the partial norms on ring 0, so "
                 "the global norm holds (9 gradient pieces, each once, on both ranks): "
                 "the promotion's clip finding on its own (row_mp_o0_sgd_clip_tp2, "
                 "engine_tp2_sgd_clip) does not survive the pair. The pipeline then "
                 "stops at the fused passes the promotion switch requires: 'after "
                 "fuse_gemm_epilogue' PASS_CRASHED on both ranks, ValueError "
                 "(InvalidArgument) Pass fuse_gemm_epilogue_pass has not been registered "
                 "(a CUDA-only pass; 3.3.1 hands the PIR executor only "
                 "fused_gemm_epilogue_pass, another name), so on a CPU build a user "
                 "cannot plan with promotion at all",
                 evidence="per-stage results; a CPU user cannot plan with promotion"),
          dp=False, pipeline={"sp_optimization.enable": False,
                              "fused_linear_promotion.enable": True,
                              "fused_passes.enable": True,
                              "fused_passes.fused_passes_list": ["fuse_gemm_epilogue"]},
          act="gelu", optimizer="sgd", clip_norm=0.05),
]
