"""Isolation: a pass application (or a simulated numeric run) in a worker process.

A pass under test is code we do not trust: before it merges it may loop
forever, call ``os._exit``, raise ``SystemExit``, segfault inside Paddle or
allocate without bound.  Paddle's executor may segfault on an ill-formed
program too.  Each of these must cost one application, never the run, so
the two jobs that run such code go to a worker process:

* ``apply_pass(adapter, case, rank)`` = ``PassAdapter.apply_local`` in a
  worker; returns a :class:`passes.base.PassRun` built in this process;
* ``run_simulated(specs, where)`` = ``simulated_ranks.run_simulated`` in a
  worker; returns ``{rank: RankResult}`` or raises ``BackendError`` (a crash
  of the worker: :class:`WorkerCrash`, naming the rank and the program).

Workers
-------
``python -m verify.engine.isolation`` processes, each in its own session, kept in a
small pool and reused while healthy (Paddle, the cases and the passes are
imported once per worker, not per job); a worker that died, overran its
wall-clock limit or hit its memory limit is killed and replaced by the next
job.  Parent and worker talk over ``multiprocessing.connection`` with a
random authkey handed over in the environment (never argv); a peer that
fails the challenge is dropped before anything it sent is unpickled
(``verify.numeric.rank_pool.accept_authenticated``).  A worker exits by
itself when its parent is gone (watchdog thread), and the parent kills its
workers at exit, on SIGTERM/SIGHUP (the rank pool's handlers) and in
:func:`shutdown`.

Limits, per job
---------------
* wall clock ``timeout`` (s): past it the parent asks the worker for its
  Python stack (``faulthandler`` registered on SIGUSR1, written to a file),
  waits a moment, then kills the worker's process group;
* memory ``memory_mb``: the resident memory of the worker's process group
  may grow by ``memory_mb`` during the job; past it a watch in this process
  kills the group (``verify/engine/resident_watch.py``: not ``RLIMIT_AS``,
  which thread stacks and malloc arenas exhaust long before memory is).

A worker killed by a signal it did not raise itself (SIGKILL, SIGTERM, ...
from outside: the OOM killer, an operator's ``kill -9``) is not the job's
fault: the job is run once more in a fresh worker, and a second such death
is an environment failure (``Outcome.kind == "external"``), INCONCLUSIVE,
never PASS_CRASHED.  Synchronous faults (SIGSEGV, SIGABRT, SIGBUS, SIGFPE,
SIGILL) are the job's.

Outcomes (``PassRun.crash`` is the one-line summary, ``PassRun.error`` the
full text with the worker's stack or log):

=====================  ===================================================
the job                outcome
=====================  ===================================================
overruns ``timeout``   ``timed out after N s`` + the worker's Python stack
exits (``os._exit``)   ``the worker exited with code N``
killed by a signal     ``the worker was killed by SIGSEGV`` (name) + stack
memory limit           ``exceeded the memory limit of N MB (resident ...)``
killed from outside    rerun once; again: ``killed by SIGKILL from outside``
raises (any, also      the traceback, as in process; the half-rewritten
``SystemExit``)        program is sent back
=====================  ===================================================

Pass files: every job carries the pass files in force here
(``verify/ir/pass_sources.py``, in load order) and the worker loads exactly
those first (reloaded when one changes), so every registry lookup the
adapter makes there (the pass under test under whatever name it is looked
up, the passes applied before it) resolves as it does in this process.
The worker records its lookups and sends them back with the answer.  A
pass the adapter looks up that was registered some other way (a class
defined by a test), or a case/adapter that does not pickle (a locally
defined builder), cannot be reproduced in a worker: that job runs in
process, as without isolation.

The rewritten program comes back as ``desc.serialize_to_string()`` plus what
the desc does not carry: each op's ``execution_stream`` and
``stream_priority`` (kept in the op's dist attr) and the names of
``params_grads`` after the pass, and every attr ``serialize_to_string``
drops (Paddle's runtime-only "extra" attrs, ``mkldnn_data_type``,
``use_quantizer``, ...: ``program_transport.dropped_attrs``), set again on
the rebuilt ops, and the names of the vars flagged ``is_data`` (a
Python-side flag: the feeds).  The snapshot of the rebuilt program equals the in-process
one, every attr of every op (``tests/test_isolation.py``).  This process builds the original itself
(``case.build`` is deterministic) and a fresh build gives the rewritten
side's feeds, fetches, loss and ``dist_context``.

``configure(enabled=, timeout=, memory_mb=)`` sets the defaults; the
environment can too (``VERIFY_ISOLATION=0`` turns it off,
``VERIFY_TIMEOUT``, ``VERIFY_MEMORY_MB``).
"""
from __future__ import annotations

import atexit
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from verify.ir.paddle_overlay import ENV as _OVERLAY_ENV
from verify.ir.pass_sources import active_files, note, recording, replayable
from verify.ir.program_transport import rebuild_legacy
from verify.engine.origins import stamp_built, stamp_imported
from verify.engine.resident_watch import ResidentWatch
from verify import interrupt
from verify.numeric import offload
from verify.numeric.run_spec import BackendError, ProcessCrash

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0
STACK_WAIT = 1.0  # seconds the worker gets to write its stack on a timeout
MAX_IDLE = 2  # idle workers kept
MAX_THREADS = 256  # a worker holding more threads after a job is not reused
# signals a process raises on itself (a fault of the code it runs); any other
# signal that kills a worker came from outside (the OOM killer, kill -9)
FAULT_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE,
                 signal.SIGILL, signal.SIGTRAP, signal.SIGSYS}

_SETTINGS = {
    "enabled": os.environ.get("VERIFY_ISOLATION", "1") not in ("0", "false", "no", "off"),
    "timeout": float(os.environ.get("VERIFY_TIMEOUT", "120")),
    "memory_mb": int(os.environ.get("VERIFY_MEMORY_MB", "4096")),
}


def configure(enabled: bool | None = None, timeout: float | None = None,
              memory_mb: int | None = None) -> dict:
    """Set the defaults (``None`` keeps a setting); returns the settings.

    ``memory_mb=0`` means no memory limit."""
    if enabled is not None:
        _SETTINGS["enabled"] = bool(enabled)
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        _SETTINGS["timeout"] = float(timeout)
    if memory_mb is not None:
        if memory_mb < 0:
            raise ValueError("memory must be >= 0 MB")
        _SETTINGS["memory_mb"] = int(memory_mb)
    return dict(_SETTINGS)


def settings() -> dict:
    return dict(_SETTINGS)


def enabled() -> bool:
    return _SETTINGS["enabled"]


class WorkerCrash(ProcessCrash):
    """A numeric run whose worker process died, overran or ran out of memory
    (the program may have crashed Paddle's executor): inconclusive, not a
    difference."""


@dataclass
class Outcome:
    """How a job ended when it did not answer."""

    kind: str  # "timeout" | "exit" | "signal" | "memory" | "external"
    summary: str  # one line
    detail: str = ""  # the worker's Python stack, or its log tail

    def text(self) -> str:
        return self.summary + ("\n" + self.detail if self.detail else "")


# ================================================================== parent
class _Worker:
    def __init__(self):
        from verify.numeric.rank_pool import (AUTH_TIMEOUT, accept_authenticated,
                                              listen, new_authkey)

        self.dir = tempfile.mkdtemp(prefix="verify_iso_")
        self.stack_path = os.path.join(self.dir, "stack.txt")
        self.log_path = os.path.join(self.dir, "worker.log")
        self.jobs = 0
        self.owner = os.getpid()
        self.overlay = os.environ.get(_OVERLAY_ENV)  # the overlay it loads at start
        key = new_authkey()
        listener = listen(4)
        host, port = listener.getsockname()
        env = dict(os.environ)
        env.update({
            "VERIFY_ISOLATION_ADDR": f"{host}:{port}",
            "VERIFY_ISOLATION_AUTHKEY": key.hex(),
            "VERIFY_ISOLATION_PARENT": str(os.getpid()),
            "VERIFY_ISOLATION_STACKS": self.stack_path,
            "VERIFY_ISOLATION": "0",  # a worker never isolates again
            "PYTHONPATH": os.pathsep.join(
                [str(PROJECT_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(
                    os.pathsep) if p]),
            "PYTHONUNBUFFERED": "1",
        })
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "verify.engine.isolation", "--worker"], env=env,
                cwd=str(PROJECT_ROOT), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
            _LIVE.add(self.proc.pid)  # killed by a forced exit (verify/interrupt.py)
        finally:
            log.close()
        self.conn = None
        try:
            deadline = time.monotonic() + START_TIMEOUT
            import select

            while self.conn is None:
                if self.proc.poll() is not None:
                    raise BackendError("the isolation worker exited with code "
                                       f"{self.proc.returncode} at start:\n" + self.log_tail())
                if time.monotonic() > deadline:
                    raise BackendError(f"the isolation worker did not start within "
                                       f"{START_TIMEOUT:.0f} s:\n" + self.log_tail())
                ready, _, _ = select.select([listener], [], [], 0.1)
                interrupt.check()  # an interrupt swallowed while the worker starts
                if _ABORT.is_set():  # shutdown() while a prestarted worker starts
                    raise BackendError("the isolation worker was shut down while starting")
                if not ready:
                    continue
                conn = accept_authenticated(listener, key)
                if conn is None:
                    continue
                try:
                    if conn.poll(AUTH_TIMEOUT) and conn.recv() == ("hello", self.proc.pid):
                        self.conn = conn
                        break
                except Exception:
                    pass
                conn.close()
        except BaseException:
            self.kill()
            raise
        finally:
            listener.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None and self.conn is not None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        text = [t for t in text if t.strip()][-lines:]
        return "\n".join(text)

    def stack(self) -> str:
        try:
            return Path(self.stack_path).read_text(errors="replace").strip()
        except OSError:
            return ""

    def kill(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None
        if self.owner == os.getpid():
            for target in (lambda: os.killpg(self.proc.pid, signal.SIGKILL),
                           lambda: self.proc.kill()):
                try:
                    target()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            _LIVE.discard(self.proc.pid)
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, kind: str, payload, timeout: float, memory_mb: int, meanwhile=None):
        """Send a job, run ``meanwhile()`` here while the worker works, wait.

        Returns (("ok", answer) or ("crash", Outcome), what meanwhile returned).
        A crashed or overrun worker is killed here."""
        self.jobs += 1
        job = self.jobs
        self.watch = ResidentWatch(self.proc.pid, memory_mb) if memory_mb else None
        try:
            return self._call(kind, job, payload, timeout, memory_mb, meanwhile)
        finally:
            if self.watch is not None:
                self.watch.stop()

    def _call(self, kind, job, payload, timeout, memory_mb, meanwhile):
        self.conn.send((kind, job, payload, memory_mb))
        deadline = time.monotonic() + timeout
        extra = meanwhile() if meanwhile is not None else None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return ("crash", self._timed_out(timeout)), extra
            try:
                ready = self.conn.poll(min(0.25, left))
            except (OSError, EOFError):
                ready = True
            interrupt.check()  # an interrupt swallowed while the worker works
            if ready:
                try:
                    msg = self.conn.recv()
                except (OSError, EOFError):
                    return ("crash", self._died(memory_mb)), extra
                if msg[0] == "answer" and msg[1] == job:
                    return ("ok", msg[2]), extra
                self.kill()
                return ("crash", Outcome("exit", "the worker broke the protocol")), extra
            if self.proc.poll() is not None:
                return ("crash", self._died(memory_mb)), extra

    def _timed_out(self, timeout: float) -> Outcome:
        try:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGUSR1)  # faulthandler: dump the stack
        except OSError:
            pass
        deadline = time.monotonic() + STACK_WAIT
        while time.monotonic() < deadline and not self.stack():
            time.sleep(0.02)
        time.sleep(0.05)
        stack = self.stack()
        self.kill()
        return Outcome("timeout", f"timed out after {timeout:g} s (worker killed)",
                       "Python stack of the worker at the time:\n" + (stack or "(none)"))

    def _died(self, memory_mb: int) -> Outcome:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        time.sleep(0.05)
        stack, tail = self.stack(), self.log_tail()
        self.kill()
        watch = getattr(self, "watch", None)
        if watch is not None and watch.tripped:
            return Outcome("memory", watch.summary(), tail)
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            detail = ("Python stack of the worker when it died:\n" + stack) if stack else tail
            if -code not in FAULT_SIGNALS:
                return Outcome("external", f"the worker was killed by {name} from outside "
                               "the checker (not a fault of the job: no limit of the "
                               "checker's was reached)", detail)
            return Outcome("signal", f"the worker was killed by {name}", detail)
        if code is None:
            return Outcome("exit", "the worker closed its connection and did not exit",
                           tail)
        return Outcome("exit", f"the worker exited with code {code}", tail)


_IDLE: list = []
_LOCK = threading.RLock()
_ATEXIT = False
_SIGNALS = False
_LIVE: set = set()  # pids (= process groups) of the workers this process started


def _force_kill() -> None:
    """Kill every worker, busy or idle, without a lock (a forced exit)."""
    for pid in list(_LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


interrupt.on_force_exit(_force_kill)


def shutdown() -> None:
    """Kill every idle worker of this process and one :func:`prestart` is
    starting (busy ones die with their job)."""
    if _STARTING:
        _ABORT.set()
        try:
            for t in list(_STARTING):
                if t is not threading.current_thread():
                    t.join(timeout=5.0)
        finally:
            _ABORT.clear()
            _STARTING[:] = [t for t in _STARTING if t.is_alive()]
    locked = _LOCK.acquire(timeout=1.0)
    try:
        while _IDLE:
            _IDLE.pop().kill()
    finally:
        if locked:
            _LOCK.release()


def workers() -> list:
    """Pids of this process's idle workers (tests)."""
    return [w.pid for w in _IDLE if w.alive()]


def _on_exit(signals: bool = True) -> None:
    """Have this process kill its workers at exit and, with ``signals``, on
    SIGTERM/SIGHUP (once each).  Not the signals before Paddle is imported:
    its import installs its own SIGTERM handler in C, under Python's."""
    global _ATEXIT, _SIGNALS
    with _LOCK:
        if not _ATEXIT:
            _ATEXIT = True
            atexit.register(shutdown)
        if not signals or _SIGNALS:
            return
        _SIGNALS = True
        try:  # the rank pool's SIGTERM/SIGHUP handlers: also kill our workers
            from verify.numeric import rank_pool

            rank_pool._install_handlers()
            rank_pool.also_on_shutdown(shutdown)
        except Exception:
            pass


def arm_signals() -> None:
    """Kill this process's workers on SIGTERM/SIGHUP from now on: call once
    Paddle is imported, after :func:`prestart` (the first job does too)."""
    if _ATEXIT:
        _on_exit()


_STARTING: list = []  # the thread of prestart(), until a job waits for it
_ABORT = threading.Event()  # set by shutdown(): a starting worker gives up


def prestart() -> None:
    """Start one worker now, in a thread, into the idle pool: its start-up
    (importing Paddle, the cases and the passes; 3-5 s on the zoo machine)
    overlaps this process's own instead of the first job waiting for it.
    Nothing when isolation is off or a worker is idle or starting already;
    a worker that fails to start is dropped (the first job starts its own
    and reports why)."""
    if not enabled() or _STARTING or _IDLE:
        return
    _on_exit(signals=False)  # the first job installs them (after Paddle's import)

    def start():
        try:
            w = _Worker()
        except BaseException:  # noqa: B036  (an interrupt included: the job sees it)
            return
        _release(w)

    t = threading.Thread(target=start, name="isolation-prestart", daemon=True)
    _STARTING.append(t)
    t.start()


def _acquire() -> _Worker:
    while _STARTING:  # a worker prestart() is starting: wait for it, then take it
        _STARTING.pop().join()
    with _LOCK:
        while _IDLE:
            w = _IDLE.pop()
            # a worker runs the Paddle sources it started with: one started
            # under another --paddle-file overlay (or none) is not reused
            if w.alive() and w.owner == os.getpid() and \
                    w.overlay == os.environ.get(_OVERLAY_ENV):
                return w
            w.kill()
    _on_exit()
    return _Worker()


def _threads(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    except (OSError, StopIteration, ValueError):
        return 0


def _release(w: _Worker) -> None:
    # Paddle keeps each program's interpreter, and its thread pool, alive in
    # the process: a worker reused for many numeric runs collects hundreds of
    # idle threads (851 measured); it is retired, not reused, past a bound
    with _LOCK:
        if w.alive() and len(_IDLE) < MAX_IDLE and _threads(w.pid) <= MAX_THREADS:
            _IDLE.append(w)
        else:
            w.kill()


def _run_job(kind, payload, timeout, memory_mb, meanwhile=None):
    """((status, answer), meanwhile's result) of one job on a pooled worker.
    Every job carries the pass files in force here: the worker loads
    exactly those before it (a job never sees another's pass file)."""
    payload = {**payload, "pass_files": active_files()}
    first = None
    for attempt in (0, 1):
        w = _acquire()
        try:
            (status, answer), got = w.call(kind, payload, timeout, memory_mb, meanwhile)
        except BaseException:
            w.kill()  # interrupted, or meanwhile raised: the worker's state is unknown
            raise
        if attempt == 0:
            extra, meanwhile = got, None  # what meanwhile built serves the rerun too
        if status == "ok" and answer.get("healthy", True):
            _release(w)
        else:
            w.kill()
        if status != "crash" or answer.kind != "external":
            return (status, answer), extra
        if first is None:  # killed from outside: once more in a fresh worker
            first = answer
            continue
    return ("crash", Outcome(
        "external", f"checker environment: {answer.summary}, twice (the job was rerun "
        "once in a fresh worker)", f"first death: {first.summary}\n{first.detail}\n"
        f"second death: {answer.summary}\n{answer.detail}")), extra


def budget() -> float:
    """The per-job wall-clock budget (s) in force (``configure``/``VERIFY_TIMEOUT``)."""
    return _SETTINGS["timeout"]


def _limits(timeout, memory):
    t = _SETTINGS["timeout"] if timeout is None else float(timeout)
    m = _SETTINGS["memory_mb"] if memory is None else int(memory)
    return t, m


# ------------------------------------------------------------ pass applications
def run_pass(adapter, case, rank: int):
    """The engine's one way to apply a pass: in a worker when isolation is on
    and the adapter allows it (``PassAdapter.isolated``), else in this process."""
    if enabled() and getattr(adapter, "isolated", True):
        return apply_pass(adapter, case, rank)
    return _in_process(adapter, case, rank)


def _in_process(adapter, case, rank: int):
    """``adapter.apply_local`` here; refused while a --paddle-file overlay is
    exported but not loaded in this process (it would apply the installed
    modules under the overlay's name)."""
    from verify.ir.paddle_overlay import require_here

    require_here(f"{adapter.name} on case {case.name} rank {rank} (applied in process)")
    return adapter.apply_local(case, rank)


def apply_pass(adapter, case, rank: int, timeout=None, memory=None):
    """``adapter.apply_local(case, rank)`` in a worker; a ``PassRun``.

    The worker loads the pass files in force here (module docstring).
    Falls back to the in-process application when the job cannot be
    reproduced in a worker.
    """
    from verify.ir.legacy_ir import paddle_module

    paddle_module()
    timeout, memory = _limits(timeout, memory)
    if not replayable(adapter.python_passes()):
        return _in_process(adapter, case, rank)
    try:
        blob = pickle.dumps((adapter, case), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return _in_process(adapter, case, rank)
    payload = {"blob": blob, "rank": rank}
    # the original (and a fresh build, for the rewritten side's metadata) are
    # built here while the worker applies the pass
    (status, answer), (original, fresh) = _run_job(
        "apply", payload, timeout, memory, lambda: _builds(adapter, case, rank))
    if status == "ok":
        note(answer.get("applied", []))  # what the worker really looked up
    if fresh is None:  # see _builds: a crash needs an unrewritten build of its own
        fresh = case.build(rank) if status != "ok" or "exported" not in answer else \
            _metadata_copy(original)
        stamp_built(fresh)
    return _pass_run(status, answer, original, fresh, timeout, memory, adapter)


def _builds(adapter, case, rank):
    """(original, fresh build or None).  An original from a program dir's
    files, no pass before it, is stamped (``verify/engine/origins.py``), and
    when the adapter imports the rewritten programs the base way (they replace
    the fresh build's programs and names) no fresh build is made: the
    rewritten side takes a copy of the original's metadata instead."""
    from passes.base import PirPassAdapter

    original = adapter.build_original(case, rank)
    if stamp_built(original) and \
            getattr(type(adapter), "import_rewritten", None) is PirPassAdapter.import_rewritten:
        return original, None
    return original, case.build(rank)


def _metadata_copy(rp):
    """A copy of ``rp`` sharing only its programs (which the import replaces;
    programs not deserialized yet are not shared, nor read)."""
    import copy
    import dataclasses

    # programs deserialized on first read (cases.pir_matmul_grad.LazyPirRankProgram)
    # are not read to be replaced: the copy has none
    lazy = [k for k in ("main", "startup", "names")
            if isinstance(getattr(type(rp), k, None), property)]
    return dataclasses.replace(rp, **{k: None for k in lazy}, feeds=copy.deepcopy(rp.feeds),
                               fetches=list(rp.fetches), placements=copy.deepcopy(rp.placements),
                               params_grads=list(rp.params_grads), origin=None)


def _pass_run(status, answer, original, fresh, timeout, memory, adapter=None):
    from passes.base import PassRun

    if status == "ok" and answer.get("memory"):
        status, answer = "crash", Outcome(
            "memory", "ran out of memory (MemoryError from the system)",
            answer.get("error", ""))
    if status == "crash":
        out: Outcome = answer
        if out.kind == "external":  # not the pass's doing: no finding against it
            return PassRun(original, fresh, out.text(), "Environment", environment=out.summary)
        summary = {"timeout": f"the pass timed out after {timeout:g} s (worker killed)",
                   "memory": f"the pass {out.summary}"}.get(
                       out.kind, f"the pass crashed: {out.summary}")
        kind = {"timeout": "Timeout", "signal": "Signal", "exit": "Exit",
                "memory": "MemoryError"}[out.kind]
        return PassRun(original, fresh, f"{summary}\n{out.detail}".strip(), kind,
                       crash=summary)
    if answer.get("build_error"):
        raise RuntimeError("the case failed to build in the isolation worker:\n"
                           + answer["build_error"])
    rewritten = adapter.import_rewritten(fresh, answer["exported"]) \
        if "exported" in answer else rebuild_legacy(fresh, answer)
    if "exported" in answer and getattr(rewritten, "plan_digest", None):
        stamp_imported(rewritten, answer["exported"], fresh)
        rewritten.plan_digest = None  # not the files' programs any more
    error, etype = answer.get("error"), answer.get("error_type")
    crash = None
    if etype == "MemoryError" and memory:
        crash = f"the pass exceeded the memory limit of {memory} MB (MemoryError)"
        error = crash + "\n" + (error or "")
    return PassRun(original, rewritten, error, etype, crash=crash)


# ------------------------------------------------------------ simulated numeric runs
def run_simulated(specs: dict, where: str = "simulated", timeout=None, memory=None) -> dict:
    """``simulated_ranks.run_simulated(specs, where)`` in a worker.

    A BackendError of the simulator comes back as one; a worker that crashed
    (e.g. SIGSEGV in Paddle's executor), overran or ran out of memory raises
    :class:`WorkerCrash` naming the rank and the program it was running."""
    if not enabled():
        from verify.ir.paddle_overlay import require_here
        from verify.numeric.simulated_ranks import run_simulated as local

        require_here(f"{where} (numeric run in process)")
        return local(specs, where)
    timeout, memory = _limits(timeout, memory)
    (status, answer), _ = _run_job("simulate", {"specs": specs, "where": where},
                                   timeout, memory)
    if status == "crash":
        out: Outcome = answer
        rank, phase = _last_progress(out)
        at = f"rank {rank} ({phase} program)" if rank is not None else "a rank"
        if out.kind == "external":
            raise WorkerCrash(f"{where}: {out.summary}\n{out.detail}", rank)
        raise WorkerCrash(f"{where}: {at} crashed the executor: {out.summary}\n{out.detail}",
                          rank)
    if answer.get("backend_error") is not None:
        msg, rank = answer["backend_error"]
        raise BackendError(msg, rank)
    if answer.get("error"):
        raise BackendError(f"{where}: {answer['error']}")
    return answer["results"]


def run_call(module: str, function: str, kwargs: dict, where: str, timeout=None,
             memory=None, force=False, retire=False):
    """``module.function(**kwargs)`` (a function of the suite, ``verify.*``) in
    a worker; its (picklable) result.  It raising is a RuntimeError carrying
    the traceback; a worker that died, overran or ran out of memory raises
    :class:`WorkerCrash` (e.g. PIR numeric runs, ``verify/numeric/pir_runner.py``).
    ``force``: in a worker even with isolation off (user code, loaded first:
    ``verify/engine/input_probe.py``); ``retire``: the worker is not reused."""
    if not enabled() and not force:
        import importlib

        from verify.ir.paddle_overlay import require_here

        require_here(f"{where} ({module}.{function} in process)")
        return getattr(importlib.import_module(module), function)(**kwargs)
    timeout, memory = _limits(timeout, memory)
    (status, answer), _ = _run_job("call", {"module": module, "function": function,
                                            "kwargs": kwargs, "retire": retire},
                                   timeout, memory)
    if status == "crash":
        out: Outcome = answer
        if out.kind == "external":
            raise WorkerCrash(f"{where}: {out.summary}\n{out.detail}")
        what = "overran its time limit" if out.kind == "timeout" else "crashed the executor"
        raise WorkerCrash(f"{where}: {what}: {out.summary}\n{out.detail}")
    if answer.get("error"):
        raise RuntimeError(answer["error"])
    return answer["result"]


def _last_progress(out: Outcome):
    """(rank, "startup"|"main") the simulator was executing, from the stack dump."""
    import re

    found = re.findall(r"ISOLATION-PROGRESS rank=(\d+) program=(\w+)", out.detail)
    if found:
        r, p = found[-1]
        return int(r), p
    return None, "?"


# ================================================================== worker
class _WorkerState:
    def __init__(self, stack_fd: int):
        self.stack_fd = stack_fd
        self.loaded = []  # [((path, mtime), LoadedPassFile)], in load order
        self.progress = None

    def reset_stack(self) -> None:
        os.ftruncate(self.stack_fd, 0)
        os.lseek(self.stack_fd, 0, os.SEEK_SET)

    # -- pass files
    def use_pass_files(self, files) -> None:
        """Have exactly ``files`` (``[(path, mtime)]``, the parent's) loaded."""
        files = [tuple(f) for f in files]
        if [key for key, _ in self.loaded] == files:
            return
        for _, loaded in reversed(self.loaded):
            loaded.restore()
        self.loaded = []
        from verify.ir.pass_files import load_pass_file

        for path, mtime in files:
            self.loaded.append(((path, mtime), load_pass_file(path)))

    # -- jobs
    def apply(self, payload: dict) -> dict:
        adapter, case = pickle.loads(payload["blob"])
        rank = payload["rank"]
        try:
            from verify.ir.paddle_overlay import require_here

            # an overlay the parent exported is loaded here at start (boot
            # sitecustomize); a worker without it must not apply the installed code
            require_here(f"the isolation worker applying {adapter.name} on case "
                         f"{case.name} rank {rank}")
            with recording() as applied:
                run = adapter.apply_local(case, rank)
        except MemoryError:
            raise
        except BaseException:
            return {"build_error": traceback.format_exc()}
        rw = run.rewritten
        export = getattr(adapter, "export_rewritten", None)
        if export is not None:  # programs that do not travel as a ProgramDesc (PIR)
            return {"exported": export(rw), "error": run.error, "error_type": run.error_type,
                    "healthy": not run.out_of_memory, "applied": applied}
        from verify.ir.program_transport import export_legacy

        # the serialized descs and what they lose on the way (stream attrs,
        # Paddle's runtime-only extra attrs, is_data), set again by rebuild_legacy
        return {**export_legacy(rw),
                "error": run.error, "error_type": run.error_type,
                "healthy": not run.out_of_memory, "applied": applied}

    def call(self, payload: dict) -> dict:
        import importlib

        if not payload["module"].startswith("verify."):
            return {"error": f"refused: {payload['module']} is not a module of the suite"}
        try:
            fn = getattr(importlib.import_module(payload["module"]), payload["function"])
            return {"result": fn(**payload["kwargs"]), "healthy": not payload.get("retire")}
        except MemoryError:
            raise
        except Exception:
            return {"error": traceback.format_exc()}

    def simulate(self, payload: dict) -> dict:
        from verify.numeric import simulated_ranks as sim

        self.track_progress(sim)
        try:
            results = sim.run_simulated(payload["specs"], payload["where"])
        except sim.BackendError as exc:
            return {"backend_error": (str(exc), exc.rank)}
        except MemoryError:
            raise
        except Exception:
            return {"error": traceback.format_exc()}
        return {"results": results}

    def track_progress(self, sim) -> None:
        """Write the rank and program the simulator runs into the stack file
        before each piece, so a crash can name them."""
        if self.progress is not None:
            return
        fd = self.stack_fd
        original = sim._Rank.advance

        def advance(rank_state):
            which = "startup" if rank_state.items is rank_state.startup else "main"
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"ISOLATION-PROGRESS rank={rank_state.rank} "
                         f"program={which}\n".encode())
            return original(rank_state)

        sim._Rank.advance = advance
        self.progress = advance


def worker_main() -> int:
    import faulthandler

    from verify.ir import legacy_ir  # noqa: F401  (legacy IR before paddle)
    from verify.ir.legacy_ir import paddle_module
    from verify.numeric.rank_pool import connect

    parent = int(os.environ["VERIFY_ISOLATION_PARENT"])
    from verify.numeric.parent_watch import exit_with_parent

    exit_with_parent(parent)
    authkey = bytes.fromhex(os.environ.pop("VERIFY_ISOLATION_AUTHKEY"))
    stack_file = open(os.environ["VERIFY_ISOLATION_STACKS"], "w+")
    state = _WorkerState(stack_file.fileno())
    paddle_module()
    import cases  # noqa: F401  (imported once per worker)
    import passes  # noqa: F401

    faulthandler.enable(file=stack_file, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    conn = connect(os.environ["VERIFY_ISOLATION_ADDR"], authkey)
    conn.send(("hello", os.getpid()))
    while True:
        try:
            kind, job, payload, memory_mb = conn.recv()
        except (EOFError, OSError):
            break
        if kind == "exit":
            break
        state.reset_stack()
        try:
            state.use_pass_files(payload.get("pass_files", []))
        except Exception:  # the parent loaded it; here it does not: say so, stop
            files = ", ".join(str(f[0]) for f in payload.get("pass_files", []))
            msg = f"the isolation worker could not load the pass files ({files}):\n" + \
                traceback.format_exc()
            conn.send(("answer", job, {"error": msg, "build_error": msg, "healthy": False}))
            continue
        try:
            if kind == "apply":
                answer = state.apply(payload)
            elif kind == "simulate":
                answer = state.simulate(payload)
            elif kind == "call":
                answer = state.call(payload)
            else:
                answer = {"error": f"unknown job {kind!r}"}
        except MemoryError:  # the system's (the limit is watched from the parent)
            answer = {"memory": True, "healthy": False,
                      "error": f"MemoryError: exceeded the memory limit of {memory_mb} MB",
                      "error_type": "MemoryError"}
        _flush_executed_trace()  # a pooled worker is killed, not exited
        conn.send(("answer", job, answer))
    _flush_executed_trace()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _flush_executed_trace() -> None:
    """Write what Paddle code ran so far when ``verify premerge-trace``
    records it (``verify/premerge/trace.py``, installed at start-up)."""
    rec = sys.modules.get("_paddle_trace_boot")
    if rec is not None:
        rec.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        sys.exit(worker_main())
    print(__doc__)


# the numeric layer's runs go through this module (verify/numeric/offload.py)
offload.install(sys.modules[__name__])
