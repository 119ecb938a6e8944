"""A program dir (``verify/plan/program_format.py``) as a case: the
built-in way to run a planned model's per-rank programs through every pass
(``python -m verify run --program-dir DIR``)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from verify import cache_files
from verify.plan import schema
from verify.plan.program_format import (FORMAT, VERSION, ProgramDirError, _check_format,
                                        _read_json)


def build(case, rank: int):
    """A rank's RankProgram from the dir (``case.params["dir"]``)."""
    from verify.ir.legacy_ir import paddle_module

    paddle_module()
    from cases.base import FeedSpec, RankProgram
    from cases.engine_planned import load_annotated

    folder = Path(case.params["dir"]) / f"rank{rank}"
    meta = _read_json(folder / "meta.json", "the rank's record")
    _check_format(meta, folder / "meta.json")
    main, startup, ctx = load_annotated(folder, meta)
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
    from cases.pir_matmul_grad import LazyPirRankProgram
    from verify.plan.pir_rank import load_rank, rank_data

    from verify.ir.origin import digest

    folder = Path(case.params["dir"]) / f"rank{rank}"
    # every file this function and load_rank read, by content (not path)
    files = {n: (folder / n).read_bytes() if (folder / n).is_file() else None
             for n in _RANK_FILES}
    plan_digest = digest(rank, *(b"<absent>" if b is None else b for b in files.values()))
    data, meta = rank_data(folder, files)

    def load():  # the programs of exactly the bytes digested above
        main, startup, names, _ = load_rank(folder, (data, meta))
        return main, startup, names

    feeds = [FeedSpec(f["name"], tuple(f.get("concrete_shape", f["shape"])), f["dtype"],
                      f.get("split", "dp")) for f in meta["feeds"]]
    loss = meta.get("loss")
    if loss is None:  # planned before format version 3: its meta names only a 0-D mean
        import paddle

        from verify.ir.loss_seed import seeded_loss

        main, startup, names = load()
        with paddle.pir_utils.IrGuard():
            loss = seeded_loss(main, names)
        loaded = (main, startup, names)
        load = lambda: loaded  # noqa: E731
    # main, startup and names deserialized on first read: a stamped rank
    # whose snapshot is cached is never deserialized (verify/engine/origins.py)
    rp = LazyPirRankProgram(load, rank=rank, dist_context=None,
                            params_grads=[], feeds=feeds, loss=loss,
                            fetches=list(meta.get("fetches", [])) + ([loss] if loss else []),
                            placements=_placements_of(files["planner.json"]),
                            plan_digest=plan_digest)
    if files["planner.json"] is not None:  # {"k_steps", "avg"} of a merged plan
        rp.merge = json.loads(files["planner.json"]).get("gradient_merge")
    return rp


# the files of a PIR rank folder build_pir reads (load_rank, recorded_placements)
_RANK_FILES = ("meta.json", "main.json", "startup.json", "names.json", "planner.json")


def recorded_placements(folder: Path) -> dict:
    """``{var: placement record}`` of the parameters and persistable states
    the rank's final program reads (``planner.json``'s ``final_ops``, as the
    planner recorded them before dist2dense); empty without the record."""
    path = folder / "planner.json"
    return _placements_of(path.read_bytes() if path.is_file() else None)


_PLACEMENTS: dict = {}  # sha256 of planner.json's bytes -> its placements


def _placements_of(data: bytes | None) -> dict:
    """``recorded_placements`` of ``planner.json``'s bytes, remembered by
    their digest in this process and on disk (``<cache>/placements/``): the
    record is ~1 MB of stage snapshots per zoo rank, parsed for a few dozen
    names every time a rank is built.  A copy per call."""
    import copy
    import hashlib

    if data is None:
        return {}
    key = hashlib.sha256(b"placements/1\0" + data).hexdigest()
    got = _PLACEMENTS.get(key)
    if got is None:
        path = cache_files.root() / "placements" / f"{key}.json"
        # one entry of verify/cache_files.py: key and digest checked, anything
        # else (damaged, edited, not a dict) a miss, parsed anew and rewritten
        got = cache_files.read_entry(path, key, json.loads, lambda v: isinstance(v, dict))
        if got is cache_files.MISS:
            got = {}
            for op in json.loads(data).get("final_ops", []):
                if op.get("type") in ("builtin.parameter", "pd_op.data") and \
                        op.get("results") and op.get("placements") and \
                        op["placements"][0] is not None:
                    got[op["results"][0]] = op["placements"][0]
            cache_files.write_entry(path, key, json.dumps(got).encode())
        _PLACEMENTS[key] = got
    return copy.deepcopy(got)


def load_program_dir(path: str):
    """The Case of a program dir; ProgramDirError (one line) on bad input."""
    import passes
    from cases.base import Case, Expect

    folder = Path(path).resolve()
    if folder.name == "plan.json":
        folder = folder.parent
    if not folder.is_dir():
        raise ProgramDirError(f"program dir {folder} does not exist")
    plan = _read_json(folder / "plan.json", "written by python -m verify plan")
    if isinstance(plan, dict) and plan.get("format") != FORMAT:
        _check_format(plan, folder / "plan.json")  # "not a ... file": one message for all
    # every file read below is validated first (types, ranges, versions): a
    # field of the wrong shape is one line naming file and field
    ranks = sorted(schema.check_plan(folder, plan))
    ir = plan.get("ir", "legacy")
    if ir == "pir":
        from verify.plan.pir_rank import FILES as files
    else:
        files = ("main.pdmodel", "startup.pdmodel", "meta.json")
    # every file read below or by the passes is a regular file inside the dir
    # (no symlink out, FIFO, device; no absolute or '..' path in planner.json)
    from verify.plan.dir_files import check_paths

    check_paths(folder, ranks, ir, files)
    for r in ranks:
        for f in files:
            if not (folder / f"rank{r}" / f).is_file():
                raise ProgramDirError(f"program dir {folder}: rank{r}/{f} is missing")
    for r in ranks:
        schema.check_rank(folder, r, ranks, ir)
    table = passes.adapters()
    short = {a.short: n for n, a in table.items()}
    expect = {}
    for key, e in (plan.get("expect") or {}).items():
        name = short.get(key, key)
        if name not in table:
            raise ProgramDirError(f"{folder / 'plan.json'}: expect names unknown pass {key!r}")
        expect[name] = Expect(bool(e.get("fires", True)), e.get("verdict", "EQUIVALENT"),
                              e.get("reason", ""))
    name = str(plan["name"])
    from cases import all_cases

    if name in all_cases():  # a user's plan of a model file a built-in case plans too
        name = f"{name}@{folder.name}"
    case = Case(name=name, family="program_dir",
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
            from verify.ir.pir_snapshot import snapshot_rank as snap_of
        else:
            from verify.ir.snapshot import from_programs

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
