"""``python -m verify plan MODEL.py --ir pir --ranks N --out DIR``: plan a
model with Paddle's PIR auto-parallel path (``dist.to_static``) for every
rank and write a PIR program dir (``verify/plan/program_format.py``, ``"ir": "pir"``).

A PIR model file is written in Paddle 3.x's own style (see
``examples/tiny_mlp_pir.py``): ``build_model(mesh)`` returns a
``paddle.nn.Layer`` whose parameters are placed with
``dist.shard_tensor(param, mesh, [dist.Shard(d) | dist.Replicate()])`` on the
``dist.ProcessMesh`` it is given (dim names ``["mp"]``, or ``["dp", "mp"]``
for ``--mesh DPxTP``, or the model file's ``MESH_DIMS``, e.g. ``["pp", "mp"]``
for a pipeline: ``examples/pipeline_of.py``); ``loss``, ``optimizer(parameters)``, ``inputs`` and
``labels`` (``InputSpec`` lists, the first dim the batch, ``-1`` allowed
there only) and ``BATCH`` as for the legacy planner; integer inputs (token
ids) are drawn from ``[0, VOCAB)`` (``VOCAB`` of the model file, default 2).
Optional: ``wrap_optimizer(opt, mesh)`` (e.g. ``dist.shard_optimizer``) and
``configure(strategy)`` (the legacy planner's hook, ``verify/plan/planner.py``),
the one place a model file (a case) sets the planner's strategy: it is given
a fresh ``dist.Strategy()`` to set (e.g. ``strategy.gradient_merge.enable =
True; ...k_steps = 2``), which ``dist.to_static`` then plans with; without it
no strategy is passed (Paddle's default, as before the hook).  A gradient
merge the planner applied is recorded (``planner.json``'s ``gradient_merge``).

How each rank is planned (in a fresh subprocess, ``python -m verify.plan.pir_rank
--rank R ...``, because Paddle reads ``PADDLE_TRAINER_ID`` and friends once
and keeps global state): the model, a ``DataLoader`` of seeded samples of the
input specs' shapes wrapped by ``dist.shard_dataloader`` (batch split over
``dp`` when the mesh has it), ``dist.to_static(layer, loader, loss, opt)``,
``.train()`` -- which runs ``Engine._parallel_pir``: completion, partition,
reshard, the passes of the default strategy -- with ``Engine._init_comm``
and ``Engine._initialize`` replaced by no-ops (planning without running: no
communicators, no startup run; measured on 3.3.1 CPU: 0.2 s per rank).

What is written per rank: the planner's *dense* main program (the per-rank
program ``Engine`` executes: local shapes, no dist types:
``_pir_dense_main_progs``) and its startup program (``_pir_dist_startup_progs``:
the parameters' initial fill; it runs on CPU), in PIR's own serialization,
with the value-name table of ``verify.ir.pir_snapshot`` (so every tool names
values alike), plus ``meta.json`` (feeds with concrete shapes, the loss
value -- the value the backward is seeded from, ``verify/ir/loss_seed.py``,
whatever computes it --, the model output values, the process groups).  One attr is dropped
before serialization: ``chunk_id`` on ``builtin.parameter`` ops, which
3.3.1's serializer refuses (``attr name chunk_id not supposed be
serialized in WriteParameterOP``); it is a pipeline-chunk tag no pass under
test reads.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

SEED = 1234
FILES = ("main.json", "startup.json", "names.json", "meta.json")


def _load_model(path: str):
    from verify.plan.common import PlanError
    from verify.plan.common import load_model as load

    module = load(path, "examples/tiny_mlp_pir.py")
    for spec_ in list(module.inputs) + list(module.labels):
        if any(d == -1 for d in list(spec_.shape)[1:]):
            raise PlanError(f"model file {path}: input {spec_.name} {list(spec_.shape)} has "
                            "a dynamic dim after the batch dim; a PIR plan needs concrete ones")
    return module


def mesh_dims(model, mesh) -> list:
    """The mesh's dim names: the model file's ``MESH_DIMS`` (e.g. ``["pp",
    "mp"]`` for a pipeline), else ``["mp"]`` for a 1-D mesh and ``["dp",
    "mp"]`` for a 2-D one."""
    import numpy as np

    from verify.plan.common import PlanError

    ndim = np.array(mesh).ndim
    names = getattr(model, "MESH_DIMS", None)
    if names is None:
        return ["mp"] if ndim == 1 else ["dp", "mp"]
    names = [str(n) for n in names]
    if len(names) != ndim:
        raise PlanError(f"the model file's MESH_DIMS {names} name {len(names)} dims; the "
                        f"mesh {mesh} has {ndim}")
    return names


def _samples(model, batch: int) -> list:
    """Two batches of seeded samples of the input specs' per-sample shapes
    (inputs then labels), the loader's and the eager step's
    (``verify/plan/eager_grads.py``)."""
    import numpy as np

    specs = list(model.inputs) + list(model.labels)
    rng = np.random.default_rng(SEED)
    vocab = int(getattr(model, "VOCAB", 2))

    def sample(s):  # integer inputs (token ids) from [0, VOCAB), floats normal
        shape, dtype = [int(d) for d in list(s.shape)[1:]], str(s.dtype).replace("paddle.", "")
        if "int" in dtype:
            return rng.integers(0, vocab, shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    return [tuple(sample(s) for s in specs) for _ in range(batch * 2)]


def _loader(model, batch: int, mesh):
    """The seeded samples (:func:`_samples`), batched."""
    import paddle
    import paddle.distributed as dist

    samples = _samples(model, batch)

    class Samples(paddle.io.Dataset):
        def __getitem__(self, i):
            return samples[i]

        def __len__(self):
            return len(samples)

    loader = paddle.io.DataLoader(Samples(), batch_size=batch, shuffle=False)
    shard_dims = "dp" if "dp" in mesh.dim_names else None
    _numpy2_process_mesh_rank()
    meshes = [mesh]
    if "pp" in mesh.dim_names:  # inputs on the first stage's mesh, labels on the last's
        stages = mesh.get_mesh_with_dim("pp")
        meshes = [stages[0], stages[len(stages.process_ids) // max(
            1, len(stages[0].process_ids)) - 1]]
    return dist.shard_dataloader(loader, meshes=meshes, shard_dims=shard_dims)


def _numpy2_process_mesh_rank() -> None:
    """3.3.1's ``ProcessMesh.get_rank_by_dim_and_process_id`` (which
    ``shard_dataloader`` calls for a ``dp`` dim) does ``int(np.where(...)[i])``
    on a 1-element array, an error since NumPy 2.4 ("only 0-dimensional arrays
    can be converted to Python scalars"): every DP plan fails there.  The
    planning process gets the same lookup with the element taken first; the
    planner's own stages are untouched."""
    import numpy as np
    from paddle.distributed.auto_parallel.process_mesh import ProcessMesh

    def get_rank_by_dim_and_process_id(self, dim, process_id):
        if dim is None:
            return 0
        name = self._dim_names[dim] if isinstance(dim, int) else dim
        return int(np.where(self._mesh == process_id)[self._dim_names.index(name)][0])

    ProcessMesh.get_rank_by_dim_and_process_id = get_rank_by_dim_and_process_id


def _plan_rank(model_path: str, rank: int, mesh: list, out_dir: Path) -> None:
    """In the rank's subprocess (PIR mode): plan and write rank<R>/."""
    import numpy as np
    import paddle
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static.engine import Engine
    from paddle.distributed.auto_parallel.static.process_group import (
        get_all_process_groups,
    )

    from verify.ir.pir_snapshot import export_programs, from_pir_programs, value_names
    from verify.plan.program_format import FORMAT, VERSION

    from verify.plan import stages as planner_capture

    # Plan without running: no communicators, no startup run.
    Engine._init_comm = lambda self: None
    Engine._initialize = lambda self, *a, **k: None
    # Record the program after every planner stage (verify/plan/stages.py).
    capture = planner_capture.Capture()
    from verify.plan.crash_records import TRACE

    capture.trace = out_dir / TRACE  # names the stage running (a SIGABRT leaves it)
    planner_capture.install(capture)
    planner_capture.install_engine_hook(capture)
    paddle.seed(SEED)
    model = _load_model(model_path)
    names_ = mesh_dims(model, mesh)
    pmesh = dist.ProcessMesh(mesh, dim_names=names_)
    batch = int(getattr(model, "BATCH", 2))
    # the eager step's gradients (the lost-gradient check's reference), on the
    # loader's first batch, before the plan's build; then the seed again
    from verify.plan.eager_grads import by_param_name, eager_gradients

    first = _samples(model, batch)[:batch]
    eager = eager_gradients(model, names_, rank, [np.stack(col) for col in zip(*first)])
    paddle.seed(SEED)
    layer = model.build_model(pmesh)
    capture.eager_gradients = by_param_name(eager, layer)
    opt = model.optimizer(layer.parameters())
    if hasattr(model, "wrap_optimizer"):  # e.g. dist.shard_optimizer(opt, ShardingStage1)
        opt = model.wrap_optimizer(opt, pmesh)
    kwargs = {}
    if hasattr(model, "configure"):  # the case's planner strategy (docstring)
        kwargs["strategy"] = dist.Strategy()
        model.configure(kwargs["strategy"])
        st = kwargs["strategy"]
        if st.gradient_merge.enable or st.pipeline.enable:  # the engine then merges
            capture.optional.add("gradient_merge")  # so "not run" names it after a crash
        if st._recompute.enable:  # the engine's recompute pass (train mode)
            capture.optional.add("recompute")
    dm = dist.to_static(layer, _loader(model, batch, pmesh), model.loss, opt, **kwargs)
    try:
        dm.train()
    except Exception:
        if any(st["error"] for st in capture.stages):  # a planner stage raised
            planner_capture.write(capture, out_dir)
        raise
    engine = dm._engine
    gm = engine._strategy.gradient_merge  # the strategy the planner used
    capture.gradient_merge = ({"k_steps": int(gm.k_steps), "avg": bool(gm.avg)}
                              if gm.enable and int(gm.k_steps) > 1 else None)
    main = engine._pir_dense_main_progs["train"]
    startup = engine._pir_dist_startup_progs["train"]
    with paddle.pir_utils.IrGuard():
        for prog in (main, startup):
            for op in prog.global_block().ops:
                if op.name().startswith("builtin.") and op.has_attr("chunk_id"):
                    op.erase_attr("chunk_id")  # 3.3.1's serializer refuses it here
        names = value_names(main)
        snap = from_pir_programs(main, startup, names)
        exported = export_programs(main, startup, names)
    feeds = []  # the dense program's feeds have local shapes; a -1 is the local batch
    local = batch // (np.array(mesh).shape[names_.index("dp")] if "dp" in names_ else 1)
    for n in snap.feeds:
        shape = [int(d) for d in snap.vars[n].shape]
        feeds.append({"name": n, "shape": shape,
                      "concrete_shape": [local if d == -1 else d for d in shape],
                      "dtype": snap.vars[n].dtype, "split": "dp"})
    with paddle.pir_utils.IrGuard():  # the loss: the value the backward is seeded from
        loss = planner_capture.loss_value(main)
        loss_name = names.name(loss) if loss is not None else None
    meta = {
        "format": FORMAT, "version": VERSION, "ir": "pir", "rank": rank,
        "world_size": int(np.array(mesh).size),
        "paddle_version": paddle.__version__, "paddle_commit": paddle.version.commit,
        "mesh": {"shape": list(np.array(mesh).shape), "process_ids": list(
            np.array(mesh).flatten().tolist()), "dim_names": names_},
        "process_groups": {str(g.id): list(g.ranks) for g in get_all_process_groups()},
        "feeds": feeds, "loss": loss_name, "fetches": [],
        "counter": exported["counter"],
        # the keyword block arguments (a gradient merge's accumulators) with their
        # readers: PIR's serializer drops them, import_programs adds them back
        "block_kwargs": exported["kwargs"],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    with paddle.pir_utils.IrGuard():
        planner_capture.write(capture, out_dir, main, names)
    (out_dir / "main.json").write_bytes(exported["main"])
    (out_dir / "startup.json").write_bytes(exported["startup"])
    (out_dir / "names.json").write_text(json.dumps(exported["names"]))
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def rank_data(folder: Path, files: dict | None = None):
    """``(exported programs, meta)`` of a PIR rank folder, as
    :func:`load_rank` imports them, without importing; ``files``: ``{file
    name: bytes}`` already read (the rest is read here)."""
    files = files or {}

    def read(name):
        got = files.get(name)
        return got if got is not None else (folder / name).read_bytes()

    meta = json.loads(read("meta.json"))
    data = {"main": read("main.json"), "startup": read("startup.json"),
            "names": json.loads(read("names.json")), "counter": meta["counter"],
            "kwargs": meta.get("block_kwargs", [])}
    return data, meta


def load_rank(folder: Path, read=None):
    """``(main, startup, names, meta)`` of a PIR rank folder (PIR mode is
    entered here: call from any process); ``read``: its :func:`rank_data`."""
    import paddle

    from verify.ir.pir_snapshot import import_programs

    data, meta = read if read is not None else rank_data(folder)
    with paddle.pir_utils.IrGuard():
        main, startup, names = import_programs(data)
    return main, startup, names, meta


def rings_of(folder: Path, ranks) -> dict:
    """``{ring_id: [ranks]}`` of the collectives the planned programs use,
    from the process groups the planner recorded."""
    rings = {}
    for r in ranks:
        meta = json.loads((folder / f"rank{r}" / "meta.json").read_text())
        for gid, members in meta["process_groups"].items():
            if int(gid) != 0:
                groups = rings.setdefault(int(gid), [])
                # the group's order as recorded: a send's ``peer`` indexes it
                if list(members) not in groups:
                    groups.append(list(members))
    return rings


def plan_env(rank: int, nranks: int, repo: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDLE_")}
    ports = [6170 + i for i in range(nranks)]
    env.update(PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(nranks),
               PADDLE_TRAINER_ENDPOINTS=",".join(f"127.0.0.1:{p}" for p in ports),
               PADDLE_CURRENT_ENDPOINT=f"127.0.0.1:{ports[rank]}",
               FLAGS_enable_pir_api="1",
               PYTHONPATH=os.pathsep.join([str(repo)] + [p for p in [
                   os.environ.get("PYTHONPATH")] if p]))
    return env


def command(rank: int, model_path: str, mesh: list, rank_dir: Path) -> list:
    return [sys.executable, "-m", "verify.plan.pir_rank", "--rank", str(rank), "--model",
            model_path, "--mesh-json", json.dumps(mesh), "--rank-dir", str(rank_dir)]


def _main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python -m verify.plan.pir_rank")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mesh-json", required=True)
    ap.add_argument("--rank-dir", required=True)
    a = ap.parse_args(argv)
    if os.environ.get("PADDLE_TRAINER_ID") != str(a.rank):
        print("run through `python -m verify plan --ir pir`", file=sys.stderr)
        return 2
    t = time.time()
    if os.environ.get("VERIFY_PLANNER_TRACE"):  # the planner's lines that ran (coverage)
        from verify.plan.coverage_trace import FILE, traced

        with traced(Path(a.rank_dir) / FILE):
            _plan_rank(a.model, a.rank, json.loads(a.mesh_json), Path(a.rank_dir))
    else:
        _plan_rank(a.model, a.rank, json.loads(a.mesh_json), Path(a.rank_dir))
    print(f"rank {a.rank} planned (PIR) in {time.time() - t:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
