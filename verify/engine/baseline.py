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
import re

PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "baseline.json")
SCHEMA = "pass-baseline/1"


def key(pass_name: str, case_name: str) -> str:
    return f"{pass_name}::{case_name}"


def current(previous: dict | None = None) -> dict:
    """The baseline as the cases state it now; each entry keeps the finding
    identities ``previous`` (the file as it is) recorded for it from a run
    (``python -m verify baseline --from-report``) while its verdict is the
    same (a changed verdict needs a new run's identities)."""
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
            k = key(adapter.name, case.name)
            old = ((previous or {}).get("entries") or {}).get(k) or {}
            if "findings" in old and old.get("verdict") == e.verdict:
                entry["findings"] = old["findings"]
            entries[k] = entry
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


# ------------------------------------------------------------------ words
# One vocabulary for ``run``, the gate and ``premerge``.
UNCHANGED = "unchanged"  # the same verdict and, where recorded, the same findings
NEW = "NEW"  # a finding the baseline does not have (or a finding that lost its job)
CHANGED_CAUSE = "CHANGED CAUSE"  # the same check fails, for another cause
GONE = "GONE"  # some of the baseline's findings went away, others remain
FIXED = "FIXED"  # every finding gone, and the pass still fires where it must
UNPROVED = "UNPROVED"  # a finding no longer reproduced but not proved gone (INCONCLUSIVE)
LABELS = (UNCHANGED, NEW, CHANGED_CAUSE, GONE, FIXED, UNPROVED)
# labels that make premerge exit 1 (a new defect); the gate and run are red
# on every label but UNCHANGED (a strict xfail: the baseline must be updated)
NEW_LABELS = (NEW, CHANGED_CAUSE)


def classify(expected: str, got: str, fires: bool | None = None,
             fired: bool | None = None) -> str:
    """How a verdict differs from its baseline (verdicts only: an entry
    without recorded findings).  ``fires``: the baseline says the pass fires
    here; ``fired``: it fired now on some rank.  A finding gone because the
    pass stopped firing is NEW, never FIXED."""
    if expected == got:
        return UNCHANGED
    if got == "EQUIVALENT":
        return NEW if fires and fired is False else FIXED
    if got == "INCONCLUSIVE" and expected != "EQUIVALENT":
        return UNPROVED  # never counted as fixed, nor as a new finding
    return NEW


# --------------------------------------------------------- finding identity
_OP = re.compile(r"\bop \d+ \(([\w.]+)\)")
_READS = re.compile(r"\b(?:reads|writes|var|variable|input|output) "
                    r"([A-Za-z_][\w.@/]*(?:@[\w]+)*)")
_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Interrupt|Exit))\b")
_FINDINGS = ("NOT_EQUIVALENT", "CONTRACT_BROKEN", "PASS_CRASHED", "NOT_APPLIED")


def _stable_var(name) -> str:
    """A variable's name, or "" for a name that is a position (PIR's
    ``%63``: renumbered when an op is inserted before it)."""
    name = str(name or "").strip().rstrip(".,:;)")
    return "" if not name or re.fullmatch(r"%\d+", name) else name


def identity(check: dict) -> dict:
    """A finding's identity, from one deciding check of a report: check kind
    and name, stage (the planner's), rank, op type and the variable it names
    (the position key: never an op index, which any insertion shifts), the
    exception's class for a crash.  Deterministic: nothing from a number a
    run computes."""
    cx = check.get("counterexample") if isinstance(check.get("counterexample"), dict) else {}
    details = check.get("details") if isinstance(check.get("details"), dict) else {}
    msg = str(check.get("message") or "")
    body = msg.split(": ", 1)[-1] if ": " in msg else msg
    op = cx.get("op_type") or ""
    if not op:
        m = _OP.search(body)
        op = m.group(1) if m else ""
    var = _stable_var(cx.get("var"))
    at = _OP.search(body)
    if not var and at:  # the variable the op names, after it in the message
        m = _READS.search(body[at.end():])
        var = _stable_var(m.group(1)) if m else ""
    error = ""
    if check.get("verdict") == "PASS_CRASHED" or check.get("kind") == "pass":
        m = _ERROR.search(body)
        error = m.group(1) if m else ""
    ident = {"check": f"{check.get('kind')}/{check.get('name')}",
             "stage": str(details.get("stage") or ""),
             "rank": check.get("rank"), "verdict": check.get("verdict"),
             "op": op, "var": var}
    if error:
        ident["error"] = error
    if not var and "declared" in cx and "inferred" in cx:  # a PIR value: its shapes say which
        ident["shapes"] = f"declared {cx['declared']}, is {cx['inferred']}"
    return ident


def _slot(ident: dict) -> tuple:
    """Where a finding is: the check, stage and rank (its cause aside)."""
    return (ident.get("check"), ident.get("stage") or "", ident.get("rank"))


def _canon(ident: dict) -> str:
    return json.dumps(ident, sort_keys=True)


def identities(app: dict) -> list:
    """The sorted, distinct identities of an application's findings (report
    dict): every deciding check whose verdict is a finding."""
    out = {_canon(identity(c)): identity(c) for c in app.get("checks") or []
           if isinstance(c, dict) and not c.get("advisory")
           and c.get("verdict") in _FINDINGS}
    return [out[k] for k in sorted(out)]


def decided(app: dict) -> list:
    """The checks (kind/name) that decided something here: a check that did
    not run (INCONCLUSIVE, e.g. no numeric backend) cannot say a finding went."""
    return sorted({f"{c.get('kind')}/{c.get('name')}" for c in app.get("checks") or []
                   if isinstance(c, dict) and not c.get("advisory")
                   and c.get("verdict") != "INCONCLUSIVE"})


def fired(app: dict):
    """Whether the pass fired on some rank (None: the report does not say)."""
    outs = [o.get("fired") for o in app.get("rank_outcomes") or [] if isinstance(o, dict)]
    outs = [f for f in outs if f is not None]
    return any(outs) if outs else None


def compare(entry: dict, app: dict) -> dict:
    """An application (report dict: ``verdict``, ``checks``,
    ``rank_outcomes``; or premerge's record: ``verdict``, ``identities``,
    ``fired``) against its baseline ``entry``: ``{"label", "new", "gone"}``,
    the label one of :data:`LABELS`.  Where the entry records its findings
    (``findings``), they are compared by identity: an identity not in the
    baseline is NEW even when the verdict is unchanged, a replaced one in
    the same check is CHANGED CAUSE, some gone is GONE; all gone is FIXED
    only where the pass still fires as the baseline says."""
    expected, got = entry.get("verdict"), app.get("verdict")
    now = app["identities"] if "identities" in app else identities(app)
    did = app["fired"] if "fired" in app else fired(app)
    ran = set(app["decided"] if "decided" in app else decided(app))
    fires = entry.get("fires")
    if "findings" not in entry:
        return {"label": classify(expected, got, fires, did), "new": [], "gone": []}
    base = {_canon(i): i for i in entry["findings"]}
    mine = {_canon(i): i for i in now}
    new = [mine[k] for k in sorted(mine) if k not in base]
    # a baseline finding of a check that decided nothing now (not run: no
    # numeric backend) is neither gone nor kept: it is not compared
    gone = [base[k] for k in sorted(base) if k not in mine and base[k].get("check") in ran]
    if got == "EQUIVALENT" and expected != "EQUIVALENT":
        label = NEW if fires and did is False else FIXED
    elif got == "INCONCLUSIVE" and expected not in ("EQUIVALENT", "INCONCLUSIVE") \
            and not new:
        label = UNPROVED
    elif new:
        gone_slots = {_slot(i) for i in gone}
        label = CHANGED_CAUSE if all(_slot(i) in gone_slots for i in new) else NEW
    elif expected != got:
        label = NEW if got != "EQUIVALENT" and _rank(got) < _rank(expected) else GONE
    elif gone:
        label = GONE
    else:
        label = UNCHANGED
    return {"label": label, "new": new, "gone": gone}


def _rank(verdict) -> int:
    order = ["PASS_CRASHED", "NOT_EQUIVALENT", "CONTRACT_BROKEN", "NOT_APPLIED",
             "INCONCLUSIVE", "EQUIVALENT"]
    return order.index(verdict) if verdict in order else len(order)


def describe(ident: dict) -> str:
    """One identity in words: ``[kind/name stage S rank R] VERDICT at op (var)``."""
    where = " ".join(x for x in (ident.get("op") or "", f"({ident['var']})"
                                 if ident.get("var") else "") if x)
    return (f"[{ident.get('check')}" + (f" stage {ident['stage']}" if ident.get("stage")
                                        else "") + f" rank {ident.get('rank')}] "
            f"{ident.get('verdict')}" + (f" at {where}" if where else "")
            + (f" raising {ident['error']}" if ident.get("error") else ""))


def from_report(data: dict, report: dict) -> tuple:
    """``data`` with the findings of every application of ``report`` whose
    verdict equals its entry's recorded (``entries[k]["findings"]``); the
    others are left as they are.  Returns ``(data, recorded, skipped)``:
    skipped are ``(key, why)`` (a verdict other than the baseline's, a case
    not in the baseline)."""
    recorded, skipped = 0, []
    for app in report.get("applications") or []:
        k = key(app.get("pass"), app.get("case"))
        entry = data["entries"].get(k)
        if entry is None or app.get("case_file"):
            skipped.append((k, "not a baseline entry"))
            continue
        if app.get("verdict") != entry.get("verdict"):
            skipped.append((k, f"verdict {app.get('verdict')}, baseline "
                               f"{entry.get('verdict')}: update the case's Expect first"))
            continue
        entry["findings"] = identities(app)
        recorded += 1
    return data, recorded, skipped
