"""The pre-merge result cache: one JSON file per application (or audit),
keyed by everything its result depends on.

Key = sha256 of: the sources the overlay applies *to that application*
(the changed modules in its pass's import closure, path and text), the case,
the run's options (backend, seed), Paddle's version and the suite's version
(its package version and a digest of its own Python sources, so editing a
check invalidates what it judged).  A change elsewhere in the checkout
leaves the key alone: the rerun after an unrelated change is a lookup.

Directory: ``$PADDLE_PASS_VERIFY_CACHE/premerge`` if set, else
``$XDG_CACHE_HOME/paddle-pass-verify/premerge``, else
``~/.cache/paddle-pass-verify/premerge``.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SUITE_DIRS = ("verify", "passes", "cases")


def cache_root() -> Path:
    """The suite's user cache directory (shared with the planned-case cache)."""
    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "paddle-pass-verify"


def premerge_dir() -> Path:
    """Where results go (``$VERIFY_PREMERGE_CACHE`` overrides, e.g. for tests)."""
    own = os.environ.get("VERIFY_PREMERGE_CACHE")
    return Path(own) if own else cache_root() / "premerge"


@functools.lru_cache(maxsize=1)
def paddle_version() -> str:
    for dist in ("paddlepaddle", "paddlepaddle-gpu"):
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "paddle==unknown"


@functools.lru_cache(maxsize=1)
def suite_version() -> str:
    """The suite's package version and a digest of its Python sources."""
    try:
        version = importlib.metadata.version("paddle-pass-verify")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    h = hashlib.sha256()
    for d in SUITE_DIRS:
        for p in sorted((PROJECT_ROOT / d).rglob("*")):
            if p.suffix in (".py", ".json") and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(PROJECT_ROOT)).encode())
                h.update(p.read_bytes())
    return f"{version}+{h.hexdigest()[:16]}"


def key(kind: str, sources: dict, subject: str, options: dict) -> str:
    """``sources``: ``{module: text}`` applied to this subject."""
    h = hashlib.sha256()
    for part in (kind, subject, json.dumps(options, sort_keys=True), paddle_version(),
                 suite_version()):
        h.update(part.encode())
        h.update(b"\0")
    for mod in sorted(sources):
        h.update(mod.encode())
        h.update(b"\0")
        h.update(sources[mod].encode())
        h.update(b"\0")
    return h.hexdigest()


class Cache:
    """Get/put JSON values by key; a disabled cache misses and stores nothing."""

    def __init__(self, directory: Path | None = None, enabled: bool = True):
        self.dir = Path(directory) if directory else premerge_dir()
        self.enabled = enabled
        self.hits = self.misses = 0

    def _path(self, k: str) -> Path:
        return self.dir / k[:2] / f"{k}.json"

    def get(self, k: str):
        if self.enabled:
            try:
                with open(self._path(k)) as f:
                    value = json.load(f)
                self.hits += 1
                return value
            except (OSError, ValueError):
                pass
        self.misses += 1
        return None

    def put(self, k: str, value) -> None:
        if not self.enabled:
            return
        path = self._path(k)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
