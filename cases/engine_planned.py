"""Per-rank programs planned by Paddle's own auto-parallel ``Engine``.

Every other family spells its ops out by hand; this one asks the installed
Paddle's planner (``paddle.distributed.fleet.auto.Engine``, legacy
ProgramDesc path) to write the programs, so the passes meet exactly what a
user of 3.3.1 would hand them.  The model is a GPT-style MLP block on a 1-D
mesh ``[0, 1]`` (dim ``mp``, TP 2)::

    h   = layer_norm(x)                      # replicated (pre-LN, as in GPT)
    a   = act(h @ W1 + b1)                   # column parallel: W1 [H, F/2], b1 [F/2]
    out = (a @ W2) -> all_reduce -> + b2     # row parallel: W2 [F/2, H], b2 replicated
    loss = mean((out - y)^2)                 # paddle.nn.MSELoss
    optimizer: SGD or AdamW

The layer norm is there so that ``x``'s branch needs a gradient: without it
the feed ``x`` is ``stop_gradient`` and the planner emits no backward
collective for the column-parallel linear at all (no ``X@GRAD``), so the
pattern ``allreduce_matmul_grad_overlapping`` targets would simply be absent.
With it, the planner emits ``matmul_v2_grad -> all_reduce(dX)`` (in place).

How the programs are made
-------------------------
The Engine plans the rank given by ``PADDLE_TRAINER_ID`` /
``PADDLE_TRAINERS_NUM``, read when Paddle's distributed env is first queried,
and it leaves global state behind (default dist context, process groups), so
each rank is planned in a fresh subprocess::

    python -m cases.engine_planned --plan RANK OUT_DIR [--params JSON]

(it re-executes itself with the right environment when started by hand).
On this CPU build the Engine gets a synthetic cluster
(``Cluster().gen_default_config_cluster(node_count=1, device_count=2)``);
``Engine._init_comm`` (instantiating process groups = real communicators)
and ``Engine._initialize`` (running the startup program) are replaced by
no-ops, because we plan without running.  Everything else (build, complete,
partition, backward, optimizer, reshard, post-optimization passes) is the
planner's own code.  The strategy is the default one except:

* ``auto_mode = "semi"``;
* ``sp_optimization.enable = False`` (its 3.3.1 default is True; the cases
  here are ``enable_sp=False``);
* ``fused_linear_promotion`` and ``mp_optimization.allreduce_matmul_grad_
  overlapping`` stay at their default (off): we want the programs *before*
  the passes under test, which the suite applies itself.  (In 3.3.1 the
  planner would run the promotion pass only with ``fused_passes`` and
  ``fuse_gemm_epilogue`` enabled, and that pass exists only in CUDA builds.)

The subprocess writes ``main.pdmodel`` / ``startup.pdmodel`` (serialized
``ProgramDesc`` of ``dist_main_programs[rank]`` / ``dist_startup_programs
[rank]``) and ``meta.json``.  Dist attrs do NOT survive serialization in
3.3.1 (``OpDesc``/``VarDesc`` protos have no dist-attr field; parsed ops and
vars come back with an empty process mesh), so ``meta.json`` records the
planner's dist attr of every op and var of both programs (process mesh, dims
mappings, execution stream, impl, chunk) plus the ``params_grads`` the
Parallelizer handed to its post-optimization passes, the feeds, the loss, the
outputs and the process groups.  The builder parses the programs back and
rebuilds a ``DistributedContext`` from that record.

Planned programs are cached under ``$PADDLE_PASS_VERIFY_CACHE`` (default
``~/.cache/paddle-pass-verify``)``/engine_planned/<paddle version>-<commit>/
<key>/rank<N>/``, the key hashing the case params, this file's source and the
``--paddle-file`` overlay (a changed planner module plans apart); a cold plan takes 2-5 s of wall time for both ranks planned in parallel on
2 CPUs (``engine.prepare`` itself 0.1-0.5 s per rank, the rest is importing
Paddle); a warm build only parses the cache (about 0.01 s per rank).
Concurrent builders wait on a lock file instead of planning twice.

What is skipped on CPU: only ``_init_comm`` and ``_initialize`` (above).
Nothing of the planning itself.

What the planner produces (3.3.1, both ranks alike; per-rank shapes)::

    layer_norm, matmul_v2, elementwise_add, gelu|relu, matmul_v2, all_reduce,
    elementwise_add, elementwise_sub, square, reduce_mean, fill_constant,
    reduce_mean_grad, square_grad, elementwise_sub_grad, elementwise_add_grad,
    matmul_v2_grad, gelu_grad|relu_grad, elementwise_add_grad, matmul_v2_grad,
    all_reduce, layer_norm_grad, 6 x sgd|adamw
    startup: fill/uniform inits, broadcast of the replicated params
    (layer_norm w/b, linear_1.b_0), fill of the lr (and the AdamW states)

Both TP collectives are in-place ``all_reduce`` on ring 12 (the planner's
process group [0, 1]; group 0, the world group, is used by no op), so there
is a single ring and real gloo ranks run these programs faithfully.

Observed outcomes (recorded in ``expect``):

* ``allreduce_matmul_grad_overlapping``: NOT_APPLIED.  The column-parallel
  ``matmul_v2_grad -> all_reduce(dX)`` is there, but the pass matches only
  ``c_allreduce_sum``.  (Respelled as ``c_allreduce_sum`` the pass does fire:
  equivalent on the static [2,4,8] batch, and it raises on the [-1,4,8] one
  with the reshape target [-4, 8], as in the hand-built family.)
* ``auto_parallel_fused_linear_promotion``: fires on both ranks and the
  rewrite is numerically equivalent (loss, parameters).  Side effects a
  checker must expect: the forward output ``linear_1.tmp_1`` no longer exists
  after the pass (rank 0 writes ``linear_1.tmp_1@promote_N``, rank 1 reads
  ``linear_1.tmp_0@promote_N`` downstream), so it is not in ``fetches``; the
  pass deletes entries of the ``params_grads`` list it is given in place
  (rank 1 loses ``linear_1.b_0``), so an adapter must hand it a copy.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from verify.plan.records import mesh_record as _mesh_record
from verify.plan.records import program_record as _program_record

from .base import Case, Expect, FeedSpec, RankProgram
from .column_parallel import SPELLING_EV

OVERLAP = "allreduce_matmul_grad_overlapping"
PROMOTION = "auto_parallel_fused_linear_promotion"

H, FFN, B, S = 8, 16, 2, 4
MESH = [0, 1]
DIM_NAMES = ["mp"]


def mesh_of(params: dict):
    """(nested process ids, dim names, flat ranks) of the planned mesh:
    ``params["mesh"]`` (nested ids, e.g. ``[[0, 1], [2, 3]]`` for DP2 x TP2,
    dims ``dp``, ``mp``) or the default 1-D ``[0, 1]``."""
    nested = params.get("mesh") or MESH
    flat = sorted(int(r) for r in np.array(nested).flatten())
    if np.array(nested).ndim == 2:
        return nested, ["dp", "mp"], flat
    return nested, (["dp"] if params.get("parallel") == "dp" else DIM_NAMES), flat
SEED = 1234
# Bump when the on-disk format changes (the source hash covers the rest).
PLAN_FORMAT = 1
_REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# planning (runs in a subprocess, one per rank)
# ---------------------------------------------------------------------------
def _activation(x, kind):
    """Append ``kind`` (gelu/relu) with LayerHelper: in legacy mode the
    functional API (``F.gelu``) raises "must be Value, but got Variable"."""
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(kind)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    attrs = {"approximate": False} if kind == "gelu" else {}
    helper.append_op(type=kind, inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs=attrs)
    return out


def _plan(rank: int, out_dir: Path, params: dict) -> None:
    """Plan ``rank`` with the Engine and write the programs and meta.json."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    from paddle import nn
    from paddle.distributed.auto_parallel.static import parallelizer_v2
    from paddle.distributed.auto_parallel.static.cluster import Cluster
    from paddle.distributed.auto_parallel.static.process_group import (
        get_all_process_groups,
    )
    from paddle.distributed.fleet import auto
    from paddle.static import InputSpec

    nested, dim_names, ranks = mesh_of(params)
    nranks = len(ranks)
    if paddle.distributed.get_rank() != rank or \
            paddle.distributed.get_world_size() != nranks:
        raise RuntimeError(
            f"planning rank {rank}/{nranks} but Paddle sees rank "
            f"{paddle.distributed.get_rank()}/{paddle.distributed.get_world_size()}"
            " (PADDLE_TRAINER_ID/PADDLE_TRAINERS_NUM must be set before import)")

    paddle.static.default_main_program().random_seed = SEED
    paddle.static.default_startup_program().random_seed = SEED
    # "parallel": "mp" (default, the TP2 model) or "dp" (DP2: parameters
    # replicated, the batch of x sharded along the mesh dim "dp")
    data_parallel = params.get("parallel", "mp") == "dp"
    mesh = auto.ProcessMesh(nested, dim_names=dim_names)
    act = params.get("act", "gelu")

    class MLPBlock(nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(H)
            self.fc1 = nn.Linear(H, FFN)   # column parallel
            # row parallel; without bias in the sequence-parallel variant, so
            # that reshard's split directly follows the all_reduce
            self.fc2 = nn.Linear(FFN, H, bias_attr=False if params.get("sp") else None)

        def forward(self, x):
            if "dp" in dim_names:  # the batch of x split along the data-parallel dim
                auto.shard_tensor(x, mesh, ["dp", None, None])
            if data_parallel:
                return self.fc2(_activation(self.fc1(self.norm(x)), act))
            auto.shard_tensor(self.fc1.weight, mesh, [None, "mp"])
            auto.shard_tensor(self.fc1.bias, mesh, ["mp"])
            auto.shard_tensor(self.fc2.weight, mesh, ["mp", None])
            h = self.fc1(self.norm(x))
            out = self.fc2(_activation(h, act))
            if params.get("sp"):
                # sequence parallel after the row-parallel linear (as Paddle's
                # own SP test marks it): replicated, then sharded along dim 0,
                # so reshard splits the all_reduce's result
                auto.shard_tensor(out, mesh, [None, None, None])
                out = _activation(out, "relu")
                auto.shard_tensor(out, mesh, ["mp", None, None])
            return out

    model = MLPBlock()
    # "grad_clip": a clip norm -> ClipGradByGlobalNorm on the optimizer
    clip = paddle.nn.ClipGradByGlobalNorm(float(params["grad_clip"])) \
        if params.get("grad_clip") else None
    if params.get("optimizer", "sgd") == "adamw":
        opt = paddle.optimizer.AdamW(learning_rate=0.01, weight_decay=0.01,
                                     parameters=model.parameters(), grad_clip=clip)
    else:
        opt = paddle.optimizer.SGD(learning_rate=0.1,
                                   parameters=model.parameters(), grad_clip=clip)
    strategy = auto.Strategy()
    strategy.auto_mode = "semi"
    strategy.seed = SEED
    # off: the suite applies the passes itself; "sp_default" keeps 3.3.1's
    # default (True), so the planner runs the SP optimization pass itself
    strategy.sp_optimization.enable = bool(params.get("sp_default"))
    # "strategy": {"dp_optimization.enable": True, ...} overrides
    for path, value in (params.get("strategy") or {}).items():
        *owners, field = path.split(".")
        obj = strategy
        for o in owners:
            obj = getattr(obj, o)
        setattr(obj, field, value)
    cluster = Cluster()
    cluster.gen_default_config_cluster(node_count=1, device_count=nranks)
    engine = auto.Engine(model, nn.MSELoss(), opt, cluster=cluster,
                         strategy=strategy)
    # Plan without running: no communicators, no startup run.
    engine._init_comm = lambda: None
    engine._initialize = lambda *a, **k: None

    # Record the params_grads the Parallelizer hands to its post passes
    # (the list the promotion pass would get inside the planner).
    seen = {}
    original_post = parallelizer_v2.Parallelizer._apply_post_optimization

    def recording_post(self, main_program, startup_program, rank_, params_grads):
        seen["params_grads"] = [[p.name, g.name] for p, g in params_grads]
        if params.get("post") is False:
            # "post": False keeps the programs as partition + reshard left
            # them, before the post-partition passes (the suite applies them)
            return None
        return original_post(self, main_program, startup_program, rank_,
                             params_grads)

    parallelizer_v2.Parallelizer._apply_post_optimization = recording_post
    batch = -1 if params.get("dynamic_batch") else B
    t1 = time.time()
    try:
        engine.prepare(inputs_spec=[InputSpec([batch, S, H], "float32", "x")],
                       labels_spec=[InputSpec([batch, S, H], "float32", "y")],
                       mode="train")
    finally:
        parallelizer_v2.Parallelizer._apply_post_optimization = original_post
    t_plan = time.time() - t1

    ctx = engine._dist_contexts["train"]
    main = ctx.dist_main_programs[rank]
    startup = ctx.dist_startup_programs[rank]
    feeds = []
    for var in list(ctx.serial_feed_vars["inputs"]) + list(ctx.serial_feed_vars["labels"]):
        v = main.global_block().var(var.name)
        feeds.append({"name": v.name, "shape": list(v.shape),
                      "dtype": paddle.base.data_feeder.convert_dtype(v.dtype)})
    outputs = [v.name for v in ctx.serial_fetch_vars["outputs"]]
    loss = ctx.serial_loss
    loss = loss[0] if isinstance(loss, (list, tuple)) else loss
    meta = {
        "format": PLAN_FORMAT,
        "paddle_version": paddle.__version__,
        "paddle_commit": paddle.version.commit,
        "rank": rank,
        "world_size": nranks,
        "params": params,
        "mesh": {"shape": list(np.array(nested).shape), "process_ids": ranks,
                 "dim_names": list(mesh.dim_names)},
        "process_meshes": [_mesh_record(m) for m in ctx.process_meshes],
        "process_groups": {str(g.id): list(g.ranks) for g in get_all_process_groups()},
        "feeds": feeds,
        "loss": loss.name,
        "outputs": outputs,
        "params_grads": seen.get("params_grads", []),
        "main": _program_record(main, ctx),
        "startup": _program_record(startup, ctx),
        "plan_seconds": round(t_plan, 3),  # engine.prepare only
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "main.pdmodel").write_bytes(main.desc.serialize_to_string())
    (out_dir / "startup.pdmodel").write_bytes(startup.desc.serialize_to_string())
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def _plan_env(rank: int, nranks: int = len(MESH)) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDLE_")}
    env.update({"PADDLE_TRAINER_ID": str(rank),
                "PADDLE_TRAINERS_NUM": str(nranks),
                "FLAGS_enable_pir_api": "0",
                "PYTHONPATH": os.pathsep.join(
                    [str(_REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p])})
    return env


def _plan_command(rank: int, out_dir: Path, params: dict) -> list:
    return [sys.executable, "-m", "cases.engine_planned", "--plan", str(rank),
            str(out_dir), "--params", json.dumps(params, sort_keys=True)]


# ---------------------------------------------------------------------------
# cache
# ---------------------------------------------------------------------------
def _paddle_tag() -> str:
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    return f"{paddle.__version__}-{paddle.version.commit[:12]}"


def cache_root() -> Path:
    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "paddle-pass-verify"
    return root / "engine_planned" / _paddle_tag()


def _plan_key(params: dict) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"format": PLAN_FORMAT, "params": params,
                         "mesh": MESH}, sort_keys=True).encode())
    h.update(Path(__file__).read_bytes())
    from verify.plan import source_digest_parts  # the records it writes live there

    for part in source_digest_parts():
        h.update(part)
    # a --paddle-file / premerge overlay (a changed planner module, e.g. a
    # dist operator) plans apart: the installed Paddle's plan is not its plan
    from verify.ir.paddle_overlay import fingerprint

    h.update(fingerprint().encode())
    return h.hexdigest()


def planned_dir(params: dict, timeout: float = 300.0) -> Path:
    """Directory holding ``rank<N>/`` for every rank, planning if needed.

    Ranks are planned in parallel subprocesses into a temporary directory
    that is renamed into place, so no builder ever sees a half-written plan;
    concurrent builders (pytest -n) of the same case wait on a lock file for
    the first one instead of planning again.
    """
    from verify.cache_files import cached_dir

    key = _plan_key(params)  # the full sha256; the dir's name is a prefix
    final = cache_root() / key[:16]
    # sealed with the full key and every file's sha256 (verify/cache_files.py):
    # a damaged or edited plan is planned again
    return cached_dir(final, key, lambda: _plan_all(final, params, timeout),
                      lambda f: _complete(f, params))


def _complete(folder: Path, params: dict | None = None) -> bool:
    ranks = mesh_of(params or {})[2]
    return all((folder / f"rank{r}" / "meta.json").is_file() for r in ranks)


def _plan_all(final: Path, params: dict, timeout: float) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=".plan-", dir=final.parent))
    started = time.time()
    ranks = mesh_of(params)[2]
    procs = {r: subprocess.Popen(_plan_command(r, tmp / f"rank{r}", params),
                                 cwd=str(_REPO), env=_plan_env(r, len(ranks)),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
             for r in ranks}
    errors = []
    for r, p in procs.items():
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            errors.append(f"rank {r}: planning timed out after {timeout}s")
            continue
        if p.returncode != 0:
            tail = "\n".join((err or out).strip().splitlines()[-25:])
            errors.append(f"rank {r}: exit {p.returncode}\n{tail}")
            continue
        # wall time of the rank's planning process (import + plan + save)
        (tmp / f"rank{r}" / "wall_seconds").write_text(
            f"{time.time() - started:.2f}\n")
    if errors:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError("Engine planning failed:\n" + "\n".join(errors))
    try:
        os.rename(tmp, final)
    except OSError:
        # another builder won the race; its plan is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def plan_meta(params: dict, rank: int) -> dict:
    """The planner's meta.json for ``rank`` (planning if not cached)."""
    return json.loads((planned_dir(params) / f"rank{rank}" / "meta.json").read_text())


# ---------------------------------------------------------------------------
# builder (in the suite's process)
# ---------------------------------------------------------------------------
def _load_program(path: Path):
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    return paddle.static.Program.parse_from_string(path.read_bytes())


def _annotate(program, record: dict, ctx, default_mesh) -> None:
    """Put the planner's dist attrs back on ``program``'s vars and ops."""
    from paddle.distributed.auto_parallel.process_mesh import ProcessMesh
    from paddle.distributed.auto_parallel.static.dist_attribute import (
        OperatorDistAttr,
    )
    from paddle.distributed.auto_parallel.static.utils import set_var_dist_attr

    meshes = {}

    def mesh_of(rec):
        if rec is None:
            return default_mesh
        key = json.dumps(rec, sort_keys=True)
        if key not in meshes:
            ids = np.array(rec["process_ids"]).reshape(rec["shape"]).tolist()
            meshes[key] = ProcessMesh(ids, dim_names=rec["dim_names"])
            ctx.add_process_mesh(meshes[key])
        return meshes[key]

    block = program.global_block()
    for var in block.vars.values():
        rec = record["vars"].get(var.name)
        if rec is None:
            # no planner attr (e.g. learning_rate_0 in startup): replicated
            mapping = [-1] * len(var.shape)
            mesh = default_mesh
        else:
            mapping, mesh = rec["dims_mapping"], mesh_of(rec["mesh"])
        set_var_dist_attr(ctx, var, list(mapping), mesh,
                          chunk_id=(rec or {}).get("chunk_id", 0))

    if len(block.ops) != len(record["ops"]):
        raise RuntimeError("planned program and its dist-attr record disagree "
                           f"({len(block.ops)} ops vs {len(record['ops'])})")
    for op, rec in zip(block.ops, record["ops"]):
        if op.type != rec["type"]:
            raise RuntimeError(f"op {op.type} does not match record {rec['type']}")
        if rec.get("mesh") is None:
            continue  # the planner left it without (startup fill of the lr)
        attr = OperatorDistAttr()
        for name, mapping in rec["inputs"].items():
            attr.set_input_dims_mapping(name, list(mapping))
        for name, mapping in rec["outputs"].items():
            attr.set_output_dims_mapping(name, list(mapping))
        attr.process_mesh = mesh_of(rec["mesh"])
        attr.execution_stream = rec["execution_stream"]
        attr.impl_type = rec["impl_type"]
        attr.impl_idx = rec["impl_idx"]
        attr.chunk_id = rec["chunk_id"]
        attr.is_recompute = rec["is_recompute"]
        ctx.set_op_dist_attr_for_program(op, attr)


def load_annotated(folder: Path, meta: dict):
    """(main, startup, DistributedContext) of one rank's planned legacy
    programs in ``folder``: seeded with SEED and annotated from ``meta``'s
    dist attrs on the recorded mesh (shared by the built-in planned cases
    and program dirs)."""
    from paddle.distributed.auto_parallel.process_mesh import ProcessMesh
    from paddle.distributed.auto_parallel.static.dist_context import (
        DistributedContext,
    )

    main = _load_program(folder / "main.pdmodel")
    startup = _load_program(folder / "startup.pdmodel")
    main.random_seed = startup.random_seed = SEED
    ctx = DistributedContext(serial_main_prog=main, serial_startup_prog=startup)
    rec = meta["mesh"]
    mesh = ProcessMesh(np.array(rec["process_ids"]).reshape(rec["shape"]).tolist(),
                       dim_names=rec["dim_names"])
    ctx.add_process_mesh(mesh)
    _annotate(main, meta["main"], ctx, mesh)
    _annotate(startup, meta["startup"], ctx, mesh)
    return main, startup, ctx


def build(case: Case, rank: int) -> RankProgram:
    from verify.ir.legacy_ir import paddle_module

    paddle_module()
    folder = planned_dir(case.params) / f"rank{rank}"
    meta = json.loads((folder / "meta.json").read_text())
    main, startup, ctx = load_annotated(folder, meta)

    # Ring ids are the planner's process-group ids; the case must declare them.
    rings = {int(op.attr("ring_id")) for op in main.global_block().ops
             + startup.global_block().ops if op.has_attr("ring_id")}
    unknown = rings - set(case.rings)
    if unknown:
        raise RuntimeError(f"case {case.name}: planner used rings {sorted(rings)}, "
                           f"case declares {sorted(case.rings)}")

    block = main.global_block()
    feeds = []
    for f in meta["feeds"]:
        var = block.var(f["name"])
        var.is_data = True
        concrete = tuple(B if d == -1 else d for d in f["shape"])
        feeds.append(FeedSpec(f["name"], concrete, f["dtype"]))
    params_grads = [(block.var(p), block.var(g)) for p, g in meta["params_grads"]]
    sharded = {name for name, rec in meta["main"]["vars"].items()
               if rec is not None and block.var(name).is_parameter
               and any(d != -1 for d in rec["dims_mapping"])}
    if sharded != set(case.sharded_params):
        raise RuntimeError(f"case {case.name}: planner sharded {sorted(sharded)}, "
                           f"case declares {sorted(case.sharded_params)}")
    # Forward values to compare: the activation (column-parallel, sharded)
    # and the loss.  The model output (meta["outputs"], linear_1.tmp_1) is not
    # listed: the promotion pass renames it (see the module docstring), and
    # the loss reads it, so the loss carries its comparison.
    act = case.params.get("act", "gelu")
    acts = [op.output("Out")[0] for op in block.ops if op.type == act]
    return RankProgram(rank=rank, main=main, startup=startup, dist_context=ctx,
                       params_grads=params_grads, feeds=feeds, loss=meta["loss"],
                       fetches=acts + [meta["loss"]])


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------
# The planner's only TP process group: id 12 (= Paddle's _new_ring_id() + 2
# in a fresh process), ranks [0, 1]; group 0 is the world group, unused by ops.
RING = 12

_OVERLAP_NOT_APPLIED = Expect(
    True, "NOT_APPLIED",
    "the planner emits the column-parallel dX collective as an in-place "
    "all_reduce(x, reduce_type=SUM) right after matmul_v2_grad; 3.3.1's pass "
    "matches only c_allreduce_sum, so it silently does nothing on real "
    "planned programs",
    evidence=SPELLING_EV)


_PROMOTION_FIRES = Expect(
    True, "EQUIVALENT",
    "the planner's row-parallel linear is exactly the MP pattern "
    "(matmul_v2 -> all_reduce -> elementwise_add / elementwise_add_grad -> "
    "matmul_v2_grad), so the pass fires on both ranks: rank 0 adds b2 before "
    "the all_reduce, rank 1 loses b2, its grad op, its optimizer op (and its "
    "AdamW moments/beta pows) and its startup fill+broadcast, and rank 0 "
    "drops b2's startup broadcast; loss and parameters match after 3 steps "
    "in an SPMD simulation (max |diff| < 3e-8)")


def _case(name, summary, **params):
    symbols = {"x": ("B", None, None), "y": ("B", None, None)} \
        if params.get("dynamic_batch") else {}
    return Case(name=name, family="engine_planned", summary=summary,
                mesh=list(MESH), builder=build,
                expect={OVERLAP: _OVERLAP_NOT_APPLIED, PROMOTION: _PROMOTION_FIRES},
                rings={RING: [list(MESH)]}, symbols=symbols,
                sharded_params=frozenset({"linear_0.w_0", "linear_0.b_0",
                                          "linear_1.w_0"}),
                enable_sp=False, amp_level="o0", gloo_unfaithful="",
                params=params)


CASES = [
    _case("engine_mlp_tp2_sgd",
          "Engine-planned LN -> column linear+bias -> gelu -> row linear+bias, "
          "MSE loss, SGD, TP2, x [2,4,8]",
          act="gelu", optimizer="sgd"),
    _case("engine_mlp_tp2_adamw",
          "Engine-planned LN -> column linear+bias -> relu -> row linear+bias, "
          "MSE loss, AdamW, TP2, x [-1,4,8] (dynamic batch)",
          act="relu", optimizer="adamw", dynamic_batch=True),
]


def _main(argv) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m cases.engine_planned")
    ap.add_argument("--plan", nargs=2, metavar=("RANK", "OUT_DIR"), required=True)
    ap.add_argument("--params", default="{}", help="case params as JSON")
    args = ap.parse_args(argv)
    rank, out_dir = int(args.plan[0]), Path(args.plan[1])
    params = json.loads(args.params)
    nranks = len(mesh_of(params)[2])
    if os.environ.get("PADDLE_TRAINER_ID") != str(rank) or \
            os.environ.get("PADDLE_TRAINERS_NUM") != str(nranks) or \
            os.environ.get("FLAGS_enable_pir_api") != "0":
        # Paddle is already imported (cases/__init__ -> verify.ir.legacy_ir):
        # start again with the rank's environment.
        cmd = _plan_command(rank, out_dir.resolve(), params)
        return subprocess.call(cmd, cwd=str(_REPO), env=_plan_env(rank, nranks))
    _plan(rank, out_dir, params)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
