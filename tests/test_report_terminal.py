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
        apps.append(SimpleNamespace(pass_name=p, case_name="sized", status="EQUIVALENT",
                                    as_expected=True, proof="proved at sizes B in 1, 3"))
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
    assert "unexpected 0" in joined and "proved at sizes only 1" in joined


def test_summary_piped_is_the_markdown_table():
    plain = io.StringIO()
    print_summary(_apps(), "/x/report.json", 1.0, plain, summary=SUMMARY)
    header = next(ln for ln in plain.getvalue().splitlines() if ln.startswith("pass "))
    assert [c.strip() for c in header.split("|")][1:3] == ["EQUIVALENT", "LEFT_ALONE"]


def test_latest_last_and_pruning(tmp_path, monkeypatch):
    """``last`` follows every run, ``latest`` the full ones; the oldest
    default folders past the number kept go, never one a link names."""
    import os
    import time as _time

    from verify.report import write

    for i, name in enumerate(["run-a", "pytest-b", "run-c", "run-d", "run-e", "other"]):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text("{}")
        os.utime(tmp_path / name, (_time.time() - 100 + i, _time.time() - 100 + i))
    write.point_reports(str(tmp_path / "run-a"), full=True)
    write.point_reports(str(tmp_path / "run-e"), full=False)
    assert os.readlink(tmp_path / "latest") == "run-a"
    assert os.readlink(tmp_path / "last") == "run-e"
    removed = write.prune_reports(str(tmp_path), keep=2, current=str(tmp_path / "run-e"))
    assert sorted(os.path.basename(p) for p in removed) == ["pytest-b", "run-c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["last", "latest", "other", "run-a", "run-d", "run-e"]
    assert write.prune_reports(str(tmp_path), keep=0) == []
    monkeypatch.setenv(write.KEEP_ENV, "3")
    assert write.keep_reports() == 3 and write.keep_reports(5) == 5
    monkeypatch.delenv(write.KEEP_ENV)
    assert write.keep_reports() == write.DEFAULT_KEEP
