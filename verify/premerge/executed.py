"""The executed-source table: for each application of the baseline (pass x
case), the Paddle functions and module bodies it ran (``trace.py``), kept in
``verify/executed_files.json`` beside ``verify/baseline.json`` and read by
premerge's selection (``affected.py``).

``python -m verify premerge-trace [--pass NAME] [--case GLOB] [--unrecorded]
[--backend B]`` records the applications it selects (``--unrecorded``: those
of the baseline the table does not record yet, the ones premerge's output
names as selected by the import graph), one ``python -m verify run`` each, with
the recorder on in every process that run starts and a fresh cache (a cached
plan or application would not run its Paddle code), and merges them into the
table.  The table says which Paddle version it was recorded on; on another
the selection ignores it (falls back to the import graph).

File format (JSON)::

    {"schema": "executed-files/1", "paddle": "3.3.1",
     "units": ["paddle/distributed/passes/pass_utils.py::<module>", ...],
     "applications": {"planner::planner_tp2_gm": {"backend": null, "seconds": 41.0,
                                                 "units": "<base64 zlib>"}, ...}}

an application's ``units`` are indices into the shared ``units`` list
(sorted, delta-encoded, comma-joined, zlib, base64: most units, Paddle's
import, are common to every application).
"""
from __future__ import annotations

import base64
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TABLE = PROJECT_ROOT / "verify" / "executed_files.json"
SCHEMA = "executed-files/1"


def _encode(indices) -> str:
    prev, deltas = 0, []
    for i in sorted(indices):
        deltas.append(i - prev)
        prev = i
    return base64.b64encode(zlib.compress(",".join(map(str, deltas)).encode(), 9)).decode()


def _decode(blob: str) -> list:
    text = zlib.decompress(base64.b64decode(blob)).decode()
    out, acc = [], 0
    for d in text.split(",") if text else ():
        acc += int(d)
        out.append(acc)
    return out


def load(path=None, paddle_version: str | None = None) -> dict:
    """``{application: {file: set of units}}`` (empty when there is no table,
    it does not parse, or it was recorded on another Paddle than
    ``paddle_version``)."""
    path = Path(path or TABLE)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return {}
    if paddle_version is not None and data.get("paddle") != paddle_version:
        return {}
    units = data.get("units") or []
    out = {}
    for app, rec in (data.get("applications") or {}).items():
        try:
            idx = _decode(rec["units"])
        except (KeyError, TypeError, ValueError, zlib.error):
            continue
        files = {}
        for i in idx:
            if 0 <= i < len(units):
                rel, _, unit = units[i].partition("::")
                files.setdefault(rel, set()).add(unit)
        out[app] = files
    return out


def merge(records: dict, path=None, paddle_version: str = "") -> None:
    """Add ``{application: ({file: units}, meta)}`` to the table (replacing
    those applications' earlier records)."""
    path = Path(path or TABLE)
    try:
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA or data.get("paddle") != paddle_version:
            data = None
    except (OSError, ValueError):
        data = None
    old_units = (data or {}).get("units") or []
    # the kept records as unit strings, then everything re-indexed
    flat = {}
    for app, rec in ((data or {}).get("applications") or {}).items():
        if app in records:
            continue
        flat[app] = ([old_units[i] for i in _decode(rec["units"])],
                     {k: v for k, v in rec.items() if k != "units"})
    for app, (files, meta) in records.items():
        flat[app] = ([f"{rel}::{u}" for rel, us in files.items() for u in us], meta)
    table = sorted({u for units, _ in flat.values() for u in units})
    pos = {u: i for i, u in enumerate(table)}
    out = {"schema": SCHEMA, "paddle": paddle_version, "units": table,
           "applications": {app: dict(meta, units=_encode(pos[u] for u in units))
                            for app, (units, meta) in sorted(flat.items())}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    os.replace(tmp, path)


def unrecorded(apps, recorded) -> list:
    """The applications of ``apps`` (``"pass::case"``) ``recorded`` (the
    table as :func:`load` reads it) has no run of: premerge selects them by
    the import graph."""
    return sorted(a for a in apps if a not in recorded)


def fallback_line(apps, limit: int = 6) -> str:
    """One line naming the applications whose selection falls back to the
    import graph (``apps``: ``"pass::case"``), grouped by pass, at most
    ``limit`` cases each, and how to record them; "" when there are none."""
    if not apps:
        return ""
    by = {}
    for a in sorted(apps):
        p, _, c = a.partition("::")
        by.setdefault(p, []).append(c)
    parts = []
    for p, cs in sorted(by.items()):
        more = f" and {len(cs) - limit} more" if len(cs) > limit else ""
        parts.append(f"`{p}` ({len(cs)}: {', '.join(cs[:limit])}{more})")
    return (f"Selected by the import graph, no recorded run in verify/executed_files.json: "
            f"{len(apps)} application(s): " + "; ".join(parts) +
            " (record them: `python -m verify premerge-trace --unrecorded`).")


def select(entries, passes=(), cases=(), only_unrecorded=False, recorded=None) -> list:
    """The baseline applications ``premerge-trace`` records: those of the
    ``passes`` and matching a ``cases`` glob (all when empty); with
    ``only_unrecorded``, only the ones ``recorded`` lacks."""
    apps = [k for k in entries
            if (not passes or k.split("::")[0] in passes) and
            (not cases or any(fnmatch.fnmatchcase(k.split("::", 1)[1], g) for g in cases))]
    return unrecorded(apps, recorded or {}) if only_unrecorded else apps


HELP_EPILOG = """\
How: each selected application of verify/baseline.json runs once, as
`python -m verify run --pass P --case C`, with the recorder on in every
process the run starts and a fresh, empty cache (a cached plan or result would
not run its Paddle code): as slow as running it uncached (a planner or zoo case
replans; zoo cases need the models group installed).  Each application is
merged into the table as soon as it is recorded, so an interrupted recording
keeps what it did; run it on the Paddle the baseline was made on (the table
says which; on another, premerge ignores it).

Examples:
  python -m verify premerge-trace --unrecorded
      every baseline application the table does not record yet (premerge's
      output names them: "Selected by the import graph ...")
  python -m verify premerge-trace --pass planner --case 'zoo_*'
  python -m verify premerge-trace --pass auto_parallel_fused_linear_promotion
"""


def record_one(pass_name: str, case: str, backend=None, timeout=3600) -> tuple:
    """Run one application with the recorder on: ``({file: units}, meta)``."""
    from . import overlay
    from .trace import ENV, collect

    work = Path(tempfile.mkdtemp(prefix="premerge-trace-"))
    try:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [overlay.BOOT_DIR, str(PROJECT_ROOT)] +
            [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        env[ENV] = str(work / "trace")
        env["PADDLE_PASS_VERIFY_CACHE"] = str(work / "cache")  # nothing cached: all runs
        cmd = [sys.executable, "-m", "verify", "run", "--pass", pass_name, "--case", case,
               "--quiet", "--report-dir", str(work / "report")]
        if backend:
            cmd += ["--backend", backend]
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=str(PROJECT_ROOT), env=env, capture_output=True,
                              text=True, timeout=timeout)
        seconds = round(time.perf_counter() - started, 1)
        if proc.returncode not in (0, 1):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"{pass_name} on {case}: the run exited "
                               f"{proc.returncode}: " + " / ".join(tail))
        files = collect(str(work / "trace")) if (work / "trace").is_dir() else {}
        return files, {"backend": backend, "seconds": seconds}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m verify premerge-trace",
                                description="Record which Paddle code each baseline "
                                "application runs (verify/executed_files.json), for\n"
                                "premerge's selection: an application the table does not "
                                "record is selected\nby the import graph instead.",
                                epilog=HELP_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pass", dest="passes", action="append", default=[], metavar="NAME",
                   help="a pass of the baseline (repeatable; default all)")
    p.add_argument("--case", dest="cases", action="append", default=[], metavar="GLOB",
                   help="a case name glob (repeatable; default all)")
    p.add_argument("--unrecorded", action="store_true",
                   help="only the selected applications the table does not record yet")
    p.add_argument("--backend", choices=["none", "simulated", "ranks", "both"], default=None,
                   help="the runs' numeric backend (default: the best available)")
    p.add_argument("--table", default=None, help=f"default {TABLE}")
    args = p.parse_args(argv)
    baseline = json.loads((PROJECT_ROOT / "verify" / "baseline.json").read_text())
    recorded = load(args.table, paddle_version=baseline.get("paddle")) \
        if args.unrecorded else {}
    apps = select(baseline["entries"], args.passes, args.cases, args.unrecorded, recorded)
    if not apps:
        print("error: no baseline application matches", file=sys.stderr)
        return 2
    failed = 0
    for i, app in enumerate(apps, 1):
        pass_name, case = app.split("::", 1)
        try:
            files, meta = record_one(pass_name, case, args.backend)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"[{i}/{len(apps)}] {app}: not recorded: {exc}", flush=True)
            failed += 1
            continue
        merge({app: (files, meta)}, args.table, baseline.get("paddle", ""))
        print(f"[{i}/{len(apps)}] {app}: {len(files)} Paddle files, "
              f"{sum(map(len, files.values()))} units, {meta['seconds']} s", flush=True)
    return 1 if failed else 0
