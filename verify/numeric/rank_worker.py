"""One rank of the ``ranks`` numeric backend (see :mod:`.rank_pool`).

Started by ``python -m paddle.distributed.launch`` through its keeper
(:mod:`.rank_keeper`, which records how it ended) as
``python -m verify.numeric.rank_worker --pool-id ID``; the launcher gives it
``PADDLE_TRAINER_ID`` / ``PADDLE_TRAINERS_NUM`` / ``PADDLE_MASTER`` (and
``FLAGS_selected_gpus`` on a CUDA build), the pool gives it ``RANK_POOL_*``
(controller address and pid, whether to bind the world group at start).

Life of a worker:

1. ``import verify.ir.legacy_ir`` before anything else imports paddle (it sets
   ``FLAGS_enable_pir_api=0``).  The pool also puts
   ``FLAGS_enable_pir_in_executor=True`` in the environment: without it the
   legacy executor cannot run ``all_reduce`` on CPU.
2. Ranks other than 0 poll the master's TCP store port until it listens
   (a client that finds no listener sleeps a fixed 3 s before retrying).
3. ``init_parallel_env()`` in dynamic mode (``legacy_ir`` switched to static
   mode at import, so we switch back for the call), then ``enable_static()``.
   This makes the world group: gloo on a CPU build, registered as
   communicator key ``"0"``, i.e. ring 0 (on a CUDA build NCCL, and every
   ring, 0 included, is registered when a job first needs it).
4. Optionally an ``all_reduce`` on ring 0 as warm-up.  On gloo the first
   communicator a process *executes* a collective on is the one every later
   CPU collective of that process uses, whatever its ``ring_id``; the warm-up
   binds the worker to the world group (and warms the executor up).
5. Connect to the controller (``multiprocessing.connection`` with the pool's
   authkey, read at start from ``$RANK_POOL_SECRET_DIR/key.R``, a 0600 file
   it then deletes), say hello, then serve jobs until EOF.

A job is ``("job", job_id, setup, spec_bytes)``; ``setup`` says which group
to bind first (private key + warm-up, gloo only) and which ring keys to
register (each on a TCP store of its own group, hosted by the group's first
rank).  The job itself mirrors the in-process simulator: parse main/startup,
mark every var of main's global block persistable (the new executor drops
non-persistable vars from the scope after a run, and we must read them
afterwards), run startup once in a fresh scope, overwrite the params that
startup created, then per step run main with ``feed=spec.feeds[k]`` and read
every existing var of ``spec.watch`` into numpy.  A job that raises answers
with the traceback; the worker stays up (the pool decides whether to kill).

A daemon thread exits the process as soon as the controller process is gone,
even while the main thread waits inside a collective (the executor releases
the GIL there), so a killed test run leaves no worker behind.
"""
from __future__ import annotations

import time

_T0 = time.time()

import verify.ir.legacy_ir  # noqa: E402,F401  (first: sets the legacy IR flag)

import argparse
import os
import sys
import traceback

import numpy as np

from verify.ir.legacy_ir import paddle_module
from verify.numeric.rank_pool import (AUTHKEY_ENV, SECRET_DIR_ENV, connect, read_secret,
                                      recv_msg, send_msg, wait_port)
from verify.numeric.run_spec import RankResult, RankSpec

# Private ring id used to bind a worker to a sub-group (never used by programs).
BIND_RING = 1_000_000_007


def _debug(what: str) -> None:
    """With RANK_POOL_DEBUG=1, timestamps of the start-up phases in the log."""
    if os.environ.get("RANK_POOL_DEBUG") == "1":
        print(f"[rank_worker {time.time():.3f} +{time.time() - _T0:.3f}s] {what}",
              file=sys.stderr, flush=True)


# -------------------------------------------------------------------- worker
class Worker:
    def __init__(self, bind_world: bool):
        self.rank = int(os.environ["PADDLE_TRAINER_ID"])
        self.world = int(os.environ["PADDLE_TRAINERS_NUM"])
        _debug("imported paddle")
        master = os.environ.get("PADDLE_MASTER", "")
        if self.rank != 0 and master:
            host, port = master.rsplit(":", 1)
            wait_port(host, int(port), time.monotonic() + 120)

        _debug("master store port polled")
        paddle = paddle_module()
        import paddle.distributed as dist
        from paddle.base import core

        self.paddle, self.core = paddle, core
        paddle.disable_static()
        dist.init_parallel_env()
        paddle.enable_static()
        _debug("parallel env initialised")
        self.gpu = core.is_compiled_with_cuda() and core.get_cuda_device_count() > 0
        if self.gpu:
            self.backend = "nccl"
            self.place = paddle.CUDAPlace(dist.ParallelEnv().device_id)
        else:
            self.backend = "gloo"
            self.place = paddle.CPUPlace()
        self.world_group = tuple(range(self.world))
        self.stores = {}  # group -> TCPStore
        self.keep = []  # process groups: keep them alive
        # communicator keys (ring ids) that exist: on gloo init_parallel_env
        # registered ring 0; on NCCL every ring is registered when first used
        self.rings = set() if self.gpu else {0}
        self.bound = None
        if bind_world:
            self._warm_up(0)
            self.bound = self.world_group
            _debug("bound to the world group (warm-up all_reduce done)")

    # -- communicators
    def _store(self, group: tuple, port):
        if group == self.world_group or port is None:
            return self.core.create_or_get_global_tcp_store()
        if group not in self.stores:
            leader = self.rank == group[0]
            if not leader:
                wait_port("127.0.0.1", port, time.monotonic() + 120)
            self.stores[group] = self.core.TCPStore("127.0.0.1", port, leader,
                                                    len(group), 900)
        return self.stores[group]

    def _new_comm(self, ring: int, group: tuple, port) -> None:
        if self.gpu:
            # As Paddle's own static auto-parallel does (ProcessGroup.instantiate):
            # one NCCL comm context per ring on the global store, the hash key
            # keeping apart the sub-groups that share a ring id.
            import hashlib

            import paddle.distributed as dist

            key = hashlib.md5(f"{list(group)}ring_id:{ring}".encode()).hexdigest()
            self.core.CommContextManager.set_device_id(dist.ParallelEnv().device_id)
            try:
                self.core.CommContextManager.create_nccl_comm_context(
                    self.core.create_or_get_global_tcp_store(), str(ring),
                    group.index(self.rank), len(group), key)
            except Exception:
                # init_parallel_env may already have registered ring 0 (world)
                if ring != 0 or group != self.world_group:
                    raise
            self.rings.add(ring)
            return
        from paddle.distributed.collective import _new_process_group_impl

        # gloo's comm context takes no hash key: a sub-group needs a store of
        # its own, or two sub-groups sharing a ring id rendezvous together.
        store = self._store(group, port)
        pg = _new_process_group_impl(self.backend, store, group.index(self.rank),
                                     len(group), f"rank_pool_{ring}", None,
                                     group_id=ring)
        self.keep.append(pg)
        self.rings.add(ring)

    def _warm_up(self, ring: int) -> None:
        paddle = self.paddle
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("rank_pool_x", [1], "float32")
            block = main.global_block()
            out = block.create_var(name="rank_pool_y", shape=[1], dtype="float32")
            block.append_op(type="all_reduce", inputs={"x": [x]},
                            outputs={"out": [out]},
                            attrs={"ring_id": ring, "reduce_type": 0})
        exe = paddle.static.Executor(self.place)
        exe.run(main, feed={"rank_pool_x": np.ones([1], "float32")},
                scope=paddle.static.Scope())

    def setup(self, setup: dict) -> None:
        ports = setup.get("ports", {})
        bind = setup.get("bind")
        if bind is not None and self.bound is None:
            bind = tuple(bind)
            if bind == self.world_group:
                self._warm_up(0)
            else:
                self._new_comm(BIND_RING, bind, ports.get(bind))
                self._warm_up(BIND_RING)
            self.bound = bind
        elif bind is not None and tuple(bind) != self.bound:
            raise RuntimeError(f"worker bound to group {self.bound}, job needs {bind}")
        for ring, group in setup.get("rings", []):
            if ring not in self.rings:
                group = tuple(group)
                self._new_comm(ring, group, ports.get(group))

    # -- jobs
    def run_job(self, spec: RankSpec) -> RankResult:
        paddle = self.paddle
        start = time.perf_counter()
        result = RankResult(rank=self.rank)
        main = paddle.static.Program.parse_from_string(spec.main)
        startup = paddle.static.Program.parse_from_string(spec.startup)
        # Keep every var of main readable after a run (see module docstring).
        for var in main.global_block().vars.values():
            var.desc.set_persistable(True)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(self.place)
        exe.run(startup, scope=scope)
        for name, value in spec.params.items():
            var = scope.find_var(name)
            if var is not None:
                var.get_tensor().set(np.ascontiguousarray(value), self.place)
        for feed in spec.feeds:
            exe.run(main, feed=feed, scope=scope)
            got = {}
            for name in spec.watch:
                var = scope.find_var(name)
                if var is None:
                    continue
                try:
                    tensor = var.get_tensor()
                    if tensor._is_initialized():
                        got[name] = np.array(tensor)
                except Exception:  # not a dense tensor (e.g. a tensor array)
                    continue
            result.steps.append(got)
        result.seconds = time.perf_counter() - start
        return result

    def serve(self, addr: str, authkey: bytes, pool_id: str) -> None:
        # authenticated both ways (HMAC challenge) before any pickle moves
        sock = connect(addr, authkey)
        send_msg(sock, ("hello", self.rank, os.getpid(), pool_id))
        while True:
            try:
                msg = recv_msg(sock)
            except (EOFError, OSError):
                return
            if msg[0] == "exit":
                return
            _, job_id, setup, data = msg
            start = time.perf_counter()
            try:
                self.setup(setup)
                result = self.run_job(RankSpec.loads(data))
            except BaseException:
                took = time.perf_counter() - start
                text = traceback.format_exc()
                if "std::exception" in text and took > 25 and not self.gpu:
                    text += (f"(after {took:.0f} s: most likely gloo's collective "
                             "timeout of about 30 s, i.e. a peer never joined the "
                             "collective this rank waited in)\n")
                result = RankResult(rank=self.rank,
                                    error=f"rank {self.rank} raised:\n" + text,
                                    seconds=took)
            send_msg(sock, ("result", job_id, result))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool-id", required=True)
    args = parser.parse_args(argv)
    ppid = int(os.environ["RANK_POOL_CONTROLLER_PID"])
    from verify.numeric.parent_watch import exit_with_parent

    exit_with_parent(ppid)
    addr = os.environ["RANK_POOL_ADDR"]
    # the pool's secret: from this rank's 0600 file in the pool's private
    # directory, deleted once read (never argv, never the environment, which
    # Paddle's launcher writes to its log dir)
    os.environ.pop(AUTHKEY_ENV, None)
    authkey = read_secret(os.path.join(os.environ[SECRET_DIR_ENV],
                                       f"key.{os.environ['PADDLE_TRAINER_ID']}"))
    worker = Worker(bind_world=os.environ.get("RANK_POOL_BIND_WORLD") == "1")
    worker.serve(addr, authkey, args.pool_id)
    rec = sys.modules.get("_paddle_trace_boot")  # verify premerge-trace records
    if rec is not None:
        rec.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: Paddle's/gloo's destructors can block on
    # peers that are gone.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
