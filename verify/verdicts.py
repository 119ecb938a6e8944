"""Verdicts and check results, and how an application's verdict is formed."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import Enum


class Verdict(str, Enum):
    EQUIVALENT = "EQUIVALENT"
    NOT_EQUIVALENT = "NOT_EQUIVALENT"  # the values differ; with a counterexample
    CONTRACT_BROKEN = "CONTRACT_BROKEN"  # values kept, but the pass broke its contract
    PASS_CRASHED = "PASS_CRASHED"  # exception inside the pass
    NOT_APPLIED = "NOT_APPLIED"  # the pass did not fire where it must
    INCONCLUSIVE = "INCONCLUSIVE"  # Z3 unknown/timeout, unsupported op, ...

    def __str__(self) -> str:
        return self.value


# Worst first: the application's verdict is the worst of its checks.
_SEVERITY = [Verdict.PASS_CRASHED, Verdict.NOT_EQUIVALENT, Verdict.CONTRACT_BROKEN,
             Verdict.NOT_APPLIED, Verdict.INCONCLUSIVE, Verdict.EQUIVALENT]


@dataclass
class CheckResult:
    """The outcome of one check on one rank (rank None: all ranks at once)."""

    kind: str  # contract | shape | dataflow | numeric | pass
    name: str
    rank: int | None
    verdict: Verdict
    message: str = ""
    counterexample: dict | None = None
    details: dict = field(default_factory=dict)
    # An advisory result explains (a prediction made before the pass ran);
    # it is reported but never decides the verdict.
    advisory: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.EQUIVALENT


def combine(results) -> Verdict:
    """The worst verdict among ``results`` (CheckResults or Verdicts).

    Advisory results do not count.  No deciding check at all is
    INCONCLUSIVE: nothing was shown.
    """
    verdicts = [r.verdict if isinstance(r, CheckResult) else Verdict(r) for r in results
                if not (isinstance(r, CheckResult) and r.advisory)]
    if not verdicts:
        return Verdict.INCONCLUSIVE
    return min(verdicts, key=_SEVERITY.index)


# lines a process prints beside its error that never say what went wrong: a
# Python warning (``file.py:12: UserWarning: ...``), a logging or glog line
_NOISE = re.compile(r"^\S+:\d+: \w*Warning: |^(INFO|WARNING|DEBUG|[IWD]\d{4}) |"
                    r"^\[\d{4}-\d\d-\d\d [\d:,.]+\] \[\s*(INFO|WARNING|DEBUG)\]")


def error_line(tb: str) -> str:
    """The line of a traceback that says what went wrong: the exception line
    (the last line of a Python traceback that starts without indentation,
    warnings and log lines skipped: a killed planning process's record ends
    with its last stderr lines, often a warning)."""
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    for k in range(len(lines) - 1, -1, -1):
        ln = lines[k]
        if _NOISE.match(ln):
            continue
        if not ln.startswith((" ", "\t")) and not ln.startswith("Traceback"):
            # Paddle's C++ errors put the summary on the exception line's
            # continuation; keep the first line that names the error kind
            if ln.rstrip().endswith("In user code:") and k + 1 < len(lines):
                # PIR executor errors: the error kind is the next line
                return f"{ln.strip()} {lines[k + 1].strip()}"[:400]
            return ln.strip()[:400]
    return lines[-1].strip()[:400] if lines else "unknown error"


# What the checker's own environment ran out of, as it shows in an error's
# text: (pattern, the cause in words).  Such a failure says nothing about
# the programs, and the user must read it first, not a symptom of it.
_ENVIRONMENT = [
    ("Resource temporarily unavailable",
     "a thread or process could not be started (EAGAIN: a limit on threads, "
     "processes or address space)"),
    ("Too many open files", "out of file descriptors (EMFILE)"),
    ("No space left on device", "out of disk space (ENOSPC)"),
    # a CPU machine's limit, not the program's: the ranks would run it on GPUs
    ("Unimplemented cpu kernel for",
     "this Paddle has no CPU kernel for an op the program runs (a GPU op: the "
     "CPU ranks cannot run it)"),
    ("can only be used on GPU", "an op's dtype has kernels on GPU only (the CPU ranks "
                                "cannot run it)"),
]
# (Out of memory is not here: a rewrite that allocates without bound is the
# pass's doing; the checker's own memory limit is a worker crash, named as such.)


def environment_cause(text: str) -> str | None:
    """The environment failure ``text`` reports, in words, or None."""
    for pattern, cause in _ENVIRONMENT:
        if pattern in (text or ""):
            return cause
    return None


def failure_line(exc: BaseException) -> str:
    """One line saying why a run failed: a failure of the checker's own
    environment first (``checker environment: ...``), else the exception's
    own summary (a worker crash: its first line; a traceback: its error line)."""
    text = str(exc)
    cause = environment_cause(text) or environment_cause(
        str(getattr(exc, "traceback", "") or ""))
    if cause:
        return f"checker environment: {cause}; not a fact about the programs " \
               f"({error_line(text) if text else type(exc).__name__})"[:600]
    if not text:
        return type(exc).__name__
    if getattr(exc, "first_line_says_why", False):
        return text.strip().splitlines()[0][:400]
    return error_line(text)


# the order in which tables and summaries show verdicts (LEFT_ALONE: an
# EQUIVALENT application whose pass changed nothing, shown apart)
SHOWN = ["EQUIVALENT", "LEFT_ALONE", "NOT_EQUIVALENT", "CONTRACT_BROKEN", "PASS_CRASHED",
         "NOT_APPLIED", "INCONCLUSIVE"]
