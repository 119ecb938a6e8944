"""One rank's programs as a snapshot, whichever IR they are in."""
from __future__ import annotations

from verify.ir import snapshot as snap_mod


def snapshot_of(rp, case, rank: int, which: str):
    """The snapshot of one RankProgram (``which``: "original" or "rewritten"),
    from either IR, with the case and rank in its meta."""
    meta = {"case": case.name, "rank": rank, "program": which}
    if getattr(case, "ir", "legacy") == "pir":  # the same snapshot form, from PIR
        from verify.ir.pir_snapshot import snapshot_rank

        if getattr(rp, "placements", None):  # the planner's, for startup pieces
            meta["placements"] = dict(rp.placements)
        return snapshot_rank(rp, meta)
    s = snap_mod.from_programs(rp.main, rp.startup, meta=meta)
    s.feeds = sorted(f.name for f in rp.feeds)
    return s
