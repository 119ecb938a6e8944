"""The bytes a rank's PIR programs were imported from, while untouched.

A RankProgram imported from serialized bytes (a cached plan's rank folder,
the rewritten programs an isolation worker sent back) is a deterministic
function of those bytes and of the code that imported it.  Whoever imported
it, and knows nothing has edited it since, may stamp it with a key of those
bytes (:func:`stamp`); a snapshot or a numeric run of it may then be keyed
by the stamp instead of being re-derived from the live programs
(re-serializing a 266-op zoo program costs ~0.2-0.5 s, its snapshot as much).

Fail-safe by construction: the stamp records the very ``main`` and
``startup`` objects it was made for, so a copy of the RankProgram holding
other programs (``dataclasses.replace(rp, main=...)``) has no valid stamp;
only the engine stamps (programs it built or imported itself and hands to
no pass), and whoever edits a stamped program in place must :func:`forget`
it first (the engine does, for its mutants).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Origin:
    key: str  # sha256 hex of the bytes (and the code) the programs came from
    main: object
    startup: object


def digest(*parts) -> str:
    """sha256 hex of ``parts`` (bytes or str), each length-prefixed."""
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def _pinned(rp) -> tuple:
    """What a stamp holds on to: ``rp``'s two programs; for programs
    deserialized on first read (``rp.programs_token()``,
    ``cases.pir_matmul_grad.LazyPirRankProgram``) a token that stays while
    they are the ones its bytes give, read or not, and changes when one is
    set to another program; reading it deserializes nothing."""
    token = getattr(rp, "programs_token", None)
    if callable(token):
        return token(), None
    return rp.main, rp.startup


def stamp(rp, key: str) -> None:
    """Record that ``rp``'s programs are, untouched, what ``key`` names."""
    rp.origin = Origin(key, *_pinned(rp))


def key_of(rp) -> str | None:
    """``rp``'s stamp, or None (never stamped, forgotten, or its programs are
    no longer the ones stamped)."""
    o = getattr(rp, "origin", None)
    if isinstance(o, Origin):
        main, startup = _pinned(rp)
        if o.main is main and o.startup is startup:
            return o.key
    return None


def forget(rp) -> None:
    """Drop ``rp``'s stamp: call before editing its programs in place."""
    if getattr(rp, "origin", None) is not None:
        rp.origin = None
