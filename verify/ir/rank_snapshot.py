"""One rank's programs as a snapshot, whichever IR they are in.

Snapshots of stamped programs (``verify/ir/origin.py``: imported from bytes
and untouched) are remembered by their stamp, the case and the rank: in
this process (every pass applied to a case snapshots the same originals),
and on disk under ``<cache>/snapshots/`` (``$PADDLE_PASS_VERIFY_CACHE``,
default ``~/.cache/paddle-pass-verify``; ``PADDLE_PASS_VERIFY_SNAPSHOT_CACHE``
= a dir, or ``0`` for none), so a later run takes a zoo rank's snapshot
(0.1-0.5 s to take from the live programs) from the same bytes.  The disk
key adds what the stamp does not name: Paddle's version and commit (its
deserializer and Python API make the program the snapshot reads) and a
``--paddle-file`` overlay's fingerprint; each file is one entry of
``verify/cache_files.py`` (that key and its digest checked on read, any
failure a miss that is rewritten).  Each caller gets its own copy
(unpickled), so no caller sees another's edits.
"""
from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from pathlib import Path

from verify.cache_files import (MISS, memo_dir, pack_entry, read_entry, unpickle,
                                 write_whole)
from verify.ir.origin import key_of

SIZE = 32
_MEMO: OrderedDict = OrderedDict()  # (stamp, case, rank) -> pickled snapshot
STATS = {"hits": 0, "misses": 0, "disk_hits": 0, "disk_writes": 0}


def snapshot_of(rp, case, rank: int, which: str):
    """The snapshot of one RankProgram (``which``: "original" or "rewritten"),
    from either IR, with the case and rank in its meta."""
    key = key_of(rp)
    if key is None:
        return _snapshot(rp, case, rank, which)
    memo_key = (key, case.name, rank)
    blob, s = _MEMO.get(memo_key), None
    if blob is not None:
        _MEMO.move_to_end(memo_key)
        STATS["hits"] += 1
        _name_values(rp)  # leave rp's name table as taking the snapshot would
    else:
        folder = disk_dir()
        dkey = None if folder is None else disk_key(key, case.name, rank)
        path = None if folder is None else folder / f"{dkey}.pkl"
        got = _read(path, dkey)
        if got is not None:
            blob, s = got  # the copy unpickled to check the file is this caller's
            STATS["disk_hits"] += 1
            _name_values(rp)
        else:
            STATS["misses"] += 1
            blob = pickle.dumps(_snapshot(rp, case, rank, which),
                                protocol=pickle.HIGHEST_PROTOCOL)
            _write(path, dkey, blob)
        _MEMO[memo_key] = blob
        while len(_MEMO) > SIZE:
            _MEMO.popitem(last=False)
    if s is None:
        s = unpickle(blob)  # a copy of its own (3-6x cheaper than deepcopy)
    s.meta["program"] = which
    return s


def disk_key(stamp: str, case_name: str, rank: int) -> str:
    """The on-disk key of a stamped rank's snapshot: the stamp (bytes and
    importing code), the case and rank, Paddle's version and commit, and
    a ``--paddle-file`` overlay."""
    from verify.ir.legacy_ir import paddle_module
    from verify.ir.paddle_overlay import fingerprint

    paddle = paddle_module()
    h = hashlib.sha256()
    for part in ("rank-snapshot/3", stamp, case_name, str(rank), paddle.__version__,
                 str(paddle.version.commit), fingerprint(), _format_digest()):
        b = part.encode()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


_FORMAT: list = []


def _format_digest() -> str:
    """sha256 of the modules that define and take a snapshot: a changed
    snapshot class is another key, never an old pickle of another shape."""
    if not _FORMAT:
        here = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for name in ("snapshot.py", "pir_snapshot.py", "rank_snapshot.py"):
            h.update(name.encode() + b"\0" + (here / name).read_bytes())
        _FORMAT.append(h.hexdigest())
    return _FORMAT[0]


def disk_dir() -> Path | None:
    return memo_dir("PADDLE_PASS_VERIFY_SNAPSHOT_CACHE", "snapshots")


def _disk_path(stamp, case_name, rank) -> Path | None:
    folder = disk_dir()
    return None if folder is None else folder / f"{disk_key(stamp, case_name, rank)}.pkl"


def _read(path, dkey):
    """``(blob, its unpickled snapshot)`` from the disk memo, or None: an
    entry of ``verify/cache_files.py`` under ``dkey`` whose digest holds and
    that unpickles to a snapshot; anything else (torn, edited, foreign, any
    exception) is a miss, and the snapshot taken afresh rewrites it."""
    if path is None:
        return None
    from verify.ir.snapshot import ProgramSnapshot

    got = read_entry(path, dkey, lambda blob: (blob, unpickle(blob)),
                     lambda v: isinstance(v[1], ProgramSnapshot) and isinstance(v[1].meta, dict))
    return None if got is MISS else got


def _write(path, dkey, blob: bytes) -> None:
    if path is None:
        return
    if write_whole(path, pack_entry(dkey, blob)):
        STATS["disk_writes"] += 1


def _snapshot(rp, case, rank: int, which: str):
    from verify.ir.snapshot import canonical

    s = _taken(rp, case, rank, which)
    canonical(s)  # attrs sorted: equal programs, equal render keys
    return s


def _taken(rp, case, rank: int, which: str):
    meta = {"case": case.name, "rank": rank, "program": which}
    if getattr(case, "ir", "legacy") == "pir":  # the same snapshot form, from PIR
        from verify.ir.pir_snapshot import snapshot_rank

        if getattr(rp, "placements", None):  # the planner's, for startup pieces
            meta["placements"] = dict(rp.placements)
        return snapshot_rank(rp, meta)
    from verify.ir import snapshot as snap_mod

    s = snap_mod.from_programs(rp.main, rp.startup, meta=meta)
    s.feeds = sorted(f.name for f in rp.feeds)
    return s


def _name_values(rp) -> None:
    later = getattr(rp, "when_loaded", None)
    if callable(later):  # programs deserialized on first read: named then, if ever
        later(_assign_names)
        return
    _assign_names(rp)


def _assign_names(rp) -> None:
    names = getattr(rp, "names", None)
    if names is not None and hasattr(names, "assign"):
        import paddle

        with paddle.pir_utils.IrGuard():
            names.assign(rp.main)


def clear() -> None:
    """Forget every snapshot of this process (tests; the disk keeps its own)."""
    _MEMO.clear()
    STATS.update(hits=0, misses=0, disk_hits=0, disk_writes=0)
