"""Cases from a user's file (``--case-file PATH.py``), outside this package.

A case file is a Python module that builds its cases with the public case
API (:mod:`verify.case_api`) and defines ``CASES``, a list of ``Case``.
:func:`load_case_files` imports each file, checks every case field by field
and returns the cases, each carrying its file in ``Case.source_file``.

Bad input raises :class:`CaseFileError` with one line saying what is wrong
(the command line prints it and exits 2): the file is missing, does not
import (the error line, with its line number in the file), defines no
``CASES``, holds a malformed case (which case, which field), or names a
case like a built-in one or like a case of another file.

A case from a file pickles as (file, case name, its plain fields), so an
isolation worker (``verify/engine/isolation.py``) re-imports the file to get the
builder back; the module of the file is not importable by name there.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import sys
import traceback

import numpy as np

from .base import Case, Expect

VERDICTS = ("EQUIVALENT", "NOT_EQUIVALENT", "CONTRACT_BROKEN", "PASS_CRASHED",
            "NOT_APPLIED", "INCONCLUSIVE")


class CaseFileError(Exception):
    """A case file that cannot be used; the message is one line."""


class CaseBuildRefused(Exception):
    """A builder that failed in an isolation worker is not called again."""


class FileCase(Case):
    """A :class:`Case` loaded from a case file (pickles by file and name).

    ``build_failures`` ({rank: one line}) is set by the run after each
    builder was tried in an isolation worker (verify/engine/input_probe.py):
    a rank whose builder failed there is refused here, never called (it
    may end the process)."""

    build_failures: dict = None  # not a field: the run's finding, not the file's

    def build(self, rank: int, then=None):
        why = (self.build_failures or {}).get(rank)
        if why:
            raise CaseBuildRefused(f"case {self.name} rank {rank}: its builder failed in "
                                   f"an isolation worker ({why}); not called again")
        return super().build(rank, then)

    def __reduce__(self):
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                 if f.name != "builder"}
        return (_restore, (self.source_file, self.name, state))


# path -> (mtime, {case name: FileCase}); one import per file and process
_LOADED: dict = {}


def _restore(path, name, state):
    """Unpickle a FileCase: the builder from the file, the rest as pickled."""
    found = _load_one(path).get(name)
    if found is None:
        raise CaseFileError(f"case file {path} no longer defines case {name!r}")
    return FileCase(builder=found.builder, **state)


def _error_line(path: str, exc: BaseException) -> str:
    """``line N: Type: message`` of the innermost frame in ``path``."""
    where = ""
    if isinstance(exc, SyntaxError) and exc.lineno:
        where = f"line {exc.lineno}: "
    else:
        for fr in reversed(traceback.extract_tb(exc.__traceback__)):
            if os.path.abspath(fr.filename) == path:
                where = f"line {fr.lineno}: "
                break
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{where}{type(exc).__name__}" + (f": {msg}" if msg else "")


def _import(path: str):
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    stem = "".join(ch if ch.isalnum() else "_" for ch in
                   os.path.splitext(os.path.basename(path))[0])
    module_name = f"_verify_case_file_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CaseFileError(f"case file {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (KeyboardInterrupt, GeneratorExit):
        sys.modules.pop(module_name, None)
        raise
    except BaseException as exc:  # SystemExit too: one line, never the run
        sys.modules.pop(module_name, None)
        raise CaseFileError(f"case file {path} does not import: "
                            f"{_error_line(path, exc)}") from None
    return module


def _malformed(path, index, case, field, why):
    who = f"case {getattr(case, 'name', None)!r}" if isinstance(
        getattr(case, "name", None), str) and case.name else f"CASES[{index}]"
    return CaseFileError(f"case file {path}: {who}: field {field!r} {why}")


def _pass_names():
    import passes

    table = passes.adapters()
    return {**{a.short: a.name for a in table.values()}, **{n: n for n in table}}


def _validate(path: str, index: int, case) -> FileCase:
    if not isinstance(case, Case):
        raise CaseFileError(f"case file {path}: CASES[{index}] is a "
                            f"{type(case).__name__}, not a Case (verify.case_api.Case)")

    def bad(field, why):
        return _malformed(path, index, case, field, why)

    if not isinstance(case.name, str) or not case.name.strip() or \
            any(ch.isspace() for ch in case.name):
        raise bad("name", "must be a non-empty string without spaces")
    if not isinstance(case.family, str):
        raise bad("family", "must be a string")
    if not isinstance(case.summary, str):
        raise bad("summary", "must be a string")
    if not callable(case.builder):
        raise bad("builder", "must be callable as builder(case, rank) -> RankProgram")
    try:
        ids = np.array(case.mesh)
        ok = ids.size > 0 and ids.dtype.kind in "iu" and ids.ndim in (1, 2)
    except Exception:
        ok = False
    if not ok:
        raise bad("mesh", "must be a list of rank ids, or a list of equal-length lists "
                          "(DP x TP)")
    ranks = [int(r) for r in ids.flatten()]
    if len(set(ranks)) != len(ranks):
        raise bad("mesh", f"holds a rank twice: {case.mesh}")
    if not isinstance(case.expect, dict):
        raise bad("expect", "must be a dict {pass name: Expect}")
    names = _pass_names()
    expect = {}
    for key, e in case.expect.items():
        if key not in names:
            raise bad("expect", f"names unknown pass {key!r}; known: {', '.join(sorted(names))}")
        if not isinstance(e, Expect):
            raise bad("expect", f"[{key!r}] must be an Expect, not {type(e).__name__}")
        if e.verdict not in VERDICTS:
            raise bad("expect", f"[{key!r}] verdict {e.verdict!r} is not one of "
                                f"{', '.join(VERDICTS)}")
        if not isinstance(e.fires, bool):
            raise bad("expect", f"[{key!r}] fires must be True or False")
        expect[names[key]] = e
    if not isinstance(case.rings, dict):
        raise bad("rings", "must be a dict {ring_id: [[ranks of one group], ...]}")
    rings = {}
    for rid, groups in case.rings.items():
        try:
            rid = int(rid)
            groups = [[int(r) for r in g] for g in groups]
        except (TypeError, ValueError):
            raise bad("rings", f"ring {rid!r}: must map an int ring id to a list of "
                               "lists of ranks") from None
        stray = sorted({r for g in groups for r in g} - set(ranks))
        if stray:
            raise bad("rings", f"ring {rid} names rank(s) {stray} outside the mesh")
        rings[rid] = groups
    if not isinstance(case.symbols, dict) or not all(
            isinstance(k, str) and isinstance(v, (tuple, list))
            and all(s is None or isinstance(s, str) for s in v)
            for k, v in case.symbols.items()):
        raise bad("symbols", "must be a dict {fed var: (dim symbol or None, ...)}")
    try:
        sharded = frozenset(case.sharded_params)
    except TypeError:
        raise bad("sharded_params", "must be a set of parameter names") from None
    if isinstance(case.sharded_params, str) or not all(isinstance(n, str) for n in sharded):
        raise bad("sharded_params", "must be a set of parameter names")
    if case.amp_level not in ("o0", "o1", "o2"):
        raise bad("amp_level", f"{case.amp_level!r} is not one of o0, o1, o2")
    if not isinstance(case.enable_sp, bool):
        raise bad("enable_sp", "must be True or False")
    if not isinstance(case.params, dict):
        raise bad("params", "must be a dict")
    fields = {f.name: getattr(case, f.name) for f in dataclasses.fields(Case)}
    fields.update(expect=expect, rings=rings, sharded_params=sharded,
                  symbols={k: tuple(v) for k, v in case.symbols.items()},
                  family=case.family or "case_file", source_file=path)
    return FileCase(**fields)


def _load_one(path: str) -> dict:
    path = os.path.abspath(path)
    if os.path.isdir(path) or os.path.basename(path) == "plan.json":
        # a program dir (verify/plan/program_format.py): one planned case
        from cases.program_dirs import ProgramDirError, load_program_dir

        try:
            case = load_program_dir(path)
        except ProgramDirError as exc:
            raise CaseFileError(str(exc)) from None
        return {case.name: case}
    if not os.path.isfile(path):
        raise CaseFileError(f"case file {path} does not exist")
    mtime = os.path.getmtime(path)
    hit = _LOADED.get(path)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    from verify.ir.legacy_ir import paddle_module

    paddle_module()  # legacy IR before the file imports paddle
    module = _import(path)
    if not hasattr(module, "CASES"):
        raise CaseFileError(f"case file {path} defines no CASES "
                            "(a list of verify.case_api.Case)")
    listed = module.CASES
    if isinstance(listed, Case) or not isinstance(listed, (list, tuple)):
        raise CaseFileError(f"case file {path}: CASES must be a list of Case, "
                            f"not {type(listed).__name__}")
    if not listed:
        raise CaseFileError(f"case file {path} defines no cases (CASES is empty)")
    out = {}
    for i, c in enumerate(listed):
        fc = _validate(path, i, c)
        if fc.name in out:
            raise CaseFileError(f"case file {path}: case name {fc.name!r} appears twice")
        out[fc.name] = fc
    _LOADED[path] = (mtime, out)
    return out


def load_case_files(paths) -> list:
    """Every case of every file in ``paths``, in order; CaseFileError on bad input."""
    from . import all_cases

    builtin = all_cases()
    seen = {}
    out = []
    for p in paths or []:
        for name, c in _load_one(p).items():
            if name in builtin:
                raise CaseFileError(f"case file {c.source_file}: case {name!r} has the "
                                    "name of a built-in case; rename it")
            if name in seen:
                raise CaseFileError(f"case file {c.source_file}: case {name!r} is also "
                                    f"defined in {seen[name]}")
            seen[name] = c.source_file
            out.append(c)
    return out
