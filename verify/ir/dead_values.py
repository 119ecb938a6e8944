"""Values a pass leaves stale on purpose, checked to be dead.

Some rewrites make a value unobservable on purpose: sharding stage 2 reduces
each gradient to the rank that owns the parameter, so on every other rank
that gradient keeps its local (unreduced) value, and the optimizer op that
read it is gone.  Comparing it with the unsharded program's all-reduced
gradient would report a difference nobody can observe.

An adapter declares such values (``PassAdapter.unobserved``: ``{var:
reason}``); the checks drop a declared value only when this module confirms,
on the rewritten program, that it is dead there: not a parameter, not
persistable, and read by no op after its last write (main program).  A
declared value that is still read stays compared, so an adapter cannot hide
a live value.  What the value stood for (the parameter it updated) is still
compared on every rank.
"""
from __future__ import annotations


def is_dead(snap, name: str) -> bool:
    """``name`` is an intermediate of ``snap`` (main program) that nothing
    reads after its last write."""
    var = snap.vars.get(name)
    if var is None or var.is_parameter or var.persistable:
        return False
    last = max((op.idx for op in snap.ops if name in op.writes()), default=-1)
    return not any(name in op.reads() for op in snap.ops if op.idx > last)


def unobserved(adapter, case, rank, before, after) -> dict:
    """``{var: reason}`` the adapter declares unobservable on ``rank`` that
    are dead in ``after``; the rest of its declaration is ignored."""
    hook = getattr(adapter, "unobserved", None)
    declared = hook(case, rank, before, after) if hook is not None else {}
    return {n: why for n, why in (declared or {}).items() if is_dead(after, n)}
