"""Numeric runs remembered by what they run.

A PIR numeric run (``pir_runner.run_ranks`` / ``run_program``) is a
deterministic function of its payload: the programs travel as PIR's own
serialization (the worker imports exactly those bytes), the parameters and
feeds are seeded arrays, the rings and the step count are data.  Two runs
with byte-identical payloads execute the same programs on the same values,
so the second one's result is the first one's.  That happens within one
``verify run``: the ORIGINAL programs of a case are run once per pass
applied to it, and a pass that leaves every rank alone hands back programs
that serialize to the same bytes as the originals.

Only successful runs are kept (an error is re-raised by a fresh run, with
its own ``where``); ``where`` names the run in messages and is not part of
the key.  Results are copied in and out, so no caller can alter another's.
The memo lives in this process and holds :data:`SIZE` results.
"""
from __future__ import annotations

import copy
import hashlib
import pickle
from collections import OrderedDict

SIZE = 32
_MEMO: OrderedDict = OrderedDict()
STATS = {"hits": 0, "misses": 0}


def digest(payload) -> str:
    """sha256 of ``payload`` pickled (dicts in their insertion order)."""
    return hashlib.sha256(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def remembered(key_payload, run):
    """``run()``'s result, or a copy of the result of an earlier call whose
    ``key_payload`` pickled to the same bytes."""
    key = digest(key_payload)
    if key in _MEMO:
        _MEMO.move_to_end(key)
        STATS["hits"] += 1
        return copy.deepcopy(_MEMO[key])
    STATS["misses"] += 1
    result = run()
    _MEMO[key] = copy.deepcopy(result)
    while len(_MEMO) > SIZE:
        _MEMO.popitem(last=False)
    return result


def clear() -> None:
    """Forget every result (tests)."""
    _MEMO.clear()
    STATS.update(hits=0, misses=0)
