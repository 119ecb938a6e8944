"""Stamps (``verify/ir/origin.py``) for the programs the engine builds and
imports itself, so every pass applied to a case shares one snapshot of its
originals and no numeric run re-serializes a program to find its key.

Two kinds, each a hash of the bytes the programs were imported from and of
the source of the code that imports them (:func:`code_key`):

* an original built from a program dir's rank folder (``build_pir``'s
  ``plan_digest``: every file it read) with no pass applied before it
  (``Case.build`` drops the digest when ``then`` ran);
* a rewritten program imported from the bytes the isolation worker sent back
  (``PassAdapter.import_rewritten``), with the fresh build whose feeds, loss
  and placements it carries.

Nothing else is stamped; a program someone edits in place afterwards (the
engine's mutants) is :func:`verify.ir.origin.forget`-ed first.
"""
from __future__ import annotations

import pickle
from pathlib import Path

from verify.ir.origin import digest, key_of, stamp

_ROOT = Path(__file__).resolve().parent.parent.parent
# the code between a program dir's files (or a worker's bytes) and the
# RankProgram: what a stamp's key must change with besides the bytes
_CODE = ("cases/base.py", "cases/program_dirs.py", "cases/pir_matmul_grad.py",
         "verify/plan/pir_rank.py", "passes/base.py", "verify/engine/isolation.py",
         "verify/engine/origins.py")
_CODE_KEY: list = []


def code_key() -> str:
    """sha256 of the importing code: :data:`_CODE` and every ``verify/ir``
    module (the import, the names, the loss finder)."""
    if not _CODE_KEY:
        files = [_ROOT / f for f in _CODE] + sorted((_ROOT / "verify" / "ir").glob("*.py"))
        _CODE_KEY.append(digest(*(p.name.encode() + p.read_bytes() for p in files)))
    return _CODE_KEY[0]


def stamp_built(rp) -> bool:
    """Stamp ``rp``, a builder's untouched program-dir rank (see the module
    docstring); False when it carries no plan digest."""
    plan = getattr(rp, "plan_digest", None)
    if not plan or not hasattr(rp, "origin"):
        return False
    stamp(rp, digest("built", plan, code_key()))
    return True


def stamp_imported(rewritten, exported: dict, fresh) -> bool:
    """Stamp ``rewritten``, just imported from the worker's ``exported`` with
    ``fresh``'s metadata; False when ``fresh`` is not itself stampable."""
    plan = getattr(fresh, "plan_digest", None)
    if not plan or not hasattr(rewritten, "origin"):
        return False
    stamp(rewritten, digest("imported", pickle.dumps(exported, protocol=4), plan,
                            code_key()))
    return True


__all__ = ["code_key", "stamp_built", "stamp_imported", "key_of"]
