"""Which pass code an application really ran: the record behind ``applied``.

Every Python pass Paddle applies is fetched by name from one dict,
``PassBase._REGISTERED_PASSES`` (``new_pass``, and the adapters that take a
pass class from it, e.g. the VPP split's ``pipeline_scheduler_VPP``).  The
dict is replaced once by a subclass that notes each lookup made while a
:func:`recording` is open, so a report says what was applied, not what
was meant to be: a pass file that a path fails to load shows up as
``installed`` there (and the isolation worker sends back what it looked
up).  A C++ pass (``paddle.pir.PassManager``) is noted by its adapter with
:func:`note_native`.

A record is ``{"pass": name, "source": "file", "path", "sha256"}`` for a
class a ``--pass-file`` registered, ``{"pass", "source": "installed",
"paddle", "commit"}`` for Paddle's own (``native`` says when it is C++;
``overlay`` names the ``--paddle-file`` modules loaded in its place),
or ``{"pass", "source": "python", "module", "class"}`` for a class
registered some other way (a test's).
"""
from __future__ import annotations

import contextlib
import os
import threading

_STATE = threading.local()

# Pass files loaded and not restored (verify/ir/pass_files.py), in load
# order: an isolation worker loads the same list, so every lookup there
# resolves as it does here.
ACTIVE: list = []


def active_files() -> list:
    """``[(path, mtime)]`` of the pass files in force, in load order (the
    file's mtime now: a worker reloads a file changed since)."""
    out = []
    for f in ACTIVE:
        try:
            out.append((f.path, os.path.getmtime(f.path)))
        except OSError:
            out.append((f.path, f.mtime))
    return out


def file_of_module(module_name: str):
    """``(path, sha256)`` of the active pass file that defined ``module_name``."""
    for f in ACTIVE:
        if f.module_name == module_name:
            return f.path, f.sha256
    return None


def replayable(names) -> bool:
    """Whether each registry pass in ``names`` resolves in a fresh process
    (an isolation worker) as here: installed, or from an active pass file;
    not a class registered some other way (a test's)."""
    from paddle.distributed.passes.pass_base import PassBase

    for name in names:
        cls = dict.get(PassBase._REGISTERED_PASSES, name)  # not a recorded lookup
        mod = getattr(cls, "__module__", "") or ""
        if cls is not None and not mod.startswith("paddle.") and file_of_module(mod) is None:
            return False
    return True


class _WatchedRegistry(dict):
    """``PassBase._REGISTERED_PASSES``, noting lookups while recording."""

    def __getitem__(self, name):
        cls = dict.__getitem__(self, name)
        _note(name, cls)
        return cls

    def get(self, name, default=None):
        cls = dict.get(self, name, default)
        if cls is not default or name in self:
            _note(name, cls)
        return cls


def watch() -> None:
    """Install the watched registry (idempotent)."""
    from paddle.distributed.passes.pass_base import PassBase

    if not isinstance(PassBase._REGISTERED_PASSES, _WatchedRegistry):
        PassBase._REGISTERED_PASSES = _WatchedRegistry(PassBase._REGISTERED_PASSES)


def _stack() -> list:
    if not hasattr(_STATE, "stack"):
        _STATE.stack = []
    return _STATE.stack


def _note(name, cls) -> None:
    for rec in _stack():
        rec.append(describe(name, cls))


def note_native(name: str) -> None:
    """A C++ pass applied through ``paddle.pir.PassManager`` (never from a file)."""
    for rec in _stack():
        rec.append({**installed(name), "native": "C++ (paddle.pir.PassManager)"})


def note(records) -> None:
    """Records made elsewhere (an isolation worker) join the open recordings."""
    for rec in _stack():
        rec.extend(records)


@contextlib.contextmanager
def recording():
    """Collect the records of every pass looked up inside the block."""
    watch()
    rec: list = []
    _stack().append(rec)
    try:
        yield rec
    finally:
        _stack().remove(rec)


def paddle_build() -> dict:
    import paddle

    return {"paddle": paddle.version.full_version, "commit": paddle.version.commit}


def overlay_label() -> str:
    """``paddle-file: MOD=PATH, ...`` of the Paddle overlay loaded in this
    process (``verify/premerge/overlay.py``'s finder), "" without one: the
    installed pass then runs with those modules in place of Paddle's."""
    import sys

    for f in sys.meta_path:
        mods = getattr(f, "modules", None) if getattr(f, "paddle_overlay", False) else None
        if mods:
            return "paddle-file: " + ", ".join(f"{m}={p}" for m, p in sorted(mods.items()))
    return ""


def installed(name: str) -> dict:
    rec = {"pass": name, "source": "installed", **paddle_build()}
    label = overlay_label()
    return {**rec, "overlay": label} if label else rec


def describe(name, cls) -> dict:
    """The record of pass ``name`` resolved to class ``cls``."""
    mod = getattr(cls, "__module__", "") or ""
    found = file_of_module(mod)
    if found is not None:
        return {"pass": name, "source": "file", "path": found[0], "sha256": found[1]}
    if cls is None or mod.startswith("paddle."):
        return installed(name)
    return {"pass": name, "source": "python", "module": mod,
            "class": getattr(cls, "__qualname__", repr(cls))}


def unique(records) -> list:
    """Records in first-seen order, each once."""
    out, seen = [], set()
    for r in records:
        key = tuple(sorted((k, str(v)) for k, v in r.items()))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def summary(records) -> str:
    """One string for ``Application.source``: the files applied, else
    ``installed`` (and the module of a test-registered class)."""
    files = list(dict.fromkeys(r["path"] for r in records if r.get("source") == "file"))
    others = list(dict.fromkeys(r["module"] for r in records if r.get("source") == "python"))
    overlays = list(dict.fromkeys(r["overlay"] for r in records if r.get("overlay")))
    return ", ".join(files + others) or "; ".join(overlays) or "installed"
