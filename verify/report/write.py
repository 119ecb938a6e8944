"""The equivalence report: ``report.json`` (schema below) in a report dir.

Schema ``pass-equivalence-report/1``::

    {schema, created, command, environment: {python, paddle, z3, numpy,
     platform}, seed, backend, value_budget: {work_units,
     z3_rlimit_per_query, z3_rlimit_per_application, z3_random_seed,
     z3_hang_guard_s}, source, summary: {total, as_expected,
     unexpected, by_verdict}, applications: [{pass, case, ranks, source,
     verdict, expected, expected_fires, expected_reason, as_expected,
     seconds, checks: [{kind, name, rank, verdict, message, counterexample,
     details}], rank_outcomes: [{rank, fired, error, build_error,
     ops_before, ops_after, diff, before, after}]}], errors: [str]}

Detail no reviewer reads per application is not in report.json but in the
compressed sidecar ``detail.js`` beside it (:func:`split_detail`): whole
programs (``before``/``after``), the op-level diff of an application that
is no finding (or a finding's diff longer than ``INLINE_DIFF_CHARS``), and
the numeric tables' agreeing rows (the rows that differ stay).  What moved is
marked where it was: ``rank_outcomes[].diff_in_detail`` (with
``diff_lines``), ``checks[].details.tensors_total`` (the table's length),
``applications[].detail`` (the kinds moved) and the report's
``detail_file``.  ``index.html`` loads the sidecar only when a reader asks
(a script tag works from file://); machines read it with :func:`read_detail`.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from collections import Counter

SCHEMA = "pass-equivalence-report/1"
DEFAULT_SEED = 20261130


def environment() -> dict:
    import numpy
    import z3

    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    return {"python": sys.version.split()[0], "paddle": paddle.__version__,
            "paddle_commit": getattr(paddle.version, "commit", ""),
            "paddle_cuda": bool(paddle.is_compiled_with_cuda()),
            "z3": z3.get_version_string(), "numpy": numpy.__version__,
            "platform": platform.platform()}


def value_budget() -> dict:
    """The value proof's budget in force (work units, Z3 rlimits and seed)."""
    from verify.value.proof import budget_settings

    return budget_settings()


def _witness(app: dict) -> str:
    """What the numeric evidence of an application rests on."""
    ws = {c.get("details", {}).get("witness") for c in app.get("checks", [])
          if c.get("kind") == "numeric" and c.get("rank") is not None}
    ws.discard(None)
    if "real ranks" in ws:
        return "real ranks"
    return "simulator only" if "simulator only" in ws else "no numeric run"


def summarize(apps) -> dict:
    """Counts by verdict, by matrix status (LEFT_ALONE apart from a rewrite
    found EQUIVALENT), by numeric witness, and of the value proofs."""
    apps = [a if isinstance(a, dict) else a.to_dict(False) for a in apps]
    by = Counter(a["verdict"] for a in apps)
    status = Counter(a.get("status", a["verdict"]) for a in apps)
    witness = Counter(_witness(a) for a in apps)
    proofs = Counter(c["verdict"] for a in apps for c in a.get("checks", [])
                     if c.get("kind") == "value" and c.get("rank") is not None)
    value = [c.get("details") or {} for a in apps for c in a.get("checks", [])
             if c.get("kind") == "value" and c.get("rank") is not None]
    witnessed = [f"{a['pass']} on {a['case']}" for a in apps
                 if a.get("proof") == "witnessed" and a.get("status") == "EQUIVALENT"]
    # EQUIVALENT proved at sampled sizes of the -1 dims only (the label names them)
    at_sizes = [f"{a['pass']} on {a['case']} ({a['proof']})" for a in apps
                if str(a.get("proof") or "").startswith("proved at sizes")
                and a.get("status") == "EQUIVALENT"]
    unexpected = [a for a in apps if not a["as_expected"]]
    return {"total": len(apps), "as_expected": len(apps) - len(unexpected),
            "unexpected": len(unexpected), "by_verdict": dict(sorted(by.items())),
            "by_status": dict(sorted(status.items())),
            "numeric_witness": dict(sorted(witness.items())),
            "value_proofs_by_rank": {"proved": proofs.get("EQUIVALENT", 0),
                                     "refuted": proofs.get("NOT_EQUIVALENT", 0),
                                     "unknown": proofs.get("INCONCLUSIVE", 0),
                                     # how: values proved by canonical form, with
                                     # cuts expanded, by Z3; refutations replayed
                                     # on the real program
                                     "values_by_canonical_form":
                                         sum(d.get("by_normal_form", 0) for d in value),
                                     "values_by_expanded_form":
                                         sum(d.get("by_expanded_form", 0) for d in value),
                                     "values_by_z3": sum(d.get("by_z3", 0) for d in value),
                                     "refutations_replayed":
                                         sum(d.get("refuted_replayed", 0) for d in value)},
            # EQUIVALENT on sampling (numeric runs) alone: no value proof holds
            "witnessed_not_proved": witnessed,
            "proved_at_sizes_only": at_sizes}


def build_report(apps, seed=DEFAULT_SEED, backend="none", source="installed",
                 command=None, errors=None, with_programs=None) -> dict:
    """The report of ``apps``.  Whole programs are kept where a finding needs
    them (``with_programs=None``: applications not EQUIVALENT), a diff
    elsewhere, so the report grows with the findings, not the programs."""
    app_dicts = [a if isinstance(a, dict) else a.to_dict(with_programs) for a in apps]
    return {"schema": SCHEMA,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command or user_command(),
            "environment": environment(), "seed": seed, "backend": backend,
            # the value proof's deterministic budget: a rerun with it gives the same verdicts
            "value_budget": value_budget(),
            "source": source, "summary": summarize(app_dicts),
            "applications": app_dicts, "errors": list(errors or [])}


DETAIL_NAME = "detail.js"
DETAIL_SCHEMA = "pass-equivalence-detail/1"
# a finding's diff up to this many characters stays in report.json and on the page
INLINE_DIFF_CHARS = 8000


def _finding(app: dict) -> bool:
    return (app.get("status") or app.get("verdict")) not in ("EQUIVALENT", "LEFT_ALONE") \
        or not app.get("as_expected", True)


def split_detail(report: dict) -> tuple:
    """``(slim, detail)``: the report as report.json holds it and what moves
    to the sidecar, ``{schema, applications: {str(index): {rank_outcomes:
    {str(position): {before, after, diff}}, checks: {str(position):
    {tensors}}}}}``.  ``report`` is not changed."""
    slim = dict(report)
    apps, moved_all = [], {}
    for i, app in enumerate(report.get("applications") or []):
        app = dict(app)
        finding = _finding(app)
        moved, outs, checks = {}, [], []
        for j, o in enumerate(app.get("rank_outcomes") or []):
            o, m = dict(o), {}
            for k in ("before", "after"):
                if k in o:
                    m[k] = o.pop(k)
            diff = o.get("diff")
            if diff and (not finding or len(diff) > INLINE_DIFF_CHARS):
                m["diff"] = o.pop("diff")
                o["diff_lines"] = len(diff.splitlines())
                o["diff_in_detail"] = True
            if m:
                m["rank"] = o.get("rank")
                moved.setdefault("rank_outcomes", {})[str(j)] = m
            outs.append(o)
        for k, c in enumerate(app.get("checks") or []):
            details = c.get("details") or {}
            tensors = details.get("tensors") if isinstance(details, dict) else None
            if isinstance(tensors, list) and tensors:
                bad = [t for t in tensors if not (isinstance(t, dict) and t.get("ok", True))]
                if len(bad) < len(tensors):
                    c = dict(c, details=dict(details, tensors=bad,
                                             tensors_total=len(tensors)))
                    moved.setdefault("checks", {})[str(k)] = {"tensors": tensors}
            checks.append(c)
        if "rank_outcomes" in app:
            app["rank_outcomes"] = outs
        if "checks" in app:
            app["checks"] = checks
        if moved:
            kinds = set()
            for m in moved.get("rank_outcomes", {}).values():
                kinds |= {"programs" if k in ("before", "after") else k for k in m}
            if "checks" in moved:
                kinds.add("tensors")
            app["detail"] = sorted(kinds)
            moved_all[str(i)] = moved
        apps.append(app)
    if "applications" in report:
        slim["applications"] = apps
    if moved_all:
        slim["detail_file"] = DETAIL_NAME
    return slim, {"schema": DETAIL_SCHEMA, "applications": moved_all}


_DETAIL_HEAD = ("/* {schema}: the report's per-application detail (whole programs, "
                "diffs, numeric tables), JSON, gzip, base64; index.html loads it on "
                "demand, python reads it with verify.report.write.read_detail */\n")


def write_detail(detail: dict, directory: str) -> str | None:
    """The sidecar ``detail.js`` (None when nothing moved)."""
    import base64
    import gzip

    path = os.path.join(directory, DETAIL_NAME)
    if not detail.get("applications"):
        if os.path.exists(path):
            os.remove(path)
        return None
    raw = json.dumps(detail, separators=(",", ":"), default=str).encode()
    packed = base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(_DETAIL_HEAD.format(schema=DETAIL_SCHEMA))
        f.write(f'window.reportDetail && window.reportDetail("{packed}");\n')
    os.replace(tmp, path)
    return path


def read_detail(directory: str) -> dict:
    """The sidecar of the report in ``directory`` as :func:`split_detail`
    made it (``{"applications": {}}`` when there is none)."""
    import base64
    import gzip
    import re

    path = os.path.join(directory, DETAIL_NAME)
    if not os.path.exists(path):
        return {"schema": DETAIL_SCHEMA, "applications": {}}
    with open(path) as f:
        m = re.search(r'reportDetail\("([A-Za-z0-9+/=]*)"\)', f.read())
    return json.loads(gzip.decompress(base64.b64decode(m.group(1))))


def merge_detail(report: dict, detail: dict) -> dict:
    """``report`` (slim, as report.json holds it) with the sidecar's detail
    put back where :func:`split_detail` took it from."""
    full = dict(report)
    apps = []
    for i, app in enumerate(report.get("applications") or []):
        moved = (detail.get("applications") or {}).get(str(i))
        if not moved:
            apps.append(app)
            continue
        app = dict(app)
        outs = [dict(o) for o in app.get("rank_outcomes") or []]
        for j, m in (moved.get("rank_outcomes") or {}).items():
            o = outs[int(j)]
            o.update(m)
            o.pop("diff_in_detail", None)
            o.pop("diff_lines", None)
        checks = [dict(c) for c in app.get("checks") or []]
        for k, m in (moved.get("checks") or {}).items():
            d = dict(checks[int(k)].get("details") or {})
            d["tensors"] = m["tensors"]
            d.pop("tensors_total", None)
            checks[int(k)]["details"] = d
        app["rank_outcomes"], app["checks"] = outs, checks
        app.pop("detail", None)
        apps.append(app)
    full["applications"] = apps
    full.pop("detail_file", None)
    return full


def user_command() -> str:
    """The command line as a user types it (``python -m verify run ...``),
    not the path of ``__main__.py`` that ``sys.argv`` holds."""
    import shlex

    argv = list(sys.argv)
    head = argv[0] if argv else ""
    if head.endswith(("verify/__main__.py", os.path.join("verify", "__main__.py"))):
        head = "python -m verify"
    return " ".join([head] + [shlex.quote(a) for a in argv[1:]])


def write_report(report: dict, directory: str) -> str:
    """Write ``report.json`` into ``directory`` (created); returns its path.

    Beside it: ``detail.js`` (:func:`split_detail`), ``junit.xml``
    (``verify/report/junit.py``) and ``index.html`` (``verify/report/html.py``),
    both made from the report as written.  A
    failure there is reported on stderr and does not lose report.json.
    """
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "report.json")
    tmp = path + ".tmp"
    report, detail = split_detail(report)
    # the sidecar first: a report.json that names detail.js finds it there
    write_detail(detail, directory)
    # compact: index.html is the view for people.  json.dumps, not json.dump:
    # dump encodes in Python chunk by chunk, dumps in C (10x on a zoo report)
    text = json.dumps(report, separators=(",", ":"), sort_keys=False, default=str)
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    # The other views read the report as JSON sees it (tuples as lists, ...).
    written = json.loads(text)
    from verify.report.html import write_html
    from verify.report.junit import write_junit

    for name, writer in (("junit.xml", write_junit), ("index.html", write_html)):
        try:
            writer(written, directory)
        except Exception as exc:  # noqa: BLE001  (report.json is already safe)
            print(f"warning: could not write {os.path.join(directory, name)}: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
    return path


def run_dir_name(prefix: str = "run", parent: str = "reports") -> str:
    """A fresh default report directory, ``reports/<prefix>-<time>-<pid>-<random>``:
    two runs started in the same second (or by the same pid, later) never
    share one.  Not created here."""
    import secrets
    import time

    return os.path.join(parent, f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-"
                                f"{os.getpid()}-{secrets.token_hex(3)}")


LOCK_NAME = ".lock"


class DirectoryBusy(Exception):
    """Another run holds the directory's lock (the message is one line)."""


class DirLock:
    """An exclusive ``fcntl.flock`` on ``DIR/.lock``, held while a run writes
    into DIR (``verify run --report-dir``, ``verify premerge --out``): a
    second run on the same directory is refused at once (:class:`DirectoryBusy`)
    instead of both writing and one report being lost.  The lock goes with
    the process (or :meth:`release`); the file stays (removing it would let a
    third run lock a new file while the second holds the old one)."""

    def __init__(self, directory: str, what: str = "run"):
        import fcntl

        os.makedirs(directory, exist_ok=True)  # OSError: the caller's "cannot write"
        self.path = os.path.join(directory, LOCK_NAME)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 200).decode(errors="replace").strip()
            except OSError:
                holder = ""
            os.close(fd)
            raise DirectoryBusy(f"{directory} is in use by another {what}"
                                + (f" ({holder})" if holder else "")
                                + ": wait for it or give another directory") from None
        except OSError:
            os.close(fd)
            raise
        try:  # who holds it, for the message of a run refused
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}".encode())
        except OSError:
            pass
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def point_latest(directory: str, name: str = "latest") -> None:
    """Make ``reports/<name>`` (beside ``directory``) point at ``directory``,
    atomically: a new symlink under a temporary name renamed over it
    (``os.replace``), so a reader (or a concurrent run) never finds it
    missing or half made.  A real directory of that name is left alone."""
    import secrets

    parent = os.path.dirname(os.path.abspath(directory))
    link = os.path.join(parent, name)
    if os.path.exists(link) and not os.path.islink(link):
        return
    tmp = os.path.join(parent, f".{name}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.symlink(os.path.basename(os.path.abspath(directory)), tmp)
        os.replace(tmp, link)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass


def point_reports(directory: str, full: bool) -> None:
    """``reports/last``: the last run of any kind (a subset, a pytest gate);
    ``reports/latest``: the last *full* run (``python -m verify run`` of every
    pass on every built-in case, not interrupted), so a subset run never
    hides the last full report."""
    point_latest(directory, "last")
    if full:
        point_latest(directory, "latest")


KEEP_ENV = "VERIFY_KEEP_REPORTS"
DEFAULT_KEEP = 10
PRUNED_PREFIXES = ("run-", "pytest-")


def keep_reports(value=None) -> int:
    """How many run folders to keep: ``value`` (``--keep-reports``), else
    ``$VERIFY_KEEP_REPORTS``, else ``DEFAULT_KEEP``; 0 keeps all."""
    if value is None:
        raw = os.environ.get(KEEP_ENV, "").strip()
        if not raw:
            return DEFAULT_KEEP
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{KEEP_ENV}={raw!r}: give a whole number "
                             "(0 keeps every report)") from None
    if value < 0:
        raise ValueError(f"keep {value} reports: give 0 (keep all) or more")
    return value


def prune_reports(parent: str, keep: int, current: str | None = None) -> list:
    """Remove the oldest default run folders (``run-*``, ``pytest-*``) in
    ``parent`` beyond the newest ``keep`` (0: none removed).  Never removed:
    ``current``, what ``latest`` and ``last`` point at, a folder another run
    holds (its lock), anything else.  Returns the paths removed."""
    import shutil

    if keep <= 0 or not os.path.isdir(parent):
        return []
    spared = set()
    for name in ("latest", "last"):
        link = os.path.join(parent, name)
        if os.path.islink(link):
            spared.add(os.path.realpath(link))
    if current:
        spared.add(os.path.realpath(current))
    runs = []
    for entry in os.scandir(parent):
        if entry.name.startswith(PRUNED_PREFIXES) and entry.is_dir(follow_symlinks=False):
            try:
                runs.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
            except OSError:
                continue
    runs.sort(reverse=True)
    removed = []
    for _, path in runs[keep:]:
        if os.path.realpath(path) in spared:
            continue
        try:
            lock = DirLock(path)
        except (DirectoryBusy, OSError):
            continue  # in use by a run: next time
        try:
            shutil.rmtree(path)
            removed.append(path)
        except OSError:
            pass
        finally:
            lock.release()
    return removed
