"""Ctrl-C (and SIGTERM) end a run within seconds in every state
(verify/interrupt.py), also under load: the runs of this test are
interrupted in parallel, each in another state."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from conftest import live_processes_marked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = os.path.join(ROOT, "tests", "mutants", "faults")
CASES = ["--case", "col_3d_static", "--case", "col_seq1", "--case", "col_trans_y"]
LIMIT = 20.0  # seconds from the signal to the exit, on a loaded machine


def _workers(pid: int) -> set:
    return live_processes_marked(f"VERIFY_ISOLATION_PARENT={pid}")


# state -> (pass file, extra args, when to signal: seconds after the run's
# handlers are installed, or "worker" = once an isolation worker exists,
# "pass" = once the fault pass runs, plus a delay; signal).  No program can
# handle a signal before its first line runs (Python's own default prints a
# KeyboardInterrupt traceback there), so every state waits for the handlers;
# under CI load the interpreter alone can take longer than a fixed delay.
STATES = {
    "start-up": ("loops.py", [], (0.05, None), signal.SIGINT),
    "paddle import": ("loops.py", [], (1.5, None), signal.SIGINT),
    "worker starting": ("loops.py", [], (0.0, "worker"), signal.SIGINT),
    # a worker exists from start-up (isolation.prestart): busy = the pass runs in it
    "worker busy": ("loops.py", [], (1.0, "pass"), signal.SIGINT),
    "worker busy, SIGTERM": ("loops.py", [], (1.0, "pass"), signal.SIGTERM),
    "in-process pass swallows it": ("swallows_interrupt.py", ["--no-isolation"],
                                    (0.5, "pass"), signal.SIGINT),
    "in-process pass turns it into an error": ("interrupt_to_error.py", ["--no-isolation"],
                                               (0.5, "pass"), signal.SIGINT),
}


def _interrupt(state, out, results):
    fault, extra, (delay, after), signum = STATES[state]
    started = f"{out}.started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "verify", "run", "--pass", "overlap", *CASES, "--pass-file",
         os.path.join(FAULTS, fault), "--backend", "none", "--timeout", "120",
         "--report-dir", str(out), *extra], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "FAULT_STARTED": started})
    workers = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _catches_sigterm(proc.pid) \
            and proc.poll() is None:
        time.sleep(0.01)
    if after == "worker":
        while time.monotonic() < deadline and not workers:
            time.sleep(0.05)
            workers = _workers(proc.pid)
    if after == "pass":
        while time.monotonic() < deadline and not os.path.exists(started):
            time.sleep(0.05)
    time.sleep(delay)
    workers |= _workers(proc.pid)
    sent = time.monotonic()
    os.kill(proc.pid, signum)
    try:
        stdout, stderr = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    took = time.monotonic() - sent
    gone_by = time.monotonic() + 10
    while time.monotonic() < gone_by and any(_alive(p) for p in workers):
        time.sleep(0.1)
    results[state] = dict(code=proc.returncode, took=took, stderr=stderr, stdout=stdout,
                          left=[p for p in workers if _alive(p)], signum=signum)


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler: verify/interrupt.install()
    has run (Python itself catches SIGINT from start-up, never SIGTERM)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except OSError:
        pass
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_interrupts_in_every_state_end_the_run_within_seconds(tmp_path):
    results = {}
    threads = [threading.Thread(target=_interrupt, args=(s, tmp_path / f"r{i}", results))
               for i, s in enumerate(STATES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = {}
    for state, r in results.items():
        want = 143 if r["signum"] == signal.SIGTERM else 130
        problems = []
        if r["code"] != want:
            problems.append(f"exit {r['code']}, not {want}")
        if r["took"] > LIMIT:
            problems.append(f"alive {r['took']:.0f} s after the signal")
        if "Traceback" in r["stderr"]:
            problems.append("a traceback")
        if r["left"]:
            problems.append(f"workers left: {r['left']}")
        if problems:
            bad[state] = (problems, r["stderr"][-600:])
    assert not bad, bad
    assert set(results) == set(STATES)
    # an interrupt turned into an error is not a verdict: that application
    # is left out of the partial report, which says it was interrupted
    i = list(STATES).index("in-process pass turns it into an error")
    rep = json.loads((tmp_path / f"r{i}" / "report.json").read_text())
    assert rep["interrupted"] == "SIGINT" and rep["applications"] == []
    assert len(rep["not_run"]) == 3
