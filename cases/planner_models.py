"""Models planned by Paddle's PIR planner, for the ``planner`` family
(``passes/planner.py``): the serial program against every rank's program.

Each case plans a model file of ``examples/`` with ``dist.to_static`` for
every rank of its mesh (one fresh subprocess per rank,
``python -m verify.plan.pir_rank``, whose planning process records every planner
stage: ``verify/plan/stages.py``) on first use, cached under
``$PADDLE_PASS_VERIFY_CACHE`` (default ``~/.cache/paddle-pass-verify``)
``/planner/<paddle version>-<commit>/<key>``; the key hashes the model
files, the mesh, every planning module's source (``verify/plan/*.py``) and
the snapshot's, and the ``--paddle-file`` overlay (a changed Paddle module plans apart).
Concurrent builders (pytest -n) wait on a lock file.

Beyond tensor parallelism: DP (replicated parameters, the batch split over
``dp``: the gradients are Partial over ``dp`` and all-reduced), DP x TP, a
sharded optimizer (``dist.shard_optimizer`` with ``ShardingStage1``), a
mesh whose process ids are not 0..n-1 (ranks 2 and 3 of a job of 4), and a
head on a sub-mesh of that mesh (the ranks outside it drop its ops).
Sequence-parallel reshards (s_to_r / r_to_s along the sequence dim) are
``planned_row_sp_pir`` of ``cases/pir_collectives.py``, whose planner
records come from here too (:func:`planned_dir` on its model).

A planning rank that raises inside a planner stage still leaves its stage
records (``rank<R>/planner.json``): the planner application reports that
stage PASS_CRASHED; a rank that fails elsewhere fails the build.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .base import Case, Expect

_REPO = Path(__file__).resolve().parent.parent
EXAMPLES = _REPO / "examples"
PLANNER = "planner"


def cache_root() -> Path:
    from cases.engine_planned import _paddle_tag

    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "paddle-pass-verify"
    return root / "planner" / _paddle_tag()


# modules outside verify/plan/ that run inside the planning process: the
# snapshot writer, and the fused-parameter recorder examples/fused_ffn_qkv_of.py calls
PLANNING_HELPERS = ("verify/ir/pir_snapshot.py", "verify/numeric/fused_params.py")


def full_key(params: dict) -> str:
    from verify.ir.paddle_overlay import fingerprint

    h = hashlib.sha256(json.dumps({"model": params["model"], "mesh": params["mesh"]},
                                  sort_keys=True).encode())
    if params.get("trace"):  # a traced plan (coverage.json per rank) is cached apart
        h.update(b"coverage-trace")
    for name in [params["model"]] + list(params.get("uses", [])):
        h.update((EXAMPLES / name).read_bytes())
    from verify.plan import source_digest_parts

    for part in source_digest_parts():  # every planning module (stages.py included)
        h.update(part)
    for helper in PLANNING_HELPERS:  # modules a model file's hooks run while planning
        h.update((_REPO / helper).read_bytes())
    h.update(fingerprint().encode())
    return h.hexdigest()


def plan_key(params: dict) -> str:
    """The name of the plan's dir (a prefix of :func:`full_key`; the dir's
    seal holds the whole key, checked on read)."""
    return full_key(params)[:16]


def _ids(mesh) -> list:
    return sorted(int(r) for r in np.array(mesh).flatten())


def _complete(folder: Path, mesh) -> bool:
    return (folder / "plan.json").is_file() and all(
        (folder / f"rank{r}" / "planner.json").is_file() for r in _ids(mesh))


def plan_model(model: Path, mesh, out: Path, name: str, timeout: float = 600.0,
               trace: bool = False) -> Path:
    """Plan ``model`` for every rank of ``mesh`` into ``out`` (see the module
    docstring); RuntimeError naming the rank when one fails outside a stage;
    ``trace``: each rank also records which planner lines ran
    (``verify/plan/coverage_trace.py``)."""
    from verify.plan import pir_rank as pir_plan
    from verify.plan.crash_records import how_it_died, write_killed
    from verify.plan.program_format import write_failed_plan_json, write_plan_json

    ids = _ids(mesh)
    world = max(ids) + 1

    def env(r):
        e = pir_plan.plan_env(r, world, _REPO)
        e.pop("VERIFY_PLANNER_TRACE", None)  # the case says whether to trace, not the caller
        return {**e, "VERIFY_PLANNER_TRACE": "1"} if trace else e
    procs = {r: subprocess.Popen(pir_plan.command(r, str(model), mesh, out / f"rank{r}"),
                                 cwd=str(_REPO), env=env(r),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in ids}
    failed = {}
    for r, p in procs.items():
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise RuntimeError(f"case {name}: rank {r} planning timed out after {timeout:g} s")
        p.stderr_text = se or so
        if p.returncode != 0:
            lines = [ln for ln in (se or so).strip().splitlines() if ln.strip()]
            # the exception's own line, not a C++ hint after it
            errors = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
            failed[r] = (errors or lines)[-1] if lines else how_it_died(p.returncode)
    for r, p in procs.items():  # killed inside a stage (SIGABRT): records from its trace
        if p.returncode and not (out / f"rank{r}" / "planner.json").is_file():
            write_killed(out / f"rank{r}", p.returncode, p.stderr_text)
    lost = [r for r in failed if not (out / f"rank{r}" / "planner.json").is_file()]
    if lost:
        exc = RuntimeError(f"case {name}: planning rank {lost[0]} failed outside the "
                           f"planner's stages: {failed[lost[0]]}")
        # each failed rank's output (its traceback names where it failed: an engine pass
        # before the stages, e.g. passes/auto_parallel_c_embedding_pass.py)
        exc.stderr = {r: procs[r].stderr_text[-20000:] for r in lost}
        raise exc
    if failed:  # a stage raised: the records say which; no programs to run
        write_failed_plan_json(out, name, mesh, failed)
    else:
        write_plan_json(out, name=name, mesh=mesh, model=str(model), ir="pir")
    return out


def planned_dir(case) -> Path:
    """The planned program dir of ``case`` (params ``model``, ``mesh``;
    ``model`` and ``uses`` may be absolute paths outside ``examples/``, as a
    generated plan's are; ``trace``: record coverage), planning it once."""
    from verify.cache_files import cached_dir

    params = case.params
    key = full_key(params)
    final = cache_root() / key[:16]

    def make():
        tmp = Path(tempfile.mkdtemp(prefix=".plan-", dir=final.parent))
        try:
            plan_model(EXAMPLES / params["model"], params["mesh"], tmp / "dir", case.name,
                       trace=bool(params.get("trace")))
            os.rename(tmp / "dir", final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final
    # sealed with the full key and every file's sha256 (verify/cache_files.py):
    # a damaged or edited plan is planned again
    return cached_dir(final, key, make, lambda f: _complete(f, params["mesh"]) and
                      isinstance(json.loads((f / "plan.json").read_text()), dict))


def build(case, rank: int):
    """A rank's final PIR program (``program_dir.build_pir``), for the other
    checks and tools; the planner application reads the records itself."""
    import dataclasses

    from cases.program_dirs import build_pir

    folder = planned_dir(case)
    failed = json.loads((folder / "plan.json").read_text()).get("planner_failed")
    if failed:  # a stage raised: the records say which, and no rank program exists
        r, why = next(iter(sorted(failed.items())))
        raise RuntimeError(f"case {case.name}: Paddle's planner raised on rank {r} ({why}); "
                           "no rank program to build (the planner family reports the stage: "
                           f"python -m verify run --pass planner --case {case.name})")
    return build_pir(dataclasses.replace(case, params={**case.params, "dir": str(folder)}),
                     rank)


def _case(name, summary, model, mesh, expect, uses=(), strategy_passes=None,
          reference=None, **extra):
    """``strategy_passes``: ``{pass name: Expect}`` of the engine passes the
    model's strategy turns on that have an adapter of their own (e.g.
    ``passes/auto_parallel_recompute_pir.py``), which handles the case too;
    ``reference``: ``{"model", "uses"}`` of the same model with such a pass
    off, planned as the reference of a pass whose rank programs the
    planner's own serial program does not describe
    (``passes/auto_parallel_c_embedding_pass.py``); ``extra``: more params (an
    AMP case's ``amp_reference``, ``amp_dtype``, ``amp_level``:
    ``passes/pir_amp.py``)."""
    strategy_passes = dict(strategy_passes or {})
    return Case(name=name, family="planner_models", summary=summary, mesh=mesh,
                builder=build, expect={PLANNER: expect, **strategy_passes}, ir="pir",
                params={"model": model, "mesh": mesh, "uses": list(uses),
                        "planner": "cases.planner_models:planned_dir",
                        "only_pass": PLANNER,
                        **({"strategy_passes": sorted(strategy_passes)}
                           if strategy_passes else {}),
                        **({"reference": reference} if reference else {}), **extra},
                gloo_unfaithful="the planner relation runs the ranks in the PIR simulator")


_HOLDS = ("every stage's program holds def-use (shapes where rules exist), every rank "
          "plans from one serial program, the parameters are the slices their "
          "placements name, and the serial run and the ranks in lock step agree on the "
          "loss, every gradient and every updated parameter for 3 steps")

# the same Paddle defect as the zoo's LLaMA planned with gradient merge
# (cases/zoo.py, zoo_llama_tp2_gm), on a model the test suite plans in seconds
_GM_ZEROING = Expect(
    True, "CONTRACT_BROKEN",
    "Paddle's defect: 3.3.1's PIR auto_parallel_gradient_merge_pass zeroes each "
    "parameter's @GRAD@MERGE accumulator with a pd_op.set_value_with_tensor_ whose result "
    "is typed with the gradient's global shape; on a TP-sharded parameter it declares the "
    "global shape while it writes the local accumulator (the row-parallel weight's "
    "[8, 8] piece declared [16, 8], the column-parallel weight's and bias's alike). The "
    "in-place write runs on the local buffer, so the types, not the values, are wrong. The stage checks name the gradient_merge stage "
    "(recorded apart since the stage recorder wraps the engine's new_pass); every other "
    "stage holds. The relation drives each rank's merged program as its job schedule, "
    "[forward, backward] * 2 + [optimize], against the serial program's micro-steps with "
    "the gradients merged (verify/numeric/merged_relation.py): every micro-step's loss, "
    "the merged gradients and the updates relate on both ranks for 2 optimizer steps, "
    "and the value proof of that schedule (verify/value/merged_relation.py) proves them "
    "at the real shapes for every step (the accumulators back at zero after the update)",
    evidence="the shape check of the stage programs: 'op 66 (pd_op.set_value_with_tensor_): "
    "output %63 dim 0 is declared 16 but is 8' on rank 0 and rank 1 after gradient_merge, its "
    "x linear_1.w_0.dist@GRAD@MERGE [8, 8]; "
    "reproduce: python -m verify run --pass planner --case planner_tp2_gm")

_GM_SUM = Expect(
    True, "EQUIVALENT",
    "gradient merge with the merged gradient summed on a DP plan: every stage holds (the "
    "replicated parameters' accumulators are typed right), the optimizer reads each "
    "accumulator unscaled, all-reduced over dp in the optimize job, and the relation "
    "driving each rank's job schedule [forward, backward] * 2 + [optimize] against the "
    "serial micro-steps with the gradients summed holds for 2 optimizer steps, and is "
    "proved at the real shapes for every step (verify/value/merged_relation.py)")

_GM_MOMENTUM_AVG = Expect(
    True, "NOT_EQUIVALENT",
    "Paddle's defect (as pir_gm_momentum_avg_k2 of the pass's own cases): 3.3.1's PIR "
    "auto_parallel_gradient_merge_pass finds no optimizer named sgd or adam, so "
    "_append_scale_op_before_comm appends its 1/k scale_ of each accumulator at the block "
    "end, after the momentum_ and the zeroing: the optimizer reads the sum of the 2 "
    "micro-step gradients where avg asks for their mean. Mended (tests/planner_mutant_edits.py "
    "gm_scale_mended: each accumulator scaled in place before the momentum_ that reads it by "
    "its keyword) the plan is proved and relates (tests/test_planner_gm_momentum.py)",
    evidence="the value proof refutes every parameter and velocity after the step (rank 0: "
    "linear_0.b_0 twice the serial mean's update), the numeric relation rank 0's "
    "linear_0.b_0@GRAD at step 0 (rank 2 x serial); both: first divergence at op 35 "
    "(pd_op.momentum_), stage gradient_merge (the accumulator as the optimizer reads it: "
    "the merge's add_, op 27, unscaled); reproduce: python -m verify run --pass "
    "planner --case planner_gm_momentum")

_UNEVEN = Expect(
    True, "PASS_CRASHED",
    "Paddle's defect: 3.3.1's s_to_r reshard of a value sharded unevenly (a dim not "
    "divisible by its mesh dim: here each micro-step's single row over dp=2, the engine "
    "feeding BATCH / k_steps rows) takes reshard_s_to_r_with_padding, which calls "
    "get_defining_op() on the list paddle._C_ops.split returns: the reshard stage raises "
    "AttributeError on every rank, so no uneven Shard can be gathered back (the same model "
    "with a batch of 4 plans and relates: planner_dp2_gm_sum)",
    evidence="the reshard stage's traceback on rank 0 and rank 1: s_to_r_reshard_func.py "
    "line 291, split_op = tmp_split_values.get_defining_op(): AttributeError: 'list' object "
    "has no attribute 'get_defining_op'; the later stages not run; reproduce: python -m "
    "verify run --pass planner --case planner_dp2_gm_uneven")

_PIPELINE = Expect(
    True, "EQUIVALENT",
    "a two-stage pipeline: every stage holds, the stages joined by send_v2/recv_v2 pairs "
    "(the activation forward, its gradient back); the relation drives both ranks' job "
    "lists as the scheduler made them, send/recv matched across the ranks, against the "
    "serial program's micro-steps with the gradients averaged, for 2 optimizer steps; the "
    "value proof of the job lists (verify/value/job_list_relation.py: per micro-batch "
    "scopes, one mailbox) proves it at the real shapes for every step")

RECOMPUTE = "auto_parallel_recompute_pir"
_RECOMPUTE = Expect(
    True, "EQUIVALENT",
    "the serial program is the model without recompute (taken before the engine's "
    "recompute pass); the recompute stage clones the block's forward ops into the backward "
    "and every stage holds; the relation holds on both ranks for 3 steps, each clone "
    "compared with the forward op it clones")
_RECOMPUTE_CONTRACT = Expect(
    True, "EQUIVALENT",
    "the planner's checks as for planner, and the pass's contract on its stage: the "
    "block's forward ops cloned into the backward, every backward read of an activation "
    "re-pointed to its clone, no activation of the block read by the backward any more, "
    "every other op unchanged")

AMP = "pir_amp"
_AMP_BF16 = Expect(
    True, "EQUIVALENT",
    "the PIR Engine's AMP (bfloat16, O1; planned as on a GPU, examples/amp_of.py): the AMP "
    "serial program equals the float32 plan's serial program with round_bfloat16 exactly "
    "where PIR's AMP lists put casts (the matmuls and their grads in bfloat16, every other "
    "op in float32), for all inputs; one step of both serial programs with Paddle's CPU "
    "kernels agrees within the bfloat16 rounding tolerance")
_AMP_LEFT_ALONE = Expect(
    False, "EQUIVALENT",
    "no op on PIR AMP's bfloat16 white list (the O1 lists by their legacy names, "
    "verify/value/pir_amp_rounding.py): the AMP serial program holds no cast and no "
    "bfloat16 value, so the rounding relation holds with no rounding anywhere: left alone")

C_EMBEDDING = "auto_parallel_c_embedding_pass"
_C_EMBEDDING_FILES = ["c_embedding_of.py"]
# the planner itself on a plan with the flag on: its serial program is taken after the
# pass (rank 0's start_index 0 over the whole table: the model's lookup), so its own
# checks hold; the pass is judged against the plan with the flag off (the adapter)
_C_EMBEDDING_PLANNER = Expect(True, "EQUIVALENT", _HOLDS)
_C_EMBEDDING_FIRES = Expect(
    True, "EQUIVALENT",
    "each rank looks its ids up in its half of the table with pd_op.c_embedding "
    "(start_index 0 and 2 of a vocabulary of 4) and the partial lookups are all-reduced "
    "over mp; every stage holds, and the ranks relate to the serial program of the model "
    "planned with the flag off (an all_gather of the table and a pd_op.embedding) on the "
    "loss, every gradient and every update for 3 steps; contract: the rank's rows, the "
    "sum over the vocab axis, the grad's start_index")
_C_EMBEDDING_REPLICATED = Expect(
    True, "CONTRACT_BROKEN",
    "Paddle's behaviour: 3.3.1's auto_parallel_c_embedding_pass rewrites every "
    "pd_op.embedding, whatever its table's placement: a table the user left replicated is "
    "resharded on its vocab dim over the mesh axis it takes from a fresh "
    "DistributedStrategy's mp_degree (dims_mapping [-1, -1] planned with the flag off, "
    "[1, -1] with it on: 2 of 4 rows a rank) and its lookup becomes a c_embedding and an "
    "all-reduce. The values relate (the ranks to the flag-off serial program, loss, "
    "gradients and updates for 3 steps); what changed is the placement the user chose",
    evidence="the contract's 'left alone' check on rank 0 and rank 1: op 6 "
    "(pd_op.c_embedding) on embedding_0.w_0.dist, dims_mapping [-1, -1] with the flag off, "
    "[1, -1] with it on; reproduce: python -m verify run --pass c_embedding --case "
    "planner_c_embedding_replicated")
_C_EMBEDDING_ABSENT = Expect(
    False, "EQUIVALENT",
    "no lookup: the pass has nothing to rewrite, and every rank's program is the plan "
    "with the flag off, op for op")

FUSED_FFN_QKV = "fuse_attention_ffn_qkv_pass"
_FUSED_FILES = ["fused_ffn_qkv_of.py"]
_FUSED_FIRES = Expect(
    True, "EQUIVALENT",
    "the q/k/v projections and the gate/up pair become one matmul each (6 -> 3) of "
    "parameters the pass fused per head group (q|k|v columns of each of the 2 heads) and "
    "gate|up, as recorded from their values in the planning process; each rank relates "
    "to the serial program of the model planned with the flag off, the fused parameters "
    "made of its parameters by that record (loss, every gradient and update, 3 steps; "
    "the value proof proves all 14 values per rank, at batch 2 x seq 2: at 4 x 4 the fused "
    "q|k|v bias gradient's query went over Z3's rlimit after ~600 s a rank); contract: the parts read by no op, the fused "
    "ones read")
_FUSED_ABSENT = Expect(
    False, "EQUIVALENT",
    "no input multiplied by two parameters: nothing fused, and every rank's program is "
    "the plan with the flag off, op for op")

_PIPELINE_FILES = ["pipeline_of.py", "pipeline_strategy.py"]
# the gradient-merge zeroing defect of planner_tp2_gm, met again inside a pipeline
_PIPELINE_TP = Expect(
    True, "CONTRACT_BROKEN",
    "Paddle's defect (as planner_tp2_gm): the pipeline turns gradient merge on, and 3.3.1's "
    "auto_parallel_gradient_merge_pass types the zeroing of each TP-sharded parameter's "
    "accumulator with the global shape (the column-parallel bias's [4] piece declared [8] "
    "on every rank); every other stage holds, and both relations hold on all 4 ranks for "
    "2 optimizer steps (the whole programs as the merged schedule, and the scheduler's "
    "job lists with the row-parallel all-reduces beside the sends and recvs)",
    evidence="the shape check after gradient_merge: 'op 47 (pd_op.set_value_with_tensor_): "
    "output %43 dim 0 is declared 8 but is 4' on ranks 0 and 1 (op 54 on ranks 2 and 3); "
    "reproduce: python -m verify run --pass planner --case planner_pp2_tp2")

# generated models kept as built-in cases (verify/generate/, examples/planner_gen_*.py: a
# stub and its JSON spec, built by examples/generated_model.py): each runs a reshard
# function no other case runs (tests/test_planner_reshard_coverage.py)
_GEN_FILES = ["generated_model.py", "generated_model.json"]


def _gen(name, summary, mesh, expect):
    stem = f"planner_gen_{name}"
    return _case(stem, f"examples/{stem}.py (generated): {summary}", f"{stem}.py", mesh,
                 expect, uses=_GEN_FILES + [f"{stem}.json"])


_GEN_CASES = [
    _gen("p_to_s_transpose", "a row-parallel linear's partial sums resharded to Shard(1): "
         "p_to_s's transpose path (a reduce_scatter on dim 0 between two transposes)",
         [0, 1], Expect(True, "EQUIVALENT", _HOLDS)),
    _gen("nd_mesh_p_to_r", "an activation resharded to [Partial, Partial] on a 2 x 1 mesh "
         "(the reshard folded: completion already typed it so), then read by a replicated "
         "linear: the nd-mesh reshard function's partial-to-replicate step",
         [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS)),
    _gen("nd_mesh_r_to_p", "spec 2 of seed 2: a layer norm sharded over mp of a 2 x 1 mesh, "
         "its output resharded to [Partial, Replicate], a linear, ShardingStage2: the nd-mesh "
         "reshard function's replicate-to-partial step",
         [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS)),
    _gen("s_to_s", "an activation resharded from Shard(1) to Shard(2): s_to_s",
         [0, 1], Expect(
             True, "NOT_EQUIVALENT",
             "Paddle's defect: 3.3.1's s_to_s between two non-zero dims (here Shard(1) to "
             "Shard(2) of [4, 4, 4] over 2 ranks) runs both of its branches: the pre-exchange "
             "one lays the value out as [N, B, S/N, H/N] chunks for the all_to_all, the "
             "post-exchange one (written for Shard(1) to Shard(0)) reads the result as if it "
             "were the src-typed [B, S/N, H] and reshapes it [N, B/N, S/N, H]: each rank's "
             "piece is another mix of elements than the Shard(2) piece, and the all_to_all's "
             "result is typed [4, 2, 4] where the kernel makes x's [4, 4, 2]. pd_op.all_to_all "
             "has no CPU kernel in 3.3.1: both relations exchange by Paddle's GPU kernel's "
             "definition (verify/ir/collectives.py: rank i's chunk j along dim 0 is rank j's "
             "chunk i); with one of the dims 0 the same function plans, relates and is "
             "proved (planner_gen_s_to_s_dim0)",
             evidence="the value proof and the numeric relation on ranks 0 and 1: the loss "
             "(serial 1.41999, rank 1.3905 at step 0), first divergence at op 13 "
             "(pd_op.reshape, stage reshard, the all_to_all's operand compared as its "
             "Shard(2) type says); the shape check after reshard: op 14 (pd_op.all_to_all) "
             "output %9 dim 1 is declared 2 but is 4 (op 42: declared 4 but is 2, the "
             "gradient's); reproduce: python -m verify run --pass planner --case "
             "planner_gen_s_to_s")),
    _gen("s_to_s_dim0", "an activation resharded from Shard(1) to Shard(0): s_to_s with "
         "dim 0 the result's split (its gradient Shard(0) to Shard(1): dim 0 the source's)",
         [0, 1], Expect(True, "EQUIVALENT", _HOLDS)),
    _gen("p_to_s_padding", "a row-parallel linear's partial sums resharded to Shard(1) of a "
         "sequence of 3 over 2 ranks (p_to_s's padding path), then to Replicate for the "
         "linear after it", [0, 1], Expect(
             True, "PASS_CRASHED",
             "Paddle's defect: 3.3.1's p_to_s of a dim not divisible by the mesh "
             "(reshard_p_to_s_with_padding: the value padded, reduce-scattered, the padding "
             "split off the last rank's piece, transposed back) leaves its result typed "
             "Replicate where the reshard asked for Shard(1); the next reshard of that value "
             "(Shard(1) to Replicate) finds its input's type is not its operand's and "
             "reshard_op_pass asserts: the reshard stage raises, no rank is planned (found by "
             "python -m verify generate; the same reshards on an even sequence plan and "
             "relate: planner_gen_p_to_s_transpose)",
             evidence="the reshard stage's traceback on rank 0: pir_pass.py reshard_op_pass: "
             "AssertionError: The dist_attr of reshard op's input and operand should be "
             "equal, but got ... dims_mappings:[-1,-1,-1], placements:[Replicate()] and ... "
             "dims_mappings:[-1,0,-1], placements:[Shard(dim=1)]; reproduce: python -m "
             "verify run --pass planner --case planner_gen_p_to_s_padding")),
    _gen("pp2_attention", "spec 0 of seed 2: a linear and a layer norm on stage 0, attention "
         "on stage 1, FThenB over 2 micro-batches (an operand list resharded: "
         "reshard_combine_value)", [[0], [1]], _PIPELINE),
    _gen("cross_p_to_r", "a partial activation on the stage mesh [0] crossing to the stage "
         "mesh [1] as Replicate, no pipeline schedule: a same-status send/recv and p_to_r; "
         "its gradient crosses back through r_to_p",
         [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS)),
    _gen("s_to_p", "verify generate seed 0 plan 134: a linear on stage 0 of a pp x mp mesh "
         "[[0], [1]], its output resharded to Partial, crossing to stage 1 as Shard(0) for a "
         "layer norm, FThenB", [[0], [1]], Expect(
             True, "PASS_CRASHED",
             "Paddle's defect: 3.3.1's PIR reshard functions (static/reshard_funcs/) have no "
             "Shard-to-Partial one (the dynamic graph's phi registry has "
             "SToPReshardFunction); the gradient's crossing back (Shard(0) on [1] to the "
             "forward's Partial on [0]) is split by decompose_reshard_pass into a same-status "
             "send/recv and a Shard(0)-to-Partial reshard on the mesh [0]: "
             "reshard_op_pass asserts, no rank is planned (generate's Known no_s_to_p_reshard)",
             evidence="the reshard stage's traceback on rank 0: pir_pass.py reshard_op_pass: "
             "AssertionError: There is no reshard function that matches src_dist_attr: "
             "mesh_shape:[1],process_ids:[0],dims_mappings:[0,-1,-1], "
             "placements:[Shard(dim=0)] and dst_dist_attr: mesh_shape:[1],process_ids:[0],"
             "dims_mappings:[-1,-1,-1], partial(0,SUM), placements:[Partial(reduce_type=SUM)]; "
             "reproduce: python -m verify run --pass planner --case planner_gen_s_to_p")),
    _gen("sub_partial", "verify generate seed 0 plan 153: a linear on the sub-mesh [0] of "
         "[0, 1] (its input moved onto it and its output back, both Replicate), then a "
         "column-parallel linear", [0, 1], Expect(
             True, "PASS_CRASHED",
             "Paddle's defect: the column-parallel linear's input gradient is Partial on "
             "[0, 1]; its move onto the sub-mesh [0] (the gradient of the sub-to-global "
             "reshard) is split by 3.3.1's decompose_reshard_pass, whose guard meant to 'avoid "
             "global to sub mesh case' compares the meshes' ndims only (both 1), into a "
             "same-status Partial reshard from [0, 1] to [0] (SameStatusReshardFunction takes "
             "equal mesh shapes only, GlobalToSubMeshFunction Replicate destinations only) "
             "and a Partial-to-Replicate one: reshard_op_pass asserts, no rank is planned; "
             "undecomposed, GlobalToSubMeshFunction would reshard the value to Replicate "
             "first (generate's Known decomposed_global_to_sub)",
             evidence="the reshard stage's traceback on rank 0: pir_pass.py reshard_op_pass: "
             "AssertionError: There is no reshard function that matches src_dist_attr: "
             "mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1,-1], partial(0,SUM), "
             "placements:[Partial(reduce_type=SUM)] and dst_dist_attr: mesh_shape:[1],"
             "process_ids:[0],dims_mappings:[-1,-1,-1], partial(0,SUM), "
             "placements:[Partial(reduce_type=SUM)]; reproduce: python -m verify run --pass "
             "planner --case planner_gen_sub_partial")),
    _gen("ln_grad_partial", "a row-parallel linear on [0, 1] (its output Partial) and a "
         "replicated layer norm after it (verify generate seed 0 plan 193's defect, its "
         "attention and gradient merge dropped)", [0, 1], Expect(
             True, "NOT_EQUIVALENT",
             "Paddle's defect: 3.3.1's completion types pd_op.layer_norm_grad's x operand "
             "Partial(SUM) (the row-parallel matmul's output as it is) where the forward "
             "pd_op.layer_norm reads it resharded to Replicate: the partition reshards the "
             "forward's operand only, and each rank's layer_norm_grad runs on its own addend; "
             "layer_norm is not linear in x, so the layer norm's weight and bias gradients "
             "(declared Replicate) differ between the ranks and from the serial ones, and the "
             "input gradient with them (generate's Known layer_norm_grad_partial_x)",
             evidence="the dist program before partition (stage 'serial' snapshot): "
             "pd_op.layer_norm's operand x Replicate, pd_op.layer_norm_grad's x the same "
             "value's Partial(SUM); the value proof (REFUTED, exact evaluation with the real "
             "kernels) and the numeric relation on ranks 0 and 1: layer_norm_0.w_0.dist@GRAD "
             "differs (serial -0.186192, rank 0 0.0612521 at step 0), first divergence at op "
             "22 (pd_op.layer_norm_grad), stage partition; reproduce: python -m verify run "
             "--pass planner --case planner_gen_ln_grad_partial")),
    _gen("embedding_adamw_stage2", "a replicated embedding table, AdamW wrapped in "
         "ShardingStage2 over dp of a 2 x 1 mesh", [[0], [1]], Expect(
             True, "PASS_CRASHED",
             "Paddle's defect: 3.3.1's planner kills the process with SIGSEGV in the reshard "
             "stage (after partition) on an embedding trained by AdamW under a sharded "
             "optimizer (ShardingStage1 or 2 over dp), on every rank; the same model with "
             "SGD, or AdamW unsharded, or a linear in the embedding's place plans and "
             "relates (found by python -m verify generate as a 2 x 2 dp x mp plan; measured "
             "on a fresh cache; no C++ stack: the process prints none)",
             evidence="the reshard stage's record on ranks 0 and 1: the planning process was "
             "killed by SIGSEGV inside planner stage reshard (after serial, partition); "
             "reproduce: python -m verify run --pass planner --case "
             "planner_gen_embedding_adamw_stage2")),
    _gen("r_to_p_rank0", "verify generate seed 0 plan 0 (its gradient merge and "
         "ShardingStage3 dropped): on a dp x mp mesh [[0], [1]], a linear with its weight "
         "Shard(1) over mp, its output resharded to [Replicate, Partial]",
         [[0], [1]], Expect(
             True, "NOT_EQUIVALENT",
             "Paddle's defect: 3.3.1's RToPReshardFunction keeps the value where the GLOBAL "
             "rank is 0 (`local_rank != 0`, local_rank = paddle.distributed.get_rank()) and "
             "writes pd_op.full(0) elsewhere; the output gradient's reshard from [Shard(0), "
             "Replicate] to [Replicate, Partial] runs it (the nd-mesh function's "
             "replicate-to-partial step) on each rank's mp sub-mesh: rank 0's [0] keeps the "
             "value (pd_op.assign), rank 1's [1] holds zeros, so rank 1's half of the batch "
             "adds nothing to the weight gradient the dp all_reduce sums. On a mesh with "
             "process 0 the same reshard relates (planner_gen_nd_mesh_r_to_p; with the "
             "value kept on the mesh's first process this case relates: "
             "tests/test_planner_r_to_p.py; generate's Known r_to_p_zeros_off_rank0)",
             evidence="the reshard stage's programs: op 21 is pd_op.assign of the "
             "all-gathered gradient on rank 0 and pd_op.full(value 0.0, shape [4, 2, 4]) on "
             "rank 1 (the partition's dist_op.reshard [Shard(0), Replicate] -> [Replicate, "
             "Partial(SUM)] of the subtract_grad's x_grad); the value proof (REFUTED, exact "
             "evaluation) and the numeric relation on ranks 0 and 1: linear_1.w_0.dist@GRAD "
             "differs (serial 0.565933, rank 0.104223 at step 0); rank 1's first divergence: "
             "op 26 (pd_op.matmul_grad), stage reshard (pd_op.slice, from pd_op.full); "
             "reproduce: python -m verify run --pass planner --case planner_gen_r_to_p_rank0")),
]

# Paddle's own semi-auto-parallel test models, re-expressed as model files
# (examples/paddle_*.py; each docstring names the Paddle test it follows)
_PADDLE_DEMO = ["paddle_demo_net_mp.py"]
_GM_ONE_RANK = Expect(
    True, "EQUIVALENT",
    "gradient merge (k_steps 4, avg) with AdamW on one rank: every stage holds (the "
    "accumulators of replicated parameters typed right), each AdamW reads its accumulator "
    "scaled by 1/4, and the relation driving the merged program as its job schedule "
    "[forward, backward] * 4 + [optimize] against the serial micro-steps with the gradients "
    "averaged holds for 2 optimizer steps (witnessed, not proved: the symbolic proof does "
    "not model the schedule). Its rank program, fed to the gradient-merge adapter as a "
    "program dir, is the merge's output: not merged again (tests/test_pir_gradient_merge.py)")
_PADDLE_CASES = [
    _case("planner_paddle_demo_net_tp2", "examples/paddle_demo_net_mp.py: the DemoNet of "
          "Paddle's to_static mp test (test_to_static_pir_program.py) planned for TP2 (a "
          "column- then row-parallel bias-free linear between ReLUs)",
          "paddle_demo_net_mp.py", [0, 1], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_paddle_gm_mlp", "examples/paddle_gm_mlp.py: Paddle's gradient-merge pass "
          "test (gradient_merge_pass_unittest.py: k_steps 4, avg, AdamW) on the DemoNet, "
          "planned on one rank: the final program holds the merge",
          "paddle_gm_mlp.py", [0], _GM_ONE_RANK,
          uses=_PADDLE_DEMO + ["gradient_merge_of.py"]),
    _case("planner_paddle_sharding_stage1_mp", "examples/paddle_sharding_stage1_mp.py: "
          "Paddle's sharding stage 1 with mp (semi_auto_parallel_sharding_stage_1.py) on the "
          "DemoNet, DP2 x TP2 (mesh [[0, 1], [2, 3]]), SGD states sharded over dp",
          "paddle_sharding_stage1_mp.py", [[0, 1], [2, 3]], Expect(True, "EQUIVALENT", _HOLDS),
          uses=_PADDLE_DEMO),
    _case("planner_paddle_pp_fthenb", "examples/paddle_pp_demo_net.py: the PPDemoNet of "
          "Paddle's pipeline test (pir/mlp_demo.py) as a two-stage FThenB pipeline over 2 "
          "micro-batches", "paddle_pp_demo_net.py", [[0], [1]], _PIPELINE,
          uses=["pipeline_strategy.py"]),
    _case("planner_gm_momentum", "examples/planner_gm_momentum.py: planner_dp_mlp.py "
          "planned on one rank (mesh [[0]]) with gradient merge (k_steps 2, avg) and "
          "Momentum: each optimizer reads its accumulator by its keyword, the 1/k scale an "
          "in-place scale_ of it", "planner_gm_momentum.py", [[0]], _GM_MOMENTUM_AVG,
          uses=["planner_dp_mlp.py", "gradient_merge_of.py"]),
]

CASES = _GEN_CASES + _PADDLE_CASES + [
    _case("planner_tp2", "examples/tiny_mlp_pir.py planned for TP2 (column- then "
          "row-parallel linear; p_to_r all-reduces of the partial sums)",
          "tiny_mlp_pir.py", [0, 1], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_dp2", "examples/planner_dp_mlp.py planned for DP2 (mesh 2x1, every "
          "parameter replicated, the batch split over dp: Partial gradients all-reduced)",
          "planner_dp_mlp.py", [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_dp2_tp2", "examples/tiny_mlp_pir.py planned for DP2 x TP2 (mesh "
          "[[0, 1], [2, 3]]: TP partial sums within a row, DP gradients across rows)",
          "tiny_mlp_pir.py", [[0, 1], [2, 3]], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_shard_opt_dp2", "examples/planner_shard_opt.py: AdamW wrapped by "
          "dist.shard_optimizer(ShardingStage1('dp')) planned for DP2 (mesh 2x1)",
          "planner_shard_opt.py", [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS),
          uses=["planner_dp_mlp.py"]),
    _case("planner_dp2_fused_ffn_qkv", "examples/planner_fused_ffn_qkv.py: q/k/v "
          "projections and a SwiGLU FFN planned for DP2 (mesh [[0], [1]]) with "
          "FLAGS_enable_fused_ffn_qkv_pass: fuse_attention_ffn_qkv_pass rewrites the forward",
          "planner_fused_ffn_qkv.py", [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS + (
              "; the fusion runs first in Engine._parallel_pir, so the serial program "
              "this relation starts from is already fused (3 matmuls, 6 parameters): the "
              "fusion itself is judged against the plan with the flag off by "
              "fuse_attention_ffn_qkv_pass's adapter")),
          uses=["fused_ffn_qkv_net.py"] + _FUSED_FILES,
          strategy_passes={FUSED_FFN_QKV: _FUSED_FIRES},
          reference={"model": "fused_ffn_qkv_net.py", "uses": []}),
    _case("planner_dp2_fused_ffn_qkv_absent", "examples/planner_fused_ffn_qkv_absent.py: "
          "planner_dp_mlp.py (no q/k/v projections, no gate/up pair) planned for DP2 "
          "(mesh [[0], [1]]) with FLAGS_enable_fused_ffn_qkv_pass",
          "planner_fused_ffn_qkv_absent.py", [[0], [1]], Expect(True, "EQUIVALENT", _HOLDS),
          uses=["planner_dp_mlp.py"] + _FUSED_FILES,
          strategy_passes={FUSED_FFN_QKV: _FUSED_ABSENT},
          reference={"model": "planner_dp_mlp.py", "uses": []}),
    _case("planner_tp2_clip", "examples/planner_tp2_clip.py: a column- then row-parallel "
          "MLP planned for TP2, AdamW with grad_clip=ClipGradByGlobalNorm(1.0) (the global "
          "norm: squared_l2_norm per gradient, stack, sum, the sharded part all-reduced "
          "over mp, sqrt, maximum, divide; every gradient rescaled)",
          "planner_tp2_clip.py", [0, 1], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_tp2_ids23", "examples/tiny_mlp_pir.py planned on the mesh [2, 3]: "
          "ranks 2 and 3 of a job of 4 (process ids not 0..n-1)",
          "tiny_mlp_pir.py", [2, 3], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_sub_mesh_ids23", "examples/planner_sub_mesh.py planned on the mesh [2, 3] "
          "(ranks 2 and 3 of a job of 4): the head's parameters on the sub-mesh [2], its "
          "input shared onto it (global_to_sub), its output broadcast back (sub_to_global); "
          "rank 3's partition drops the head's ops",
          "planner_sub_mesh.py", [2, 3], Expect(True, "EQUIVALENT", _HOLDS)),
    _case("planner_tp2_gm", "examples/planner_tp2_gm.py: tiny_mlp_pir.py planned for TP2 "
          "with gradient merge (k_steps 2, avg): the engine's "
          "auto_parallel_gradient_merge_pass recorded as its own stage",
          "planner_tp2_gm.py", [0, 1], _GM_ZEROING,
          uses=["tiny_mlp_pir.py", "gradient_merge_of.py"]),
    _case("planner_dp2_gm_sum", "examples/planner_dp2_gm_sum.py: planner_dp_mlp.py planned "
          "for DP2 (mesh 2x1) with gradient merge (k_steps 2, avg False): each optimizer "
          "reads its accumulator unscaled, the DP all-reduce inside the merged schedule",
          "planner_dp2_gm_sum.py", [[0], [1]], _GM_SUM,
          uses=["planner_dp_mlp.py", "gradient_merge_of.py"]),
    _case("planner_dp2_gm_uneven", "examples/planner_dp2_gm_uneven.py: planner_dp2_gm_sum.py "
          "with a batch of 2: each micro-step's single row sharded over dp=2 (uneven: the "
          "reshards' padding path)",
          "planner_dp2_gm_uneven.py", [[0], [1]], _UNEVEN,
          uses=["planner_dp_mlp.py", "gradient_merge_of.py"]),
    _case("planner_tp2_recompute", "examples/planner_tp2_recompute.py: a column- then "
          "row-parallel block wrapped by fleet.utils.recompute, a replicated head, TP2, "
          "strategy.recompute on: the engine's auto_parallel_recompute_pir recorded as the "
          "stage 'recompute', the serial program taken before it",
          "planner_tp2_recompute.py", [0, 1], _RECOMPUTE,
          strategy_passes={RECOMPUTE: _RECOMPUTE_CONTRACT}),
    _case("planner_amp_bf16", "examples/planner_amp_bf16.py: a layer-norm-linear-tanh-linear MLP on one rank "
          "with the PIR Engine's AMP (strategy.amp: bfloat16, O1): the serial program holds "
          "the casts auto_cast put around each matmul",
          "planner_amp_bf16.py", [0], Expect(True, "EQUIVALENT", _HOLDS + (
              ", proved over the reals")),
          uses=["planner_amp_mlp.py", "amp_of.py"], strategy_passes={AMP: _AMP_BF16},
          amp_reference="planner_amp_mlp.py", amp_dtype="bfloat16", amp_level="O1"),
    _case("planner_amp_bf16_tp2", "examples/planner_amp_bf16_tp2.py: tiny_mlp_pir.py for "
          "TP2 with the PIR Engine's AMP (bfloat16, O1)",
          "planner_amp_bf16_tp2.py", [0, 1], Expect(True, "EQUIVALENT", _HOLDS + (
              " within the bfloat16 rounding tolerance (the serial program computes in "
              "bfloat16; the row-parallel matmul rounds each partial sum where the serial "
              "one rounds the whole), proved over the reals")),
          uses=["tiny_mlp_pir.py", "amp_of.py"], strategy_passes={AMP: _AMP_BF16},
          amp_reference="tiny_mlp_pir.py", amp_dtype="bfloat16", amp_level="O1"),
    _case("planner_amp_bf16_no_white", "examples/planner_amp_bf16_no_white.py: layer norm, "
          "tanh, an elementwise scale and shift and a mean on one rank, no op on PIR AMP's "
          "white list, with the PIR Engine's AMP (bfloat16, O1): the AMP rewrite's pattern "
          "absent", "planner_amp_bf16_no_white.py", [0], Expect(True, "EQUIVALENT", _HOLDS),
          uses=["planner_amp_no_white.py", "amp_of.py"],
          strategy_passes={AMP: _AMP_LEFT_ALONE}, amp_reference="planner_amp_no_white.py",
          amp_dtype="bfloat16", amp_level="O1"),
    _case("planner_c_embedding_tp2", "examples/planner_c_embedding.py: an embedding "
          "whose rows are sharded over mp (vocabulary 4), a linear, MSE, planned for dp1 x "
          "mp2 (mesh [[0, 1]]) with strategy.mp_optimization.replace_with_c_embedding (fleet's "
          "hybrid group over gloo)", "planner_c_embedding.py", [[0, 1]],
          _C_EMBEDDING_PLANNER, uses=["c_embedding_net.py"] + _C_EMBEDDING_FILES,
          strategy_passes={C_EMBEDDING: _C_EMBEDDING_FIRES},
          reference={"model": "c_embedding_net.py", "uses": []}),
    _case("planner_c_embedding_replicated", "examples/planner_c_embedding_replicated.py: "
          "planner_c_embedding_tp2's model with the table replicated (the user shards "
          "nothing), planned with replace_with_c_embedding on",
          "planner_c_embedding_replicated.py", [[0, 1]], Expect(True, "EQUIVALENT", _HOLDS),
          uses=["c_embedding_net.py", "c_embedding_net_replicated.py"] + _C_EMBEDDING_FILES,
          strategy_passes={C_EMBEDDING: _C_EMBEDDING_REPLICATED},
          reference={"model": "c_embedding_net_replicated.py", "uses": ["c_embedding_net.py"]}),
    _case("planner_c_embedding_absent", "examples/planner_c_embedding_absent.py: "
          "tiny_mlp_pir.py (no embedding) planned for dp1 x mp2 with replace_with_c_embedding "
          "on", "planner_c_embedding_absent.py", [[0, 1]],
          Expect(True, "EQUIVALENT", _HOLDS), uses=["tiny_mlp_pir.py"] + _C_EMBEDDING_FILES,
          strategy_passes={C_EMBEDDING: _C_EMBEDDING_ABSENT},
          reference={"model": "tiny_mlp_pir.py", "uses": []}),
    _case("planner_pp2", "examples/planner_pp2.py: a 4-block MLP as a two-stage pipeline "
          "(mesh pp2 x mp1, blocks 0-1 on stage 0), FThenB over 2 micro-batches",
          "planner_pp2.py", [[0], [1]], _PIPELINE, uses=_PIPELINE_FILES),
    _case("planner_pp2_1f1b", "examples/planner_pp2_1f1b.py: planner_pp2 under 1F1B (the "
          "scheduler's recv_forward / send_backward jobs)",
          "planner_pp2_1f1b.py", [[0], [1]], _PIPELINE, uses=_PIPELINE_FILES),
    _case("planner_pp2_tp2", "examples/planner_pp2_tp2.py: planner_pp2 on a 2 x 2 pp x mp "
          "mesh, each stage's blocks column- then row-parallel (all-reduces beside the "
          "sends and recvs)",
          "planner_pp2_tp2.py", [[0, 1], [2, 3]], _PIPELINE_TP, uses=_PIPELINE_FILES),
    _case("planner_pp2_vpp", "examples/planner_pp2_vpp.py: the blocks round-robin over two "
          "stages, VPP with 2 chunks a stage (jobs per chunk)",
          "planner_pp2_vpp.py", [[0], [1]], _PIPELINE, uses=_PIPELINE_FILES),
]
