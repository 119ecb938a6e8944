"""One rank's programs as a snapshot, whichever IR they are in."""
from __future__ import annotations

import copy
from collections import OrderedDict

from verify.ir import snapshot as snap_mod
from verify.ir.origin import key_of

# Snapshots of stamped programs (verify/ir/origin.py) by (stamp, case, rank):
# every pass applied to a case snapshots the same originals; a copy is
# handed out each time, so no caller sees another's edits.
SIZE = 32
_MEMO: OrderedDict = OrderedDict()
STATS = {"hits": 0, "misses": 0}


def snapshot_of(rp, case, rank: int, which: str):
    """The snapshot of one RankProgram (``which``: "original" or "rewritten"),
    from either IR, with the case and rank in its meta."""
    key = key_of(rp)
    if key is None:
        return _snapshot(rp, case, rank, which)
    memo_key = (key, case.name, rank)
    if memo_key in _MEMO:
        _MEMO.move_to_end(memo_key)
        STATS["hits"] += 1
        s = copy.deepcopy(_MEMO[memo_key])
        _name_values(rp)  # leave rp's name table as taking the snapshot would
    else:
        STATS["misses"] += 1
        s = _snapshot(rp, case, rank, which)
        _MEMO[memo_key] = copy.deepcopy(s)
        while len(_MEMO) > SIZE:
            _MEMO.popitem(last=False)
    s.meta["program"] = which
    return s


def _snapshot(rp, case, rank: int, which: str):
    meta = {"case": case.name, "rank": rank, "program": which}
    if getattr(case, "ir", "legacy") == "pir":  # the same snapshot form, from PIR
        from verify.ir.pir_snapshot import snapshot_rank

        if getattr(rp, "placements", None):  # the planner's, for startup pieces
            meta["placements"] = dict(rp.placements)
        return snapshot_rank(rp, meta)
    s = snap_mod.from_programs(rp.main, rp.startup, meta=meta)
    s.feeds = sorted(f.name for f in rp.feeds)
    return s


def _name_values(rp) -> None:
    names = getattr(rp, "names", None)
    if names is not None and hasattr(names, "assign"):
        import paddle

        with paddle.pir_utils.IrGuard():
            names.assign(rp.main)


def clear() -> None:
    """Forget every snapshot (tests)."""
    _MEMO.clear()
    STATS.update(hits=0, misses=0)
