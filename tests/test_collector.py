"""The collector in a run (``verify/engine/collector.py``): settled per
application inside a run's scope (cyclic garbage an application left is
freed, survivors frozen), untouched outside one."""
from __future__ import annotations

import gc
import weakref

from verify.engine import collector


class _Node:
    pass


def _cycle():
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_frees_an_applications_cycles_and_the_scope_restores_the_collector():
    thresholds = gc.get_threshold()
    assert not collector.active()
    collector.settle()  # outside a scope: nothing
    assert gc.get_freeze_count() == 0
    with collector.run_scope():
        assert collector.active() and gc.get_threshold()[0] >= collector.YOUNG_THRESHOLD
        kept = _Node()
        kept.self = kept  # alive: survives the settle, frozen
        gone = _cycle()  # garbage in a cycle: only a collection frees it
        collector.settle()
        assert gone() is None
        assert gc.get_freeze_count() > 0
        holder = [_Node()]
        holder[0].self = holder[0]
        frozen = weakref.ref(holder[0])
        collector.settle()  # alive here: frozen
        holder.clear()  # garbage in a cycle now, its objects frozen ...
        collector.settle()
        assert frozen() is not None  # ... wait for a full collection
        for _ in range(collector.FULL_EVERY):
            collector.settle()
        assert frozen() is None  # the full collection every FULL_EVERY applications
        assert kept.self is kept
    assert not collector.active()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
