"""Program directories: per-rank planned programs on disk, as a case.

``python -m verify plan MODEL.py --ranks N --out DIR`` writes one; a user's
own script may write one too.  ``python -m verify run --program-dir DIR``
(or ``--case-file DIR``) applies every pass to it with every check.

Format ``paddle-pass-verify/program-dir``, version 3
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

A PIR program dir (``python -m verify plan --ir pir``, ``verify/plan/pir_rank.py``)
has ``"ir": "pir"`` in ``plan.json`` and per rank ``main.json`` /
``startup.json`` (PIR's own serialization, ``serialize_pir_program``),
``names.json`` (the value names of ``verify/ir/pir_snapshot.py`` by op and
result index) and ``meta.json`` (feeds, loss and fetches by value name,
process groups, ``counter``, and ``block_kwargs``: the main program's keyword
block arguments, e.g. a gradient merge's accumulators, with their readers,
which PIR's serializer drops on 3.3.1; absent in dirs planned before it, whose
merged programs then read null operands); PIR programs carry their dist attrs
themselves.

Version 2 (PIR dirs planned since the planner family, ``passes/planner.py``)
adds the planner's own records per rank; a reader of version 2 reads version
1 dirs unchanged (they have no planner records, and the planner family does
not pair with them)::

    DIR/rank<R>/planner.json      {"version" (since 3), "gradient_merge"
                                  (since 3: {"k_steps", "avg"} | null), "stages": [{"stage",
                                  "error" (traceback |
                                  null), "snapshot": "stages/<i>_<stage>.json",
                                  "shapes": "global" | "local", "ops"}],
                                  "not_run": [stage, ...], "serial_error",
                                  "serial_relation" / "relation": {"params":
                                  {name: {"param", "grad" (value names),
                                  "placement", "grad_placement", "shape",
                                  "dtype", "optimizer"}}, "parameters", "feeds",
                                  "loss", "loss_placement"} of the serial and
                                  the final program, "final_ops": [per op of
                                  the final program: type, origin stage, serial
                                  op, results, placements, serial value names,
                                  operands]}
    DIR/rank<R>/stages/*.json     each stage's program (suite snapshot form)
    DIR/rank<R>/serial.json       the serial program made executable on
                                  global tensors (PIR serialization + names)

Version 3 (PIR dirs): the loss (``meta.json``'s ``loss``, the records'
``"loss"`` / ``"loss_placement"``) is the value the backward is seeded from
(``verify/ir/loss_seed.py``), whatever computes it; version 2 named only a
0-D ``pd_op.mean`` (none for paddleformers' ``sum / count``, whose loss the
planner relation then never compared).  Version 2 records still read, but
the planner family does not reuse them: it says to re-plan
(``passes/planner.py``; the plan caches are keyed by the planning modules'
source, so a cached plan is re-planned).

A placement is ``{"process_ids", "mesh_shape", "dims_mapping", "partial":
{mesh axis: "SUM" | "AVG" | "MAX" | ...}}`` (``verify/plan/stages.py``).

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
# 2: PIR dirs may hold the planner's stage records (above); 3: the loss recorded
# is the backward's seed (above); 1 and 2 still read
VERSION = 3
# the oldest version whose planner records the planner family uses (the loss)
PLANNER_RECORDS_SINCE = 3


from verify.plan.dir_files import ProgramDirError  # noqa: E402,F401  (its home is below)


def _read_json(path: Path, what: str) -> dict:
    """The JSON of ``path``, a regular file inside its folder (never a
    symlink out, a FIFO or a device: ``verify/plan/dir_files.py``)."""
    from verify.plan.dir_files import read_regular

    path = Path(path)
    if not os.path.lexists(path):
        raise ProgramDirError(f"program dir {path.parent}: no {path.name} ({what})")
    try:
        return json.loads(read_regular(path.parent, path.name))
    except (OSError, ValueError) as exc:
        raise ProgramDirError(f"program dir {path.parent}: {path.name} is not JSON: "
                              f"{exc}") from None


def _check_format(data: dict, path: Path) -> None:
    if data.get("format") != FORMAT:
        raise ProgramDirError(f"{path}: not a {FORMAT} file (format {data.get('format')!r})")
    if not isinstance(data.get("version"), int) or data["version"] > VERSION:
        raise ProgramDirError(f"{path}: version {data.get('version')!r} is newer than "
                              f"this reader's {VERSION}")


def write_failed_plan_json(folder, name: str, mesh: list, failed: dict) -> Path:
    """``plan.json`` of a PIR plan whose planner failed inside a stage on the
    ranks of ``failed`` (``{rank: last error line}``): their records say
    which stage (``planner.json``, or ``crash_records.py``'s for a process
    killed there); no rank program to run, so no rings."""
    path = Path(folder) / "plan.json"
    path.write_text(json.dumps({
        "format": FORMAT, "version": VERSION, "name": name, "mesh": mesh, "rings": {},
        "ir": "pir", "planner_failed": {str(r): m for r, m in failed.items()}},
        indent=1, sort_keys=True))
    return path


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
            # the group's order as recorded: a send's ``peer`` indexes it
            if list(members) not in groups:
                groups.append(list(members))
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

    from verify.plan.records import mesh_record as _mesh_record
    from verify.plan.records import program_record as _program_record

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


def exists(path) -> bool:
    p = Path(path)
    return p.is_dir() or p.name == "plan.json"


def describe() -> str:
    return os.linesep.join(__doc__.splitlines()[5:])
