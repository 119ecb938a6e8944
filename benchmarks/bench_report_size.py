"""Report sizes per 100 applications: ``report.json``, ``index.html`` and the
``detail.js`` sidecar, against the goals (5 MB of JSON, 2 MB of HTML per 100).

    python benchmarks/bench_report_size.py --report reports/latest   # an existing report
    python benchmarks/bench_report_size.py                           # runs a representative subset

With ``--report`` (a report.json or its folder, e.g. README command 1's
``reports/latest``) the report is written again by today's
``verify.report.write.write_report`` (an older report, with whole programs
inline, is split the way a run now splits it; a report with a ``detail.js``
beside it is merged with it first) into a temporary folder, and each file
is measured.  Without it, ``python -m verify run --case 'row_*' --case
'planner_*' --backend none`` runs (every pass on the row-parallel and
planner cases: hand-built and planned programs, findings and left-alone
cells, 2-10 min on 2 cores) into a temporary folder and its files are
measured.  Sizes are scaled linearly to 100 applications: a report grows
with its applications, and the page's fixed part (styles, script, header)
is counted in, so a small report overstates the figure a little.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_JSON_MB = 5.0   # per 100 applications
GOAL_HTML_MB = 2.0
SUBSET = ["--case", "row_*", "--case", "planner_*"]


def _load(path: Path) -> tuple:
    """(the report as it was written before, its folder or None)."""
    from verify.report.write import merge_detail, read_detail

    if path.is_dir():
        path = path / "report.json"
    report = json.loads(path.read_text())
    folder = path.parent
    if report.get("detail_file"):
        report = merge_detail(report, read_detail(str(folder)))
    return report, folder


def _sizes(folder: Path) -> dict:
    return {name: (folder / name).stat().st_size
            for name in ("report.json", "index.html", "detail.js", "junit.xml")
            if (folder / name).exists()}


def _run_subset(out: Path, backend: str) -> float:
    cmd = [sys.executable, "-m", "verify", "run", *SUBSET, "--backend", backend,
           "--report-dir", str(out), "--quiet"]
    print("running:", " ".join(cmd[1:]), flush=True)
    start = time.perf_counter()
    p = subprocess.run(cmd, cwd=str(ROOT), capture_output=True, text=True)
    if p.returncode not in (0, 1):  # 1: a verdict differs from the baseline
        sys.exit(f"verify run exited {p.returncode}:\n{p.stderr[-3000:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", type=Path, default=None,
                    help="an existing report.json (or its folder) to measure")
    ap.add_argument("--backend", default="none",
                    help="numeric backend of the subset run (default none: sizes "
                         "barely depend on it, the time does)")
    args = ap.parse_args(argv)
    from verify.report.write import write_report

    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        out = Path(tmp) / "report"
        if args.report is not None:
            report, folder = _load(args.report)
            before = _sizes(folder)
            start = time.perf_counter()
            write_report(report, str(out))
            print(f"{args.report}: {len(report.get('applications') or [])} applications, "
                  f"command {report.get('command')!r}, written again in "
                  f"{time.perf_counter() - start:.1f} s")
        else:
            before = {}
            secs = _run_subset(out, args.backend)
            report = json.loads((out / "report.json").read_text())
            print(f"subset run: {len(report['applications'])} applications in {secs:.0f} s")
        n = len(report.get("applications") or [])
        after = _sizes(out)
    if not n:
        sys.exit("the report has no applications")
    scale = 100.0 / n
    print(f"\n{'file':<12} {'as given MB':>12} {'per 100 MB':>11} {'now MB':>9} "
          f"{'per 100 MB':>11}  goal per 100")
    for name in ("report.json", "index.html", "detail.js", "junit.xml"):
        b, a = before.get(name), after.get(name)
        goal = {"report.json": f"<= {GOAL_JSON_MB} MB",
                "index.html": f"<= {GOAL_HTML_MB} MB"}.get(name, "(sidecar)"
                                                             if name == "detail.js" else "")
        cols = [f"{b / 1e6:12.2f}" if b else f"{'-':>12}",
                f"{b / 1e6 * scale:11.2f}" if b else f"{'-':>11}",
                f"{a / 1e6:9.2f}" if a else f"{'-':>9}",
                f"{a / 1e6 * scale:11.2f}" if a else f"{'-':>11}"]
        print(f"{name:<12} {' '.join(cols)}  {goal}")
    json_ok = after["report.json"] / 1e6 * scale <= GOAL_JSON_MB
    html_ok = after["index.html"] / 1e6 * scale <= GOAL_HTML_MB
    print(f"\nper 100 applications: report.json "
          f"{after['report.json'] / 1e6 * scale:.2f} MB ({'meets' if json_ok else 'MISSES'} "
          f"{GOAL_JSON_MB} MB), index.html {after['index.html'] / 1e6 * scale:.2f} MB "
          f"({'meets' if html_ok else 'MISSES'} {GOAL_HTML_MB} MB); run folder "
          f"{sum(after.values()) / 1e6:.1f} MB for {n} applications")
    return 0 if json_ok and html_ok else 1


if __name__ == "__main__":
    sys.exit(main())
