"""Plan generated models with Paddle's planner and check each with the
planner family (``passes/planner.py``): one plan = one spec of
``verify/generate/models.py`` written as ``DIR/<name>/model.json`` beside a
verbatim copy of ``examples/generated_model.py`` (no code is generated),
planned for every rank of its mesh (``cases/planner_models.py``, traced for
coverage: ``verify/plan/coverage_trace.py``) and judged.

Outcomes: ``pass`` (EQUIVALENT), ``known`` (a finding this module knows:
``KNOWN``, each with the reason and evidence), ``finding`` (any other
NOT_EQUIVALENT / CONTRACT_BROKEN / PASS_CRASHED: the run exits 1; it is
shrunk and written out with the command reproducing it), ``rejected``
(Paddle refused the model before any planner stage: the generator's limit,
named with Paddle's error) and ``inconclusive``.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
MODEL = _REPO / "examples" / "generated_model.py"

FINDING_VERDICTS = ("NOT_EQUIVALENT", "CONTRACT_BROKEN", "PASS_CRASHED", "NOT_APPLIED")


@dataclass(frozen=True)
class Known:
    """A Paddle defect generated plans meet again and again: matched on what
    the checks say (never on a spec's or case's name)."""

    name: str
    verdict: str
    needle: str  # in a failing check's message or traceback
    reason: str
    evidence: str
    # a regular expression the text must match too (when one needle cannot say it:
    # e.g. the src and dst dist attrs of the reshard Paddle has no function for)
    pattern: str = ""

    def matches(self, verdict: str, text: str) -> bool:
        return (self.verdict == verdict and self.needle in text
                and (not self.pattern or re.search(self.pattern, text) is not None))


KNOWN = [
    Known("uneven_s_to_r", "PASS_CRASHED", "get_defining_op",
          "3.3.1's s_to_r (and nd-mesh) reshard of an unevenly sharded value takes "
          "reshard_s_to_r_with_padding, which calls get_defining_op() on the list "
          "paddle._C_ops.split returns (built-in case planner_dp2_gm_uneven)",
          "the reshard stage's traceback: AttributeError: 'list' object has no attribute "
          "'get_defining_op' (s_to_r_reshard_func.py)"),
    Known("gm_zeroing_global_shape", "CONTRACT_BROKEN", "set_value_with_tensor_",
          "3.3.1's auto_parallel_gradient_merge_pass types a sharded parameter's "
          "accumulator zeroing with the global shape (built-in case planner_tp2_gm)",
          "the shape check after gradient_merge: pd_op.set_value_with_tensor_ output "
          "declared the global dim"),
    Known("p_to_s_padding_type", "PASS_CRASHED",
          "reshard op's input and operand should be equal",
          "3.3.1's p_to_s padding path types its result Replicate, not the Shard asked "
          "for, and reshard_op_pass asserts on the next reshard of it (built-in case "
          "planner_gen_p_to_s_padding)",
          "the reshard stage's traceback: AssertionError: The dist_attr of reshard op's "
          "input and operand should be equal (pir_pass.py, reshard_op_pass)"),
    Known("no_s_to_p_reshard", "PASS_CRASHED", "There is no reshard function that matches",
          "3.3.1's PIR reshard functions (static/reshard_funcs/) have no Shard-to-Partial "
          "one (the dynamic graph's phi registry has SToPReshardFunction): a value asked "
          "Partial where it is Shard on the same mesh (after decompose_reshard_pass moved a "
          "stage-crossing reshard to the destination mesh, or as the gradient of a reshard "
          "to Partial) makes reshard_op_pass assert (built-in case planner_gen_s_to_p)",
          "the reshard stage's traceback: AssertionError: There is no reshard function that "
          "matches src_dist_attr: ... placements:[Shard(dim=2)] and dst_dist_attr: <the same "
          "mesh> ... partial(0,SUM), placements:[Partial(reduce_type=SUM)] (pir_pass.py, "
          "reshard_op_pass)",
          pattern=(r"src_dist_attr: mesh_shape:\[([\d,]+)\],process_ids:\[([\d,]+)\],"
                   r"dims_mappings:\[[-\d,]*\], placements:\[[^\]]*Shard[^\]]*\] and "
                   r"dst_dist_attr: mesh_shape:\[\1\],process_ids:\[\2\],"
                   r"dims_mappings:\[[-\d,]*\], partial\(")),
    Known("decomposed_global_to_sub", "PASS_CRASHED", "There is no reshard function that matches",
          "3.3.1's decompose_reshard_pass (pir_pass.py) splits every reshard between two "
          "meshes of the same ndim whose placements differ into a same-status move and a "
          "reshard on the destination mesh; its guard meant to 'avoid global to sub mesh "
          "case' compares ndims only, so a non-replicated value (e.g. the Partial input "
          "gradient of a column-parallel linear) going from a 1-D mesh to its 1-D sub-mesh "
          "becomes a same-status reshard between meshes of different shapes, which "
          "SameStatusReshardFunction (equal mesh shapes only) and GlobalToSubMeshFunction "
          "(Replicate destinations only) both refuse; undecomposed, GlobalToSubMeshFunction "
          "makes the value Replicate first (built-in case planner_gen_sub_partial)",
          "the reshard stage's traceback: AssertionError: There is no reshard function that "
          "matches src_dist_attr: mesh_shape:[2],process_ids:[0,1],... partial(0,SUM), "
          "placements:[Partial(reduce_type=SUM)] and dst_dist_attr: mesh_shape:[1],"
          "process_ids:[0],<the same status> (pir_pass.py, reshard_op_pass)",
          pattern=(r"src_dist_attr: mesh_shape:\[([\d,]+)\],process_ids:\[[\d,]+\],"
                   r"(dims_mappings:\[[-\d,]*\],[^\]]*?placements:\[[^\]]*\]) and "
                   r"dst_dist_attr: mesh_shape:\[(?!\1\])[\d,]+\],process_ids:\[[\d,]+\],"
                   r"\2")),
    Known("layer_norm_grad_partial_x", "NOT_EQUIVALENT", "stage partition (pd_op.layer_norm_grad",
          "3.3.1's completion types layer_norm_grad's x operand Partial where the forward "
          "layer_norm's x is a Partial value resharded to Replicate (a row-parallel matmul's "
          "output): the partition reshards the forward's operand but not the gradient's, so "
          "each rank's layer_norm_grad runs on its own addend; layer_norm is not linear in "
          "x, so the weight, bias and input gradients are wrong (built-in case "
          "planner_gen_ln_grad_partial)",
          "the dist program before partition: pd_op.layer_norm reads x as Replicate, "
          "pd_op.layer_norm_grad reads the same value as Partial(SUM) (its op dist attr); "
          "the value proof and the numeric relation: first divergence at "
          "pd_op.layer_norm_grad, stage partition"),
    Known("embedding_sharded_adamw_segv", "PASS_CRASHED",
          "killed by SIGSEGV inside planner stage reshard",
          "3.3.1's planner kills the process with SIGSEGV in the reshard stage on an "
          "embedding trained by AdamW under ShardingStage1/2 over dp (built-in case "
          "planner_gen_embedding_adamw_stage2; SGD, unsharded AdamW or a linear instead plan). "
          "No C++ stack is printed, so this needle matches any SIGSEGV in that stage: a "
          "plan it matches without an embedding and a sharded AdamW is another defect",
          "the reshard stage's crash record: the planning process was killed by SIGSEGV "
          "inside planner stage reshard (after serial, partition), on every rank"),
    Known("r_to_p_zeros_off_rank0", "NOT_EQUIVALENT", "stage reshard (",
          "3.3.1's RToPReshardFunction (reshard_funcs/r_to_p_reshard_func.py) keeps the "
          "value on the process whose GLOBAL rank is 0 (`local_rank != 0` with "
          "local_rank = paddle.distributed.get_rank()) and writes pd_op.full(0) on every "
          "other: on a mesh without process 0 (a stage mesh [1], the mp sub-mesh [1] of a "
          "dp x mp mesh [[0], [1]] the nd-mesh function hands it) every rank holds zeros, "
          "and the Partial(SUM) sums to 0. Met when a reshard to Partial is read as it is "
          "(the gradient of an activation resharded to Partial, a layer_norm_grad reading "
          "a value crossing to its stage as Partial); the same spec on [0, 1] relates "
          "(built-in case planner_gen_r_to_p_rank0; tests/test_planner_r_to_p.py: with "
          "the value kept on the mesh's first process instead, the case relates). The "
          "message names the zero fill, not the function that wrote it: a divergence "
          "blamed on another reshard function's pd_op.full (sub_to_global's zeros off the "
          "sub-mesh, a padding) would match too, and is another defect",
          "the reshard stage's program on the rank off process 0: pd_op.full(value 0.0) "
          "where the partition's dist_op.reshard to Partial was; the numeric relation: "
          "first divergence at the first op reading it, stage reshard, blamed on "
          "pd_op.full (directly, or as the op a chain of reshard ops starts from); with "
          "r_to_p mended (tests/planner_mutant_edits.py r_to_p_mesh_first, through the "
          "--paddle-file overlay) verify generate seed 0 plans 0, 65, 80, 91 and 158 (dp x "
          "mp and stage meshes, pipelines, gradient merge, ShardingStage3) all pass",
          pattern=r"stage reshard \((pd_op\.full %|[^()]*, from pd_op\.full %)"),
]


@dataclass
class Outcome:
    name: str
    spec: dict
    status: str  # pass | known | finding | rejected | inconclusive
    verdict: str
    why: str = ""
    known: str = ""
    failing: list = field(default_factory=list)  # [(check name, rank, first line)]
    seconds: float = 0.0
    plan_dir: str = ""  # the planned dir (its ranks' coverage.json)

    def signature(self) -> tuple:
        """What a shrunk spec must keep to be the same failure."""
        return (self.status, self.verdict, tuple(sorted({f[0] for f in self.failing})))

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "verdict": self.verdict,
                "why": self.why, "known": self.known, "seconds": round(self.seconds, 1),
                "failing": [list(f) for f in self.failing], "spec": self.spec}


def write_plan(spec: dict, folder: Path) -> Path:
    """``folder/model.py`` (the generic model file, copied) and ``model.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MODEL, folder / "model.py")
    (folder / "model.json").write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n")
    return folder / "model.py"


def make_case(model: Path, spec: dict, name: str, trace: bool = True):
    """A planner case of the generated model file (absolute paths: outside
    ``examples/``), built with the helper the built-in planner cases use."""
    import dataclasses

    from cases.base import Expect
    from cases.planner_models import _case

    case = _case(name, f"generated: {model}", str(model.resolve()), spec["mesh"],
                 Expect(True, "EQUIVALENT", "a generated plan: every check must hold"),
                 uses=[str(model.with_suffix(".json").resolve())])
    return dataclasses.replace(case, params={**case.params, "trace": trace})


def _first_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _error_line(check) -> str:
    """What went wrong, as the traceback says it (``verdicts.error_line``:
    not a warning a killed process printed last), else the message's line."""
    from verify.verdicts import error_line

    tb = (check.details or {}).get("traceback") or ""
    return error_line(tb)[:300] if tb.strip() else _first_line(check.message)


def classify(app, name: str, spec: dict, seconds: float) -> Outcome:
    verdict = app.verdict.value
    bad = [c for c in app.checks if not c.ok and not c.advisory]
    failing = [(c.name, c.rank, _error_line(c)) for c in bad]
    if verdict == "EQUIVALENT":
        return Outcome(name, spec, "pass", verdict, seconds=seconds)
    text = " ".join(c.message + str((c.details or {}).get("traceback", "")) for c in bad)
    if any(c.name == "build" and "outside the planner's stages" in c.message for c in bad):
        why = re.sub(r"^.*outside the planner's stages: ", "", _first_line(
            next(c.message for c in bad if c.name == "build")))
        return Outcome(name, spec, "rejected", verdict, why=why, failing=failing,
                       seconds=seconds)
    if verdict in FINDING_VERDICTS:
        for k in KNOWN:
            if k.matches(verdict, text):
                return Outcome(name, spec, "known", verdict, why=k.reason, known=k.name,
                               failing=failing, seconds=seconds)
        return Outcome(name, spec, "finding", verdict, why=failing[0][2] if failing else "",
                       failing=failing, seconds=seconds)
    return Outcome(name, spec, "inconclusive", verdict,
                   why=failing[0][2] if failing else "", failing=failing, seconds=seconds)


def judge(spec: dict, folder: Path, name: str) -> Outcome:
    """Plan ``spec`` into ``folder`` and check it with the planner family."""
    import time

    from passes.planner import ADAPTER
    from verify.engine.application import run_application

    t = time.perf_counter()
    model = write_plan(spec, folder)
    case = make_case(model, spec, name)
    app = run_application(ADAPTER, case, numeric=lambda *a: [])
    out = classify(app, name, spec, time.perf_counter() - t)
    from cases.planner_models import planned_dir

    try:  # where its coverage trace is (the plan cache)
        out.plan_dir = str(planned_dir(case))
    except Exception:
        out.plan_dir = ""
    return out


def reproduce_command(spec_file: Path) -> str:
    return f"python -m verify generate --replay {spec_file}"


def write_failure(out: Outcome, folder: Path) -> Path:
    """The failing spec (shrunk) with the command reproducing it."""
    spec_file = folder / "model.json"
    (folder / "FAILURE.txt").write_text(
        f"{out.verdict}: {out.why}\nfailing checks: {out.failing}\n"
        f"reproduce: {reproduce_command(spec_file)}\n")
    return spec_file
