"""The keeper of one rank of the ``ranks`` backend (see :mod:`.rank_pool`).

Paddle's launcher starts ``python -m verify.numeric.rank_keeper --pool-id ID``
once per rank; the keeper starts the real worker
(``python -m verify.numeric.rank_worker`` with the same arguments, fork and
exec: a clean process) and waits for it.  A worker is not a child of the
controller (the launcher is its parent and reaps it), so without a keeper
nobody could say how a rank that died mid-job ended.  The keeper records it
in ``$RANK_POOL_SECRET_DIR/exit.R``::

    <worker pid> signal <number>   <time.time() of its end>
    <worker pid> code <exit code>  <time.time() of its end>

then ends the same way (the same signal, or the same code), so the launcher
sees what it saw before.  It forwards SIGTERM/SIGINT/SIGHUP to the worker
(the launcher signals the rank's process group, which holds both anyway).

It imports nothing but the standard library's ``os``, ``signal``, ``sys``
and ``time``: a few MB per rank.
"""
from __future__ import annotations

import os
import signal
import sys
import time


def describe(line: str) -> tuple[int, str, float] | None:
    """``(pid, "killed by SIGKILL" / "exited with code N", when)`` of a
    keeper's record, or None if it cannot be read."""
    try:
        pid, kind, value, when = line.split()
        pid, value, when = int(pid), int(value), float(when)
    except ValueError:
        return None
    if kind == "signal":
        try:
            name = signal.Signals(value).name
        except ValueError:
            name = f"signal {value}"
        return pid, f"killed by {name}", when
    return pid, f"exited with code {value}", when


def main() -> int:
    rank = os.environ.get("PADDLE_TRAINER_ID", "x")
    status_dir = os.environ.get("RANK_POOL_SECRET_DIR")
    argv = [sys.executable, "-m", "verify.numeric.rank_worker"] + sys.argv[1:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)

    def forward(num, frame):
        try:
            os.kill(pid, num)
        except OSError:
            pass

    for num in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(num, forward)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = None
    when = time.time()
    if status is not None and os.WIFSIGNALED(status):
        kind, value = "signal", os.WTERMSIG(status)
    else:
        kind, value = "code", (os.waitstatus_to_exitcode(status)
                               if status is not None else 255)
    if status_dir:
        path = os.path.join(status_dir, f"exit.{rank}")
        try:
            with open(path + ".tmp", "w") as f:
                f.write(f"{pid} {kind} {value} {when:.6f}\n")
            os.replace(path + ".tmp", path)
        except OSError:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    if kind == "signal":
        signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
        time.sleep(1)
        os._exit(128 + value)
    os._exit(value)


if __name__ == "__main__":
    sys.exit(main())
