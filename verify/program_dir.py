"""Program directories: per-rank planned programs on disk, as a case.

``python -m verify plan MODEL.py --ranks N --out DIR`` writes one; a user's
own script may write one too.  ``python -m verify run --program-dir DIR``
(or ``--case-file DIR``) applies every pass to it with every check.

Format ``paddle-pass-verify/program-dir``, version 1
----------------------------------------------------
::

    DIR/plan.json
        {"format": "paddle-pass-verify/program-dir", "version": 1,
         "name": "tiny_mlp",                 # the case name (unique)
         "mesh": [0, 1] | [[0, 1], [2, 3]],  # process mesh, last axis TP
         "rings": {"12": [[0, 1]]},          # ring_id -> groups of ranks
         "sharded_params": ["linear_0.w_0"], # values differ per TP rank
         "symbols": {"x": ["B", null, null]},# symbolic dims of fed vars
         "enable_sp": false, "amp_level": "o0",   # told to the promotion pass
         "expect": {"<pass>": {"fires": true, "verdict": "EQUIVALENT",
                               "reason": "..."}}  # optional; default: every
                                                  # pass must be EQUIVALENT
        }
    DIR/rank<R>/main.pdmodel      ProgramDesc.serialize_to_string() of the
    DIR/rank<R>/startup.pdmodel   rank's main / startup program
    DIR/rank<R>/meta.json
        {"format": ..., "version": 1, "rank": R, "world_size": N,
         "mesh": {"shape": [2], "process_ids": [0, 1], "dim_names": ["mp"]},
         "process_groups": {"12": [0, 1]},
         "feeds": [{"name": "x", "shape": [-1, 4, 8], "concrete_shape": [2, 4, 8],
                    "dtype": "float32", "split": "dp" | "tp"}],
         "loss": "mean_0.tmp_0", "fetches": ["linear_1.tmp_1"],
         "params_grads": [["linear_0.w_0", "linear_0.w_0@GRAD"], ...],
         "main":    {"ops": [per op, in order: {"type", "mesh", "inputs": {var:
                             dims_mapping}, "outputs": {...}, "execution_stream",
                             "impl_type", "impl_idx", "chunk_id", "is_recompute"}],
                     "vars": {name: {"mesh", "dims_mapping", "chunk_id"} | null}},
         "startup": {...same...}}

A PIR program dir (``python -m verify plan --ir pir``, ``verify/pir_plan.py``)
has ``"ir": "pir"`` in ``plan.json`` and per rank ``main.json`` /
``startup.json`` (PIR's own serialization, ``serialize_pir_program``),
``names.json`` (the value names of ``verify/pir_snapshot.py`` by op and
result index) and ``meta.json`` (feeds, loss and fetches by value name,
process groups, ``counter``); PIR programs carry their dist attrs themselves.

Dist attrs are recorded beside the descs because the 3.3.1 protos carry
none.  A var without a record is replicated on the default mesh; an op with
``"mesh": null`` gets no dist attr.  Readers refuse another ``format`` or a
newer ``version``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

FORMAT = "paddle-pass-verify/program-dir"
VERSION = 1


class ProgramDirError(Exception):
    """A program dir that cannot be used; the message is one line."""


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ProgramDirError(f"program dir {path.parent}: no {path.name} ({what})") from None
    except (OSError, ValueError) as exc:
        raise ProgramDirError(f"program dir {path.parent}: {path.name} is not JSON: "
                              f"{exc}") from None


def _check_format(data: dict, path: Path) -> None:
    if data.get("format") != FORMAT:
        raise ProgramDirError(f"{path}: not a {FORMAT} file (format {data.get('format')!r})")
    if not isinstance(data.get("version"), int) or data["version"] > VERSION:
        raise ProgramDirError(f"{path}: version {data.get('version')!r} is newer than "
                              f"this reader's {VERSION}")


def write_plan_json(folder, name: str, mesh: list, model: str = "", expect=None,
                    enable_sp: bool = False, ir: str = "legacy") -> Path:
    """``plan.json`` of a folder whose ``rank<R>/meta.json`` are written."""
    import numpy as np

    folder = Path(folder)
    ranks = sorted(int(r) for r in np.array(mesh).flatten())
    rings, sharded, symbols = {}, set(), {}
    for r in ranks:
        meta = _read_json(folder / f"rank{r}" / "meta.json", "the rank's record")
        for gid, members in meta.get("process_groups", {}).items():
            if int(gid) == 0 or r not in members:
                continue
            groups = rings.setdefault(str(gid), [])
            if sorted(members) not in groups:
                groups.append(sorted(members))
        params = {p for p, _ in meta.get("params_grads", [])}
        for vname, rec in (meta["main"]["vars"].items() if "main" in meta else ()):
            if vname in params and rec and any(d != -1 for d in rec["dims_mapping"]):
                sharded.add(vname)
        for f in meta["feeds"]:
            if any(d == -1 for d in f["shape"]):
                symbols[f["name"]] = ["B" if i == 0 and d == -1 else None
                                      for i, d in enumerate(f["shape"])]
    data = {"format": FORMAT, "version": VERSION, "name": name, "mesh": mesh,
            "rings": rings, "sharded_params": sorted(sharded), "symbols": symbols,
            "enable_sp": enable_sp, "amp_level": "o0", "model": model,
            "expect": expect or {}}
    if ir != "legacy":
        data["ir"] = ir
    path = folder / "plan.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def save(programs: dict, mesh: list, out, name: str, rings=None, expect=None) -> Path:
    """Write ``{rank: RankProgram}`` (live programs with their dist context)
    as a program dir; ``rings`` overrides the rings read from Paddle's
    process groups (``{ring_id: [[ranks], ...]}``)."""
    from paddle.distributed.auto_parallel.static.process_group import get_all_process_groups

    from cases.engine_planned import _mesh_record, _program_record

    out = Path(out)
    for rank, rp in programs.items():
        ctx = rp.dist_context
        meshes = [m for m in ctx.process_meshes if _mesh_record(m)]
        folder = out / f"rank{rank}"
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"format": FORMAT, "version": VERSION, "rank": rank,
                "world_size": len(programs), "mesh": _mesh_record(meshes[0]),
                "process_groups": {str(g.id): list(g.ranks) for g in get_all_process_groups()},
                "feeds": [{"name": f.name, "shape": list(rp.main.global_block().var(
                    f.name).shape), "concrete_shape": list(f.shape), "dtype": f.dtype,
                    "split": f.split} for f in rp.feeds],
                "loss": rp.loss, "fetches": [n for n in rp.fetches if n != rp.loss],
                "params_grads": [[p.name, g.name] for p, g in rp.params_grads],
                "main": _program_record(rp.main, ctx),
                "startup": _program_record(rp.startup, ctx)}
        (folder / "main.pdmodel").write_bytes(rp.main.desc.serialize_to_string())
        (folder / "startup.pdmodel").write_bytes(rp.startup.desc.serialize_to_string())
        (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    path = write_plan_json(out, name, mesh, expect=expect)
    if rings is not None:
        data = json.loads(path.read_text())
        data["rings"] = {str(k): v for k, v in rings.items()}
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return out


def build(case, rank: int):
    """A rank's RankProgram from the dir (``case.params["dir"]``)."""
    from verify.legacy_ir import paddle_module

    paddle_module()
    from paddle.distributed.auto_parallel.process_mesh import ProcessMesh
    from paddle.distributed.auto_parallel.static.dist_context import DistributedContext

    import numpy as np

    from cases.base import FeedSpec, RankProgram
    from cases.engine_planned import SEED, _annotate, _load_program

    folder = Path(case.params["dir"]) / f"rank{rank}"
    meta = _read_json(folder / "meta.json", "the rank's record")
    _check_format(meta, folder / "meta.json")
    main = _load_program(folder / "main.pdmodel")
    startup = _load_program(folder / "startup.pdmodel")
    main.random_seed = startup.random_seed = SEED
    ctx = DistributedContext(serial_main_prog=main, serial_startup_prog=startup)
    m = meta["mesh"]
    mesh = ProcessMesh(np.array(m["process_ids"]).reshape(m["shape"]).tolist(),
                       dim_names=m["dim_names"])
    ctx.add_process_mesh(mesh)
    _annotate(main, meta["main"], ctx, mesh)
    _annotate(startup, meta["startup"], ctx, mesh)
    block = main.global_block()
    feeds = []
    for f in meta["feeds"]:
        block.var(f["name"]).is_data = True
        feeds.append(FeedSpec(f["name"], tuple(f.get("concrete_shape", f["shape"])),
                              f["dtype"], f.get("split", "dp")))
    params_grads = [(block.var(p), block.var(g)) for p, g in meta["params_grads"]]
    fetches = [n for n in meta.get("fetches", []) if block.has_var(n)]
    return RankProgram(rank=rank, main=main, startup=startup, dist_context=ctx,
                       params_grads=params_grads, feeds=feeds, loss=meta.get("loss"),
                       fetches=fetches + ([meta["loss"]] if meta.get("loss") else []))


def build_pir(case, rank: int):
    """A rank's PIR RankProgram from a dir planned with ``--ir pir``."""
    from cases.base import FeedSpec
    from cases.pir_matmul_grad import PirRankProgram
    from verify.pir_plan import load_rank

    main, startup, names, meta = load_rank(Path(case.params["dir"]) / f"rank{rank}")
    feeds = [FeedSpec(f["name"], tuple(f.get("concrete_shape", f["shape"])), f["dtype"],
                      f.get("split", "dp")) for f in meta["feeds"]]
    loss = meta.get("loss")
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=[], feeds=feeds, loss=loss,
                          fetches=list(meta.get("fetches", [])) + ([loss] if loss else []),
                          names=names)


def load_program_dir(path: str):
    """The Case of a program dir; ProgramDirError (one line) on bad input."""
    import numpy as np

    import passes
    from cases.base import Case, Expect

    folder = Path(path).resolve()
    if folder.name == "plan.json":
        folder = folder.parent
    if not folder.is_dir():
        raise ProgramDirError(f"program dir {folder} does not exist")
    plan = _read_json(folder / "plan.json", "written by python -m verify plan")
    _check_format(plan, folder / "plan.json")
    for key in ("name", "mesh", "rings"):
        if key not in plan:
            raise ProgramDirError(f"{folder / 'plan.json'}: no {key!r}")
    ranks = sorted(int(r) for r in np.array(plan["mesh"]).flatten())
    ir = plan.get("ir", "legacy")
    if ir not in ("legacy", "pir"):
        raise ProgramDirError(f"{folder / 'plan.json'}: unknown ir {ir!r}")
    if ir == "pir":
        from verify.pir_plan import FILES as files
    else:
        files = ("main.pdmodel", "startup.pdmodel", "meta.json")
    for r in ranks:
        for f in files:
            if not (folder / f"rank{r}" / f).is_file():
                raise ProgramDirError(f"program dir {folder}: rank{r}/{f} is missing")
    table = passes.adapters()
    short = {a.short: n for n, a in table.items()}
    expect = {}
    for key, e in (plan.get("expect") or {}).items():
        name = short.get(key, key)
        if name not in table:
            raise ProgramDirError(f"{folder / 'plan.json'}: expect names unknown pass {key!r}")
        expect[name] = Expect(bool(e.get("fires", True)), e.get("verdict", "EQUIVALENT"),
                              e.get("reason", ""))
    case = Case(name=str(plan["name"]), family="program_dir",
                summary=f"planned {'PIR ' if ir == 'pir' else ''}programs in {folder}",
                mesh=plan["mesh"], builder=build_pir if ir == "pir" else build,
                expect={}, rings={int(k): v for k, v in plan["rings"].items()},
                symbols={k: tuple(v) for k, v in plan.get("symbols", {}).items()},
                sharded_params=frozenset(plan.get("sharded_params", [])),
                enable_sp=bool(plan.get("enable_sp", False)),
                amp_level=plan.get("amp_level", "o0"), params={"dir": str(folder)},
                source_file=str(folder), ir=ir)
    # Unstated passes must keep every value; whether they must fire is what
    # their documented pattern says on the planned programs.
    try:
        if ir == "pir":
            from verify.pir_snapshot import snapshot_rank as snap_of
        else:
            from verify.snapshot import from_programs

            def snap_of(rp):
                return from_programs(rp.main, rp.startup)
        snaps = [snap_of(rp) for rp in (case.build(r) for r in ranks)]
    except Exception as exc:
        raise ProgramDirError(f"program dir {folder} does not load: "
                              f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
                              ) from None
    for name, adapter in table.items():
        if name in expect or getattr(adapter, "ir", "legacy") != ir:
            continue
        try:
            fires = any(adapter.pattern_present(s) for s in snaps)
        except Exception:
            continue
        expect[name] = Expect(fires, "EQUIVALENT",
                              "planned programs: the pass must fire where its pattern is "
                              "present and keep every value" if fires else
                              "pattern absent from the planned programs: left alone")
    case.expect = expect
    return case


def exists(path) -> bool:
    p = Path(path)
    return p.is_dir() or p.name == "plan.json"


def describe() -> str:
    return os.linesep.join(__doc__.splitlines()[5:])
