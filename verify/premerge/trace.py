"""What Paddle source an application executed: a record of the functions (and
module bodies) of ``paddle/`` whose code ran, in every process of a run.

``$VERIFY_TRACE_EXECUTED=<dir>`` turns it on at interpreter start (the boot
``sitecustomize.py`` of ``verify/premerge/boot``, first on ``PYTHONPATH`` in
every process the run starts: the run, its isolation workers, the Engine and
planner processes, the rank workers).  A global ``sys.settrace`` function
that returns ``None`` sees only the ``call`` event of each new Python frame
(no line events, no C calls) and keeps its code object; at exit, after each
isolation-worker job and every few seconds (a worker may be killed, not
exit) the process writes ``<dir>/<pid>.json``: the *units* it ran, each
``<path under site-packages>::<unit>``, where the unit is a function's
qualified name cut at ``.<locals>`` (a nested function, lambda or
comprehension runs inside its enclosing function) or ``<module>`` for a
module's or a class's body (both run at import).

:func:`changed_units` is the other half: the units of a source file a change
touches (``ast`` dumps compared, so moved lines are not a change); a file
that no longer parses, or is deleted, has every unit changed.

Cost, only while recording (premerge itself never records): ``verify run
--pass planner --case planner_tp2_gm`` with an empty cache, two runs each on
a loaded 2-core machine, 5.8-6.0 s of CPU without the recorder and 8.5-8.8 s
with it (+45 %), 23-26 s wall against 26-34 s.

This module imports only the standard library: it runs at interpreter start.
"""
from __future__ import annotations

import ast
import atexit
import json
import os
import sys
import threading

ENV = "VERIFY_TRACE_EXECUTED"
MODULE = "<module>"
ALL = "*"  # every unit of a file (it no longer parses, or is deleted)

_state = {"dir": None, "prefix": None, "codes": set(), "written": 0}


def _paddle_prefix() -> str | None:
    """``<site-packages>/`` of the installed ``paddle`` (no import), or None."""
    import importlib.util

    spec = importlib.util.find_spec("paddle")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0]) + os.sep


def _tracer(frame, event, arg):
    # 'call' of a new frame only: returning None asks for no local events
    _state["codes"].add(frame.f_code)
    return None


def install(out_dir: str) -> None:
    """Record in this process (and its threads) from now on."""
    if _state["dir"] is not None:
        return
    _state["dir"] = out_dir
    _state["prefix"] = _paddle_prefix()
    os.makedirs(out_dir, exist_ok=True)
    sys.settrace(_tracer)
    threading.settrace(_tracer)
    atexit.register(flush)

    def every_few_seconds():
        import time

        while True:
            time.sleep(3)
            flush()

    threading.Thread(target=every_few_seconds, daemon=True,
                     name="executed-trace").start()


def install_from_env() -> None:
    d = os.environ.get(ENV)
    if d:
        install(d)


def unit_of(code) -> str:
    q = getattr(code, "co_qualname", code.co_name)
    if code.co_name == "<module>":
        return MODULE
    q = q.split(".<locals>", 1)[0]
    return q


def flush() -> None:
    """Write this process's units so far (nothing when not recording or
    nothing new)."""
    prefix, out_dir = _state["prefix"], _state["dir"]
    codes = _state["codes"]
    if out_dir is None or prefix is None or len(codes) == _state["written"]:
        return
    n = len(codes)
    units = set()
    for code in list(codes):
        fn = code.co_filename
        if fn.startswith(prefix) and fn.endswith(".py"):
            rel = fn[len(prefix):].replace(os.sep, "/")
            if rel.startswith("paddle/"):
                # a class body runs at import, in its module's body: its
                # unit (the class's name) matches no function unit
                units.add(f"{rel}::{unit_of(code)}")
    path = os.path.join(out_dir, f"{os.getpid()}.json")
    tmp = f"{path}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(sorted(units), f)
        os.replace(tmp, path)
        _state["written"] = n
    except OSError:
        pass


def collect(out_dir: str) -> dict:
    """``{file: sorted units}`` of every process that wrote into ``out_dir``."""
    out = {}
    for name in sorted(os.listdir(out_dir)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(out_dir, name)) as f:
                units = json.load(f)
        except (OSError, ValueError):
            continue
        for u in units:
            rel, _, unit = u.partition("::")
            out.setdefault(rel, set()).add(unit)
    return {k: sorted(v) for k, v in sorted(out.items())}


# ------------------------------------------------------------ changed units
def _units(tree) -> dict:
    """``{unit: ast dump}`` of a module: each function by qualified name (a
    method ``Class.f``), and ``<module>`` for the rest (the bodies of the
    module and its classes, the functions' signatures and decorators)."""
    out = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + node.name] = ast.dump(ast.Module(body=node.body,
                                                              type_ignores=[]))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")

    walk(tree.body, "")

    class Strip(ast.NodeTransformer):
        def visit_FunctionDef(self, node):
            node.body = [ast.Pass()]
            return node

        visit_AsyncFunctionDef = visit_FunctionDef

    out[MODULE] = ast.dump(Strip().visit(tree))
    return out


def changed_units(old: str | None, new: str | None) -> set:
    """Units of a file that differ between ``old`` and ``new`` text (None:
    the file does not exist there); :data:`ALL` when either does not parse
    or the file is deleted."""
    if new is None:
        return {ALL}
    try:
        after = _units(ast.parse(new))
    except SyntaxError:
        return {ALL}
    if old is None:
        return set(after)
    try:
        before = _units(ast.parse(old))
    except SyntaxError:
        return {ALL}
    return {u for u in set(before) | set(after) if before.get(u) != after.get(u)}
