"""The matrix runner: every pass on every case, one line per application,
and the numeric backend choice the command line and the gate share."""
from __future__ import annotations

import contextlib
import sys

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from verify.engine import collector
from verify.engine.application import run_application
from verify.engine.console import console_for, verdict_style
from verify.safe_names import printable


def _line_parts(app) -> tuple:
    fired = ",".join(map(str, app.fired_ranks)) or "-"
    mark = "ok " if app.as_expected else "BAD"
    exp = "" if app.as_expected else f" (expected {app.expected.verdict})"
    # a case name is input: its control characters escaped (verify/safe_names.py)
    middle = (f" {app.pass_name:38s} {printable(app.case_name):28s} ranks={len(app.ranks)} "
              f"fired={fired:7s} ops={app.op_delta():15s} ")
    how = " (witnessed, not proved)" if app.proof == "witnessed" else \
        f" ({app.proof})" if app.proof.startswith("proved at sizes") else ""
    return mark, middle, str(app.status) + how, exp


def line(app) -> str:
    """pass, case, ranks, fired, op-count change, verdict (and expectation)."""
    return "".join(_line_parts(app))


def styled_line(app, done: int, total: int) -> Text:
    """``[done/total] line(app)``, the mark and the verdict coloured (on a terminal)."""
    mark, middle, status, exp = _line_parts(app)
    return Text.assemble(f"[{done}/{total}] ", (mark, "green" if app.as_expected else "bold red"),
                         middle, (status, verdict_style(status)), (exp, "bold red"))


BACKENDS = {"none": (), "simulated": ("simulated",), "ranks": ("ranks",),
            "both": ("simulated", "ranks")}


def pick_backend(requested, seed=0):
    """The numeric backend name and the callable running it (or None)."""
    from verify.numeric.equivalence import numeric_checks

    name = requested or "both"
    if name not in BACKENDS:
        raise ValueError(f"unknown numeric backend {name!r}; known: {', '.join(BACKENDS)}")
    backends = BACKENDS[name]
    if not backends:
        return name, None

    def numeric(case, adapter, outcomes, mutator=None, notes=None):
        return numeric_checks(case, outcomes, backends=backends, seed=seed, adapter=adapter,
                              mutator=mutator, notes=notes)

    return name, numeric


def run_matrix(adapters, cases, source="installed", seed=0, backend=None, out=sys.stdout,
               apps=None):
    """Every adapter on every case; returns (applications, backend name).

    ``apps``: a list to append to (its caller keeps the finished ones when
    the run is interrupted)."""
    from verify import interrupt

    name, numeric = pick_backend(backend, seed)
    apps = [] if apps is None else apps
    from passes.base import pairs

    todo = pairs(adapters, cases)  # a pass meets only cases of its own IR
    total = len(todo)
    console = console_for(out) if out is not None else None
    progress = None
    if console is not None and console.is_terminal:  # a bar; finished lines scroll above it
        progress = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                            transient=True)
    with progress if progress is not None else contextlib.nullcontext():
        task = progress.add_task("", total=total) if progress is not None else None
        for adapter, case in todo:
            if progress is not None:
                progress.update(task, description=f"{adapter.short} "
                                f"{printable(case.name)[:30]}")
            app = run_application(adapter, case, source=source, numeric=numeric)
            # an interrupt that some code swallowed (or turned into an error):
            # this application's verdict may rest on it, so it is not kept
            interrupt.check()
            apps.append(app)
            collector.settle()  # within a run's scope: what it left collected once
            if console is not None:
                console.print(styled_line(app, len(apps), total))
            if progress is not None:
                progress.advance(task)
    return apps, name
