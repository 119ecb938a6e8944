"""The one validator of the files a program dir holds (the format is in
``verify/plan/program_format.py``): ``plan.json``, each rank's ``meta.json``,
and a PIR rank's ``names.json`` and ``planner.json``.

Every reader of a program dir (``cases/program_dirs.py``) runs these checks
before it uses a field, so a file of the wrong shape is one line naming the
file and the field (:class:`ProgramDirError`, exit 2 on the command line),
never a traceback deep in a reader nor a wrong verdict (a mesh ``[0, -1]``
once planned ``NOT_EQUIVALENT``).  Plain Python checks, no dependency.

What is checked (types and ranges; fields a reader does not need may be
absent where the format says so):

* ``plan.json``: ``format``; ``version`` an int from 1 to the suite's
  ``VERSION``; ``name`` a non-empty string; ``mesh`` a non-empty, regular
  (rectangular) nested list of distinct non-negative ints; ``rings`` a dict
  ``{int ring id: [[ranks of the mesh], ...]}``; ``symbols`` a dict ``{fed
  var: [dim symbol (str) or null, ...]}``; ``sharded_params`` a list of
  strings; ``enable_sp`` a bool; ``amp_level`` o0 / o1 / o2; ``ir`` legacy /
  pir; ``expect`` a dict ``{pass: {"fires": bool, "verdict": a verdict,
  "reason": str}}``; ``model`` a string; ``planner_failed`` a dict ``{rank:
  str}``.
* ``rank<R>/meta.json``: ``format``, ``version`` as above; ``rank`` equal to
  R; ``world_size`` the number of mesh ranks; ``mesh`` ``{shape,
  process_ids, dim_names}`` with its process ids in the plan's mesh;
  ``process_groups`` ``{int id: [non-negative ranks]}``; ``feeds`` a list of
  ``{name, shape (ints >= -1), concrete_shape (ints >= 0), dtype, split
  (dp | tp)}``; ``loss`` a string or null; ``fetches`` a list of strings;
  legacy dirs: ``params_grads`` a list of ``[param, grad]`` name pairs and
  ``main`` / ``startup`` ``{"ops": [...], "vars": {...}}``; PIR dirs:
  ``counter`` a non-negative int, ``block_kwargs`` a list.
* PIR ``rank<R>/names.json``: a list of lists of value names (str or null).
* PIR ``rank<R>/planner.json`` (when present): ``version`` an int not newer
  than the suite's; ``stages``, ``not_run``, ``final_ops`` lists;
  ``gradient_merge`` null or ``{"k_steps": int >= 1, "avg": bool}``;
  ``eager_gradients`` null or ``{"with_grad", "without_grad": [str], "error":
  str or null}``.
"""
from __future__ import annotations

import json
from pathlib import Path

from verify.plan.program_format import FORMAT, VERSION, ProgramDirError

AMP_LEVELS = ("o0", "o1", "o2")
IRS = ("legacy", "pir")
SPLITS = ("dp", "tp")


class _Bad(Exception):
    """``(field, why)`` of the first check that failed."""


def _fail(field: str, why: str):
    raise _Bad(field, why)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(v, field: str, lo=None, hi=None) -> int:
    if not _is_int(v):
        _fail(field, f"must be an integer, not {_show(v)}")
    if lo is not None and v < lo:
        _fail(field, f"must be >= {lo}, not {v}")
    if hi is not None and v > hi:
        _fail(field, f"must be <= {hi}, not {v}")
    return v


def _str(v, field: str, empty_ok: bool = False) -> str:
    if not isinstance(v, str) or (not empty_ok and not v.strip()):
        _fail(field, f"must be a {'' if empty_ok else 'non-empty '}string, not {_show(v)}")
    return v


def _bool(v, field: str) -> bool:
    if not isinstance(v, bool):
        _fail(field, f"must be true or false, not {_show(v)}")
    return v


def _list(v, field: str, nonempty: bool = False) -> list:
    if not isinstance(v, list):
        _fail(field, f"must be a list, not {_show(v)}")
    if nonempty and not v:
        _fail(field, "must not be empty")
    return v


def _dict(v, field: str) -> dict:
    if not isinstance(v, dict):
        _fail(field, f"must be an object (dict), not {_show(v)}")
    return v


def _show(v) -> str:
    text = json.dumps(v) if _jsonable(v) else repr(v)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(v).__name__ if not isinstance(v, (list, dict)) else _kind(v)} {text}"


def _kind(v) -> str:
    return "a list" if isinstance(v, list) else "an object"


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _ring_id(k, field: str) -> int:
    try:
        rid = int(k)
    except (TypeError, ValueError):
        rid = None
    if rid is None or str(rid) != str(k).strip() or rid < 0:
        _fail(field, f"key {k!r} is not a non-negative integer ring id")
    return rid


def _header(data, field_prefix: str = "") -> None:
    if data.get("format") != FORMAT:
        _fail("format", f"not a {FORMAT} file (format {data.get('format')!r})")
    v = data.get("version")
    if not _is_int(v) or v < 1:
        _fail("version", f"must be an integer from 1 to {VERSION}, not {_show(v)}")
    if v > VERSION:
        _fail("version", f"{v} is newer than this suite's {VERSION}: update the suite "
                         "or re-plan with it")


def mesh_ranks(mesh, field: str = "mesh") -> list:
    """The ranks of a mesh (a non-empty regular nested list of distinct
    non-negative ints), in order; ``_Bad`` otherwise."""
    def shape(v, where):
        if _is_int(v):
            if v < 0:
                _fail(field, f"{where} is {v}: ranks are non-negative")
            return ()
        if not isinstance(v, list):
            _fail(field, f"{where} must be a rank (non-negative int) or a list, "
                         f"not {_show(v)}")
        if not v:
            _fail(field, f"{where} is an empty list" if where != field else
                  "must not be empty")
        subs = [shape(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if any(s != subs[0] for s in subs):
            _fail(field, f"{where} is not rectangular (rows of different shapes)")
        return (len(v),) + subs[0]

    if not isinstance(mesh, list):
        _fail(field, f"must be a non-empty list of ranks (or of lists), not {_show(mesh)}")
    shape(mesh, field)

    def flat(v):
        return [v] if _is_int(v) else [r for x in v for r in flat(x)]

    ranks = flat(mesh)
    dup = sorted({r for r in ranks if ranks.count(r) > 1})
    if dup:
        _fail(field, f"holds rank(s) {dup} more than once")
    return ranks


def _check_plan(plan, ranks_out: list) -> None:
    _dict(plan, "(top level)")
    _header(plan)
    if "name" not in plan:
        _fail("name", "is missing")
    _str(plan["name"], "name")
    if "mesh" not in plan:
        _fail("mesh", "is missing")
    ranks = mesh_ranks(plan["mesh"])
    ranks_out[:] = ranks
    ir = plan.get("ir", "legacy")
    if ir not in IRS:
        _fail("ir", f"must be one of {', '.join(IRS)}, not {_show(ir)}")
    if "rings" not in plan:
        _fail("rings", "is missing")
    rings = _dict(plan["rings"], "rings")
    for k, groups in rings.items():
        _ring_id(k, "rings")
        _list(groups, f"rings[{k!r}]")
        for i, g in enumerate(groups):
            _list(g, f"rings[{k!r}][{i}]", nonempty=True)
            for r in g:
                _int(r, f"rings[{k!r}][{i}]", lo=0)
                if r not in ranks:
                    _fail(f"rings[{k!r}][{i}]", f"names rank {r}, not in the mesh {ranks}")
            if len(set(g)) != len(g):
                _fail(f"rings[{k!r}][{i}]", f"holds a rank twice: {g}")
    symbols = _dict(plan.get("symbols", {}), "symbols")
    for k, dims in symbols.items():
        _str(k, "symbols (a key)")
        _list(dims, f"symbols[{k!r}]")
        for d in dims:
            if d is not None and (not isinstance(d, str) or not d.strip()):
                _fail(f"symbols[{k!r}]", f"each dim is a symbol name or null, not {_show(d)}")
    for n in _list(plan.get("sharded_params", []), "sharded_params"):
        _str(n, "sharded_params")
    _bool(plan.get("enable_sp", False), "enable_sp")
    if plan.get("amp_level", "o0") not in AMP_LEVELS:
        _fail("amp_level", f"must be one of {', '.join(AMP_LEVELS)}, "
                           f"not {_show(plan.get('amp_level'))}")
    _str(plan.get("model", ""), "model", empty_ok=True)
    expect = plan.get("expect")
    if expect is not None:
        from verify.verdicts import Verdict

        verdicts = [v.value for v in Verdict]
        for p, e in _dict(expect, "expect").items():
            _dict(e, f"expect[{p!r}]")
            if "fires" in e:
                _bool(e["fires"], f"expect[{p!r}].fires")
            if e.get("verdict", "EQUIVALENT") not in verdicts:
                _fail(f"expect[{p!r}].verdict", f"must be one of {', '.join(verdicts)}, "
                                                 f"not {_show(e.get('verdict'))}")
            _str(e.get("reason", ""), f"expect[{p!r}].reason", empty_ok=True)
    failed = plan.get("planner_failed")
    if failed is not None:
        for k, m in _dict(failed, "planner_failed").items():
            _ring_id(k, "planner_failed")
            _str(m, f"planner_failed[{k!r}]", empty_ok=True)


def _dims(v, field: str, lo: int) -> None:
    for d in _list(v, field):
        _int(d, field, lo=lo)


def _check_meta(meta, rank: int, ranks: list, ir: str) -> None:
    _dict(meta, "(top level)")
    _header(meta)
    if "rank" in meta and _int(meta["rank"], "rank", lo=0) != rank:
        _fail("rank", f"is {meta['rank']}, but the file is in rank{rank}/")
    if "world_size" in meta and _int(meta["world_size"], "world_size", lo=1) != len(ranks):
        _fail("world_size", f"is {meta['world_size']}, but the plan's mesh has "
                            f"{len(ranks)} rank(s)")
    mesh = meta.get("mesh")
    if mesh is not None:
        _dict(mesh, "mesh")
        for d in _list(mesh.get("shape", []), "mesh.shape"):
            _int(d, "mesh.shape", lo=1)
        for r in _list(mesh.get("process_ids", []), "mesh.process_ids"):
            _int(r, "mesh.process_ids", lo=0)
            if r not in ranks:
                _fail("mesh.process_ids", f"names rank {r}, not in plan.json's mesh {ranks}")
        for n in _list(mesh.get("dim_names", []), "mesh.dim_names"):
            _str(n, "mesh.dim_names")
    for k, members in _dict(meta.get("process_groups", {}), "process_groups").items():
        _ring_id(k, "process_groups")
        for r in _list(members, f"process_groups[{k!r}]"):
            _int(r, f"process_groups[{k!r}]", lo=0)
    if "feeds" not in meta:
        _fail("feeds", "is missing")
    for i, f in enumerate(_list(meta["feeds"], "feeds")):
        where = f"feeds[{i}]"
        _dict(f, where)
        _str(f.get("name"), f"{where}.name")
        _dims(f.get("shape"), f"{where}.shape", lo=-1)
        if "concrete_shape" in f:
            _dims(f["concrete_shape"], f"{where}.concrete_shape", lo=0)
        _str(f.get("dtype"), f"{where}.dtype")
        if f.get("split", "dp") not in SPLITS:
            _fail(f"{where}.split", f"must be one of {', '.join(SPLITS)}, "
                                    f"not {_show(f.get('split'))}")
    if meta.get("loss") is not None:
        _str(meta["loss"], "loss")
    for n in _list(meta.get("fetches", []), "fetches"):
        _str(n, "fetches")
    if ir == "legacy":
        for i, pg in enumerate(_list(meta.get("params_grads"), "params_grads")):
            if not isinstance(pg, list) or len(pg) != 2:
                _fail(f"params_grads[{i}]", f"must be a [param, grad] pair, not {_show(pg)}")
            _str(pg[0], f"params_grads[{i}]")
            _str(pg[1], f"params_grads[{i}]")
        for part in ("main", "startup"):
            rec = _dict(meta.get(part), part)
            _list(rec.get("ops"), f"{part}.ops")
            _dict(rec.get("vars"), f"{part}.vars")
    else:
        _int(meta.get("counter"), "counter", lo=0)
        _list(meta.get("block_kwargs", []), "block_kwargs")


def _check_names(names) -> None:
    for i, row in enumerate(_list(names, "(top level)")):
        for n in _list(row, f"[{i}]"):
            if n is not None and not isinstance(n, str):
                _fail(f"[{i}]", f"value names are strings or null, not {_show(n)}")


def _check_planner(rec) -> None:
    _dict(rec, "(top level)")
    v = rec.get("version")
    if v is not None:
        _int(v, "version", lo=1)
        if v > VERSION:
            _fail("version", f"{v} is newer than this suite's {VERSION}: update the suite "
                             "or re-plan with it")
    for key in ("stages", "not_run", "final_ops"):
        if key in rec:
            _list(rec[key], key)
    for i, st in enumerate(rec.get("stages", [])):
        _dict(st, f"stages[{i}]")
    gm = rec.get("gradient_merge")
    if gm is not None:
        _dict(gm, "gradient_merge")
        _int(gm.get("k_steps"), "gradient_merge.k_steps", lo=1)
        _bool(gm.get("avg", False), "gradient_merge.avg")
    eg = rec.get("eager_gradients")
    if eg is not None:
        _dict(eg, "eager_gradients")
        for key in ("with_grad", "without_grad"):
            for i, n in enumerate(_list(eg.get(key, []), f"eager_gradients.{key}")):
                _str(n, f"eager_gradients.{key}[{i}]")
        if eg.get("error") is not None:
            _str(eg["error"], "eager_gradients.error")


def _read(path: Path, data=None):
    if data is None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ProgramDirError(f"{path}: no such file") from None
        except OSError as exc:
            raise ProgramDirError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return json.loads(data, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise ProgramDirError(f"{path}: not UTF-8 text: {exc.reason} at byte "
                              f"{exc.start}") from None
    except ValueError as exc:
        raise ProgramDirError(f"{path}: is not JSON: {exc}") from None


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _run(check, path: Path, *args) -> None:
    try:
        check(*args)
    except _Bad as bad:
        field, why = bad.args
        raise ProgramDirError(f"{path}: {field}: {why}") from None


def check_plan(folder: Path, plan) -> list:
    """Validate ``plan.json``'s data; returns the mesh's ranks in order."""
    ranks: list = []
    _run(_check_plan, Path(folder) / "plan.json", plan, ranks)
    return ranks


def check_rank(folder: Path, rank: int, ranks: list, ir: str, files: dict | None = None
               ) -> None:
    """Validate ``rank<R>/``'s JSON files (``files``: ``{name: bytes}`` read
    already, the rest read here); ProgramDirError naming file and field."""
    files = files or {}
    d = Path(folder) / f"rank{rank}"
    _run(_check_meta, d / "meta.json", _read(d / "meta.json", files.get("meta.json")),
         rank, ranks, ir)
    if ir != "pir":
        return
    _run(_check_names, d / "names.json", _read(d / "names.json", files.get("names.json")))
    planner = files.get("planner.json")
    if planner is not None or (d / "planner.json").is_file():
        _run(_check_planner, d / "planner.json", _read(d / "planner.json", planner))
