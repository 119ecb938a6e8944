"""Ctrl-C (SIGINT) and SIGTERM end a command-line run within seconds, in
every state.

Raising KeyboardInterrupt from the signal handler is not enough: code the
run calls may swallow it (Paddle's import turns it into ``ImportError:
initialization failed``; a pass applied in process catches every
``Exception``, and Paddle's C++ wraps a Python error raised in a callback
into one), and the run then went on, e.g. waiting up to ``--timeout`` on a
worker that loops.  So the handler also remembers the signal, and:

* the waits of the run (isolation workers, rank pools, the matrix loop)
  ask :func:`check`, which raises again once a signal was received;
* a watchdog thread, started by the first signal, kills every worker
  process group registered with :func:`on_force_exit` and ends the process
  with 130 (SIGINT) / 143 (SIGTERM) after :data:`GRACE` seconds, the time
  the run has to write its partial report;
* an ``alarm`` a few seconds later ends the process even if the main
  thread holds the GIL in C++ (the kernel's default action for SIGALRM);
* a second signal ends the process at once.

:func:`install` is called by ``python -m verify`` before Paddle is imported;
nothing changes where it is not installed (pytest, library use).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

GRACE = 8.0  # seconds between the first signal and the forced exit
ALARM_AFTER = 4  # further seconds before the kernel ends a stuck process
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}

_STATE = {"installed": False, "signal": None, "at": None}
_FORCE: list = []  # callables killing worker process groups; no locks taken


class Terminated(BaseException):
    """SIGTERM, raised in the main thread (as KeyboardInterrupt is for SIGINT)."""


def install() -> None:
    """Handle SIGINT and SIGTERM as the module docstring says (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in CODES:
        signal.signal(signum, _handler)
    _STATE["installed"] = True


def received():
    """The name of the signal received (``"SIGINT"``/``"SIGTERM"``), or None."""
    s = _STATE["signal"]
    return None if s is None else signal.Signals(s).name


def exit_code() -> int:
    return CODES.get(_STATE["signal"], 130)


def check() -> None:
    """Raise the interrupt again if one was received (someone swallowed it)."""
    s = _STATE["signal"]
    if s is not None:
        raise Terminated() if s == signal.SIGTERM else KeyboardInterrupt()


def on_force_exit(fn) -> None:
    """``fn()`` kills processes this one started; called before a forced exit."""
    if fn not in _FORCE:
        _FORCE.append(fn)


def force_exit(code: int | None = None) -> None:
    """Kill the registered workers and end the process now."""
    for fn in list(_FORCE):
        try:
            fn()
        except BaseException:
            pass
    try:
        sys.stderr.write(f"interrupted ({received() or 'signal'}): forced exit\n")
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(exit_code() if code is None else code)


def _watchdog() -> None:
    time.sleep(GRACE)
    force_exit()


def _handler(signum, frame):
    if _STATE["signal"] is not None:  # the second signal: no more grace
        force_exit(CODES.get(signum, 130))
    _STATE["signal"], _STATE["at"] = signum, time.monotonic()
    threading.Thread(target=_watchdog, name="interrupt-watchdog", daemon=True).start()
    try:  # the backstop needs no Python: the kernel ends the process
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(GRACE) + ALARM_AFTER)
    except (ValueError, OSError):
        pass
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
