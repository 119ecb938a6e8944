"""The ``ranks`` numeric backend: real rank processes, kept alive in a pool.

:func:`run_ranks` runs one :class:`RankSpec` per rank in real processes
started by Paddle's own launcher::

    python -m paddle.distributed.launch --nproc_per_node N \\
        --master 127.0.0.1:PORT --log_dir TMP [--devices 0,..,N-1] \\
        python -m verify.numeric.rank_keeper --pool-id ID

and returns one :class:`RankResult` per rank, with the same semantics as
the in-process simulator (see :mod:`.rank_worker` for what a worker does
with a job; in short: startup once in a fresh scope, params overwritten,
then per step ``exe.run(main, feed=feeds[k])`` and every existing ``watch``
var read back; every var of main's global block is made persistable so that
non-persistable vars stay readable after the run).

Launching costs seconds (the launcher and each rank import Paddle and
rendezvous), so a launched group is kept alive per world size and reused:
jobs travel to the workers and results back over loopback TCP connections
(``multiprocessing.connection`` with a per-pool authkey each worker reads
from a 0600 file: nothing is unpickled before the peer passed the challenge,
run for each connecting peer in a thread of its own).

Environment given to the launcher and the workers
-------------------------------------------------
- ``FLAGS_enable_pir_in_executor=True``: needed on CPU; without it the
  legacy executor fails on ``all_reduce`` ("interface not found" from the
  device manager).  The legacy program is translated to PIR for execution.
- ``FLAGS_enable_pir_api=0``: set again by ``verify.ir.legacy_ir``, which each
  worker imports before anything else imports paddle.
- ``PYTHONPATH`` starts with the project root (the worker is started with
  ``-m``; the launcher only knows scripts, so the "script" is the Python
  interpreter and ``-m verify.numeric.rank_worker`` are its arguments).
- ``RANK_POOL_ADDR`` / ``RANK_POOL_CONTROLLER_PID`` /
  ``RANK_POOL_BIND_WORLD``: how a worker finds this process, and whether it
  binds to the world group at start; ``RANK_POOL_SECRET_DIR``: a private
  directory (0700) of this process holding ``key.R``, rank R's copy of the
  pool's secret (a 0600 file the worker reads and deletes at start), and
  where each rank's keeper writes ``exit.R``.  The secret itself is never in
  an environment: Paddle's launcher writes its environment and every rank's
  to its log dir (``default.*.log``, ``envlog.R``, ``backup_env.R.json``).
- ``GLOO_SOCKET_IFNAME=lo``: gloo's transport binds the loopback interface
  (without it, the address the host name resolves to).  Paddle's TCP store
  (rank 0, ``PADDLE_MASTER``'s port, and the sub-group stores) binds
  0.0.0.0 whatever it is given (docs/faults.md), so ``LD_PRELOAD`` holds
  :mod:`.loopback_bind`'s library, whose ``bind()`` turns a wildcard bind
  into a loopback one (without a C compiler: not set, and a warning).
- Not set: ``PADDLE_DISTRI_BACKEND`` (``auto`` picks gloo on a CPU build and
  NCCL on a CUDA build).  The launcher sets ``OMP_NUM_THREADS=1``.
- ``RANK_POOL_MAX`` (default 2): most pools alive at once in one process.
  ``RANK_POOL_KEEP_LOGS=1`` keeps the launcher's log dir of killed pools.

Each worker initialises the parallel env in dynamic mode before going
(back) to static mode, as DESIGN.md requires.  Ranks other than 0 poll the
master's store port first, which saves the fixed 3 s a store client sleeps
when it starts before the store listens.

Rings and communicators
-----------------------
A job's rings are the ``ring_id`` attrs of the ops of its main and startup
programs; a rank's group in ring r comes from ``spec.rings``
(``{ring_id: [[ranks], ...]}``; a ring that is missing there is the world
group for ring 0 and an error otherwise).  On gloo, ring 0 is the world
group that ``init_parallel_env`` makes, and every other ring id is registered
in the workers when first needed, as a gloo communicator of the rank's own
group (``ProcessGroupGloo`` with ``group_id=ring``) on a TCP store of that
group hosted by its first rank: gloo's comm key is also its store prefix,
so sub-groups sharing a ring id must not share a store.

On gloo (CPU build) a process uses, for every CPU collective, the first
communicator it ever executed a collective on, whatever the ``ring_id``.
Faithful results therefore need every rank to use ONE group for all its
collectives, and a worker to stay with that group for its whole life.  So
on gloo:

- a job in which some rank uses two different groups (e.g. DP+MP with two
  rings) raises :class:`UnsupportedJob` (it cannot run faithfully here; the
  in-process simulator can);
- a pool is "bound": each worker is tied to one group, either the world
  group (warm-up all_reduce on ring 0 at start) or the group the first job
  that uses it needs (private communicator + warm-up all_reduce);
- a job goes to a pool whose bindings agree with the groups its ranks use,
  else a new pool is launched (the least recently used one beyond
  ``RANK_POOL_MAX`` is killed).

Programs whose ranks each use one group work, including sub-groups
(``ring 1 = [[0, 1], [2, 3]]``) and ring 0 used as a sub-group.  Working
collectives on gloo: all_reduce, mp_allreduce_sum, all_gather, broadcast;
not reduce_scatter nor all_to_all.

On a CUDA build (NCCL) nothing is bound: every ring id a job uses is
registered when first needed with ``create_nccl_comm_context`` on the global
store (as Paddle's static auto-parallel does), so any number of rings and
groups per rank is faithful; a pool only refuses a job that wants an already
registered ring id with another group (a new pool is launched for it).  The
GPU path is written but untested here (no GPU on this machine).

Failures
--------
- A rank that raises: its ``RankResult.error`` holds ``"rank R raised:"``
  and the traceback.  The others get a short grace to report; a rank still
  running then (typically waiting in a collective for the failed rank) gets
  an error saying so.  The pool is then killed and relaunched by the next
  job (a failed job may have left the collectives out of step).
- A rank that does not answer within ``timeout``: error naming the rank(s),
  and the whole pool (launcher and every worker process group) is killed.
  Gloo gives up on a collective by itself after about 30 s
  (``RuntimeError: std::exception``; the worker adds a note saying so), so
  with ``timeout`` above that a collective nobody joins is reported as the
  waiting rank having raised, not as a timeout.
- A worker that dies: ``"rank R (pid P) died: killed by SIGKILL"`` (or
  "exited with code N"), from the wait status its keeper recorded
  (:mod:`.rank_keeper`: the launcher starts a keeper per rank, which starts
  the worker and writes how it ended), with the tail of its launcher log.
  The rank that died first is named first: every other rank's failure in
  that job (a survivor's gloo ``std::exception``, a rank the launcher then
  stopped) is marked as following it.
- No pool can be launched: :class:`BackendError`.
- Programs that gloo cannot run faithfully: :class:`UnsupportedJob`.

No process survives: pools are killed by :func:`shutdown_pools` at
interpreter exit (atexit), on SIGTERM/SIGHUP (a handler is chained in front
of the previous one), when a ``KeyboardInterrupt`` leaves :func:`run_ranks`,
and each worker exits by itself as soon as this process is gone (a watchdog
thread, which also runs while the worker waits inside a collective).
"""
from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

from verify import interrupt

from .run_spec import BackendError, RankResult, RankSpec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT = float(os.environ.get("RANK_POOL_LAUNCH_TIMEOUT", "120"))
ERROR_GRACE = 1.0  # seconds the other ranks get after one rank raised
_HEADER = struct.Struct("!Q")


class _PoolBroken(Exception):
    """A pool could not take a job (a worker was gone before it was sent)."""


from .run_spec import ProcessCrash, UnsupportedJob  # noqa: E402,F401  (re-exported)


# --------------------------------------------------------------- wire format
# Controller and workers talk over ``multiprocessing.connection`` with an
# authkey: the controller makes a fresh random key per pool and hands it to
# each worker in a 0600 file of a private directory (RANK_POOL_SECRET_DIR;
# the worker deletes it after reading; never argv, never an environment:
# Paddle's launcher logs environments to disk).  A peer that connects is
# first put through the HMAC challenge in both directions (raw bytes, nothing
# unpickled, a few seconds at most), in a thread of its own
# (:class:`Handshakes`): a peer that fails it, or says nothing, is dropped
# without delaying the others.  Only then are messages (pickles) exchanged.
AUTH_TIMEOUT = 5.0  # seconds a connecting peer has to pass the challenge
AUTHKEY_ENV = "RANK_POOL_AUTHKEY"  # no longer set; a worker ignores it
SECRET_DIR_ENV = "RANK_POOL_SECRET_DIR"
MAX_PENDING = 64  # connections authenticated at once; more are refused at once


def new_authkey() -> bytes:
    return os.urandom(32)


def write_secret(path: str, data: bytes) -> None:
    """Write ``data`` to a new file readable by this user only (0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_secret(path: str) -> bytes:
    """Read a secret written by :func:`write_secret` and delete the file."""
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data


def _set_timeouts(fd: int, seconds: float) -> None:
    """SO_RCVTIMEO/SO_SNDTIMEO on a connected socket fd (0 = block forever)."""
    tv = struct.pack("ll", int(seconds), int((seconds % 1) * 1e6))
    dup = socket.socket(fileno=os.dup(fd))
    try:
        dup.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        dup.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    finally:
        dup.close()


def listen(backlog: int = 128) -> socket.socket:
    """A loopback listening socket on a free port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    return listener


def accept_authenticated(listener: socket.socket, authkey: bytes,
                         timeout: float = AUTH_TIMEOUT, io_timeout: float = 0):
    """Accept one peer and authenticate it; a ``Connection`` or None (dropped).

    Nothing the peer sends is unpickled here: the HMAC challenge exchanges
    raw bytes only.  ``io_timeout`` bounds every later read/write (0: none).
    """
    from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

    raw, _ = listener.accept()
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass
    raw.setblocking(True)
    _set_timeouts(raw.fileno(), timeout)
    conn = Connection(raw.detach())
    try:
        deliver_challenge(conn, authkey)
        answer_challenge(conn, authkey)
        _set_timeouts(conn.fileno(), io_timeout)
    except Exception:  # wrong key, garbage, silence, reset: drop the peer
        conn.close()
        return None
    return conn


def _why_refused(exc: BaseException, timeout: float) -> str:
    from multiprocessing import AuthenticationError

    if isinstance(exc, (BlockingIOError, TimeoutError, socket.timeout)):
        return f"silent for {timeout:g} s"
    if isinstance(exc, AuthenticationError):
        return "failed the challenge (wrong key or not a worker)"
    if isinstance(exc, (EOFError, ConnectionError)):
        return "closed the connection before authenticating"
    return f"{type(exc).__name__}: {exc}"


class Handshakes:
    """Authenticate the peers of ``listener`` off the accept path.

    :meth:`accept_ready` accepts every pending connection without blocking
    and hands each to a thread of its own, which runs the HMAC challenge
    (raw bytes, nothing unpickled) and then, when ``hello`` is given, reads
    the peer's first message and passes it to ``hello`` (which raises
    ``ValueError`` to refuse it), all within ``timeout`` per read.  A peer that
    is silent, fails or lies is dropped and recorded in :attr:`refused` as
    ``(address:port, why)``; it never delays another peer.  Authenticated
    peers come out of :meth:`get` as ``(Connection, hello message)``.
    :meth:`close` stops: connections still pending are shut down and recorded
    as refused too.
    """

    def __init__(self, listener: socket.socket, authkey: bytes,
                 timeout: float = AUTH_TIMEOUT, io_timeout: float = 0,
                 hello=None, max_pending: int = MAX_PENDING):
        import queue

        self.listener = listener
        self.authkey = authkey
        self.timeout = timeout
        self.io_timeout = io_timeout
        self.hello = hello
        self.max_pending = max_pending
        self.refused: list[tuple[str, str]] = []
        self._pending: dict[str, socket.socket] = {}
        self._ready = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        listener.setblocking(False)

    def accept_ready(self) -> None:
        while True:
            try:
                raw, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            peer = f"{addr[0]}:{addr[1]}"
            with self._lock:
                if self._closed:
                    raw.close()
                    return
                if len(self._pending) >= self.max_pending:
                    self.refused.append(
                        (peer, f"refused at once: {self.max_pending} connections "
                               "were already being authenticated"))
                    raw.close()
                    continue
                self._pending[peer] = raw
            threading.Thread(target=self._authenticate, args=(raw, peer),
                             name=f"handshake {peer}", daemon=True).start()

    def _authenticate(self, raw: socket.socket, peer: str) -> None:
        from multiprocessing.connection import (Connection, answer_challenge,
                                                deliver_challenge)

        conn, message, why = None, None, None
        try:
            raw.setblocking(True)
            try:
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            _set_timeouts(raw.fileno(), self.timeout)
            conn = Connection(os.dup(raw.fileno()))
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            if self.hello is not None:
                if not conn.poll(self.timeout):
                    raise TimeoutError("no hello")
                message = conn.recv()
                self.hello(message)
            _set_timeouts(conn.fileno(), self.io_timeout)
        except ValueError as exc:
            why = f"authenticated, but a bad hello ({exc})"
        except TimeoutError as exc:
            why = ("authenticated, but said no hello within "
                   f"{self.timeout:g} s" if str(exc) == "no hello"
                   else _why_refused(exc, self.timeout))
        except Exception as exc:  # wrong key, garbage, silence, reset
            why = _why_refused(exc, self.timeout)
        with self._lock:
            known = self._pending.pop(peer, None) is not None
            if why is None and not self._closed:
                self._ready.put((conn, message))
                raw.close()
                return
            if known:  # else close() has recorded it already
                self.refused.append((peer, why or "authenticated after the wait was over"))
        if conn is not None:
            conn.close()
        raw.close()

    def get(self):
        """An authenticated ``(Connection, hello)``, or None if none is ready."""
        import queue

        try:
            return self._ready.get_nowait()
        except queue.Empty:
            return None

    def close(self, why: str = "still unauthenticated when the wait was over") -> None:
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, {}
            for peer, raw in pending.items():
                self.refused.append((peer, why))
                try:
                    raw.shutdown(socket.SHUT_RDWR)  # wakes its thread up
                except OSError:
                    pass
        while (item := self.get()) is not None:
            item[0].close()

    def describe(self, limit: int = 40) -> str:
        """``"refused N local connection(s): addr:port (why), ..."``, or ''."""
        if not self.refused:
            return ""
        shown = [f"{peer} ({why})" for peer, why in self.refused[:limit]]
        more = len(self.refused) - len(shown)
        return (f"refused {len(self.refused)} local connection(s) that did not "
                "authenticate: " + ", ".join(shown)
                + (f", and {more} more" if more > 0 else ""))


def connect(addr: str, authkey: bytes):
    """Worker side: an authenticated ``Connection`` to ``host:port``."""
    from multiprocessing.connection import Client

    host, port = addr.rsplit(":", 1)
    return Client((host, int(port)), family="AF_INET", authkey=authkey)


def send_msg(conn, obj) -> None:
    conn.send(obj)


def recv_msg(conn):
    return conn.recv()


def wait_port(host: str, port: int, deadline: float) -> bool:
    """Poll until something listens on host:port (True) or deadline passes."""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class LaunchExited(BackendError):
    """The launcher died before every rank connected: no job ran.  Its master
    port is picked free, closed, then bound by the launcher; another process
    can take it in between (two pools starting at once under ``pytest -n``),
    and Paddle's TCP store then aborts: ``_pool_for`` launches again."""


# launches of a pool before its start-up failure is reported (LaunchExited)
LAUNCH_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------ /proc helpers
def processes_with(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line holds marker."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def _state(pid) -> bytes | None:
    """The /proc state letter of pid (b"R", b"S", b"T" stopped, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, TypeError):
        return None


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _kill_tree(pid: int, any_group: bool = False) -> None:
    """SIGKILL pid's process group if pid leads one (``any_group``: whatever
    group it is in, but never this process's), and pid itself."""
    try:
        group = os.getpgid(pid)
        if group == pid or (any_group and group != os.getpgrp()):
            os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# ------------------------------------------------------------ job analysis
def _is_gpu() -> bool:
    from verify.ir.legacy_ir import paddle_module

    core = paddle_module().base.core
    return core.is_compiled_with_cuda() and core.get_cuda_device_count() > 0


def used_rings(program_bytes: bytes) -> set[int]:
    """Ring ids of every op with a ``ring_id`` attr in a serialized program."""
    from verify.ir import legacy_ir  # noqa: F401  (before paddle)
    from paddle.base.proto import framework_pb2

    desc = framework_pb2.ProgramDesc.FromString(program_bytes)
    rings = set()
    for block in desc.blocks:
        for op in block.ops:
            for attr in op.attrs:
                if attr.name == "ring_id" and attr.i >= 0:
                    rings.add(int(attr.i))
    return rings


def _group_of(rings: dict, ring: int, rank: int, world: int) -> tuple | None:
    groups = rings.get(ring, rings.get(str(ring)))
    if groups is None:
        if ring == 0:
            return tuple(range(world))
        raise UnsupportedJob(f"rank {rank} runs collectives on ring {ring}, but the "
                             f"job declares no groups for ring {ring} (rings: {rings})")
    for group in groups:
        if rank in group:
            return tuple(sorted(int(m) for m in group))
    return None


class _Job:
    """What a job needs from the communicators of the pool."""

    def __init__(self, specs: dict, gpu: bool):
        self.world = len(specs)
        self.gpu = gpu
        rings = next(iter(specs.values())).rings or {}
        self.uses = {r: used_rings(s.main) | used_rings(s.startup)
                     for r, s in specs.items()}
        # (rank, ring) -> group of that rank in that ring, for rings it uses
        self.groups = {}
        for r, used in self.uses.items():
            for ring in used:
                g = _group_of(rings, ring, r, self.world)
                if g is None:
                    raise UnsupportedJob(f"rank {r} runs collectives on ring {ring}, "
                                         f"but no group of ring {ring} holds it "
                                         f"(rings: {rings})")
                self.groups[(r, ring)] = g
        # ring keys every rank registers: ring r on rank k with k's group in r,
        # when some member of that group uses r (same sorted order on members)
        all_rings = sorted(set().union(*self.uses.values())) if self.uses else []
        self.register = {r: [] for r in specs}
        for ring in all_rings:
            for r in specs:
                g = _group_of(rings, ring, r, self.world)
                if g and len(g) > 1 and any(ring in self.uses[m] for m in g):
                    self.register[r].append((ring, g))
        # gloo: the one group each rank is bound to
        self.bind = {}
        if not gpu:
            for r in specs:
                mine = {self.groups[(r, ring)] for ring in self.uses[r]}
                if len(mine) > 1:
                    raise UnsupportedJob(
                        f"rank {r} uses {len(mine)} different groups "
                        f"({sorted(mine)}, rings {sorted(self.uses[r])}); on gloo a "
                        "process honours only the first communicator it uses, so "
                        "this job cannot run faithfully on CPU ranks")
            for (r, ring), g in self.groups.items():
                for m in g:
                    if self.bind.setdefault(m, g) != g:
                        raise UnsupportedJob(
                            f"rank {m} is in group {self.bind[m]} and in group {g}; "
                            "on gloo a rank can use only one group")

    @property
    def binds_world(self) -> bool:
        world = tuple(range(self.world))
        return all(g == world for g in self.bind.values())


def _log():
    import logging

    return logging.getLogger("verify.numeric.rank_pool")


# --------------------------------------------------------------------- pool
class Pool:
    """One launched group of ``world`` worker processes."""

    def __init__(self, world: int, gpu: bool, bind_world: bool):
        self.world = world
        self.gpu = gpu
        self.id = "rankpool-" + uuid.uuid4().hex[:12]
        self.owner = os.getpid()
        self._bind_world = bind_world and not gpu and world > 1
        self.bound = {r: (tuple(range(world)) if self._bind_world else None)
                      for r in range(world)}  # gloo: the group each worker uses
        self.ring_groups = {}  # NCCL: (rank, ring) -> group registered
        self.registered = {r: (set() if gpu else {0}) for r in range(world)}
        self.ports = {}  # sub-group -> port of its TCP store
        self.socks = {}
        self.pids = {}
        self.proc = None
        self.dead = False
        self.jobs = 0
        self.launch_seconds = 0.0
        self.log_dir = tempfile.mkdtemp(prefix=f"rank_pool_{world}_")
        self._authkey = new_authkey()
        # private (0700): the ranks' key files, the keepers' exit records
        self.secret_dir = tempfile.mkdtemp(prefix="rank_pool_secret_")
        self.dropped = 0  # peers that failed authentication while starting
        self.refused = []  # (address:port, why) of those peers
        self.loopback_only = False  # wildcard binds made loopback (loopback_bind)
        self.attempts = 1  # launches it took (LaunchExited: its port was taken)

    # -- lifecycle
    def _hello(self, message) -> None:
        kind, rank, pid, pool_id = message
        if kind != "hello" or pool_id != self.id or rank not in range(self.world):
            raise ValueError(f"not a hello of this pool: {message!r:.80}")

    def start(self, timeout: float | None = None) -> None:
        timeout = LAUNCH_TIMEOUT if timeout is None else timeout
        start = time.monotonic()
        listener = listen()
        host, port = listener.getsockname()
        for r in range(self.world):
            write_secret(os.path.join(self.secret_dir, f"key.{r}"), self._authkey)
        env = dict(os.environ)
        env.update({
            "FLAGS_enable_pir_in_executor": "True",
            "FLAGS_enable_pir_api": "0",
            "PYTHONPATH": os.pathsep.join(
                [str(PROJECT_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(
                    os.pathsep) if p]),
            "PYTHONUNBUFFERED": "1",
            "RANK_POOL_ADDR": f"{host}:{port}",
            "RANK_POOL_CONTROLLER_PID": str(os.getpid()),
            "RANK_POOL_BIND_WORLD": "1" if self._bind_world else "0",
            SECRET_DIR_ENV: self.secret_dir,
            # gloo's transport on the loopback interface (Paddle's TCP store
            # binds 0.0.0.0 whatever it is told: docs/faults.md)
            "GLOO_SOCKET_IFNAME": "lo",
        })
        env.pop(AUTHKEY_ENV, None)
        # Paddle's TCP store binds 0.0.0.0 whatever it is given: a preloaded
        # bind() makes every wildcard bind of these processes a loopback one
        from .loopback_bind import preload

        why = preload(env)
        if why:
            _log().warning("rank pool %s: its TCP store will listen on 0.0.0.0: %s",
                           self.id, why)
        self.loopback_only = not why
        cmd = [sys.executable, "-m", "paddle.distributed.launch",
               "--nproc_per_node", str(self.world),
               "--master", f"127.0.0.1:{_free_port()}",
               "--log_dir", self.log_dir, "--log_level", "WARNING"]
        if self.gpu:
            cmd += ["--devices", ",".join(str(i) for i in range(self.world))]
        cmd += [sys.executable, "-m", "verify.numeric.rank_keeper",
                "--pool-id", self.id]
        log = open(os.path.join(self.log_dir, "launcher.log"), "wb")
        try:
            self.proc = subprocess.Popen(cmd, env=env, cwd=str(PROJECT_ROOT),
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
        finally:
            log.close()
        # every connection is authenticated in a thread of its own: a silent
        # or failing peer is dropped after AUTH_TIMEOUT without holding up
        # the ranks (or the other peers)
        shakes = Handshakes(listener, self._authkey, io_timeout=60, hello=self._hello)

        def refused() -> str:
            self.refused = list(shakes.refused)
            self.dropped = len(self.refused)
            text = shakes.describe()
            return f"; {text}" if text else ""

        try:
            deadline = start + timeout
            while len(self.socks) < self.world:
                if self.proc.poll() is not None:
                    shakes.close("still unauthenticated when the launcher exited")
                    raise LaunchExited(
                        f"the launcher of a {self.world}-rank pool exited with code "
                        f"{self.proc.returncode} before every rank connected"
                        f"{refused()}\n" + self.logs())
                if time.monotonic() > deadline:
                    shakes.close(f"still unauthenticated after {timeout:g} s")
                    raise BackendError(
                        f"a {self.world}-rank pool did not come up within {timeout:.0f}"
                        f" s (ranks connected: {sorted(self.socks)}){refused()}\n"
                        + self.logs())
                ready, _, _ = select.select([listener], [], [], 0.1)
                interrupt.check()
                if ready:
                    shakes.accept_ready()
                while (got := shakes.get()) is not None:
                    conn, (_, rank, pid, _) = got
                    if rank in self.socks:
                        shakes.refused.append((f"rank {rank}", "a second hello of rank "
                                               f"{rank} (pid {pid})"))
                        conn.close()
                        continue
                    self.socks[rank] = conn
                    self.pids[rank] = pid
            shakes.close("still unauthenticated when every rank had connected")
            refused()
            if self.refused:
                _log().warning("rank pool %s (%d ranks) came up; %s", self.id,
                               self.world, shakes.describe())
        except BaseException:
            shakes.close()
            self.kill()
            raise
        finally:
            listener.close()
            for r in range(self.world):  # a rank that connected deleted its own
                try:
                    os.unlink(os.path.join(self.secret_dir, f"key.{r}"))
                except OSError:
                    pass
        self.launch_seconds = time.monotonic() - start

    def alive(self) -> bool:
        return not self.dead and self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """Kill the launcher and every worker (their own process groups)."""
        if self.dead:
            return
        self.dead = True
        for sock in self.socks.values():
            try:
                sock.close()
            except OSError:
                pass
        self.socks = {}
        if self.owner != os.getpid():  # a forked child must not kill our pool
            return
        victims = set(self.pids.values()) | set(processes_with(self.id))
        if self.proc is not None:
            victims.discard(self.proc.pid)
        for pid in victims:
            _kill_tree(pid)
        if self.proc is not None:
            _kill_tree(self.proc.pid)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 5
        while processes_with(self.id) and time.monotonic() < deadline:
            for pid in processes_with(self.id):
                _kill_tree(pid)
            time.sleep(0.05)
        shutil.rmtree(self.secret_dir, ignore_errors=True)
        if not os.environ.get("RANK_POOL_KEEP_LOGS"):
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def logs(self, ranks=None, lines: int = 30) -> str:
        out = []
        names = ["launcher.log"] + [f"workerlog.{r}" for r in
                                    (range(self.world) if ranks is None else ranks)]
        for name in names:
            try:
                with open(os.path.join(self.log_dir, name), "rb") as f:
                    text = f.read().decode(errors="replace").splitlines()
            except OSError:
                continue
            text = [t for t in text if t.strip()][-lines:]
            if text:
                out.append(f"--- {name} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(out)

    # -- jobs
    def accepts(self, job: _Job) -> bool:
        if self.world != job.world or not self.alive():
            return False
        if self.gpu:
            return all(self.ring_groups.get((r, ring), g) == g
                       for r, pairs in job.register.items() for ring, g in pairs)
        return all(self.bound[r] in (None, g) for r, g in job.bind.items())

    def plan(self, job: _Job) -> dict:
        setups = {}
        for r in range(self.world):
            setup = {"bind": None, "rings": [], "ports": {}}
            if not self.gpu and r in job.bind and self.bound[r] is None:
                setup["bind"] = job.bind[r]
            for ring, g in job.register[r]:
                if ring not in self.registered[r]:
                    setup["rings"].append((ring, g))
            groups = {g for _, g in setup["rings"]}
            if setup["bind"] is not None:
                groups.add(setup["bind"])
            for g in groups:
                if g != tuple(range(self.world)):
                    setup["ports"][g] = self.ports.setdefault(g, _free_port())
            setups[r] = setup
        return setups

    def _commit(self, job: _Job, setups: dict) -> None:
        for r, setup in setups.items():
            if setup["bind"] is not None:
                self.bound[r] = setup["bind"]
            for ring, g in setup["rings"]:
                self.registered[r].add(ring)
                self.ring_groups.setdefault((r, ring), g)

    def run(self, specs: dict, job: _Job, timeout: float) -> dict:
        """Send the job, collect the results; kill the pool on any error."""
        self.jobs += 1
        setups = self.plan(job)
        self._commit(job, setups)
        ranks = sorted(specs)
        results: dict[int, RankResult] = {}
        rank_of = {}
        try:
            try:
                gone = [r for r, pid in sorted(self.pids.items()) if not _running(pid)]
                if gone:
                    raise OSError(f"worker process of rank(s) {gone} is gone")
                for r in ranks:
                    rank_of[self.socks[r]] = r
                    send_msg(self.socks[r],
                             ("job", self.jobs, setups[r], specs[r].dumps()))
            except OSError as exc:
                raise _PoolBroken(repr(exc)) from exc
            deadline = time.monotonic() + timeout
            grace_until = None
            failed = None
            pending = set(ranks)
            while pending:
                limit = deadline if grace_until is None else min(deadline, grace_until)
                now = time.monotonic()
                if now >= limit:
                    break
                ready, _, _ = select.select([self.socks[r] for r in pending], [], [],
                                            min(0.5, limit - now))
                interrupt.check()  # an interrupt swallowed while the ranks run
                for sock in ready:
                    r = rank_of[sock]
                    pending.discard(r)
                    try:
                        kind, job_id, result = recv_msg(sock)
                        assert kind == "result" and job_id == self.jobs, (kind, job_id)
                    except Exception as exc:  # EOF, reset, timeout, bad pickle
                        time.sleep(0.2)  # let the log reach the disk
                        pid = self.pids.get(r)
                        how = ("died during the job" if pid and not _running(pid)
                               else "broke the protocol")
                        result = RankResult(rank=r, error=(
                            f"rank {r}: worker process (pid {pid}) {how} "
                            f"({exc!r})\n" + self.logs([r])), crashed=True)
                    results[r] = result
                    if result.error and failed is None:
                        failed = r
                        grace_until = time.monotonic() + ERROR_GRACE
                if pending and not ready and self.proc.poll() is not None:
                    # launcher gone: the workers are (being) killed
                    for r in sorted(pending):
                        results[r] = RankResult(rank=r, error=(
                            f"rank {r}: the launcher exited (code "
                            f"{self.proc.returncode}) during the job\n"
                            + self.logs([r])), crashed=True)
                    pending.clear()
            for r in sorted(pending):
                if failed is not None:
                    msg = (f"rank {r} did not finish: the job was abandoned after rank "
                           f"{failed} failed (rank {r} was probably waiting in a "
                           f"collective for rank {failed}); the pool was killed")
                else:
                    stopped = [q for q in ranks if _state(self.pids.get(q)) == b"T"]
                    why = (f"rank(s) {stopped} stopped (SIGSTOP)" if stopped else
                           "hung, e.g. waiting in a collective that a peer never joins")
                    msg = (f"rank {r} did not finish within {timeout:g} s ({why}); "
                           "the pool was killed")
                results[r] = RankResult(rank=r, error=msg, seconds=timeout, waited=True)
            if any(res.error for res in results.values()):
                self._name_the_dead(ranks, results)
        except BaseException:
            self.kill()
            raise
        if any(res.error for res in results.values()):
            self.kill()
        return {r: results[r] for r in ranks}

    def death(self, rank: int) -> tuple[int, str, float] | None:
        """``(pid, how, when)`` of a rank whose worker ended, from its keeper's
        record (:mod:`.rank_keeper`), or None."""
        from .rank_keeper import describe

        try:
            with open(os.path.join(self.secret_dir, f"exit.{rank}")) as f:
                return describe(f.read().strip())
        except OSError:
            return None

    def _name_the_dead(self, ranks: list, results: dict) -> None:
        """A failed job: if some worker died during it, the one that died first
        is named (``rank R (pid P) died: killed by SIGKILL``) and every other
        rank's failure is marked as following it (a survivor's gloo
        ``std::exception``, a rank the launcher stopped after the death)."""
        suspects = [r for r in ranks if results[r].crashed
                    or not _running(self.pids.get(r))]
        deaths = {}
        wait_until = time.monotonic() + (2.0 if suspects else 0.0)
        while True:  # the keeper writes its record right after the death
            deaths = {r: d for r in ranks if (d := self.death(r)) is not None}
            if all(r in deaths for r in suspects) or time.monotonic() > wait_until:
                break
            time.sleep(0.05)
        for r in suspects:  # no record (its keeper died too): still named
            if r not in deaths and not _running(self.pids.get(r)):
                deaths[r] = (self.pids.get(r), "died (its keeper recorded no wait "
                             "status)", time.time())
        if not deaths:
            return
        first = min(deaths, key=lambda r: deaths[r][2])
        pid, how, _ = deaths[first]
        head = f"rank {first} (pid {pid}) died: {how}"
        results[first] = RankResult(rank=first, error=(
            f"{head} (during the job)\n" + self.logs([first])), crashed=True,
            seconds=results[first].seconds)
        for r in ranks:
            res = results[r]
            if r == first or not res.error:
                continue
            later = deaths.get(r)
            then = f"rank {r} (pid {later[0]}) {later[1]}; " if later else ""
            res.error = (f"{head} first; {then}rank {r}'s failure followed it:\n"
                         + res.error)
            res.waited = True


# ------------------------------------------------------------ module state
_POOLS: "OrderedDict[str, Pool]" = OrderedDict()


def _force_kill() -> None:
    """Kill every pool's process group and ranks, without a lock (a forced exit)."""
    for pool in list(_POOLS.values()):
        pids = list(pool.pids.values()) + ([pool.proc.pid] if pool.proc is not None else [])
        for pid in pids:  # a worker's group is its keeper's (rank_keeper), the launcher's its own
            _kill_tree(pid, any_group=True)


interrupt.on_force_exit(_force_kill)
_LOCK = threading.RLock()
_HANDLERS_INSTALLED = False
_ALSO = []  # more cleanups for the SIGTERM/SIGHUP handlers (isolation workers)


def also_on_shutdown(fn) -> None:
    """Call ``fn()`` too when a SIGTERM/SIGHUP handler of this module runs."""
    if fn not in _ALSO:
        _ALSO.append(fn)


def _max_pools() -> int:
    return max(1, int(os.environ.get("RANK_POOL_MAX", "2")))


def shutdown_pools() -> None:
    """Kill every pool this process launched (safe to call any time, also
    from a signal handler while another thread runs a job)."""
    locked = _LOCK.acquire(timeout=1.0)
    try:
        for key in list(_POOLS):
            pool = _POOLS.pop(key, None)
            if pool is not None:
                pool.kill()
    finally:
        if locked:
            _LOCK.release()


def pools() -> list[Pool]:
    """The pools alive in this process (for tests and benchmarks)."""
    with _LOCK:
        return [p for p in _POOLS.values() if p.alive()]


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(shutdown_pools)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)

        def handler(num, frame, previous=previous):
            shutdown_pools()
            for fn in list(_ALSO):
                try:
                    fn()
                except Exception:
                    pass
            if callable(previous):
                previous(num, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(num, signal.SIG_DFL)
                os.kill(os.getpid(), num)

        try:
            signal.signal(signum, handler)
        except (ValueError, OSError):
            pass


def _pool_for(job: _Job) -> Pool:
    with _LOCK:
        for key, pool in list(_POOLS.items()):
            if not pool.alive():
                pool.kill()
                del _POOLS[key]
        for key, pool in _POOLS.items():
            if pool.accepts(job):
                _POOLS.move_to_end(key)
                return pool
        while len(_POOLS) >= _max_pools():
            _, old = _POOLS.popitem(last=False)
            old.kill()
        _install_handlers()
        for attempt in range(1, LAUNCH_ATTEMPTS + 1):
            pool = Pool(job.world, job.gpu, bind_world=job.gpu or job.binds_world)
            try:
                pool.start()
                break
            except LaunchExited as exc:  # no job ran: a fresh port, a fresh launch
                if attempt == LAUNCH_ATTEMPTS:
                    raise BackendError(f"{exc} (launched {attempt} times, each a fresh "
                                       "master port)") from exc
        pool.attempts = attempt
        _POOLS[pool.id] = pool
        return pool


def run_ranks(specs: dict[int, RankSpec], timeout: float = 120.0, *,
              raise_on_error: bool = False) -> dict:
    """Run ``specs`` (``{rank: RankSpec}``, ranks 0..N-1) on N real ranks.

    Returns ``{rank: RankResult}``; a rank that raised, hung or died has its
    ``error`` set (naming the rank).  With ``raise_on_error`` a failed job
    raises :class:`BackendError` instead, like the simulator.  Raises
    :class:`UnsupportedJob` for jobs this backend cannot run faithfully and
    :class:`BackendError` when no pool can be launched.
    """
    ranks = sorted(specs)
    if ranks != list(range(len(ranks))) or not ranks:
        raise BackendError(f"run_ranks needs specs for ranks 0..N-1, got {ranks}")
    for r in ranks:
        if specs[r].rank != r:
            raise BackendError(f"spec for rank {r} says rank {specs[r].rank}")
    job = _Job(specs, _is_gpu())
    with _LOCK:
        for attempt in (1, 2):
            pool = _pool_for(job)
            try:
                results = pool.run(specs, job, timeout)
                break
            except _PoolBroken as exc:  # a worker died while idle: relaunch once
                if attempt == 2:
                    raise BackendError(f"ranks: could not send the job: {exc}") from exc
            finally:
                if not pool.alive():
                    _POOLS.pop(pool.id, None)
                    pool.kill()
    if raise_on_error:
        raise_for_errors(results)
    return results


def raise_for_errors(results: dict, where: str = "ranks") -> None:
    """Raise :class:`BackendError` for the first failed rank of ``results``
    (preferring a rank that raised over one abandoned or hung because of it)."""
    errors = [res for _, res in sorted(results.items()) if res.error]
    if errors:
        raised = [e for e in errors if not e.crashed and not e.waited]
        # a rank that raised explains the rest; then one that died (first the
        # one that died first: the others are marked as following it)
        first = (raised or [e for e in errors if e.crashed and not e.waited]
                 or [e for e in errors if e.crashed] or errors)[0]
        cls = ProcessCrash if first.crashed else BackendError
        raise cls(f"{where}: rank {first.rank} failed: {first.error}", first.rank)
