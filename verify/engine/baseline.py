"""The reviewed baseline: the verdict every application gets on today's Paddle.

``verify/baseline.json`` lists, for each pass x case, whether the pass must
fire, the verdict the installed Paddle gets, and why.  The statements come
from the cases (``cases/*.py``); the file is their one reviewable view, so a
changed verdict shows up as one diff line with its reason.  ``python -m
verify baseline`` rewrites it; a test fails when it is stale.

The gate is green when every verdict equals its baseline entry and red when
one changes either way: a new finding, or a finding that went away (then the
case and this file must be updated, like a strict xfail).
"""
from __future__ import annotations

import json
import os

PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "baseline.json")
SCHEMA = "pass-baseline/1"


def key(pass_name: str, case_name: str) -> str:
    return f"{pass_name}::{case_name}"


def current() -> dict:
    """The baseline as the cases state it now."""
    import cases
    import passes
    from verify.ir.legacy_ir import paddle_module

    entries = {}
    for adapter in passes.adapters().values():
        # declared: a family whose optional dependencies are missing here still
        # has its entries (the file must not depend on what is installed)
        for case in cases.all_cases(declared=True).values():
            if not adapter.handles(case):  # a pass meets only cases of its own IR
                continue
            e = case.expectation(adapter.name)
            entry = {"fires": e.fires, "verdict": e.verdict, "reason": e.reason}
            if getattr(e, "evidence", ""):
                entry["evidence"] = e.evidence
            entries[key(adapter.name, case.name)] = entry
    return {"schema": SCHEMA, "paddle": paddle_module().__version__, "entries": entries}


def render(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load(path: str = PATH) -> dict:
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a {SCHEMA} file")
    return data


def write(path: str = PATH) -> str:
    with open(path, "w") as f:
        f.write(render(current()))
    return path


def classify(expected: str, got: str) -> str:
    """How a verdict differs from its baseline, in the gate's words."""
    if expected == got:
        return "as baseline"
    if expected == "EQUIVALENT":
        return "NEW FINDING"
    if got == "EQUIVALENT":
        return "FIXED (update the case and the baseline)"
    return "CHANGED FINDING"
