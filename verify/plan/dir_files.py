"""Every path read from a program dir is a regular file inside it.

A program dir is input: its ``plan.json`` and ``rank<R>/planner.json`` name
files (a stage's ``snapshot``, a pipeline's job programs), and any of its
files may be a symlink, a FIFO or a device.  :func:`regular` refuses a path
that is absolute, holds ``..``, resolves (symlinks followed) outside the dir,
or is not a regular file; :func:`read_regular` opens it with ``O_NOFOLLOW``
and ``O_NONBLOCK`` (a FIFO never blocks the reader) and checks ``S_ISREG``
on the open file.  :func:`check_paths` runs :func:`regular` on every file
the suite's readers will open (``cases/program_dirs.py`` calls it on load,
before any application runs), so a bad path is one line
(``ProgramDirError``, exit 2 on the command line), never a traceback in a
reader, a hang, or a lost report.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath

from verify.safe_names import printable

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)


class ProgramDirError(Exception):
    """A program dir that cannot be used; the message is one line."""


def _bad(root: Path, rel, why: str) -> ProgramDirError:
    return ProgramDirError(f"program dir {printable(root)}: {printable(rel)} {why}")


def regular(root, rel) -> Path:
    """``root/rel``, resolved; ProgramDirError (one line) unless ``rel`` is a
    relative path without ``..`` naming a regular file inside ``root``."""
    root = Path(os.path.realpath(str(root)))
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise _bad(root, repr(rel), "is not a file name")
    parts = PurePosixPath(rel.replace("\\", "/"))
    if parts.is_absolute() or os.path.isabs(rel) or ".." in parts.parts:
        raise _bad(root, repr(rel), "is not a path inside the program dir "
                   "(absolute, or holding '..')")
    path = Path(os.path.realpath(root / rel))
    if not str(path).startswith(str(root).rstrip(os.sep) + os.sep):
        raise _bad(root, rel, "leads out of the program dir (a symlink)")
    try:
        mode = os.stat(path).st_mode  # stat, never open: a FIFO does not block it
    except FileNotFoundError:
        raise _bad(root, rel, "is missing") from None
    except OSError as exc:
        raise _bad(root, rel, f"cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise _bad(root, rel, "is not a regular file (a directory, FIFO, socket or device)")
    return path


def read_regular(root, rel) -> bytes:
    """The bytes of ``root/rel`` (checked by :func:`regular`), opened without
    following a symlink or blocking, ``S_ISREG`` checked on the open file."""
    path = regular(root, rel)
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise _bad(Path(root), rel, f"cannot be read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise _bad(Path(root), rel, "is not a regular file")
        return f.read()


def _exists(path: Path) -> bool:
    return os.path.lexists(path)  # a dangling symlink too


def _planner_paths(root: Path, rank_rel: str) -> list:
    """The files ``rank<R>/planner.json`` names (stage snapshots, a pipeline's
    job programs), relative to ``root``; [] when it does not parse (the
    format's validator says why)."""
    try:
        rec = json.loads(read_regular(root, f"{rank_rel}/planner.json"))
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(rec, dict):
        return []
    named = []
    for st in rec.get("stages") or []:
        if isinstance(st, dict) and st.get("snapshot") not in (None, ""):
            named.append(("stage snapshot", st["snapshot"]))
    pipe = rec.get("pipeline")
    if isinstance(pipe, dict) and isinstance(pipe.get("programs"), dict):
        named += [("job program", f) for f in pipe["programs"].values()]
    out = []
    for what, rel in named:
        if not isinstance(rel, str):
            raise _bad(root, f"{rank_rel}/planner.json", f"names a {what} that is not a "
                       f"path: {printable(repr(rel))[:80]}")
        parts = PurePosixPath(rel.replace("\\", "/"))
        if not rel or parts.is_absolute() or os.path.isabs(rel) or ".." in parts.parts:
            raise _bad(root, f"{rank_rel}/planner.json", f"names the {what} "
                       f"{printable(repr(rel))[:200]}, not a path inside the program dir "
                       "(absolute, or holding '..')")
        out.append((what, f"{rank_rel}/{rel}"))
    return out


def check_paths(folder, ranks, ir: str, files=()) -> None:
    """Every file of the program dir ``folder`` the suite reads is a regular
    file inside it: ``plan.json``, each rank's ``files`` (required) and, for
    PIR, ``planner.json``, ``serial.json``, ``jobs/*.json`` where present
    and every file ``planner.json`` names; ProgramDirError otherwise."""
    root = Path(os.path.realpath(str(folder)))
    regular(root, "plan.json")
    for r in ranks:
        rank_rel = f"rank{int(r)}"
        for f in files:
            if _exists(root / rank_rel / f):
                regular(root, f"{rank_rel}/{f}")  # a missing one: the caller says so
        if ir != "pir":
            continue
        for f in ("planner.json", "serial.json"):
            if _exists(root / rank_rel / f):
                regular(root, f"{rank_rel}/{f}")
        jobs = root / rank_rel / "jobs"
        if _exists(jobs):
            if not jobs.is_dir() or not str(os.path.realpath(jobs)).startswith(
                    str(root) + os.sep):
                raise _bad(root, f"{rank_rel}/jobs", "is not a directory inside the "
                           "program dir")
            for p in sorted(jobs.glob("*.json")):
                regular(root, f"{rank_rel}/jobs/{p.name}")
        if _exists(root / rank_rel / "planner.json"):
            for what, rel in _planner_paths(root, rank_rel):
                try:
                    regular(root, rel)
                except ProgramDirError as exc:
                    raise ProgramDirError(f"{exc} (the {what} {rank_rel}/planner.json "
                                          "names)") from None
