"""Names from input (case names, a program dir's ``plan.json``, a premerge
cache entry) made safe where they become file names or terminal text.

* :func:`component`: THE sanitiser of every file name derived from input: any
  string to one safe path component (no ``/``, ``\\``, ``..``, control
  characters, leading dot); a name already safe is kept as it is, any other
  keeps its readable characters and gets ``~`` plus a sha256 digest of the
  whole original (``~`` is never kept from input), so distinct names give
  distinct components.
* :func:`inside`: a path joined under a root, refused (``UnsafePath``) unless
  it resolves inside it: every write of a file named from input goes through it.
* :func:`printable`: text for a terminal or a log line, its control
  characters (ESC, BEL, CR, NUL, ...) and invisible format characters (bidi
  overrides) escaped as ``\\x1b``, ``\\u202e``.

Strings entering generated code (a reproducer) go through ``repr``/JSON, never
through this module: see ``verify/repro/embedded.py``'s ``literal``.
"""
from __future__ import annotations

import hashlib
import os
import unicodedata

# characters a component keeps as they are (``~`` is the digest's mark: never kept)
_KEEP = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=@,")
MAX_KEPT = 100  # readable characters kept; a component stays far below NAME_MAX
DIGEST_HEX = 32  # 128 bits of sha256


class UnsafePath(ValueError):
    """A path derived from input that would leave its root."""


def component(name) -> str:
    """``name`` as one safe path component, readable and injective.

    Kept unchanged when it is non-empty, at most ``MAX_KEPT`` characters of
    ``[A-Za-z0-9._-+=@,]`` and does not start with a dot; otherwise every
    other character becomes ``_`` (a leading dot too), the result is cut at
    ``MAX_KEPT`` and ``~<digest of the original>`` is appended."""
    s = str(name)
    kept = "".join(ch if ch in _KEEP else "_" for ch in s)
    if kept.startswith("."):
        kept = "_" + kept[1:]
    if kept == s and s and len(s) <= MAX_KEPT:
        return s
    digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_HEX]
    return f"{kept[:MAX_KEPT]}~{digest}"


def inside(root, *parts) -> str:
    """``os.path.join(root, *parts)``, resolved (symlinks too), refused with
    ``UnsafePath`` unless it lies inside ``root`` (resolved)."""
    base = os.path.realpath(str(root))
    path = os.path.realpath(os.path.join(base, *(str(p) for p in parts)))
    if path != base and not path.startswith(base.rstrip(os.sep) + os.sep):
        raise UnsafePath(f"{printable(os.path.join(str(root), *map(str, parts)))} "
                         f"is outside {printable(str(root))}")
    return path


def printable(text, keep: str = "") -> str:
    """``text`` with control and format characters escaped (``\\x1b``,
    ``\\n``, ``\\u202e``): safe on a terminal, one line in a log; the
    characters of ``keep`` (say ``"\\n"`` for a message of several lines)
    are left as they are."""
    s = str(text)
    if s.isprintable():
        return s
    out = []
    for ch in s:
        if ch.isprintable() or ch in keep:
            out.append(ch)
        elif unicodedata.category(ch) in ("Zs",):  # other spaces: shown as spaces
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])  # \x1b, \n, \u202e
    return "".join(out)
