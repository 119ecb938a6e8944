"""User code is first run in an isolation worker, under the time limit.

A case file, its builders and a pass file are code a user hands in.  Loaded
in the run's own process, a ``sys.exit(0)`` or ``os._exit(0)`` in them ended
``verify run`` with exit 0, no output and no report (read as green by CI),
a loop hung the run whatever ``--timeout`` said, and a ``KeyboardInterrupt``
they raised was taken for the user's Ctrl-C (issue 33).

So before this process imports such a file it is imported in a worker
(``verify/engine/isolation.py``), whose every way of ending is that file's
error: an exception (``SystemExit`` and ``KeyboardInterrupt`` included), an
exit, a signal, a time-out.  Bad input is then one line and exit 2 (the
command line's ``UsageError``).  Each builder of a case file is run the same
way, once per rank: a builder that cannot build leaves its case's
applications INCONCLUSIVE with the reason (``build_failures``), and this
process never calls it.  The worker that loaded user code is retired after
the job (a pass file registers passes in it).

Program dirs hold no code (their files are data, validated as such) and the
built-in cases and passes are the suite's own: neither is probed.
"""
from __future__ import annotations

import os
import traceback

from verify.engine import isolation


class InputError(Exception):
    """A file a user handed in that cannot be loaded; one line."""


def _line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}" + (f": {msg}" if msg else "")


# ----------------------------------------------------------------- in the worker
def load_in_worker(kind: str, path: str) -> dict:
    """Import a ``case`` file or a ``pass`` file here; ``{"cases": {name:
    ranks}}`` or ``{"error": one line}``.  Every exception is the file's,
    ``SystemExit`` and ``KeyboardInterrupt`` included (nothing interrupts a
    worker but its parent, which kills it)."""
    try:
        if kind == "case":
            from cases.case_files import CaseFileError, load_case_files

            try:
                found = load_case_files([path])
            except CaseFileError as exc:
                return {"error": str(exc), "own": True}
            return {"cases": {c.name: list(c.ranks) for c in found}}
        from verify.ir.pass_files import PassFileError, load_pass_file

        try:
            load_pass_file(path)
        except PassFileError as exc:
            return {"error": str(exc), "own": True}
        return {"cases": {}}
    except BaseException as exc:  # noqa: B036  the file's doing, whatever it is
        return {"error": f"{_line(exc)}\n{traceback.format_exc()}"}


def build_all_in_worker(path: str, builds: list) -> dict:
    """Build each ``(case name, rank)`` of case file ``path`` here;
    ``{"errors": {case name: {rank: one line}}}``.  A builder that ends the
    process ends the job: the caller then tries each build alone."""
    errors: dict = {}
    for case_name, rank in builds:
        got = build_in_worker(path, case_name, rank)
        if got.get("error"):
            errors.setdefault(case_name, {})[int(rank)] = got["error"].split("\n")[0]
    return {"errors": errors}


def build_in_worker(path: str, case_name: str, rank: int) -> dict:
    """Build ``rank`` of case ``case_name`` of case file ``path`` here; ``{}``
    or ``{"error": one line}``."""
    try:
        from cases.case_files import load_case_files

        case = next(c for c in load_case_files([path]) if c.name == case_name)
        case.build(rank)
        return {}
    except BaseException as exc:  # noqa: B036
        return {"error": f"{_line(exc)}\n{traceback.format_exc()}"}


# ----------------------------------------------------------------- in the run
def _in_worker(function: str, kwargs: dict, where: str):
    """``function`` of this module in a fresh-or-idle worker that is retired
    after it; (answer or None, failure line or None)."""
    try:
        got = isolation.run_call(__name__, function, kwargs, where,
                                 force=True, retire=True)
    except isolation.WorkerCrash as exc:
        return None, str(exc).splitlines()[0].removeprefix(f"{where}: ").replace(
            "crashed the executor: ", "")
    except RuntimeError as exc:
        return None, _line(exc)
    return got, None


def probe_file(kind: str, path: str) -> None:
    """Load a user's ``case`` or ``pass`` file in a worker first; InputError
    (one line) when it cannot be loaded there, however it ends."""
    path = os.path.abspath(path)
    label = f"{kind} file {path}"
    if not os.path.isfile(path):
        return  # the loader's own error says so (no code runs)
    got, failed = _in_worker("load_in_worker", {"kind": kind, "path": path},
                             f"loading {label}")
    if failed:
        raise InputError(f"{label} cannot be loaded: {failed} (loaded in an isolation "
                         "worker: whatever ends it is the file's error)")
    if got.get("error"):
        first = got["error"].splitlines()[0]
        raise InputError(first if got.get("own") else
                         f"{label} does not import: {first}")


def build_failures(cases) -> dict:
    """{case name: {rank: one line}} for the case-file cases in ``cases``
    whose builder does not build a rank in a worker."""
    out: dict = {}
    by_file: dict = {}
    for case in cases:
        path = getattr(case, "source_file", "") or ""
        if path.endswith(".py"):
            by_file.setdefault(path, []).append(case)
    alone = []
    for path, file_cases in by_file.items():  # one worker job per file, first
        builds = [(c.name, int(r)) for c in file_cases for r in c.ranks]
        got, failed = _in_worker("build_all_in_worker", {"path": path, "builds": builds},
                                 f"the builders of {path}")
        if failed:  # a builder ended the worker: find which, one build a job
            alone += file_cases
            continue
        for name, ranks in got["errors"].items():
            out.setdefault(name, {}).update({int(r): why for r, why in ranks.items()})
    for case in alone:
        path = case.source_file
        for rank in case.ranks:
            where = f"case {case.name} rank {rank} (builder of {path})"
            got, failed = _in_worker("build_in_worker", {"path": path, "case_name": case.name,
                                                         "rank": int(rank)}, where)
            why = failed or (got or {}).get("error", "").split("\n")[0]
            if why:
                out.setdefault(case.name, {})[int(rank)] = why
    return out
