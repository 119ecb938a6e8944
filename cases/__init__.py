"""The case library: every family module contributes a ``CASES`` list."""
from __future__ import annotations

import fnmatch
import importlib

from .base import Case, Expect, FeedSpec, RankProgram

FAMILIES = ["column_parallel", "engine_planned", "row_parallel", "layer_stack",
            "pir_matmul_grad", "sequence_parallel",
            "engine_sp", "pir_collectives", "engine_sharding", "engine_dp",
            "planned_models", "engine_pipeline", "pir_gradient_merge", "planner_models", "zoo",
            "amp", "pir_transpose", "pir_gemm_epilogue", "recompute", "master_grad"]


def unavailable_families() -> dict:
    """``{family: why}`` of the families whose optional dependencies are
    missing (a family module says so with ``UNAVAILABLE``; its ``CASES`` is
    then empty).  The CLI prints these so an absent family is never silent."""
    out = {}
    for fam in FAMILIES:
        why = getattr(importlib.import_module(f"cases.{fam}"), "UNAVAILABLE", None)
        if why:
            out[fam] = why
    return out


def all_cases(declared: bool = False) -> dict:
    """Every case by name, in family order.

    ``declared``: also the cases of families whose optional dependencies
    are missing here (their ``DECLARED`` list): what the baseline states,
    which must not depend on what is installed; they cannot be built."""
    out = {}
    for fam in FAMILIES:
        mod = importlib.import_module(f"cases.{fam}")
        for c in (getattr(mod, "DECLARED", mod.CASES) if declared else mod.CASES):
            if c.name in out:
                raise ValueError(f"duplicate case name {c.name} in cases/{fam}.py")
            out[c.name] = c
    return out


def select(patterns=None, extra=()) -> list:
    """Cases whose names match any glob in ``patterns`` (all when empty).

    ``extra``: more cases to choose among (a case file's, see
    ``cases/case_files.py``), after the built-in ones.
    A pattern that matches nothing raises ``KeyError`` naming it.
    """
    cases = all_cases()
    cases.update({c.name: c for c in extra})
    if not patterns:
        return list(cases.values())
    chosen = []
    for pat in patterns:
        hit = [c for n, c in cases.items() if fnmatch.fnmatchcase(n, pat)]
        if not hit:
            missing = "".join(f"; family {fam} is unavailable here ({why})"
                              for fam, why in unavailable_families().items())
            raise KeyError(f"no case matches {pat!r}{missing}; known: {', '.join(cases)}")
        chosen += [c for c in hit if c not in chosen]
    return chosen


__all__ = ["Case", "Expect", "FeedSpec", "RankProgram", "all_cases", "select",
           "unavailable_families"]
