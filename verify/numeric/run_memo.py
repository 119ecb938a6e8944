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

Programs stamped with the bytes they were imported from (``verify/ir/origin.py``:
a cached plan's rank files, the rewritten programs an isolation worker sent
back) are keyed by that stamp instead of their serialization
(``pir_runner._remembered``); a stamp's miss falls back to the serialized,
canonicalized programs, so a left-alone rewrite still finds the original's
run.

Only successful runs are kept (an error is re-raised by a fresh run, with
its own ``where``); ``where`` names the run in messages and is not part of
the key.  Results are copied in and out, so no caller can alter another's.
The memo lives in this process and holds :data:`SIZE` results.

On disk too (``disk=True``, the PIR runs): a result is also kept under
``<cache>/runs/<key>.pkl`` (one entry of ``verify/cache_files.py``: its
key and the sha256 of its pickle checked on read, any failure a miss; ``$PADDLE_PASS_VERIFY_CACHE``, default
``~/.cache/paddle-pass-verify``; ``PADDLE_PASS_VERIFY_RUN_CACHE=0`` turns
it off, ``=DIR`` keeps the results in DIR), the key a hash of everything that decides the result: the
payload's bytes, Paddle's version and commit, numpy's and Python's
versions, every ``FLAGS_*`` in the environment, a ``--paddle-file``
overlay, and the source of every module a run executes (``verify/numeric``
and ``verify/ir``, the runners and the snapshot import).  The original
programs of a zoo case are planned once and cached; their runs then are
too, across ``verify run`` and gate processes.  A reused result says so:
:data:`LAST` holds the key and where it came from, which the numeric
check writes into its message and details.

Within one session (``disk="session"``, the legacy runs): results are kept
only while a session is open (:func:`session`; the gate opens one around
each application) and shared through the session's folder by every
process of that run (the xdist workers of one gate run), keyed as on disk.
Outside a session such a call just runs: the legacy runs of ``verify run``
and of the tests are not remembered.  The session's folder is the run's own
(``<report dir>/run-memo``, removed when the run ends), so nothing outlives
the run; ``PADDLE_PASS_VERIFY_RUN_CACHE=0`` turns it off too.
"""
from __future__ import annotations

import copy
import hashlib
import io
import os
import pickle
import sys
from collections import OrderedDict
from pathlib import Path

from verify.cache_files import MISS, memo_dir, pickled, read_entry, unpickle, write_entry

SIZE = 32
_MEMO: OrderedDict = OrderedDict()
STATS = {"hits": 0, "misses": 0}
DISK_STATS = {"hits": 0, "writes": 0}
# the last remembered() call's reuse: {"key", "from"} ("this process" or the
# file), or {} when it ran
LAST: dict = {}
_FINGERPRINT = []
# the open session: {"folder": Path | None} (None: this process only), or {}
_SESSION: dict = {}


def digest(payload) -> str:
    """sha256 of ``payload`` pickled (dicts in their insertion order), by
    value: pickle's memo is off, so two payloads of equal values give one
    key whichever objects they share (one array object in two ranks'
    parameters, or two equal ones; a payload is never self-referential)."""
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    p.fast = True
    p.dump(payload)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def fingerprint() -> bytes:
    """What decides a run besides its payload (see the module docstring)."""
    if not _FINGERPRINT:
        import numpy
        import paddle

        from verify.ir.paddle_overlay import fingerprint as overlay

        h = hashlib.sha256()
        for part in (paddle.__version__, getattr(paddle.version, "commit", ""),
                     numpy.__version__, sys.version, overlay()):
            h.update(str(part).encode() + b"\0")
        for k in sorted(k for k in os.environ if k.startswith("FLAGS_")):
            h.update(f"{k}={os.environ[k]}".encode() + b"\0")
        h.update(f"cuda={paddle.is_compiled_with_cuda()}".encode() + b"\0")
        root = Path(__file__).resolve().parent.parent
        # the runners, the snapshot import, and the isolation worker that
        # hosts the simulated and PIR runs
        for f in [f for d in ("numeric", "ir") for f in sorted((root / d).glob("*.py"))] + \
                [root / "engine" / "isolation.py"]:
            h.update(f"{f.parent.name}/{f.name}".encode() + f.read_bytes())
        _FINGERPRINT.append(h.digest())
    return _FINGERPRINT[0]


def disk_dir() -> Path | None:
    """Where results are kept on disk, or None when that is turned off."""
    return memo_dir("PADDLE_PASS_VERIFY_RUN_CACHE", "runs")


class session:
    """``with session(folder):`` calls with ``disk="session"`` are remembered
    until the block ends: in this process, and in ``folder`` (shared by the
    processes of one run; None: this process only)."""

    def __init__(self, folder=None):
        self.folder = Path(folder) if folder else None

    def __enter__(self):
        _SESSION.clear()
        _SESSION["folder"] = self.folder
        return self

    def __exit__(self, *exc):
        _SESSION.clear()
        return False


def _keep(key, result):
    _MEMO[key] = copy.deepcopy(result)
    while len(_MEMO) > SIZE:
        _MEMO.popitem(last=False)


def steps_shape(v) -> bool:
    """A rank's steps as a run gives them: ``[{name: value}]``."""
    return isinstance(v, list) and all(
        isinstance(st, dict) and all(isinstance(n, str) for n in st) for st in v)


def run_shape(v) -> bool:
    """A PIR run's result: one rank's steps, or ``{rank: its steps}``."""
    return steps_shape(v) or (isinstance(v, dict) and bool(v) and all(
        isinstance(r, int) and steps_shape(x) for r, x in v.items()))


def remembered(key_payload, run, disk=False, valid=None):
    """``run()``'s result, or a copy of the result of an earlier call whose
    ``key_payload`` pickled to the same bytes (in this process; with
    ``disk``, in any process that ran the same sources; with
    ``disk="session"`` only inside an open :class:`session`, in the
    processes sharing its folder; see the module docstring).  :data:`LAST`
    says whether and from where it was reused.  ``valid(result)``: what a
    result read from disk must satisfy (else it is a miss, run and rewritten)."""
    LAST.clear()
    if disk == "session":
        if not _SESSION or os.environ.get("PADDLE_PASS_VERIFY_RUN_CACHE", "") == "0":
            return run()
        folder = _SESSION["folder"]
    else:
        folder = disk_dir() if disk else None
    key = digest(key_payload)
    if key in _MEMO:
        _MEMO.move_to_end(key)
        STATS["hits"] += 1
        LAST.update(key=key[:16], reused_from="this process")
        return copy.deepcopy(_MEMO[key])
    path = None
    if folder is not None:
        dkey = hashlib.sha256(key.encode() + fingerprint()).hexdigest()
        path = folder / f"{dkey}.pkl"
        # one entry of verify/cache_files.py: its key and digest checked; a
        # damaged, edited or foreign entry (any exception) is a miss, rewritten
        result = read_entry(path, dkey, unpickle, valid)
        if result is not MISS:
            DISK_STATS["hits"] += 1
            _keep(key, result)
            # a session's folder goes with its run: name the run, not the file
            LAST.update(key=dkey[:16], reused_from="an earlier job of this run"
                        if disk == "session" else str(path))
            return result
    STATS["misses"] += 1
    result = run()
    _keep(key, result)
    if path is not None and write_entry(path, dkey, pickled(result)):
        DISK_STATS["writes"] += 1
    return result


def clear() -> None:
    """Forget every result (tests)."""
    _MEMO.clear()
    STATS.update(hits=0, misses=0)
    DISK_STATS.update(hits=0, writes=0)
    LAST.clear()
