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
            # the executed-source table picks applications, not their results
            if p.suffix in (".py", ".json") and "__pycache__" not in p.parts and \
                    p.name != "executed_files.json":
                h.update(str(p.relative_to(PROJECT_ROOT)).encode())
                h.update(p.read_bytes())
    return f"{version}+{h.hexdigest()}"


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


def valid_application(value) -> bool:
    """An application's record as ``verify premerge`` stores it."""
    from verify.verdicts import Verdict

    return isinstance(value, dict) and value.get("verdict") in Verdict.__members__ and \
        isinstance(value.get("evidence", ""), str) and \
        all(isinstance(value.get(k, ""), str) for k in ("reproducer_name", "reproducer_text")) \
        and isinstance(value.get("identities"), list) and \
        all(isinstance(i, dict) for i in value["identities"]) and \
        isinstance(value.get("decided", []), list) and value.get("fired") in (True, False, None)


def valid_vocabulary(value) -> bool:
    """The vocabulary audit's record (``findings``, ``new``, ``gone``)."""
    return isinstance(value, dict) and \
        isinstance(value.get("findings", []), list) and \
        all(isinstance(f, dict) and isinstance(f.get("key", ""), str)
            for f in value.get("findings", [])) and \
        all(isinstance(value.get(k, []), list) and
            all(isinstance(x, str) for x in value.get(k, [])) for k in ("new", "gone"))


class Cache:
    """Get/put JSON values by key; a disabled cache misses and stores nothing.
    Each file is one entry of ``verify/cache_files.py`` (its key and the
    sha256 of its JSON checked on read): a damaged, edited or foreign entry,
    or a value ``valid`` refuses, is a miss and is rewritten by the run."""

    def __init__(self, directory: Path | None = None, enabled: bool = True):
        self.dir = Path(directory) if directory else premerge_dir()
        self.enabled = enabled
        self.hits = self.misses = 0

    def _path(self, k: str) -> Path:
        return self.dir / k[:2] / f"{k}.json"

    def get(self, k: str, valid=None):
        from verify.cache_files import MISS, read_entry

        if self.enabled:
            value = read_entry(self._path(k), k, json.loads,
                               valid or (lambda v: isinstance(v, dict)))
            if value is not MISS:
                self.hits += 1
                return value
        self.misses += 1
        return None

    def put(self, k: str, value) -> None:
        from verify.cache_files import write_entry

        if not self.enabled:
            return
        write_entry(self._path(k), k, json.dumps(value).encode())
