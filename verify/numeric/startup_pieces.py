"""A var the startup program writes at another shape than the main program
reads it: which piece the rank holds, or why that cannot be told.

Paddle's planner leaves a rank's startup program unresharded (its
``Engine._initialize`` reshards it at run time): a parameter is written at
its *global* shape (``[32, 16]`` where the rank's main program reads its
``[32, 8]`` piece), and under ``dist.shard_optimizer`` on DP x TP a moment
at the parameter's TP piece, not yet split over ``dp``.  Every consumer of
a startup value (the value proof's symbolic startup, the PIR executor and
simulator runs) takes the rank's piece through :func:`take`, on the
original and on the rewritten programs alike, each from its own snapshot,
so a pass that changes the piece (or the init) is seen.

Where the piece comes from, in order (:func:`spec` records both):

* the startup value's own dist attr (snapshot ``meta["dist_values"]``: its
  global shape and this rank's local shape): when the value is written at
  that global shape and the local shape is the main var's, the piece is
  :func:`placements.local_piece` of it;
* the main var's placement recorded by the planner (snapshot
  ``meta["placements"]``, from the program dir's ``planner.json``): the
  piece of the global value or of any coarser piece
  (:func:`placements.piece_from_coarser`; a coarser piece along a subset of
  mesh axes has a shape no other subset gives, except along size-1 axes,
  where the slice is the whole).

Anything else raises :class:`Unresolved` naming rank, var and both shapes:
the check is INCONCLUSIVE, never a reshape, never a silent pass.
"""
from __future__ import annotations

import re

import numpy as np

from .placements import PlacementError, local_piece, piece_from_coarser

# startup ops that store a value under a name (PIR) and their name slots
_NAMED = {"builtin.set_parameter": "parameter", "builtin.shadow_output": "output"}


class Unresolved(Exception):
    """The startup writes a var at a shape no recorded placement relates to
    the main program's; the message names rank, var and both shapes."""

    def __init__(self, msg, rank=None, var=None):
        super().__init__(msg)
        self.rank, self.var = rank, var


def parse_dist_attr(text: str) -> dict | None:
    """A placement record (``placements.py``'s form) from a PIR tensor dist
    attr's text (``mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1],
    partial(0,SUM), placements:[...]``); None when the text lacks a field."""
    def ints(key):
        m = re.search(key + r":\[([-0-9, ]*)\]", text or "")
        return None if m is None else [int(x) for x in m.group(1).split(",") if x.strip()]

    mesh, ids, dims = ints("mesh_shape"), ints("process_ids"), ints("dims_mappings")
    if mesh is None or ids is None or dims is None:
        return None
    partial = {a: t for a, t in re.findall(r"partial\((\d+),\s*(\w+)\)", text)}
    return {"process_ids": ids, "mesh_shape": mesh, "dims_mapping": dims, "partial": partial}


def _written_shape(op, snap, src):
    """The shape the startup op computing ``src`` writes: its ``shape`` attr
    (a draw or a constant: what its kernel makes, the local piece where the
    planner gave it one), else the value's declared shape."""
    shape = op.attrs.get("shape") if op is not None else None
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
        return [int(d) for d in shape]
    return snap.shape(src)


def spec(snap) -> dict:
    """``{var: entry}`` for every var the startup program of ``snap`` stores
    by name (PIR) that its main program declares at a static shape;
    ``entry``: ``main`` (the main var's shape), ``written`` (the shape the
    startup writes), ``source`` (the startup value), ``global`` / ``local`` /
    ``startup_placement`` (from its dist attr, when it has one),
    ``placement`` (the main var's, when the planner recorded it).  Plain
    data: it travels to isolation workers and keys remembered runs."""
    meta = snap.meta or {}
    dist = meta.get("dist_values") or {}
    recorded = meta.get("placements") or {}
    producer = {}
    out = {}
    main_vars = {n for op in snap.ops for n in op.reads() + op.writes()}
    for op in snap.startup_ops:
        slot = _NAMED.get(op.type)
        if slot is None:
            for n in op.writes():
                producer[n] = op
            continue
        src = next(iter(op.reads()), None)
        for var in op.outputs.get(slot, []):
            v = snap.vars.get(var)
            if src is None or v is None or var not in main_vars or \
                    any(int(d) < 0 for d in v.shape):
                continue
            entry = {"main": [int(d) for d in v.shape], "source": src,
                     "written": _written_shape(producer.get(src), snap, src)}
            rec = dist.get(src)
            if rec and rec.get("local_shape") is not None:
                entry.update({"global": snap.shape(src), "local": list(rec["local_shape"]),
                              "startup_placement": parse_dist_attr(rec.get("dist_attr")),
                              "dist_attr": rec.get("dist_attr")})
            if var in recorded:
                entry["placement"] = recorded[var]
            out.setdefault(var, entry)
    return out


def mismatched(entries: dict) -> dict:
    """The entries whose startup writes another shape than the main reads."""
    return {n: e for n, e in entries.items() if e["written"] != e["main"]}


def take(entry: dict, rank: int, var: str, value, where: str = ""):
    """``rank``'s piece (the main var's shape) of ``value``, the startup's
    write of ``var`` (any array: numbers or the value proof's terms); see
    the module docstring.  Raises :class:`Unresolved`."""
    arr = np.asarray(value)
    have, main = list(arr.shape), list(entry["main"])
    if have == main:
        return arr
    ps = entry.get("startup_placement")
    try:
        if ps is not None and not ps.get("partial") and have == list(entry.get("global") or []) \
                and list(entry.get("local") or []) == main:
            return local_piece(arr, ps, rank)
        pf = entry.get("placement")
        if pf is not None and not pf.get("partial"):
            got = piece_from_coarser(arr, main, pf, rank)
            if got is not None:
                return got
    except PlacementError as exc:
        raise Unresolved(f"{where}rank {rank}: the startup program writes {var} at {have}, "
                         f"the main program reads it at {main}: {exc}", rank, var) from exc
    said = (f"its startup value {entry['source']} has dist attr {entry['dist_attr']!r} "
            f"(global {entry.get('global')}, local {entry.get('local')})"
            if entry.get("dist_attr") else f"its startup value {entry['source']} has no "
            "dist attr")
    rec = (f"the planner's placement of {var} is {entry['placement']}"
           if entry.get("placement") else f"no placement of {var} is recorded")
    raise Unresolved(f"{where}rank {rank}: the startup program writes {var} at {have}, the "
                     f"main program reads it at {main}, and no placement says which piece "
                     f"the rank holds ({said}; {rec}): not compared, not reshaped",
                     rank, var)


def startup_states(snap, rank: int) -> dict:
    """``{var: entry}`` of the states (not parameters) the startup writes at
    another shape than the main reads: the run takes the rank's piece of
    what the startup wrote (``startup_pieces.take``).  Checked here on the
    written shape, so an unresolvable one raises ``Unresolved`` before any
    run."""
    out = {}
    for n, e in mismatched(spec(snap)).items():
        v = snap.vars.get(n)
        if v is None or v.is_parameter:
            continue
        take(e, rank, n, np.empty(e["written"], dtype=np.int8))
        out[n] = e
    return out


def set_startup_states(scope, states: dict, rank: int, place) -> None:
    """After the startup ran: each of ``states`` (:func:`startup_states`)
    replaced in ``scope`` by the rank's piece of it."""
    for n, e in states.items():
        var = scope.find_var(n)
        if var is None or not var.get_tensor()._is_initialized():
            continue
        arr = np.array(var.get_tensor())
        if list(arr.shape) != list(e["main"]):
            var.get_tensor().set(np.ascontiguousarray(take(e, rank, n, arr)), place)
