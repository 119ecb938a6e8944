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
    ``{module: path}`` (OverlayError on a file that names no module)."""
    table = dict(module_of(p) for p in paths)
    if not table:
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
