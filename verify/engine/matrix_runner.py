"""The matrix runner: every pass on every case, one line per application,
and the numeric backend choice the command line and the gate share."""
from __future__ import annotations

import sys

from verify.engine.application import run_application


def line(app) -> str:
    """pass, case, ranks, fired, op-count change, verdict (and expectation)."""
    fired = ",".join(map(str, app.fired_ranks)) or "-"
    mark = "ok " if app.as_expected else "BAD"
    exp = "" if app.as_expected else f" (expected {app.expected.verdict})"
    return (f"{mark} {app.pass_name:38s} {app.case_name:28s} ranks={len(app.ranks)} "
            f"fired={fired:7s} ops={app.op_delta():15s} {app.status}{exp}")


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
    bar = out is not None and hasattr(out, "isatty") and out.isatty()
    for adapter, case in todo:
        if bar:  # a progress bar on a terminal; finished lines scroll above it
            done = len(apps)
            filled = int(30 * done / max(total, 1))
            out.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} "
                      f"{adapter.short} {case.name[:30]:30s}")
            out.flush()
        app = run_application(adapter, case, source=source, numeric=numeric)
        # an interrupt that some code swallowed (or turned into an error):
        # this application's verdict may rest on it, so it is not kept
        interrupt.check()
        apps.append(app)
        if out is not None:
            prefix = "\r\033[K" if bar else ""
            print(prefix + f"[{len(apps)}/{total}] " + line(app), file=out, flush=True)
    return apps, name


def summary_table(apps) -> str:
    """Status counts per pass (LEFT_ALONE apart from EQUIVALENT), as a small
    text table."""
    from collections import Counter

    from verify.verdicts import SHOWN as verdicts

    rows = [["pass"] + verdicts + ["unexpected"]]
    for p in dict.fromkeys(a.pass_name for a in apps):
        mine = [a for a in apps if a.pass_name == p]
        c = Counter(a.status for a in mine)
        rows.append([p] + [str(c.get(v, 0)) for v in verdicts]
                    + [str(sum(not a.as_expected for a in mine))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in rows)
