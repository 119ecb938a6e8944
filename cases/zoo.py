"""The model zoo: real models of paddleformers (Paddle's model library),
placed by their tensor-parallel plans, planned by Paddle (``dist.to_static``,
PIR) at tiny configs.

The model files are in ``examples/zoo/`` (each plannable by hand:
``python -m verify plan examples/zoo/llama_tp.py --ir pir --ranks 2
--out DIR``); every workaround planning them on a CPU 3.3.1 build needs is
in ``examples/zoo/paddleformers_cpu.py``.  Each case plans its model
file on first use (``verify.plan.plan``, one fresh subprocess per rank) and
caches the program dir under ``$PADDLE_PASS_VERIFY_CACHE`` (default
``~/.cache/paddle-pass-verify``) ``/zoo/<paddle version>-<commit>/<key>``,
the key a hash of the zoo's model files, the PIR planner's source, the
mesh and paddleformers' version; concurrent builders (pytest -n) wait on a
lock file, so a plan is made once.

The family needs the optional ``models`` dependencies (``pip install
-e '.[models]'``: paddleformers, pinned).  Without them ``CASES`` is empty
and ``UNAVAILABLE`` says why; ``python -m verify list|run|coverage`` print it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from .base import Expect
from .pir_matmul_grad import PirCase

_REPO = Path(__file__).resolve().parent.parent
MODELS = _REPO / "examples" / "zoo"
RS = "fuse_allreduce_split_to_reducescatter_pass"
SPLIT = "_pir_split_matmul_grad_to_matmul"


def pinned() -> str:
    """The paddleformers version the zoo is pinned to (``PINNED`` of
    ``examples/zoo/paddleformers_cpu.py``, read without importing it)."""
    import re

    text = (MODELS / "paddleformers_cpu.py").read_text()
    return re.search(r'^PINNED = "([^"]+)"', text, re.M).group(1)


def unavailable() -> str | None:
    """Why the zoo cannot be planned here, or None."""
    import importlib.metadata
    import importlib.util


    PINNED = pinned()
    if importlib.util.find_spec("paddleformers") is None:
        return (f"paddleformers is not installed (pip install -e '.[models]' installs "
                f"paddleformers=={PINNED})")
    have = importlib.metadata.version("paddleformers")
    if have != PINNED:
        return f"paddleformers {have} is installed; the zoo is pinned to {PINNED}"
    return None


def cache_root() -> Path:
    from cases.engine_planned import _paddle_tag

    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "paddle-pass-verify"
    return root / "zoo" / _paddle_tag()


HELPERS = ("paddleformers_cpu.py", "zoo_common.py", "zoo_llama.py", "zoo_families.py",
           "../pipeline_strategy.py")


def full_key(params: dict) -> str:
    """sha256 of the case's model file, the zoo's helpers, every planning module
    (the stage records' format included), the snapshot format, the
    ``--paddle-file`` overlay, the plan params and paddleformers' version."""
    import importlib.metadata

    h = hashlib.sha256(json.dumps({k: params.get(k) for k in ("model", "ranks", "mesh")},
                                  sort_keys=True).encode())
    for name in (params["model"],) + HELPERS:
        h.update(name.encode() + (MODELS / name).read_bytes())
    for name in params.get("uses") or ():  # a case's own helpers (e.g. ../amp_of.py)
        h.update(b"uses:" + name.encode() + (MODELS / name).read_bytes())
    from verify.ir.paddle_overlay import fingerprint
    from verify.plan import source_digest_parts

    # every planning module (verify/plan/stages.py records the planner's stages
    # into the dir: the planner family reads them), the snapshot format, and a
    # --paddle-file overlay (a changed Paddle module plans apart)
    for part in source_digest_parts():
        h.update(part)
    h.update((_REPO / "verify" / "ir" / "pir_snapshot.py").read_bytes())
    h.update(fingerprint().encode())
    h.update(importlib.metadata.version("paddleformers").encode())
    return h.hexdigest()


def plan_key(params: dict) -> str:
    """The name of the plan's dir under :func:`cache_root` (a prefix of
    :func:`full_key`; the dir's seal holds the whole key, checked on read)."""
    return full_key(params)[:16]


def _legacy_ok(folder: Path) -> bool:
    """A plan written before seals existed: its plan.json and every rank's
    records parse (else it is planned again)."""
    plan = json.loads((folder / "plan.json").read_text())
    ranks = [int(r) for r in str(plan["mesh"]).replace("[", " ").replace("]", " ")
             .replace(",", " ").split()]
    for r in ranks:
        if not isinstance(json.loads((folder / f"rank{r}" / "planner.json").read_text()), dict):
            return False
    return isinstance(plan, dict) and bool(ranks)


def planned_dir(params: dict, timeout: float = 900.0) -> Path:
    """The program dir of ``params`` (model file, ranks, mesh, ``uses``: more
    files of ``examples/`` the model file loads), planning it once: sealed with its full key and every file's sha256
    (``verify/cache_files.py``); a damaged or edited dir is planned again."""
    from verify.cache_files import cached_dir
    from verify.plan.planner import plan

    key = full_key(params)
    final = cache_root() / key[:16]
    return cached_dir(final, key, lambda: plan(
        str(MODELS / params["model"]), params["ranks"], params.get("mesh"), out=final,
        timeout=timeout, ir="pir", keep_stage_failures=True), _legacy_ok)


def planner_dir(case) -> Path:
    """The case's program dir with the planner's stage records (the
    ``planner`` family, ``passes/planner.py``), planning it once."""
    return planned_dir(case.params)


def build(case, rank: int):
    """Rank ``rank``'s PIR programs from the case's cached plan; raises,
    naming the case, when the planner's rings are not the case's."""
    from cases.program_dirs import build_pir

    folder = planned_dir(case.params)
    failed = json.loads((folder / "plan.json").read_text()).get("planner_failed")
    if failed:  # a stage raised or aborted: the records say which, no rank program exists
        r, why = next(iter(sorted(failed.items())))
        raise RuntimeError(f"case {case.name}: Paddle's planner failed on rank {r} ({why}); "
                           "no rank program to build (the planner family reports the stage: "
                           f"python -m verify run --pass planner --case {case.name})")
    rings = {int(k): sorted(sorted(g) for g in v) for k, v in
             json.loads((folder / "plan.json").read_text())["rings"].items()}
    stated = {int(k): sorted(sorted(g) for g in v) for k, v in case.rings.items()}
    if rings != stated:
        raise RuntimeError(f"case {case.name}: the planner's rings are {rings}, the case "
                           f"states {stated} (update cases/zoo.py)")
    return build_pir(dataclasses.replace(case, params={**case.params, "dir": str(folder)}),
                     rank)


GLOO = ("real ranks do not run PIR programs yet: the simulator (PIR ranks in lock "
        "step) decides the numeric runs")


# A standalone reproducer embeds a case's program builder; the zoo's programs
# come from a plan (paddleformers, the cache), which no script of Paddle alone
# can rebuild yet: its findings are reproduced by `verify run` (the command in
# the findings table).
REPRO_BLOCKER = ("a planned paddleformers program: a standalone script cannot rebuild it "
                 "yet (it needs the plan); reproduce with python -m verify run --pass P "
                 "--case C (the models group installed)")


def _case(name, summary, model, ranks, mesh_text, mesh, rings, expect, only_pass=None,
          strategy_passes=None, **extra):
    """``strategy_passes``: ``{pass name: Expect}`` of the engine passes the
    model file's strategy turns on that have an adapter of their own (as in
    ``cases/planner_models.py``: e.g. ``passes/auto_parallel_recompute_pir.py``);
    ``extra``: more params (``uses``; a c_embedding case's ``reference``, an
    AMP case's ``amp_reference``, ``amp_dtype``, ``amp_level``, ``amp_black``)."""
    strategy_passes = dict(strategy_passes or {})
    return PirCase(name=name, family="zoo", summary=summary, mesh=mesh, builder=build,
                   expect={**expect, **strategy_passes}, rings=rings, ir="pir",
                   gloo_unfaithful=GLOO,
                   params={"model": model, "ranks": ranks, "mesh": mesh_text,
                           "repro_blocker": REPRO_BLOCKER,
                           "planner": "cases.zoo:planner_dir",
                           **extra,
                           **({"only_pass": only_pass} if only_pass else {}),
                           **({"strategy_passes": sorted(strategy_passes)}
                              if strategy_passes else {})})


# -- expectations (observed on 3.3.1 + paddleformers 1.2.0; the checks decide,
# these explain) ----------------------------------------------------------------
def _rs_absent(collectives: str) -> Expect:
    return Expect(False, "EQUIVALENT",
                  f"the planner's collectives here are {collectives}; the pass's DRR "
                  "pattern is an in-place pd_op.all_reduce_ followed by assign + "
                  "split_with_num + builtin.slice, which 3.3.1's reshard never emits "
                  "(a partial sum becomes the out-of-place pd_op.all_reduce, a p->s "
                  "reshard a reduce_scatter already): the pass leaves every rank alone; "
                  "the rewritten programs are the originals op for op (value proof by "
                  "identity)")


def _vpp_head(head: str) -> Expect:
    return Expect(True, "PASS_CRASHED",
                  "Paddle's defect (as pir_mm_3d_ty_nonsquare): the LM head's "
                  f"pd_op.matmul_grad has transpose_y=True ({head}); the split's guard "
                  "tests has_attr('trans_x'/'trans_y') where PIR spells transpose_*, so it "
                  "splits the grad as if untransposed and builds matmul(out_grad [2, 8, 32], "
                  "weight [32, 8]): PIR's shape inference raises 'the [2] dimension of "
                  "Input(X) must be equal to the [1] dimension of Input(Y)' (32 vs 8) on "
                  "every rank; predicted by the shape plan before the pass ran. Every "
                  "untransposed matmul_grad of the decoder is planned shape-correct",
                  evidence="the pass raises inside PIR's shape inference on every rank "
                  "(traceback: 'In operator matmul, the [2] dimension of Input(X) must be "
                  "equal to the [1] dimension of Input(Y)... [32]... [8]'); the shape plan "
                  "of the grad, made before the pass ran, predicts it (transpose_y=True "
                  "under a guard that reads trans_y); reproduce: python -m verify run "
                  "--pass _pir_split_matmul_grad_to_matmul --case 'zoo_*' (models group "
                  "installed; no standalone script yet: REPRO_BLOCKER)")


_RS_TP = _rs_absent("pd_op.all_reduce (row-parallel partial sums, the gathered "
                    "embedding's grad) and pd_op.all_gather")
_VPP_FAM = _vpp_head("the head stored [vocab 32, hidden 16], its hidden dim sharded by the "
                     "zoo plan's ColWiseParallel on lm_head (dim 1 of the stored weight): "
                     "[32, 8] per rank")
_RS_DP = _rs_absent("pd_op.all_reduce on the TP rings, the DP gradient all_reduce on the "
                    "DP rings, and pd_op.all_gather")
_RS_SP = _rs_absent("pd_op.reduce_scatter (the p->s reshards of the sequence-parallel "
                    "region, emitted fused already), pd_op.all_gather and pd_op.all_reduce")
_RS_SHARD = _rs_absent("those of DP2 x TP2 plus the sharding optimizer's "
                       "pd_op.reduce_scatter of gradients and pd_op.all_gather of the "
                       "updated parameter shards")
_VPP_OWN = _vpp_head("the head stored [vocab 32, hidden 16], its hidden dim sharded by "
                     "the plan's ColWiseParallel on lm_head.weight: [32, 8] per rank")

PLANNER = "planner"
_PLANNER_HOLDS = Expect(True, "EQUIVALENT",
                        "Paddle's planner on the real model: every stage's program holds "
                        "def-use (shapes where rules exist), every rank plans from one serial "
                        "program, the parameters are the slices their placements name, and "
                        "the serial run and the ranks in lock step agree on the loss "
                        "(paddleformers' masked sum / count, found as the backward's seed), "
                        "every gradient and every updated parameter for 3 steps")

_PLANNER_GM = Expect(
    True, "CONTRACT_BROKEN",
    "Paddle's defect, planned with gradient merge (k_steps 2): 3.3.1's PIR "
    "auto_parallel_gradient_merge_pass (it runs between the remove stage and dist2dense; "
    "the recorder keeps its program as the gradient_merge stage) zeroes each "
    "parameter's @GRAD@MERGE accumulator with a pd_op.set_value_with_tensor_ (op_role "
    "optimize) whose result is typed with the gradient's global shape: on the rank's dense "
    "program every TP-sharded parameter's zeroing declares the global shape while it writes the "
    "local accumulator (9 of 12 per rank: lm_head [32, 8] declared [32, 16], down_proj "
    "[16, 16] declared [32, 16], q/k/v [16, 8] declared [16, 16], ...); the in-place "
    "write runs on the local buffer, so the types, not the values, are wrong. The other "
    "checks hold (every other stage's def-use and shapes, one serial program, the "
    "parameters are their placements' slices and tiled), and the relation, driving each "
    "rank's merged program as its job schedule [forward, backward] * 2 + [optimize] "
    "against the serial program's micro-steps with the gradients merged "
    "(verify/numeric/merged_relation.py), holds on every rank for 2 optimizer steps: every "
    "micro-step's loss, 12 merged gradients and 12 updates (the value proof of the "
    "schedule, over relation_input_elements, is attempted within its bounded work units: "
    "proved on zoo_llama_tp2_gm; witnessed, not proved on zoo_llama_dp2_tp2_gm, whose "
    "proof runs past them)",
    evidence="the shape check of the stage programs (snapshots of the live programs in the "
    "planning process): 'op 432 (pd_op.set_value_with_tensor_): output %439 dim 1 is "
    "declared 16 but is 8' on every rank after gradient_merge (TP2; op 460 on DP2 x TP2), "
    "its x lm_head_0.w_0.dist@GRAD@MERGE [32, 8], and again after remove_comm (op 424; "
    "op 452), which drops 8 ops and renames the values, so the stage check cannot tell it "
    "is the same op; "
    "reproduce: python -m verify run --pass "
    "planner --case 'zoo_llama_*_gm' (models group installed)")

TP2 = {12: [[0, 1]]}
# DP2 x TP2 (--mesh 2x2): the planner gives each DP pair its own ring id
DP2_TP2 = {12: [[0, 2]], 13: [[1, 3]], 14: [[0, 1], [2, 3]]}
# TP2 on a 1 x 2 mesh (the SP markers need a dp dim): one-rank DP rings
DP1_TP2 = {12: [[0]], 13: [[1]], 14: [[0, 1]]}
MESH_2X2 = [[0, 1], [2, 3]]

UNAVAILABLE = unavailable()
DECLARED = [
    _case("zoo_llama_own_plan_tp2",
          "LLaMA (paddleformers 1.2.0; 1 layer, hidden 16, 2 heads, vocab 32) placed by its "
          "own auto_dist_config plan as shipped, TP2: the plan's keys name llama.* but the "
          "model's sublayers are model.*, so only lm_head is column-parallel",
          "llama_own_plan.py", 2, None, [0, 1], TP2, {RS: _RS_TP, SPLIT: _VPP_OWN, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_llama_tp2",
          "LLaMA, its own plan keyed under the model's prefix (model.*), TP2: q/k/v, gate/up "
          "column-parallel, o/down row-parallel, embedding gathered, lm_head column-parallel",
          "llama_tp.py", 2, None, [0, 1], TP2, {RS: _RS_TP, SPLIT: _VPP_OWN, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_llama_dp2_tp2",
          "LLaMA, keyed plan, DP2 x TP2 (batch split over dp)",
          "llama_tp.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_DP, SPLIT: _VPP_OWN, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_llama_tp2_sp",
          "LLaMA, keyed plan with Paddle's sequence-parallel markers, TP2 on a 1 x 2 mesh",
          "llama_sp.py", 2, "1x2", [[0, 1]], DP1_TP2, {RS: _RS_SP, SPLIT: _VPP_OWN, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_llama_dp2_tp2_stage1",
          "LLaMA, keyed plan, DP2 x TP2, AdamW through dist.shard_optimizer(ShardingStage1)",
          "llama_stage1.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_SHARD, SPLIT: _VPP_OWN, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_llama_dp2_tp2_stage2",
          "LLaMA, keyed plan, DP2 x TP2, AdamW through dist.shard_optimizer(ShardingStage2)",
          "llama_stage2.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_SHARD, SPLIT: _VPP_OWN, PLANNER: _PLANNER_HOLDS}),
]
DECLARED += [
    _case("zoo_phi3_tp2",
          "Phi-3 (paddleformers 1.2.0; 1 layer, hidden 16, 2 heads, vocab 32; fused qkv_proj "
          "and gate_up_proj, an empty KV-cache past concatenated in) with the TP plan of "
          "examples/zoo/zoo_families.py, TP2",
          "phi3_tp.py", 2, None, [0, 1], TP2, {RS: _RS_TP, SPLIT: _VPP_FAM, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_gemma3_tp2",
          "Gemma 3 text (paddleformers 1.2.0; 1 layer, hidden 16, 2 heads, head_dim 8, vocab "
          "32; q/k norms, four norms a layer, a sliding-window mask built by set_value_) with "
          "the TP plan of examples/zoo/zoo_families.py, TP2",
          "gemma3_tp.py", 2, None, [0, 1], TP2, {RS: _RS_TP, SPLIT: _VPP_FAM, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_phi3_dp2_tp2",
          "Phi-3, the TP plan of examples/zoo/zoo_families.py, DP2 x TP2 (batch split over dp)",
          "phi3_tp.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_DP, SPLIT: _VPP_FAM, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_gemma3_dp2_tp2",
          "Gemma 3 text, the TP plan of examples/zoo/zoo_families.py, DP2 x TP2 (batch split "
          "over dp)",
          "gemma3_tp.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_DP, SPLIT: _VPP_FAM, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_ernie4_5_tp2",
          "ERNIE 4.5 dense (paddleformers 1.2.0; 1 layer, hidden 16, 2 heads, head_dim 8, "
          "vocab 32; fused qkv_proj and up_gate_proj, the GLM-style rotary: cos/sin halves "
          "repeat_interleave-d, the rotated half stack((-x2, x1)).flatten) with the TP plan "
          "of examples/zoo/zoo_families.py, TP2",
          "ernie4_5_tp.py", 2, None, [0, 1], TP2, {RS: _RS_TP, SPLIT: _VPP_FAM, PLANNER: _PLANNER_HOLDS}),
    _case("zoo_ernie4_5_dp2_tp2",
          "ERNIE 4.5 dense, the TP plan of examples/zoo/zoo_families.py, DP2 x TP2 (batch "
          "split over dp)",
          "ernie4_5_tp.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_DP, SPLIT: _VPP_FAM, PLANNER: _PLANNER_HOLDS}),
]
DECLARED += [
    _case("zoo_llama_tp2_gm",
          "LLaMA, keyed plan, TP2, planned with gradient merge (strategy.gradient_merge: "
          "k_steps 2, avg; examples/zoo/llama_gm.py's configure(strategy)): each gradient "
          "accumulated over two micro-batches, one update",
          "llama_gm.py", 2, None, [0, 1], TP2, {RS: _RS_TP, SPLIT: _VPP_OWN,
                                                PLANNER: _PLANNER_GM}),
    _case("zoo_llama_dp2_tp2_gm",
          "LLaMA, keyed plan, DP2 x TP2 (batch split over dp), planned with gradient merge "
          "(examples/zoo/llama_dp_gm.py: k_steps 2, avg; a batch of 4, 2 rows a micro-step)",
          "llama_dp_gm.py", 4, "2x2", MESH_2X2, DP2_TP2, {RS: _RS_DP, SPLIT: _VPP_OWN,
                                                      PLANNER: _PLANNER_GM}),
]
PP2 = {12: [[0, 1]], 13: [[1, 0]]}  # a ring per direction: forward 0 -> 1, backward 1 -> 0
_PLANNER_PP = Expect(
    True, "EQUIVALENT",
    "Paddle's planner on the real model as a two-stage pipeline (one decoder layer a "
    "stage, the mask and rotary tensors resharded onto the second stage): every stage's "
    "program holds def-use (shapes where rules exist), the stages joined by send_v2/recv_v2 "
    "pairs; the relation holds twice for 2 optimizer steps of 2 micro-batches: each rank's "
    "whole program as the merged schedule, and each rank's job list as the "
    "pipeline_scheduler made it (a scope per micro-batch, values handed between jobs by "
    "name, sends and recvs matched across the ranks), against the serial micro-steps; "
    "the value proof of the job lists (18783 inputs, over relation_input_elements, so "
    "attempted within its bounded work units) proves it on both ranks for every "
    "optimizer step")
_PLANNER_PP_VPP = Expect(
    True, "PASS_CRASHED",
    "Paddle's defect: 3.3.1's VPP scheduler (pipeline_scheduler_VPP, "
    "PipelineVirtualPipelinePass._split_program_for_vpp) aborts the process on the second "
    "stage ('Destroyed a op_result that is still in use by pd_op.unsqueeze. The owner op "
    "type is: pd_op.recv_v2'): the recv_v2 of the rotary cos/sin is tagged with the chunk "
    "of a later layer while ops of an earlier chunk read it, and the split erases it from "
    "the earlier chunk's program; the first stage plans (17 jobs). The same VPP schedule "
    "on the pipeline MLP, whose stages exchange only the activation, plans and relates "
    "(planner_pp2_vpp)",
    evidence="rank 1's planning process killed by SIGABRT inside the pipeline_scheduler "
    "stage (verify/plan/crash_records.py keeps the stage it was in and its last error "
    "lines); reproduce: python -m verify run --pass planner --case zoo_llama_pp2_vpp "
    "(models group installed)")
_RS_PP = _rs_absent("none: the stages exchange tensors by pd_op.send_v2 / pd_op.recv_v2 "
                    "only (pp2 x mp1)")
_VPP_PP = _vpp_head("the head stored [vocab 32, hidden 16] whole on the last stage (no tensor "
                    "parallelism): rank 1 raises, rank 0 holds no head and its 9 untransposed "
                    "grads split shape-correct")
DECLARED += [
    _case("zoo_llama_pp2",
          "LLaMA (2 decoder layers) as a two-stage pipeline (pp_config splitting "
          "model.layers, mesh pp2 x mp1), FThenB over 2 micro-batches",
          "llama_pp.py", 2, "[[0],[1]]", [[0], [1]], PP2,
          {RS: _RS_PP, SPLIT: _VPP_PP, PLANNER: _PLANNER_PP}),
    _case("zoo_llama_pp2_1f1b",
          "LLaMA (2 decoder layers) as a two-stage pipeline under 1F1B (recv_forward / "
          "send_backward jobs, the stages' job lists interleaved differently)",
          "llama_pp_1f1b.py", 2, "[[0],[1]]", [[0], [1]], PP2,
          {RS: _RS_PP, SPLIT: _VPP_PP, PLANNER: _PLANNER_PP}),
    _case("zoo_llama_pp2_vpp",
          "LLaMA (4 decoder layers) as a two-stage pipeline under VPP, 2 chunks a stage",
          "llama_pp_vpp.py", 2, "[[0],[1]]", [[0], [1]], PP2, {PLANNER: _PLANNER_PP_VPP},
          only_pass=PLANNER),
]
RECOMPUTE = "auto_parallel_recompute_pir"
# A realistic configuration: DP2 x TP2 with the decoder recomputed.  The
# serial program (the relation's reference) is taken before the engine's
# recompute pass, so the ranks relate to the model WITHOUT recompute.
_PLANNER_RECOMPUTE = Expect(
    True, "EQUIVALENT",
    "Paddle's planner on the real model with recompute: paddleformers wraps the decoder "
    "layer in fleet.utils.recompute (its ops marked fwd_recompute_id), the engine's "
    "auto_parallel_recompute_pir (the stage 'recompute', recorded apart) clones the "
    "layer's 97 forward ops into the backward (375 ops -> 472) before partition; every "
    "stage's program holds def-use and shapes, every rank plans from one serial program "
    "(the model without recompute), the parameters are their placements' slices and "
    "tiled, and the ranks in lock step agree with the serial run on the loss, 12 "
    "gradients and 12 updated parameters for 3 steps; the value proof proves it by "
    "segments at the real shapes (each clone's value compared with its serial value "
    "computed again from what the forward's cuts generalized)")
_RECOMPUTE_CONTRACT = Expect(
    True, "EQUIVALENT",
    "the planner's checks as for planner, and the pass's contract on its stage, every "
    "rank: the decoder layer's 97 forward ops (attention, rotary, MLP, norms) cloned "
    "into the backward, each the op it stands for, 52 backward ops re-pointed to the "
    "clones, no backward op nor clone reads any of the layer's activations, no random op "
    "recomputed (the zoo's LLaMA has no dropout), the 375 other ops unchanged")
DECLARED += [
    _case("zoo_llama_dp2_tp2_recompute",
          "LLaMA, keyed plan, DP2 x TP2, the decoder layer recomputed (paddleformers' "
          "recompute_granularity 'full', method 'uniform', 1 layer a unit; "
          "strategy.recompute on: examples/zoo/llama_recompute.py)",
          "llama_recompute.py", 4, "2x2", MESH_2X2, DP2_TP2,
          {RS: _RS_DP, SPLIT: _VPP_OWN, PLANNER: _PLANNER_RECOMPUTE},
          strategy_passes={RECOMPUTE: _RECOMPUTE_CONTRACT}),
]
C_EMBEDDING = "auto_parallel_c_embedding_pass"
PIR_AMP = "pir_amp"
# The most realistic LLaMA configuration that plans on a CPU 3.3.1 build:
# DP2 x TP2, the decoder recomputed, the embedding vocab-parallel and looked up
# by pd_op.c_embedding, bfloat16 AMP O1 with silu on the user's black list.
# What of issue 36's list is not in it, and why (measured on this build):
# - parallel cross entropy (replace_with_parallel_cross_entropy): no CPU kernel
#   ("UnavailableError: Do not support c_softmax_with_cross_entropy for cpu
#   kernel now.", phi/kernels/cpu/c_softmax_with_cross_entropy_kernel.cc:29);
# - shared embeddings over pipeline stages (auto_parallel_sync_shared_params):
#   both planning processes die with SIGSEGV in the pass's eager reshard of the
#   tied weight, in Paddle's GetDefaultPlace (no custom device registered on
#   CPU; docs/planner.md);
# - the LM head's ColWiseParallel: with fleet's hybrid group initialised,
#   append_backward raises in the head's matmul grad (examples/zoo/
#   llama_vocab_parallel.py), so the head is replicated here;
# - silu in bfloat16: no CPU kernel ("Check data type error for op: silu, input:
#   x, x.dtype: bfloat16"), so silu is on custom_black_list (a user knob).
_REALISTIC_FILES = ["../amp_of.py", "../c_embedding_of.py", "llama_realistic_fp32.py",
                    "llama_vocab_parallel.py"]
# fleet.init's groups take ring ids 10..25 first (examples/c_embedding_of.py)
DP2_TP2_FLEET = {26: [[0, 2]], 27: [[1, 3]], 28: [[0, 1], [2, 3]]}
_FLEET_HEAD = (
    "paddleformers' own behaviour under fleet: replace_with_c_embedding needs fleet's "
    "hybrid group (fleet.init, mp 2), and with it initialised paddleformers 1.2.0's "
    "parallel_matmul (transformers/tensor_parallel_utils.py:83) takes the LM head for "
    "tensor-parallel in to_static mode and puts paddle.distributed.collective._c_identity "
    "before it; 3.3.1's backward does not pass the gradient through that "
    "pd_op.c_identity, so the serial program updates lm_head only (1 pd_op.adamw_ "
    "where the model without fleet has 12; the same with fleet.init alone, no flag, "
    "measured)")
_REALISTIC_PLANNER = Expect(
    True, "CONTRACT_BROKEN",
    "paddleformers under fleet with Paddle's static backward: 11 of the 12 trainable "
    "parameters an eager step gives a gradient are never updated: the serial program "
    "Paddle built has one optimizer op, lm_head's (the lost-gradient check, "
    "verify/checks/lost_gradients.py). Otherwise Paddle's planner on the realistic "
    "configuration holds: every stage's program holds def-use "
    "and shapes (the recompute stage recorded apart), every rank plans from one serial "
    "program, the 13 parameters are their placements' slices and tiled, and the ranks in "
    "lock step agree with the serial run within the bfloat16 rounding tolerance on the "
    "loss, the gradient and every parameter for 3 steps; the value proof proves it by "
    "segments at the real shapes on every rank (the attention's bfloat16 pd_op.scale by "
    "1/sqrt(8) multiplies by 181/512, the float32 attr rounded to bfloat16 as phi's "
    "ScaleKernel reads it; the rotary cos/sin and the norms' rsqrt inside the model's "
    "auto_cast(enable=False) are the ranks' own, the suite's amp_off_region mark being no "
    "kernel attr; pd_op.c_identity the identity). Only one gradient is compared: "
    + _FLEET_HEAD,
    evidence="the lost-gradient check: eager_gradients of rank 0's planner.json (one "
    "eager forward and backward of the model on the plan's first batch, before fleet is "
    "initialised) names 12 parameters with a gradient; the serial relation updates "
    "lm_head_0.w_0.dist only; missing: create_parameter_0..2 (the RMS norms), "
    "embedding_0, linear_0..6; the backward reads none of the values they feed upstream "
    "of serial op 198 (pd_op.cast of op 197's pd_op.c_identity, the LM head's input); "
    "examples/planner_lost_grad.py reproduces the class in a "
    "tiny MLP (_c_identity before the head in to_static mode only); reproduce: python -m "
    "verify run --pass planner --case zoo_llama_dp2_tp2_realistic (models group "
    "installed)")
_REALISTIC_RECOMPUTE = Expect(
    True, "EQUIVALENT",
    "the planner's checks as for planner, and the pass's contract on its stage, every "
    "rank: the decoder layer's forward cloned into the backward (238 serial ops -> 360), "
    "each clone the op it stands for, the backward re-pointed to the clones, no "
    "backward op nor clone reading the layer's activations, no random op recomputed")
_REALISTIC_C_EMBEDDING = Expect(
    True, "NOT_EQUIVALENT",
    "Paddle's defect: 3.3.1's auto_parallel_c_embedding_pass drops the lookup's "
    "padding_idx. paddleformers' LLaMA embedding has padding_idx = pad_token_id (0): "
    "pd_op.embedding returns zeros for token 0 (and gives its row no gradient); "
    "_replace_embedding_with_c_embedding builds pd_op.c_embedding(weight, x, "
    "start_index, vocab_size), which has no padding_idx, so token 0 reads row 0 of the "
    "table. The contract holds on every rank (each rank's rows, the sum over mp); the "
    "relation against the plan with the flag off (fleet's group built there too) does "
    "not",
    evidence="the planner relation of the plan with the flag on against the flag-off "
    "serial program: the lm_head gradient at step 0 differs at [3, 6] (serial -0.0039978, "
    "ranks 0.0162354), first divergence rank 0 op 20 (pd_op.c_embedding) value %0 at "
    "[0, 3, 6]: serial 0.0 (the padding row), rank 0.16425 (row 0 of the table), stage "
    "c_embedding; the flag-off serial's pd_op.embedding carries padding_idx 0; reproduce: "
    "python -m verify run --pass c_embedding --case zoo_llama_dp2_tp2_realistic (models "
    "group installed)")
_REALISTIC_AMP = Expect(
    True, "EQUIVALENT",
    "bfloat16 O1 with silu on custom_black_list: on every rank the AMP serial program is "
    "the float32 one (the same fleet, c_embedding and recompute) with round_bfloat16 "
    "exactly where Paddle's lists (with the user's black list) put casts: the matmuls "
    "and their grads low, the rotary embedding's auto_cast(enable=False) region float32, "
    "the model's own q/k.astype(dtype) casts rounding; proved for all inputs (ops "
    "uninterpreted); one step of both programs with Paddle's kernels agrees within the "
    "rounding tolerance")
_REALISTIC_SPLIT = Expect(
    True, "PASS_CRASHED",
    "Paddle's defect (as pir_mm_3d_ty_nonsquare): the replicated LM head's "
    "pd_op.matmul_grad has transpose_y=True (weight [vocab 32, hidden 16]); the split's "
    "guard tests has_attr('trans_x'/'trans_y') where PIR spells transpose_*, so it "
    "splits the grad as if untransposed: 'In operator matmul, the [2] dimension of "
    "Input(X) must be equal to the [1] dimension of Input(Y)' (32 vs 16) on every rank; "
    "predicted by the shape plan before the pass ran",
    evidence="the pass raises inside PIR's shape inference on every rank; the shape plan "
    "of op 272 predicts it (transpose_y=True under a guard that reads trans_y); "
    "reproduce: python -m verify run --pass _pir_split_matmul_grad_to_matmul --case "
    "zoo_llama_dp2_tp2_realistic (models group installed)")
_RS_FLEET = _rs_absent("pd_op.all_reduce on the TP and DP rings, pd_op.all_gather and "
                       "the c_embedding's partial-sum all_reduce")
DECLARED += [
    _case("zoo_llama_dp2_tp2_realistic",
          "LLaMA, DP2 x TP2, the decoder recomputed (llama_recompute.py's switches), the "
          "embedding vocab-parallel (RowWiseParallel: rows sharded over mp) and looked up "
          "by pd_op.c_embedding (strategy.mp_optimization.replace_with_c_embedding, "
          "fleet's hybrid group over gloo), bfloat16 AMP O1 with silu on "
          "strategy.amp.custom_black_list (examples/zoo/llama_realistic.py); the LM head "
          "replicated; not in it: parallel cross entropy (no CPU kernel) and shared "
          "embeddings over pipeline stages (SIGSEGV), cases/zoo.py says why",
          "llama_realistic.py", 4, "2x2", MESH_2X2, DP2_TP2_FLEET,
          {RS: _RS_FLEET, SPLIT: _REALISTIC_SPLIT, PLANNER: _REALISTIC_PLANNER},
          strategy_passes={RECOMPUTE: _REALISTIC_RECOMPUTE,
                           C_EMBEDDING: _REALISTIC_C_EMBEDDING,
                           PIR_AMP: _REALISTIC_AMP},
          uses=_REALISTIC_FILES,
          reference={"model": "llama_realistic_no_cemb.py",
                     "uses": ["../amp_of.py", "../c_embedding_of.py",
                              "llama_vocab_parallel.py"]},
          amp_reference="llama_realistic_fp32.py",
          amp_reference_uses=["../c_embedding_of.py", "llama_vocab_parallel.py"],
          amp_dtype="bfloat16", amp_level="O1", amp_black=["silu"]),
]
CASES = [] if UNAVAILABLE else DECLARED

# The zoo cases the test suite builds: a cold plan costs 1.5-4.5 min per
# model on 2 cores, so the tests (the gate, the matcher and coverage tests)
# plan at most these two: this one (DP2 x TP2, 4 ranks: both ring kinds and the
# planner family's relation; a cold plan about 4 min) where the cache is empty, in
# parallel with the rest under xdist.  Every zoo case runs in `python -m verify
# run`, in the gate with `pytest verify/ --zoo all`, and in
# benchmarks/bench_zoo.py (cold plans, builds, coverage, applications).
TEST_SAMPLE = "zoo_llama_dp2_tp2"
# Every family of paddleformers 1.2.0 that plans on CPU (docs/case-files.md
# says why the others do not), at TP2 and DP2 x TP2: the
# coverage test (tests/test_zoo.py) plans these too (a few seconds each from
# the cache, a cold plan 1.5-4.5 min) and asserts no check stops on them.
COVERAGE_SAMPLE = ("zoo_llama_tp2", "zoo_llama_dp2_tp2", "zoo_phi3_tp2", "zoo_phi3_dp2_tp2",
                   "zoo_gemma3_tp2", "zoo_gemma3_dp2_tp2", "zoo_ernie4_5_tp2",
                   "zoo_ernie4_5_dp2_tp2")
# ... and the same model with its decoder recomputed (its planner application
# cold, the plan included: 186 s with both cores shared), the one zoo case
# where the engine's recompute pass fires: the tests check its stage and the
# pass's contract on a real model (tests/test_zoo.py).
TEST_RECOMPUTE = "zoo_llama_dp2_tp2_recompute"
TEST_PLANNED = (TEST_SAMPLE, TEST_RECOMPUTE)


def left_to_the_benchmark(case) -> str | None:
    """Why the test suite does not build ``case`` (a zoo case not in
    ``TEST_PLANNED``), or None when it does."""
    if getattr(case, "family", None) != "zoo" or case.name in TEST_PLANNED:
        return None
    return (f"zoo case {case.name}: the tests plan two zoo models ({', '.join(TEST_PLANNED)}; "
            "a cold plan costs 1.5-4.5 min per model); this one runs in `pytest verify/ "
            f"--zoo all`, `python -m verify run --case {case.name}` and benchmarks/bench_zoo.py")
