"""A job's memory limit, enforced on resident memory from outside the worker.

The limit was ``RLIMIT_AS`` (address space) in the worker.  Address space is
not memory: every thread Paddle's executor starts reserves an 8 MB stack and
glibc a 64 MB malloc arena, and a lock-step run of a real model (one PIR
interpreter, with its own thread pool, per program piece, rank and
micro-batch) holds ~850 threads: 11 GB of address space for 1.5 GB resident.
Under a 4096 MB ``RLIMIT_AS`` ``pthread_create`` then fails with EAGAIN
("Resource temporarily unavailable") inside the executor, which either raised
or hung: a run of README command 1 came out INCONCLUSIVE for no fault of the
program (issue 33).

So the limit is on what the name promises: the resident memory (RSS) of the
worker and of every process of its process group, sampled from this (the
parent's) side by a thread, so a worker holding its GIL in a C loop is
still watched.  Past ``base + limit`` the group is killed with SIGKILL and
the watch says so (``tripped``); the job's outcome then names the limit and
the resident size seen.  Sampling every 50 ms overshoots by what the job
allocates in that time; the limit is a guard against runaway jobs, not an
accounting.
"""
from __future__ import annotations

import os
import signal
import threading

PAGE = os.sysconf("SC_PAGE_SIZE")
INTERVAL = 0.05  # seconds between samples of the worker's resident memory
GROUP_EVERY = 20  # samples between scans of /proc for the worker's process group


def resident_bytes(pid: int) -> int:
    """Resident memory of one process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def group_members(pgid: int) -> list[int]:
    """Pids of the processes in process group ``pgid`` (``pgid`` first)."""
    found = [pgid]
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == pgid:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            # the command may hold spaces and ')': fields after its last ')'
            fields = stat[stat.rindex(b")") + 2:].split()
            if int(fields[2]) == pgid:  # state, ppid, pgrp
                found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def group_resident(pgid: int, members: list[int] | None = None) -> int:
    return sum(resident_bytes(p) for p in (members or group_members(pgid)))


class ResidentWatch:
    """Kill process group ``pgid`` when its resident memory grows more than
    ``limit_mb`` past what it held when the watch started."""

    def __init__(self, pgid: int, limit_mb: int):
        self.pgid = pgid
        self.limit_mb = int(limit_mb)
        self.base = group_resident(pgid)
        self.peak = self.base
        self.tripped: int | None = None  # the resident bytes seen when it killed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resident-watch", daemon=True)
        self._thread.start()

    @property
    def limit_bytes(self) -> int:
        return self.base + self.limit_mb * 1024 * 1024

    def _run(self) -> None:
        members, n = [self.pgid], 0
        while not self._stop.wait(INTERVAL):
            if n % GROUP_EVERY == 0:
                members = group_members(self.pgid)
            n += 1
            rss = group_resident(self.pgid, members)
            self.peak = max(self.peak, rss)
            if rss > self.limit_bytes:
                self.tripped = rss
                try:
                    os.killpg(self.pgid, signal.SIGKILL)
                except OSError:
                    pass
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def summary(self) -> str:
        """One line for the job's outcome when the watch killed it."""
        mb = (self.tripped or self.peak) / 2 ** 20
        return (f"exceeded the memory limit of {self.limit_mb} MB (resident memory "
                f"{mb:.0f} MB against {self.base / 2 ** 20:.0f} MB at the job's start; "
                "worker killed)")
