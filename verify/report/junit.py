"""``junit.xml``: the report for CI dashboards.

One testsuite ``pass-equivalence`` with one testcase per application
(classname = pass, name = case, time = its seconds).  A testcase has a
``<failure>`` when its verdict is not the expected one, carrying the first
non-EQUIVALENT checks' messages and counterexamples, and always a
``<system-out>`` with the verdict summary.  Tests that did not finish
(``report["unfinished"]``) and the report's ``errors`` become testcases with
an ``<error>``, so a dashboard cannot show them as green.
"""
from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

from verify.report.describe import describe_counterexample, repro_command

SUITE = "pass-equivalence"
MAX_CHECKS = 8

# Characters XML 1.0 cannot hold (ElementTree would write them and produce
# a file no parser accepts).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(text) -> str:
    return _INVALID_XML.sub("\ufffd", "" if text is None else str(text))


def _unexpected(app) -> bool:
    if "as_expected" in app:
        return not app["as_expected"]
    return app.get("verdict") != app.get("expected")


def _where(c) -> str:
    rank = "all ranks" if c.get("rank") is None else f"rank {c.get('rank')}"
    return f"[{c.get('kind')}/{c.get('name')} {rank}]"


def failure_text(app: dict) -> tuple[str, str]:
    """(message attribute, body) of an unexpected application's failure."""
    verdict, expected = app.get("verdict"), app.get("expected")
    bad = [c for c in app.get("checks") or [] if c.get("verdict") != "EQUIVALENT"]
    bad.sort(key=lambda c: (c.get("verdict") != verdict, c.get("counterexample") is None))
    head = f"{verdict}, expected {expected}"
    if bad:
        head += f": {bad[0].get('message')}"
    elif verdict == "EQUIVALENT":
        head += ": every check is EQUIVALENT (the expected finding went away)"
    lines = [f"{app.get('pass')} on {app.get('case')} is {verdict}, expected {expected} "
             f"({app.get('expected_reason')})",
             f"reproduce: {repro_command(app)}"]
    for c in bad[:MAX_CHECKS]:
        lines.append(f"{_where(c)} {c.get('verdict')}: {c.get('message')}")
        if c.get("counterexample"):
            text, _ = describe_counterexample(c)
            lines.append(f"    counterexample: {text}")
            lines.append("    " + json.dumps(c["counterexample"], default=str)[:2000])
    if len(bad) > MAX_CHECKS:
        lines.append(f"... and {len(bad) - MAX_CHECKS} more non-EQUIVALENT checks")
    return head[:1000], "\n".join(lines)


def summary_text(app: dict) -> str:
    """The verdict summary of one application (its ``<system-out>``)."""
    from collections import Counter

    checks = app.get("checks") or []
    by = Counter(c.get("verdict") for c in checks)
    lines = [f"verdict: {app.get('verdict')} (expected {app.get('expected')}: "
             f"{app.get('expected_reason')})",
             f"checks: {len(checks)} (" + ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
             + ")"]
    for o in app.get("rank_outcomes") or []:
        state = "fired" if o.get("fired") else "unchanged"
        if o.get("error"):
            state = "pass raised"
        if o.get("build_error"):
            state = "case did not build"
        ops = f", ops {o.get('ops_before')}->{o.get('ops_after')}" if "ops_before" in o else ""
        lines.append(f"rank {o.get('rank')}: {state}{ops}")
    if (app.get("source") or "installed") != "installed":
        lines.append(f"pass source: {app.get('source')}")
    lines.append(f"reproduce: {repro_command(app)}")
    return "\n".join(lines)


def build_junit(report: dict) -> ET.Element:
    apps = list(report.get("applications") or [])
    unfinished = list(report.get("unfinished") or [])
    errors = list(report.get("errors") or [])
    total_time = sum(float(a.get("seconds") or 0.0) for a in apps)
    n_fail = sum(1 for a in apps if _unexpected(a))
    n_err = len(unfinished) + (1 if errors else 0)
    n_tests = len(apps) + n_err

    root = ET.Element("testsuites", name=SUITE, tests=str(n_tests), failures=str(n_fail),
                      errors=str(n_err), time=f"{total_time:.3f}")
    suite = ET.SubElement(root, "testsuite", name=SUITE, tests=str(n_tests),
                          failures=str(n_fail), errors=str(n_err), skipped="0",
                          time=f"{total_time:.3f}", timestamp=_x(report.get("created", "")))
    props = ET.SubElement(suite, "properties")
    env = report.get("environment") or {}
    for name, value in (("schema", report.get("schema")), ("command", report.get("command")),
                        ("seed", report.get("seed")), ("backend", report.get("backend")),
                        ("source", report.get("source")), ("paddle", env.get("paddle")),
                        ("paddle_commit", env.get("paddle_commit")), ("z3", env.get("z3")),
                        ("numpy", env.get("numpy")), ("python", env.get("python")),
                        *((f"value_budget.{k}", v)
                          for k, v in (report.get("value_budget") or {}).items())):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=_x(value))
    for a in apps:
        case = ET.SubElement(suite, "testcase", classname=_x(a.get("pass")),
                             name=_x(a.get("case")),
                             time=f"{float(a.get('seconds') or 0.0):.3f}")
        if _unexpected(a):
            message, body = failure_text(a)
            fail = ET.SubElement(case, "failure", message=_x(message),
                                 type=_x(a.get("verdict")))
            fail.text = _x(body)
        out = ET.SubElement(case, "system-out")
        out.text = _x(summary_text(a))
    for nodeid in unfinished:
        case = ET.SubElement(suite, "testcase", classname="unfinished", name=_x(nodeid),
                             time="0.000")
        err = ET.SubElement(case, "error", message="the test did not finish",
                            type="unfinished")
        err.text = _x(f"{nodeid} ran but left no result (a crashed worker or an "
                      "interrupted test)")
    if errors:
        case = ET.SubElement(suite, "testcase", classname="report", name="errors", time="0.000")
        err = ET.SubElement(case, "error", message=_x(f"{len(errors)} error(s) in the run"),
                            type="error")
        err.text = _x("\n\n".join(str(e) for e in errors))
    return root


def write_junit(report: dict, directory: str) -> str:
    """Write ``junit.xml`` for ``report`` into ``directory``; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "junit.xml")
    tree = ET.ElementTree(build_junit(report))
    ET.indent(tree, space=" ")
    tmp = path + ".tmp"
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
    return path
