"""The project's compiled modules, kept in its own cache dir.

With ``PYTHONDONTWRITEBYTECODE`` set (this environment sets it) Python
writes no ``.pyc`` files, so every process -- a ``verify run``, its
isolation worker, each rank process -- compiled every module of
``verify/``, ``cases/`` and ``passes/`` from source again: ~0.5 CPU s per
process.  Installed (:func:`install`, from ``verify/__init__.py``) only
when the interpreter writes no bytecode, a path hook loads this project's
source files (and nobody else's: Paddle and the other installed packages
keep Python's own loader and their ``__pycache__``) through a loader that
keeps the code object, marshalled, under
``<cache>/pycache/`` (``$PADDLE_PASS_VERIFY_CACHE``, default
``~/.cache/paddle-pass-verify``), keyed by the sha256 of the source's bytes,
its path and the interpreter's bytecode magic, in the one entry format of
``verify/cache_files.py`` (key and digest checked on read: a damaged entry
is compiled afresh and rewritten).  So a changed source is
another key (compiled afresh), never a stale module; nothing is written
beside the sources, which is what ``PYTHONDONTWRITEBYTECODE`` is usually set
for.  ``PADDLE_PASS_VERIFY_PYCACHE=0`` turns it off (every process compiles
from source, as before); ``=DIR`` keeps the code objects in DIR.
"""
from __future__ import annotations

import hashlib
import importlib.machinery as machinery
import importlib.util
import marshal
import os
import sys
import types
from pathlib import Path

from verify.cache_files import MISS, memo_dir, read_entry, write_entry

ROOT = Path(__file__).resolve().parent.parent  # the checkout: verify/, cases/, passes/
PACKAGES = ("verify", "cases", "passes")
STATS = {"hits": 0, "misses": 0}
_INSTALLED: dict = {}


def cache_dir() -> Path | None:
    return memo_dir("PADDLE_PASS_VERIFY_PYCACHE", "pycache")


def key_of(path: str, source: bytes) -> str:
    """The key of one module's code object: its source bytes, its path (the
    code object records it), the interpreter's bytecode magic."""
    h = hashlib.sha256()
    for part in (importlib.util.MAGIC_NUMBER, os.fsencode(path), source):
        h.update(len(part).to_bytes(8, "little") + part)
    return h.hexdigest()


class CachedSourceLoader(machinery.SourceFileLoader):
    """``SourceFileLoader`` whose code objects come from the cache dir when
    one was compiled from the same bytes."""

    def get_code(self, fullname):
        folder = _INSTALLED.get("dir")
        path = self.get_filename(fullname)
        source = self.get_data(path)
        if folder is None:
            return self.source_to_code(source, path)
        key = key_of(path, source)
        file = folder / key[:2] / f"{key}.code"
        # an entry of this key whose digest holds and that is a code object;
        # absent, torn, edited or foreign: compile and rewrite it
        code = read_entry(file, key, marshal.loads, lambda c: isinstance(c, types.CodeType))
        if code is not MISS:
            STATS["hits"] += 1
            return code
        STATS["misses"] += 1
        code = self.source_to_code(source, path)
        write_entry(file, key, marshal.dumps(code))
        return code


def _ours(path: str) -> bool:
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except (ValueError, OSError):
        return False
    return bool(rel.parts) and rel.parts[0] in PACKAGES


def _hook(path):
    if not _ours(path):
        raise ImportError("not a package dir of this project")  # the next hook's
    return machinery.FileFinder(
        path, (CachedSourceLoader, machinery.SOURCE_SUFFIXES),
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES))


def install() -> bool:
    """Load this project's modules through :class:`CachedSourceLoader` from
    now on, when the interpreter writes no bytecode itself; True if in force."""
    if _INSTALLED:
        return _INSTALLED.get("dir") is not None
    folder = cache_dir() if sys.dont_write_bytecode else None
    _INSTALLED["dir"] = folder
    if folder is None:
        return False
    sys.path_hooks.insert(0, _hook)
    for path in list(sys.path_importer_cache):  # finders made before the hook
        if _ours(path):
            del sys.path_importer_cache[path]
    return True
