"""``index.html``: the report as one self-contained page (no network, works from file://).

The page opens on what needs a decision, in this order:

1. *Needs a decision* (``#decide``): the verdicts that differ from the
   baseline, new findings first, then findings that went away, each with
   its one-line cause, evidence and reproducer;
2. *Findings by pass* (``#findings``): every application that is a finding,
   one line each (cause, evidence, reproducer link);
3. the pass x case matrix (``#matrix``), cases every pass left alone folded
   into one collapsed table;
4. one collapsible section per application (``#app-<pass>--<case>``) with
   its checks, counterexamples in words (long ones folded), numeric error
   tables, the pass's traceback, the op-level diff per rank and the command
   that reproduces it.

An EQUIVALENT application carries how it stands: ``proved`` (the value
proof holds on every rank at the programs' shapes), ``proved at sizes 1, 2,
3`` (a ``-1`` dim proved at those sizes only) or ``witnessed, not proved``
(numeric runs alone).  Filters (plain JS: a text box, one checkbox per
verdict, "unexpected only") are given in the query string too, and the
header's counts link to them: ``index.html?unexpected=1``,
``?v=NOT_EQUIVALENT,PASS_CRASHED``, ``?q=col_``, ``?proof=witnessed``,
``?proof=sizes``.

Detail the page does not need at first (diffs of applications that are no
finding, whole programs, numeric tables' agreeing rows) is in the sidecar
``detail.js`` (``verify/report/write.py``), loaded by a button in the
application's section, never before: the page stays small.

Everything is rendered server-side from the Jinja2 templates in
``verify/report/templates/`` (autoescaped: no report text reaches the page
unescaped); the JS only filters, counts and opens the section a matrix cell
links to, so the page is complete without JS.  This module turns a report
into plain values for the templates (grouping, ordering, wording); the
templates only lay them out.
"""
from __future__ import annotations

import os
import re

import jinja2
from markupsafe import Markup

from verify.report.describe import (describe_counterexample, fmt, repro_command,  # noqa: F401
                                    reproducer_command, short_message)
from verify.verdicts import SHOWN as VERDICTS

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _finalize(value):
    """Every ``{{ }}`` value: None prints as nothing, and control characters
    (a worker's ANSI colours, NULs) as U+FFFD, which HTML allows."""
    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Markup):
        return _CONTROL.sub("\ufffd", value)
    return value


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("verify.report", "templates"),
    autoescape=True, finalize=_finalize, trim_blocks=True, lstrip_blocks=True,
    undefined=jinja2.StrictUndefined)  # a misspelt field fails the render, not blanks it
_ENV.filters["fmt"] = fmt


def _anchor_ids(apps) -> list:
    ids, seen = [], {}
    for a in apps:
        base = "app-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{a.get('pass')}--{a.get('case')}")
        n = seen.get(base, 0) + 1
        seen[base] = n
        ids.append(base if n == 1 else f"{base}-{n}")
    return ids


def _unexpected(app) -> bool:
    if "as_expected" in app:
        return not app["as_expected"]
    return app.get("verdict") != app.get("expected")


def _first_finding(app) -> dict | None:
    bad = [c for c in app.get("checks") or [] if c.get("verdict") != "EQUIVALENT"]
    same = [c for c in bad if c.get("verdict") == app.get("verdict")]
    return (same or bad or [None])[0]


def _status(app):
    return app.get("status") or app.get("verdict")


def _ranks_phrase(ranks) -> str:
    ranks = sorted(set(ranks), key=str)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _budget_text(b) -> str | None:
    """The value proof's deterministic budget, as the header shows it."""
    if not b:
        return None
    return (f"{b.get('work_units')} work units; Z3 rlimit {b.get('z3_rlimit_per_query')} "
            f"per query, {b.get('z3_rlimit_per_application')} per application, seed "
            f"{b.get('z3_random_seed')}")


def _header(report: dict) -> dict:
    env = report.get("environment") or {}
    summ = report.get("summary") or {}
    paddle_note = None
    if env.get("paddle_commit"):
        paddle_note = (f"({str(env['paddle_commit'])[:10]}, "
                       + ("CUDA)" if env.get("paddle_cuda") else "CPU)"))
    meta = [("Paddle", env.get("paddle", "?"), paddle_note), ("z3", env.get("z3", "?"), None),
            ("numpy", env.get("numpy", "?"), None), ("python", env.get("python", "?"), None),
            ("seed", report.get("seed"), None), ("backend", report.get("backend"), None),
            ("value budget", _budget_text(report.get("value_budget")), None),
            ("pass source", report.get("source", "installed"), None),
            ("created", report.get("created"), None),
            ("platform", env.get("platform", ""), None)]
    by = summ.get("by_status") or summ.get("by_verdict") or {}
    chips = sorted(by.items(), key=lambda kv: VERDICTS.index(kv[0])
                   if kv[0] in VERDICTS else 99)
    return {"schema": report.get("schema", ""), "meta": meta, "command": report.get("command"),
            "total": summ.get("total", 0), "as_expected": summ.get("as_expected", 0),
            "unexpected": summ.get("unexpected", 0), "chips": chips,
            # EQUIVALENT on sampling alone, shown apart from the proved
            "witnessed": summ.get("witnessed_not_proved") or [],
            "sizes": [f"{a.get('pass')} on {a.get('case')}" for a in report.get("applications")
                      or [] if (_proof(a) or {}).get("kind") == "sizes"]}


def _proof(app) -> dict | None:
    """How an EQUIVALENT application stands, as its badge says it:
    ``{"kind": "proved"|"sizes"|"witnessed", "text": ...}``; None otherwise."""
    if _status(app) != "EQUIVALENT":
        return None
    if app.get("proof") == "witnessed":
        return {"kind": "witnessed", "text": "witnessed, not proved",
                "title": "EQUIVALENT on the numeric runs (sampling) alone: no value "
                         "proof holds on every rank"}
    label = str(app.get("proof") or "")
    if label.startswith("proved at sizes"):  # the engine's label names the sizes
        return {"kind": "sizes", "text": label,
                "title": "the value proof holds at these sampled sizes of the -1 dims, "
                         "not for every size"}
    sizes = sorted({n for c in app.get("checks") or [] if c.get("kind") == "value"
                    for n in ((c.get("details") or {}).get("batch_sizes") or [])
                    if isinstance(n, int)})
    if sizes:
        text = "proved at sizes " + ", ".join(str(n) for n in sizes)
        return {"kind": "sizes", "text": text,
                "title": "the value proof holds with every -1 dim at these sizes, "
                         "not for every size"}
    return {"kind": "proved", "text": "proved",
            "title": "the value proof holds on every rank at the programs' shapes"}


_CAUSE_CHARS = 220


def _cause(app) -> dict:
    """One line of why (the first deciding check), and its evidence."""
    first = _first_finding(app)
    if first is None:
        notes = app.get("notes") or []
        line = str(notes[0]).splitlines()[0] if notes else ""
        return {"line": line[:_CAUSE_CHARS], "cut": len(line) > _CAUSE_CHARS,
                "evidence": ""}
    msg = short_message(app, first).strip()
    line = msg.splitlines()[0] if msg else ""
    rank = "all ranks" if first.get("rank") is None else f"rank {first.get('rank')}"
    cex = ""
    if first.get("counterexample"):
        cex = describe_counterexample(dict(first))[0]
    return {"line": line[:_CAUSE_CHARS], "cut": len(line) > _CAUSE_CHARS,
            "evidence": f"{first.get('kind')}/{first.get('name')}, {rank}",
            "counterexample": cex[:_CAUSE_CHARS], "cex_cut": len(cex) > _CAUSE_CHARS}


# the baseline comparison's labels (verify/engine/baseline.py), as the page words them
_LABEL_WORDS = {"NEW": "new finding", "CHANGED CAUSE": "new finding: changed cause",
                "GONE": "finding went away", "FIXED": "finding went away: fixed",
                "UNPROVED": "finding not reproduced, not proved gone"}


def _label(app) -> str | None:
    """The run's comparison with the baseline by finding identity, if made."""
    b = app.get("baseline")
    return b.get("label") if isinstance(b, dict) and b.get("label") else None


def _needs_decision(app) -> bool:
    """A verdict that differs from the baseline, or the same verdict for a
    finding the baseline does not record (NEW, CHANGED CAUSE, ...)."""
    label = _label(app)
    return _unexpected(app) or (label is not None and label != "unchanged")


def _finding_entry(app, aid) -> dict:
    v = _status(app)
    decide = _needs_decision(app)
    label = _label(app)
    if label in _LABEL_WORDS:
        what = _LABEL_WORDS[label]
    elif decide:
        what = "new finding" if v not in ("EQUIVALENT", "LEFT_ALONE") else "finding went away"
    else:
        what = "as the baseline says"
    return {"id": aid, "pass": app.get("pass"), "case": app.get("case"), "verdict": v,
            "expected": app.get("expected"), "unexpected": decide,
            "what": what,
            "cause": _cause(app), "reproducer": app.get("reproducer"),
            "reproduce": reproducer_command(app) if v != "EQUIVALENT" else repro_command(app)}


def _decide(apps, ids) -> list:
    """The verdicts that differ from the baseline: new findings first."""
    out = [_finding_entry(a, aid) for a, aid in zip(apps, ids) if _needs_decision(a)]
    out.sort(key=lambda e: not e["what"].startswith("new finding"))
    return out


def _findings(apps, ids) -> list:
    """Every finding (a status other than EQUIVALENT / LEFT_ALONE), by pass."""
    groups = {}
    for a, aid in zip(apps, ids):
        if _status(a) in ("EQUIVALENT", "LEFT_ALONE"):
            continue
        groups.setdefault(a.get("pass"), []).append(_finding_entry(a, aid))
    return [{"pass": p, "entries": sorted(items, key=lambda e: (not e["unexpected"],
                                                               VERDICTS.index(e["verdict"])
                                                               if e["verdict"] in VERDICTS
                                                               else 99))}
            for p, items in groups.items()]


def _filters(apps) -> list:
    """The verdict checkboxes: the known verdicts in order, then any other status."""
    present = {_status(a) for a in apps}
    return VERDICTS + sorted(v for v in present if v not in VERDICTS)


def _matrix(apps, ids) -> dict:
    """Passes as columns, cases as rows; a cell lists its applications (usually one)."""
    passes, cases, cells = [], [], {}
    for a, aid in zip(apps, ids):
        p, c = a.get("pass"), a.get("case")
        if p not in passes:
            passes.append(p)
        if c not in cases:
            cases.append(c)
        v = _status(a)
        cells.setdefault((p, c), []).append({
            "id": aid, "pass": p, "case": c, "verdict": v, "expected": a.get("expected"),
            "unexpected": _unexpected(a), "ranks": len(a.get("ranks") or []),
            "proof": (_proof(a) or {}).get("kind", ""),
            "title": f"{p} on {c}: {v} (expected {a.get('expected')})"})
    rows, quiet = [], []
    for c in cases:
        row = [cells.get((p, c), []) for p in passes]
        first = next((e for entries in row for e in entries), None)
        entry = {"case": c, "ranks": first["ranks"] if first else None, "cells": row}
        # a case every pass left alone (as expected) is folded away
        alone = all(e["verdict"] == "LEFT_ALONE" and not e["unexpected"]
                    for entries in row for e in entries)
        (quiet if alone else rows).append(entry)
    return {"passes": passes, "rows": rows, "quiet": quiet}


_RANK = "\x00RANK\x00"
_CEX_CHARS = 300


def _counterexamples(checks) -> list:
    """Counterexamples in words; the same finding on several ranks is one line."""
    groups = {}
    for c in checks:
        cex = c.get("counterexample")
        if not cex:
            continue
        rank = cex.get("rank", c.get("rank"))
        if rank is not None:
            c = dict(c, counterexample=dict(cex, rank=_RANK))
        text, long_text = describe_counterexample(c)
        key = (c.get("verdict"), c.get("kind"), c.get("name"), text, long_text)
        groups.setdefault(key, []).append(rank)
    items = []
    for (verdict, kind, name, text, long_text), ranks in groups.items():
        known = [r for r in ranks if r is not None]
        text = text.replace(f"rank {_RANK}", _ranks_phrase(known) if known else "all ranks")
        # a long one folded: its first words as the summary
        fold = len(text) > _CEX_CHARS
        items.append({"verdict": verdict, "kind": kind, "name": name, "text": text,
                      "long_text": long_text, "fold": fold,
                      "head": text[:_CEX_CHARS].rsplit(" ", 1)[0] if fold else text})
    return items


def _numeric_tables(checks) -> list:
    """One table per numeric check: each compared tensor and how far it is off."""
    out = []
    for c in checks:
        if c.get("kind") != "numeric":
            continue
        details = c.get("details") or {}
        tensors = details.get("tensors")
        if not tensors:
            if details.get("tensors_total"):  # every row agrees: all in detail.js
                out.append({"name": c.get("name"), "tensors": [], "bad": 0,
                            "total": details["tensors_total"], "has_note": False,
                            "rank": "all ranks" if c.get("rank") is None
                            else f"rank {c.get('rank')}"})
            continue
        total = (c.get("details") or {}).get("tensors_total") or len(tensors)
        out.append({"name": c.get("name"), "tensors": tensors, "total": total,
                    "rank": "all ranks" if c.get("rank") is None else f"rank {c.get('rank')}",
                    "bad": sum(1 for t in tensors if not t.get("ok", True)),
                    "has_note": any(t.get("note") for t in tensors)})
    return out


def _tracebacks(app) -> list:
    """Each distinct traceback once, with the ranks that raised it."""
    groups = {}
    for c in app.get("checks") or []:
        tb = (c.get("details") or {}).get("traceback")
        if tb:
            what = "the pass raised" if c.get("kind") == "pass" else \
                f"{c.get('kind')}/{c.get('name')}"
            groups.setdefault((what, str(tb)), []).append(c.get("rank"))
    out = []
    for (what, tb), ranks in groups.items():
        known = [r for r in ranks if r is not None]
        out.append({"what": what, "where": f" on {_ranks_phrase(known)}" if known else "",
                    "text": tb})
    return out


def _diff_lines(diff: str) -> list:
    """(css class, line) for each line of a unified diff."""
    lines = []
    for ln in diff.splitlines():
        if ln.startswith("+++") or ln.startswith("---"):
            cls = "dh"
        elif ln.startswith("@@"):
            cls = "dhunk"
        elif ln.startswith("+"):
            cls = "dadd"
        elif ln.startswith("-"):
            cls = "ddel"
        else:
            cls = "dctx"
        lines.append((cls, ln or " "))
    return lines


def _diffs(app) -> list:
    """The op-level diff of every rank; ranks with the very same diff share one block."""
    groups = {}
    for o in app.get("rank_outcomes") or []:
        if o.get("diff_in_detail"):
            continue  # shown from detail.js on demand (see _application)
        if o.get("build_error"):
            key = ("build", o["build_error"])
        else:
            ops = (f"{o.get('ops_before')} \u2192 {o.get('ops_after')} ops"
                   if "ops_before" in o else "")
            state = "fired" if o.get("fired") else "unchanged"
            if o.get("error"):
                state = "pass raised" + (", program partly rewritten" if o.get("fired") else "")
            key = ("diff", o.get("diff") or "", ops, state)
        groups.setdefault(key, []).append(o.get("rank"))
    out = []
    for key, ranks in groups.items():
        who = _ranks_phrase([r for r in ranks if r is not None])
        if key[0] == "build":
            out.append({"who": who, "build_error": key[1]})
            continue
        _, diff, ops, state = key
        lines = _diff_lines(diff) if diff.strip() else []
        out.append({"who": who, "build_error": None,
                    "what": ", ".join(x for x in (ops, state) if x), "lines": lines,
                    "open": len(diff.splitlines()) <= 80})
    return out


def _application(app, aid) -> dict:
    """Everything one application's section shows."""
    v = _status(app)
    checks = app.get("checks") or []
    first = _first_finding(app)
    oneline = None
    if first is not None and v not in ("EQUIVALENT", "LEFT_ALONE"):
        oneline = short_message(app, first)
    fires = app.get("expected_fires")
    seconds = app.get("seconds")
    return {
        "id": aid, "pass": app.get("pass"), "case": app.get("case"), "verdict": v,
        "expected": app.get("expected"), "unexpected": _unexpected(app),
        "expected_reason": app.get("expected_reason"),
        "fires": "" if fires is None else (" (the pass must fire)" if fires
                                           else " (the pass must leave it alone)"),
        "ranks": ", ".join(str(r) for r in app.get("ranks") or []),
        "fired": ", ".join(str(o.get("rank")) for o in app.get("rank_outcomes") or []
                           if o.get("fired")) or "none",
        "n_checks": len(checks), "n_bad": sum(1 for c in checks
                                              if c.get("verdict") != "EQUIVALENT"),
        "seconds": f"{seconds:.2f} s" if isinstance(seconds, (int, float)) else "",
        "oneline": oneline,
        "source": app.get("source") or "installed", "case_file": app.get("case_file"),
        # what the application really ran, per pass: a file (path, sha256) or
        # the installed Paddle (version, commit)
        "applied": [dict(r) for r in app.get("applied") or []],
        "notes": list(app.get("notes") or []),
        "repro": repro_command(app),
        # a reproducer script is offered for findings only
        "reproducer": None if v in (None, "EQUIVALENT") else {
            "command": reproducer_command(app), "file": app.get("reproducer")},
        "checks": [{"kind": c.get("kind"), "name": c.get("name"), "verdict": c.get("verdict"),
                    "rank": "all" if c.get("rank") is None else c.get("rank"),
                    "message": short_message(app, c)} for c in checks],
        "counterexamples": _counterexamples(checks), "tracebacks": _tracebacks(app),
        "numeric": _numeric_tables(checks), "diffs": _diffs(app),
        "proof": _proof(app),
        # what detail.js holds for this application, for its "load" button
        "detail": _detail_note(app)}


def _detail_note(app) -> dict | None:
    """The button that loads this application's diffs and tables from detail.js."""
    index = app.get("_index")
    outs = [o for o in app.get("rank_outcomes") or [] if o.get("diff_in_detail")]
    tables = [c for c in app.get("checks") or []
              if (c.get("details") or {}).get("tensors_total")]
    if index is None or not (outs or tables):
        return None
    what = []
    if outs:
        n = sum(o.get("diff_lines") or 0 for o in outs)
        what.append(f"the op-level diff of {_ranks_phrase([o.get('rank') for o in outs])} "
                    f"({n} lines)")
    if tables:
        what.append(f"{len(tables)} full numeric table" + ("s" if len(tables) > 1 else ""))
    return {"index": index, "what": " and ".join(what)}


def _groups(apps, ids) -> list:
    """The sections, grouped by pass in first-seen order."""
    groups = {}
    for a, aid in zip(apps, ids):
        groups.setdefault(a.get("pass"), []).append(_application(a, aid))
    return [{"pass": p, "apps": items} for p, items in groups.items()]


def render_html(report: dict) -> str:
    """The page for ``report`` (a report.json dict) as a string."""
    apps = [dict(a, _index=i) for i, a in enumerate(report.get("applications") or [])]
    ids = _anchor_ids(apps)
    summ = report.get("summary") or {}
    title = (f"Pass equivalence: {summ.get('total', len(apps))} applications, "
             f"{summ.get('unexpected', 0)} unexpected")
    return _ENV.get_template("page.html.j2").render(
        title=title, schema=report.get("schema", ""), header=_header(report),
        errors=report.get("errors") or [], unfinished=report.get("unfinished") or [],
        filters=_filters(apps), total=len(apps), decide=_decide(apps, ids),
        findings=_findings(apps, ids), detail_file=report.get("detail_file"),
        matrix=_matrix(apps, ids), groups=_groups(apps, ids))


def write_html(report: dict, directory: str) -> str:
    """Write ``index.html`` for ``report`` into ``directory``; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "index.html")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render_html(report))
    os.replace(tmp, path)
    return path
