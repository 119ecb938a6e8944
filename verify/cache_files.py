"""The project's cache on disk: where each memo lives, and how a file is
written into it.

Every memo (compiled modules, snapshots, numeric runs, recorded placements)
lives under ``$PADDLE_PASS_VERIFY_CACHE`` (default
``~/.cache/paddle-pass-verify``), each in its own subdirectory, each with an
environment variable of its own: ``0`` turns that memo off, a path puts it
there.  Files are written whole and renamed, so a reader in another process
(xdist workers, rank processes) never sees half a file; a cache that cannot
be written costs speed, never results.

Every file of every cache is one entry (:func:`write_entry`,
:func:`read_entry`): its full key and the sha256 of its payload, checked on
read, so a torn, edited, foreign or ill-typed entry is a miss that the
caller recomputes and rewrites, never a wrong value or a crash.  A cached
directory (a planned model) is sealed the same way (:func:`cached_dir`).
Nothing is ever unpickled from a directory a user hands in (a program dir):
the memos about one live here, keyed by the digest of its files.
"""
from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """The cache's root directory."""
    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "paddle-pass-verify"


def memo_dir(env: str, sub: str) -> Path | None:
    """The directory of one memo: ``$env`` when it names one, None when it is
    ``0`` (the memo is off), else ``<root>/<sub>``."""
    own = os.environ.get(env, "")
    if own == "0":
        return None
    if own not in ("", "1"):
        return Path(own)
    return root() / sub


def write_whole(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file renamed into place;
    False (nothing raised) when the cache cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# the one entry format of every cache (issue 33: caches are not trusted as
# they are).  An entry is a header line -- magic, then JSON naming the entry's
# key, the sha256 and the size of its payload -- and the payload's bytes.  A
# reader names the key it wants: any failure to read, to check (another key,
# another digest or size, no header) or to decode the payload (any exception,
# an object of the wrong type) is a miss; the caller recomputes and rewrites
# the entry.  A key is the data or a full sha256 digest, never a prefix.
# ---------------------------------------------------------------------------
import hashlib  # noqa: E402
import json  # noqa: E402

ENTRY_MAGIC = b"paddle-pass-verify cache entry 1\n"
MISS = object()  # what read_entry returns for a miss (None may be a value)
ENTRY_STATS = {"rejected": 0}  # entries present but failing a check


class EntryMiss(Exception):
    """An entry that is not the one asked for (torn, edited, foreign)."""


def pack_entry(key: str, payload: bytes) -> bytes:
    """The bytes of an entry holding ``payload`` under ``key``."""
    head = json.dumps({"key": key, "sha256": hashlib.sha256(payload).hexdigest(),
                       "size": len(payload)}, sort_keys=True).encode()
    return ENTRY_MAGIC + head + b"\n" + payload


def unpack_entry(data: bytes, key: str) -> bytes:
    """The payload of the entry ``data`` if it holds ``key`` and its payload
    has the digest it names; else :class:`EntryMiss`."""
    if not data.startswith(ENTRY_MAGIC):
        raise EntryMiss("not a cache entry")
    head, sep, payload = data[len(ENTRY_MAGIC):].partition(b"\n")
    if not sep:
        raise EntryMiss("no header")
    try:
        meta = json.loads(head)
    except ValueError:
        raise EntryMiss("a damaged header") from None
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise EntryMiss("another key")
    if meta.get("size") != len(payload) or \
            meta.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise EntryMiss("the payload's digest differs")
    return payload


def read_entry(path, key: str, decode=None, valid=None):
    """The value of the entry at ``path`` under ``key`` (``decode(payload)``,
    the payload's bytes by default), or :data:`MISS`: when the file is absent,
    torn, edited or another key's, when ``decode`` raises anything, or when
    ``valid(value)`` is not true (or raises)."""
    if path is None:
        return MISS
    try:
        data = Path(path).read_bytes()
    except OSError:
        return MISS
    try:
        value = unpack_entry(data, key)
        if decode is not None:
            value = decode(value)
        if valid is not None and not valid(value):
            raise EntryMiss("a value of the wrong type")
        return value
    except Exception:  # any exception type: a miss, the caller rewrites it
        ENTRY_STATS["rejected"] += 1
        return MISS


def write_entry(path, key: str, payload: bytes) -> bool:
    """Write ``payload`` under ``key`` to ``path`` whole (see
    :func:`write_whole`); False when the cache cannot be written."""
    if path is None:
        return False
    return write_whole(Path(path), pack_entry(key, payload))


def unpickle(data: bytes):
    """``pickle.loads`` of an entry's checked payload (only ever bytes this
    cache wrote: the digest and key were checked) or of a blob this process
    pickled itself (the snapshot memo's copies), the cyclic collector paused
    (unpickling a zoo snapshot makes ~10 k small containers, none of them
    cyclic garbage, and the collections cost more than the unpickling)."""
    import gc
    import pickle

    on = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(data)
    finally:
        if on:
            gc.enable()


def pickled(value) -> bytes:
    import pickle

    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


# -- a directory as one entry (a planned model's program dir) ----------------
SEAL = ".cache-entry"
_SEALS: dict = {}  # (folder, key, every file's stat) -> True: checked in this process


def _files(folder: Path) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.name != SEAL and not p.name.endswith(".tmp"))


def seal_dir(folder, key: str) -> bool:
    """Write ``folder``'s seal: its key and the sha256 of every file in it."""
    folder = Path(folder)
    try:
        files = {rel: hashlib.sha256((folder / rel).read_bytes()).hexdigest()
                 for rel in _files(folder)}
    except OSError:
        return False
    return write_entry(folder / SEAL, key, json.dumps(files, sort_keys=True).encode())


def sealed(folder, key: str) -> bool:
    """Whether ``folder`` holds its seal under ``key`` and every file the seal
    names, with the digest it names (a file added since is ignored)."""
    folder = Path(folder)
    files = read_entry(folder / SEAL, key, json.loads,
                       lambda v: isinstance(v, dict) and v and
                       all(isinstance(k, str) and isinstance(d, str) for k, d in v.items()))
    if files is MISS:
        return False
    try:
        stats = tuple((rel, (st := (folder / rel).stat()).st_mtime_ns, st.st_size, st.st_ino)
                      for rel in sorted(files))
        seal = (folder / SEAL).stat()
    except OSError:
        return False
    memo = (str(folder), key, seal.st_mtime_ns, seal.st_ino, stats)
    if memo in _SEALS:
        return True
    for rel, want in files.items():
        if ".." in Path(rel).parts:
            return False
        try:
            if hashlib.sha256((folder / rel).read_bytes()).hexdigest() != want:
                return False
        except OSError:
            return False
    _SEALS[memo] = True
    return True


LEGACY_MEMOS = ("stage-checks", "relation-runs", "relation-results", "relation-proofs",
                "job-plan-runs", "job-plan-results")  # once kept in program dirs


def cached_dir(final, key: str, make, legacy_ok=None) -> Path:
    """The cached directory ``final`` made by ``make()`` (which writes it,
    whole, at ``final``) for ``key`` (a full digest), made once: a dir whose
    seal (:func:`seal_dir`) holds ``key`` and whose every file has the digest
    the seal names is used; a damaged, edited or unsealed one is removed and
    made again (concurrent builders wait on ``<final>.lock``).  A dir written
    before seals existed is sealed as it is when ``legacy_ok(final)`` accepts
    it (validated, its stale memos removed)."""
    import shutil

    final = Path(final)
    if sealed(final, key):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f"{final.name}.lock", "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # not POSIX
            pass
        if sealed(final, key):
            return final
        if legacy_ok is not None and final.is_dir() and not (final / SEAL).exists():
            try:
                ok = bool(legacy_ok(final))
            except Exception:
                ok = False
            if ok:
                for sub in LEGACY_MEMOS:  # pickles: never read again
                    shutil.rmtree(final / sub, ignore_errors=True)
                if seal_dir(final, key):
                    return final
        if final.exists():  # half-written, damaged or edited: made again
            shutil.rmtree(final, ignore_errors=True)
        got = make()
        seal_dir(final, key)
        return Path(got) if got is not None else final
