"""No exit 0 from code the run loaded: ``os._exit`` guarded in the run's process.

User code (case files, builders, pass files) is run first in an isolation
worker (``verify/engine/input_probe.py``), where any way it ends is its
error.  What still runs here (a builder that behaved in the worker, Paddle
itself) could end the process with ``os._exit(0)``: no report, exit 0, read
as green by CI.  So ``os._exit`` is wrapped in the command's process: a
call from code outside this project while the command has not finished is
turned into exit 2 with one line naming the caller.  ``sys.exit`` raises
``SystemExit``, which the command catches; a signal is not exit 0.
"""
from __future__ import annotations

import os
import sys

_REAL_EXIT = os._exit
_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN = tuple(os.path.join(_PROJECT, d) + os.sep for d in ("verify", "passes", "cases"))
EXIT_BAD_INPUT = 2


def _guarded_exit(code=0):
    caller = sys._getframe(1)
    where = caller.f_code.co_filename
    if os.path.abspath(where).startswith(_OWN):
        _REAL_EXIT(code)
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001  (a closed stream: nothing to flush)
        pass
    try:
        print(f"error: {where}:{caller.f_lineno} called os._exit({code!r}) while "
              f"'{' '.join(sys.argv[1:2]) or 'verify'}' ran: the run was ended by code it "
              "loaded, and what it checked is not reported", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001
        pass
    _REAL_EXIT(EXIT_BAD_INPUT if code in (0, None) else code)


def install() -> None:
    """Wrap ``os._exit`` in this process (idempotent)."""
    if os._exit is not _guarded_exit:
        os._exit = _guarded_exit
