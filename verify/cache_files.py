"""The project's cache on disk: where each memo lives, and how a file is
written into it.

Every memo (compiled modules, snapshots, numeric runs, recorded placements)
lives under ``$PADDLE_PASS_VERIFY_CACHE`` (default
``~/.cache/paddle-pass-verify``), each in its own subdirectory, each with an
environment variable of its own: ``0`` turns that memo off, a path puts it
there.  Files are written whole and renamed, so a reader in another process
(xdist workers, rank processes) never sees half a file; a cache that cannot
be written costs speed, never results.
"""
from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """The cache's root directory."""
    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "paddle-pass-verify"


def memo_dir(env: str, sub: str) -> Path | None:
    """The directory of one memo: ``$env`` when it names one, None when it is
    ``0`` (the memo is off), else ``<root>/<sub>``."""
    own = os.environ.get(env, "")
    if own == "0":
        return None
    if own not in ("", "1"):
        return Path(own)
    return root() / sub


def write_whole(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file renamed into place;
    False (nothing raised) when the cache cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
