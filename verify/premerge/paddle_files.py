"""``--paddle-file PATH`` (``verify run``, the gate): single changed Paddle
modules overlaid like a checkout's (``overlay.py``), without a checkout.

Each file is resolved to the installed module it replaces
(``verify/ir/paddle_overlay.module_of``), copied into an overlay directory
with its manifest (``overlay.write``), and the manifest is exported to the
processes the run starts (``overlay.child_env``: ``VERIFY_PADDLE_OVERLAY``
and the boot ``sitecustomize`` first on ``PYTHONPATH``).  The process that
calls this has imported Paddle already and keeps the installed modules; the
work an overlay changes (planning, pass application, runs) happens in the
processes it starts.
"""
from __future__ import annotations

import os
import tempfile

from verify.ir.paddle_overlay import installed_rel, installed_root, module_of

from . import overlay


def export(paths, directory: str | None = None) -> dict:
    """Overlay ``paths`` for every process started from now on; returns
    ``{module: path}`` (OverlayError on a file that names no module).  An
    overlay of the same texts loaded in this process already (``python -m
    verify`` installs it at start, :func:`install_early`; a process started
    with it) is kept as it is."""
    table = dict(module_of(p) for p in paths)
    if not table:
        return table
    if _same_as_active(table):
        return table
    directory = directory or tempfile.mkdtemp(prefix="verify-paddle-files-")
    files = {}
    for mod, path in table.items():
        with open(path, encoding="utf-8") as f:
            files[installed_rel(mod)] = f.read()
    manifest = overlay.write(directory, files, installed_root())
    env = overlay.child_env(manifest)
    os.environ[overlay.ENV] = env[overlay.ENV]
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    return table


def _same_as_active(table: dict) -> bool:
    """Whether the overlay loaded in this process holds exactly ``table``'s texts."""
    finder = overlay.active()
    if finder is None or set(finder.modules) != set(table):
        return False
    for mod, path in table.items():
        try:
            with open(path, encoding="utf-8") as a, \
                    open(finder.modules[mod], encoding="utf-8") as b:
                if a.read() != b.read():
                    return False
        except OSError:
            return False
    return True


def install_early(argv) -> None:
    """``python -m verify run|repro ... --paddle-file F``: export the overlay
    and load it in this process too, before anything imports Paddle, so the
    work done here (applications of passes applied in process, the
    reproducers' payloads, ``--no-isolation``) runs the files under review,
    as every process it starts does.  Bad files are left to the command's
    own error (it calls :func:`export` again)."""
    if argv[:1] not in (["run"], ["repro"]):
        return
    paths = []
    for i, a in enumerate(argv):
        if a == "--paddle-file" and i + 1 < len(argv):
            paths.append(argv[i + 1])
        elif a.startswith("--paddle-file="):
            paths.append(a.split("=", 1)[1])
    if not paths:
        return
    from verify.ir.paddle_overlay import OverlayError

    try:
        export(paths)
    except (OverlayError, OSError):
        return
    if overlay.active() is None:
        overlay.install(os.environ[overlay.ENV])
