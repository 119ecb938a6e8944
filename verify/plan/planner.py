"""``python -m verify plan MODEL.py --ranks N [--mesh M] --out DIR``.

Plans a model written in plain Paddle (see ``examples/tiny_mlp.py`` for what
the file defines) with Paddle's own auto-parallel planner, the legacy
``Engine`` on CPU, for every rank, and writes the per-rank programs and all
the passes need to DIR in the program-dir format (``verify/plan/program_format.py``).

Each rank is planned in a fresh subprocess (``python -m verify.plan.planner --rank
R ...``) because the Engine reads ``PADDLE_TRAINER_ID`` /
``PADDLE_TRAINERS_NUM`` when Paddle's distributed env is first queried and
leaves global state behind; as in ``cases/engine_planned.py`` it gets a
synthetic cluster and its ``_init_comm`` / ``_initialize`` are no-ops
(planning without running); everything else is the planner's own code.
Strategy: ``auto_mode = "semi"``, ``sp_optimization.enable = False``, the
passes under test left off (the suite applies them); ``--strategy FILE``
(JSON: ``{"sp_optimization": {"enable": true}, "seed": 7}``) and then the
model file (``configure(strategy)``) may change it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verify.plan.common import SEED, PlanError, load_model, parse_mesh, read_strategy

_REPO = Path(__file__).resolve().parents[2]


def _plan_rank(model_path: str, rank: int, mesh: list, out_dir: Path,
               strategy_settings=None) -> None:
    """In the rank's subprocess: plan and write rank<R>/ (main, startup, meta)."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    import numpy as np
    from paddle.distributed.auto_parallel.static import parallelizer_v2
    from paddle.distributed.auto_parallel.static.cluster import Cluster
    from paddle.distributed.auto_parallel.static.process_group import (
        get_all_process_groups,
    )
    from paddle.distributed.fleet import auto

    from verify.plan.records import mesh_record as _mesh_record
    from verify.plan.records import program_record as _program_record
    from verify.plan.program_format import FORMAT, VERSION

    nranks = int(np.array(mesh).size)
    paddle.static.default_main_program().random_seed = SEED
    paddle.static.default_startup_program().random_seed = SEED
    names = ["mp"] if np.array(mesh).ndim == 1 else ["dp", "mp"]
    pmesh = auto.ProcessMesh(mesh, dim_names=names)
    model = load_model(model_path)
    layer = model.build_model(pmesh)
    opt = model.optimizer(layer.parameters())
    strategy = auto.Strategy()
    strategy.auto_mode = "semi"
    strategy.seed = SEED
    strategy.sp_optimization.enable = False
    for key, value in (strategy_settings or {}).items():
        if isinstance(value, dict):  # a section: {"sp_optimization": {"enable": true}}
            section = getattr(strategy, key)
            for k, v in value.items():
                setattr(section, k, v)
        else:
            setattr(strategy, key, value)
    if hasattr(model, "configure"):
        model.configure(strategy)
    cluster = Cluster()
    cluster.gen_default_config_cluster(node_count=1, device_count=nranks)
    engine = auto.Engine(layer, model.loss, opt, cluster=cluster, strategy=strategy)
    engine._init_comm = lambda: None
    engine._initialize = lambda *a, **k: None
    seen = {}
    original_post = parallelizer_v2.Parallelizer._apply_post_optimization

    def recording_post(self, main_program, startup_program, rank_, params_grads):
        seen["params_grads"] = [[p.name, g.name] for p, g in params_grads]
        return original_post(self, main_program, startup_program, rank_, params_grads)

    parallelizer_v2.Parallelizer._apply_post_optimization = recording_post
    try:
        engine.prepare(inputs_spec=list(model.inputs), labels_spec=list(model.labels),
                       mode="train")
    finally:
        parallelizer_v2.Parallelizer._apply_post_optimization = original_post
    ctx = engine._dist_contexts["train"]
    main = ctx.dist_main_programs[rank]
    startup = ctx.dist_startup_programs[rank]
    batch = int(getattr(model, "BATCH", 2))
    feeds = []
    for var in list(ctx.serial_feed_vars["inputs"]) + list(ctx.serial_feed_vars["labels"]):
        v = main.global_block().var(var.name)
        shape = [int(d) for d in v.shape]
        feeds.append({"name": v.name, "shape": shape,
                      "concrete_shape": [batch if d == -1 else d for d in shape],
                      "dtype": paddle.base.data_feeder.convert_dtype(v.dtype),
                      "split": "dp"})
    loss = ctx.serial_loss
    loss = loss[0] if isinstance(loss, (list, tuple)) else loss
    meta = {
        "format": FORMAT, "version": VERSION, "rank": rank, "world_size": nranks,
        "paddle_version": paddle.__version__, "paddle_commit": paddle.version.commit,
        "mesh": _mesh_record(pmesh),
        "process_groups": {str(g.id): list(g.ranks) for g in get_all_process_groups()},
        "feeds": feeds, "loss": loss.name,
        "fetches": [v.name for v in ctx.serial_fetch_vars["outputs"]],
        "params_grads": seen.get("params_grads", []),
        "main": _program_record(main, ctx), "startup": _program_record(startup, ctx),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "main.pdmodel").write_bytes(main.desc.serialize_to_string())
    (out_dir / "startup.pdmodel").write_bytes(startup.desc.serialize_to_string())
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def plan(model_path: str, ranks: int, mesh_text=None, out=None, timeout=600.0,
         strategy_path=None, ir: str = "legacy", keep_stage_failures: bool = False) -> Path:
    """Plan every rank (in parallel subprocesses) and write the program dir;
    ``ir="pir"`` plans with ``dist.to_static`` (``verify/plan/pir_rank.py``).
    ``keep_stage_failures``: where every rank that failed did so inside a
    planner stage (its records say which; a process killed there gets them
    from ``crash_records.py``), the dir is kept with ``plan.json``'s
    ``planner_failed`` instead of raising (the planner family reports the
    stage)."""
    if ir not in ("legacy", "pir"):
        raise PlanError(f"--ir {ir!r}: expected legacy or pir")
    if ir == "pir" and strategy_path:
        raise PlanError("--strategy applies to the legacy Engine; a PIR model file sets "
                        "its own placements")
    settings = read_strategy(strategy_path)
    from verify.plan.program_format import write_plan_json

    model_path = os.path.abspath(model_path)
    if not os.path.isfile(model_path):
        raise PlanError(f"model file {model_path} does not exist")
    if ranks < 1:
        raise PlanError("--ranks must be at least 1")
    mesh = parse_mesh(mesh_text, ranks)
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        raise PlanError(f"output directory {out} exists and is not empty")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".plan-", dir=out.parent))
    procs = {}
    env0 = {k: v for k, v in os.environ.items() if not k.startswith("PADDLE_")}
    for r in range(ranks):
        if ir == "pir":
            from verify.plan import pir_rank as pir_plan

            procs[r] = subprocess.Popen(
                pir_plan.command(r, model_path, mesh, tmp / f"rank{r}"), cwd=str(_REPO),
                env=pir_plan.plan_env(r, ranks, _REPO), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            continue
        env = dict(env0, PADDLE_TRAINER_ID=str(r), PADDLE_TRAINERS_NUM=str(ranks),
                   FLAGS_enable_pir_api="0",
                   PYTHONPATH=os.pathsep.join([str(_REPO)] + [p for p in [
                       os.environ.get("PYTHONPATH")] if p]))
        procs[r] = subprocess.Popen(
            [sys.executable, "-m", "verify.plan.planner", "--rank", str(r), "--model", model_path,
             "--mesh-json", json.dumps(mesh), "--rank-dir", str(tmp / f"rank{r}"),
             "--strategy-json", json.dumps(settings)],
            cwd=str(_REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
    from verify.plan.crash_records import how_it_died, write_killed

    errors, in_stage = [], {}
    for r, p in procs.items():
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            errors.append(f"rank {r}: planning timed out after {timeout:g} s")
            continue
        if p.returncode != 0:
            lines = [ln for ln in (se or so).strip().splitlines() if ln.strip()]
            errors.append(f"rank {r}: {lines[-1] if lines else how_it_died(p.returncode)}")
            rank_dir = tmp / f"rank{r}"
            if ir == "pir" and ((rank_dir / "planner.json").is_file()
                                or write_killed(rank_dir, p.returncode, se or so)):
                in_stage[r] = lines[-1] if lines else how_it_died(p.returncode)
    if errors and keep_stage_failures and len(in_stage) == len(errors):
        from verify.plan.program_format import write_failed_plan_json

        write_failed_plan_json(tmp, Path(model_path).stem, mesh, in_stage)
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
        return out
    if errors:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise PlanError("planning failed: " + "; ".join(errors[:2]))
    sp = bool((settings.get("sp_optimization") or {}).get("enable", False))
    write_plan_json(tmp, name=Path(model_path).stem, mesh=mesh, model=model_path,
                    enable_sp=sp, ir=ir)
    if out.exists():
        out.rmdir()
    os.rename(tmp, out)
    return out


def _main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python -m verify.plan.planner")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mesh-json", required=True)
    ap.add_argument("--rank-dir", required=True)
    ap.add_argument("--strategy-json", default="{}")
    a = ap.parse_args(argv)
    if os.environ.get("PADDLE_TRAINER_ID") != str(a.rank):
        print("run through `python -m verify plan`", file=sys.stderr)
        return 2
    t = time.time()
    _plan_rank(a.model, a.rank, json.loads(a.mesh_json), Path(a.rank_dir),
               json.loads(a.strategy_json))
    print(f"rank {a.rank} planned in {time.time() - t:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
