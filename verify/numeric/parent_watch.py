"""A child process that must not outlive its parent (isolation workers, rank
workers): a daemon thread polls the parent and exits the child when it is
gone, so a killed controller never leaves orphans behind."""
from __future__ import annotations

import os
import threading
import time


def _watch(pid: int, period: float) -> None:
    direct = os.getppid() == pid
    while True:
        time.sleep(period)
        # a parent that died but is not reaped yet (a zombie) still answers
        # kill(pid, 0); a direct child is re-parented at once, so ask that too
        if direct and os.getppid() != pid:
            os._exit(3)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(3)
        except PermissionError:  # alive, owned by someone else
            pass


def exit_with_parent(pid: int, period: float = 0.5) -> threading.Thread:
    """Start the watch of ``pid``; returns the daemon thread."""
    t = threading.Thread(target=_watch, args=(pid, period), daemon=True)
    t.start()
    return t
