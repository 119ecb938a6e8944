"""``--paddle-file PATH``: a changed module of Paddle, as a user's change would be.

A file of Paddle's Python source tree (e.g. a reshard function,
``python/paddle/distributed/auto_parallel/static/reshard_funcs/s_to_r_reshard_func.py``,
or ``.../static/pir_pass.py``) is loaded *in place of* the installed module of
the same dotted name, with its relative imports resolved inside the
installed package, in every process of the run that imports Paddle after
the overlay is known: the run exports it in the environment
(``VERIFY_PADDLE_FILES``, JSON ``{module: path}``) and the
processes the run starts (planning subprocesses, isolation workers, rank
workers) install it before they import Paddle (:func:`install_from_env`,
called from ``verify/ir/legacy_ir.py`` and ``verify/plan/pir_rank.py``).  Installed
files are never edited: an import hook (a ``sys.meta_path`` finder) serves
the user's file for that one module name.

Which module a file replaces: the path after its last ``paddle/`` directory
when that names an installed module (``.../python/paddle/a/b.py`` ->
``paddle.a.b``), else the one installed module with the file's name
(ambiguous names are refused), or ``MODULE=PATH`` explicitly.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
from pathlib import Path

ENV = "VERIFY_PADDLE_FILES"  # not PADDLE_*: the planners drop those


class OverlayError(Exception):
    """A --paddle-file that names no installed module (one line)."""


def _paddle_root() -> Path:
    spec = importlib.util.find_spec("paddle")
    if spec is None or not spec.submodule_search_locations:
        raise OverlayError("paddle is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def module_of(path: str) -> tuple:
    """``(module name, absolute path)`` the file replaces (see the docstring)."""
    if "=" in path and not os.path.exists(path):
        mod, _, p = path.partition("=")
        p = os.path.abspath(p)
        if not os.path.isfile(p):
            raise OverlayError(f"--paddle-file {p} does not exist")
        return mod, p
    p = os.path.abspath(path)
    if not os.path.isfile(p):
        raise OverlayError(f"--paddle-file {p} does not exist")
    if not p.endswith(".py"):
        raise OverlayError(f"--paddle-file {p} is not a Python file")
    root = _paddle_root()
    parts = Path(p).parts
    if "paddle" in parts:
        k = len(parts) - 1 - list(reversed(parts)).index("paddle")
        rel = Path(*parts[k + 1:])
        if (root / rel).is_file():
            return ".".join(("paddle",) + rel.with_suffix("").parts), p
    hits = sorted(root.rglob(Path(p).name))
    if len(hits) != 1:
        raise OverlayError(f"--paddle-file {p}: {len(hits)} installed modules are named "
                           f"{Path(p).name}; give MODULE=PATH")
    rel = hits[0].relative_to(root)
    return ".".join(("paddle",) + rel.with_suffix("").parts), p


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, table: dict):
        self.table = dict(table)

    def find_spec(self, fullname, path=None, target=None):
        src = self.table.get(fullname)
        if src is None:
            return None
        return importlib.util.spec_from_file_location(fullname, src)


def install(table: dict) -> None:
    """Serve ``{module: path}`` from now on in this process (a module Paddle
    imported already is not replaced: call before importing Paddle)."""
    if not table:
        return
    late = [m for m in table if m in sys.modules]
    if late:
        raise OverlayError(f"{late[0]} was imported before the overlay was installed")
    for f in sys.meta_path:
        if isinstance(f, _Finder):
            f.table.update(table)
            return
    sys.meta_path.insert(0, _Finder(table))


def export(paths) -> dict:
    """Resolve ``paths`` and put them in the environment for child processes;
    the ``{module: path}`` table."""
    table = dict(module_of(p) for p in paths)
    if table:
        os.environ[ENV] = json.dumps(table, sort_keys=True)
    return table


def from_env() -> dict:
    try:
        return json.loads(os.environ.get(ENV) or "{}")
    except ValueError:
        return {}


def install_from_env() -> dict:
    """:func:`install` what the environment names (no-op when nothing)."""
    table = from_env()
    install(table)
    return table


def fingerprint() -> str:
    """A hash of the overlay files' contents ("" without overlay): plans made
    under an overlay are cached apart."""
    import hashlib

    table = from_env()
    if not table:
        return ""
    h = hashlib.sha256()
    for mod in sorted(table):
        h.update(mod.encode())
        h.update(Path(table[mod]).read_bytes())
    return h.hexdigest()[:12]


SOURCE_PREFIX = "paddle-file: "


def source_label(table: dict) -> str:
    """An application's ``source`` under an overlay: ``paddle-file: MOD=PATH, ...``."""
    return SOURCE_PREFIX + ", ".join(f"{m}={p}" for m, p in sorted(table.items()))


def command_flags(source: str) -> str:
    """The command-line flags that give a run this ``source`` again:
    ``--paddle-file PATH`` per overlaid module, or ``--pass-file PATH``."""
    import shlex

    if not source or source == "installed":
        return ""
    if source.startswith(SOURCE_PREFIX):
        return "".join(f" --paddle-file {shlex.quote(item.partition('=')[2])}"
                       for item in source[len(SOURCE_PREFIX):].split(", "))
    return f" --pass-file {shlex.quote(source)}"
