"""The docs a newcomer reads stay true: docs/findings.md is generated from the
baseline (stale -> red), the README stays short, and every doc it links exists."""
from __future__ import annotations

import re
from pathlib import Path

from verify.report import findings

ROOT = Path(__file__).resolve().parents[1]


def test_findings_doc_is_generated_from_the_baseline():
    from verify.engine import baseline

    want = findings.render(baseline.load())
    assert Path(findings.PATH).read_text() == want, \
        "docs/findings.md is stale: run python -m verify baseline"


def test_findings_rows_group_findings_and_leave_equivalents_out():
    data = {"paddle": "9.9", "entries": {
        "p::a": {"fires": True, "verdict": "NOT_EQUIVALENT", "reason": "r1", "evidence": "e1"},
        "p::b": {"fires": True, "verdict": "NOT_EQUIVALENT", "reason": "r1", "evidence": "e1"},
        "p::c": {"fires": True, "verdict": "EQUIVALENT", "reason": "fine"},
        "q::a": {"fires": True, "verdict": "PASS_CRASHED", "reason": "raises | here"}}}
    text = findings.render(data)
    assert "| a, b | p | NOT_EQUIVALENT | r1 | e1 |" in text
    assert "raises \\| here" in text and "(the application report)" in text
    assert "fine" not in text and "| EQUIVALENT | 1 |" in text


def test_readme_is_short_and_its_links_exist():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), f"README links {link}, which does not exist"
