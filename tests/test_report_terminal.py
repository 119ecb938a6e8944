"""The run's terminal summary at 80 columns (verify/report/terminal.py): no
verdict header shrunk to ``NOT_...``, no pass name cut; piped, the Markdown
table as before."""
from __future__ import annotations

import io
import re
from types import SimpleNamespace

from verify.report.terminal import print_summary
from verify.verdicts import SHOWN as VERDICTS

PASSES = ["auto_parallel_fused_linear_promotion", "allreduce_matmul_grad_overlapping",
          "auto_parallel_sequence_parallel_optimization", "auto_parallel_gradient_merge_pass"]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _apps():
    apps = []
    for i, p in enumerate(PASSES):
        for j, status in enumerate(["EQUIVALENT", "LEFT_ALONE", "NOT_EQUIVALENT",
                                    "CONTRACT_BROKEN", "PASS_CRASHED", "NOT_APPLIED",
                                    "INCONCLUSIVE"][: 3 + i + 1]):
            apps.append(SimpleNamespace(pass_name=p, case_name=f"c{j}", status=status,
                                        as_expected=True, proof="witnessed" if j == 0 else ""))
    return apps


SUMMARY = {"by_status": {"EQUIVALENT": 4}, "numeric_witness": {"simulator only": 4},
           "value_proofs_by_rank": {"proved": 0, "refuted": 0, "unknown": 0}}


def test_summary_reads_at_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _Terminal()
    print_summary(_apps(), "/x/report.json", 1.0, tty, summary=SUMMARY)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", tty.getvalue())
    lines = text.splitlines()
    assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    assert "..." not in text and "\u2026" not in text
    for p in PASSES:  # every pass name whole, on a line of its own
        assert p in lines
    for v in VERDICTS:  # every verdict whole where a pass has it
        assert re.search(rf"\b{v} \d", text), v
    block = lines[lines.index(PASSES[3]) + 1:]
    joined = " ".join(ln.strip() for ln in block[:3])
    assert "INCONCLUSIVE 1" in joined and "witnessed, not proved 1" in joined
    assert "unexpected 0" in joined


def test_summary_piped_is_the_markdown_table():
    plain = io.StringIO()
    print_summary(_apps(), "/x/report.json", 1.0, plain, summary=SUMMARY)
    header = next(ln for ln in plain.getvalue().splitlines() if ln.startswith("pass "))
    assert [c.strip() for c in header.split("|")][1:3] == ["EQUIVALENT", "LEFT_ALONE"]
