"""A runtime trace of Paddle's planner, inside one planning process: which
lines of the reshard functions (``reshard_funcs/*.py``) and of the partition,
reshard and remove passes (``pir_pass.py``) ran while the rank was planned.

Turned on by ``VERIFY_PLANNER_TRACE=1`` in the planning process's
environment (``verify/plan/pir_rank.py``; ``cases/planner_models.py`` sets it
for a case whose params ask for ``trace``); written to the rank dir as
``coverage.json``: ``{"root": the installed auto_parallel/static dir,
"lines": {"<file>::<qualname>": [line, ...]}}`` with files relative to the
root.  ``verify/generate/coverage.py`` aggregates it.  The global tracer
returns a line tracer only for frames of those files, so the rest of Paddle
runs at the cost of one call check per Python call.
"""
from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

ENV = "VERIFY_PLANNER_TRACE"
FILE = "coverage.json"


def traced_root() -> str:
    import paddle.distributed.auto_parallel.static as static

    return os.path.dirname(os.path.abspath(static.__file__))


def _watched(root: str):
    funcs = os.path.join(root, "reshard_funcs") + os.sep
    passes = os.path.join(root, "pir_pass.py")
    return lambda f: f.startswith(funcs) or f == passes


@contextmanager
def traced(out: Path):
    """Trace the body; write ``out`` after it, whether it raised or not."""
    root = traced_root()
    watched = _watched(root)
    seen: dict = {}
    verdicts: dict = {}  # code object -> watched? (one path check per code object)

    def local(frame, event, arg):
        if event == "line":
            seen[frame.f_code].add(frame.f_lineno)
        return local

    def global_(frame, event, arg):
        code = frame.f_code
        hit = verdicts.get(code)
        if hit is None:
            hit = verdicts[code] = watched(code.co_filename)
        if not hit:
            return None
        seen.setdefault(code, set()).add(code.co_firstlineno)  # the call itself
        return local

    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        yield
    finally:
        sys.settrace(previous)
        lines = {}
        for code, got in seen.items():
            rel = os.path.relpath(code.co_filename, root)
            key = f"{rel}::{getattr(code, 'co_qualname', code.co_name)}"
            lines.setdefault(key, set()).update(got)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"root": root, "lines": {
            k: sorted(v) for k, v in sorted(lines.items())}}, indent=0))
