"""Python's cyclic garbage collector during a run of many applications.

A `verify run` parent keeps what every application made (snapshots of
every rank's programs, their diffs, the render and snapshot memos): on the
25 zoo applications about a million containers.  CPython runs a full
collection each time the long-lived heap grew by a quarter, and each one
walks all of it: 9 full collections cost 5.9 of the parent's 22 CPU s there
(young ones 1.3 s more), measured with ``gc.callbacks``.

Within :func:`run_scope`, :func:`settle` (the matrix runner calls it after
each application) collects what that application left, then freezes the
survivors (``gc.freeze``): later collections skip them, so each object is
walked about once.  Reference counting still frees a frozen object nothing
points to; only a frozen object that later becomes part of a garbage
*cycle* waits, until the full collection every :data:`FULL_EVERY`
applications (unfreeze, collect, freeze again) or the scope's end (unfreeze).
Outside a scope :func:`settle` does nothing (tests and library callers keep
the interpreter's own behaviour).
"""
from __future__ import annotations

import contextlib
import gc

FULL_EVERY = 32  # applications between full collections of the frozen heap too
YOUNG_THRESHOLD = 10_000  # allocations between young collections (CPython: 700)

_STATE = {"depth": 0, "settled": 0}


@contextlib.contextmanager
def run_scope():
    """Collect-and-freeze after each application (:func:`settle`) within;
    the collector's thresholds and frozen set restored at the end."""
    outer = _STATE["depth"] == 0
    if outer:
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])
        _STATE["settled"] = 0
        gc.collect()
        gc.freeze()  # the modules and what start-up made: alive for good
    _STATE["depth"] += 1
    try:
        yield
    finally:
        _STATE["depth"] -= 1
        if outer:
            gc.unfreeze()  # back to the oldest generation, collected as usual
            gc.set_threshold(*thresholds)


def active() -> bool:
    return _STATE["depth"] > 0


def settle() -> None:
    """After an application, within :func:`run_scope`: collect what it left
    in cycles and freeze the survivors; every :data:`FULL_EVERY` calls the
    frozen heap is collected too.  Outside a scope nothing."""
    if not active():
        return
    _STATE["settled"] += 1
    if _STATE["settled"] % FULL_EVERY == 0:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
