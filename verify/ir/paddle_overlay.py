"""``--paddle-file PATH``: a changed module of Paddle, as a user's change would be.

A file of Paddle's Python source tree (e.g. a reshard function,
``python/paddle/distributed/auto_parallel/static/reshard_funcs/s_to_r_reshard_func.py``,
or ``.../static/pir_pass.py``) is loaded *in place of* the installed module of
the same dotted name in every process the run starts, through the overlay
of ``verify premerge`` (``verify/premerge/overlay.py``: a manifest named by
``VERIFY_PADDLE_OVERLAY``, installed at interpreter start by the boot
``sitecustomize`` on ``PYTHONPATH``).  This module only resolves which
installed module a file replaces, and keys caches and commands by the
overlay; the command line (``verify/cli.py``, the gate's conftest) writes
the manifest and exports it to the processes it starts.  Installed files
are never edited.

Which module a file replaces: the path after its last ``paddle/`` directory
when that names an installed module (``.../python/paddle/a/b.py`` ->
``paddle.a.b``), else the one installed module with the file's name
(ambiguous names are refused), or ``MODULE=PATH`` explicitly.
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

ENV = "VERIFY_PADDLE_OVERLAY"  # the manifest (verify/premerge/overlay.py)


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


def installed_rel(module: str) -> str:
    """``paddle.a.b`` -> ``paddle/a/b.py`` (the path an overlay stores it at)."""
    return module.replace(".", "/") + ".py"


def installed_root() -> str:
    """The directory holding the installed ``paddle`` package."""
    return str(_paddle_root().parent)


def fingerprint() -> str:
    """A hash of the overlaid modules' names and contents ("" without an
    overlay): plans made under an overlay are cached apart."""
    import hashlib

    path = os.environ.get(ENV)
    if not path:
        return ""
    try:
        manifest = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return "unreadable-overlay"
    h = hashlib.sha256()
    for mod in sorted(manifest.get("modules", {})):
        h.update(mod.encode())
        h.update(Path(manifest["modules"][mod]).read_bytes())
    for mod in sorted(manifest.get("deleted", [])):
        h.update(b"-" + mod.encode())
    return h.hexdigest()  # whole: it is part of cache keys


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


def loaded_here() -> bool:
    """Whether this process imports Paddle through an overlay finder
    (``verify/premerge/overlay.py``, or a reproducer's embedded one)."""
    import sys

    return any(getattr(f, "paddle_overlay", False) for f in sys.meta_path)


def require_here(where: str) -> None:
    """Refuse work done in this process while an overlay is exported to the
    processes it starts but not loaded here (this process imported the
    installed Paddle first): ``where`` would judge the installed modules
    under the overlay's name.  OverlayError naming ``where`` and the
    overlaid modules."""
    path = os.environ.get(ENV)
    if not path or loaded_here():
        return
    try:
        mods = ", ".join(sorted(json.loads(Path(path).read_text()).get("modules", {})))
    except (OSError, ValueError):
        mods = f"the manifest {path}"
    raise OverlayError(
        f"{where} would run in this process, which imported the installed Paddle before "
        f"the --paddle-file overlay ({mods}) was exported: it would judge the installed "
        "modules. Run it as `python -m verify ...` (which loads the overlay at start), "
        "with isolation workers, or under pytest-xdist")
