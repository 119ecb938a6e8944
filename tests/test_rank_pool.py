"""The ``ranks`` numeric backend: real processes under Paddle's launcher."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)
from verify.ir.legacy_ir import paddle_module
from verify.numeric import rank_pool
from verify.numeric.run_spec import BackendError, RankSpec
from conftest import live_processes_marked

paddle = paddle_module()


def _program(collective: bool = True, ring: int = 0, shape=(2, 3)):
    """x (fed) -> y = all_reduce(x) on ``ring`` (or y = x, without it)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", list(shape), "float32")
        block = main.global_block()
        y = block.create_var(name="y", shape=list(shape), dtype="float32")
        if collective:
            block.append_op(type="all_reduce", inputs={"x": [x]},
                            outputs={"out": [y]},
                            attrs={"ring_id": ring, "reduce_type": 0})
        else:
            block.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [y]},
                            attrs={"scale": 1.0})
    return main.desc.serialize_to_string(), startup.desc.serialize_to_string()


def _specs(world=2, programs=None, feeds=None, rings=None, steps=1):
    specs = {}
    for r in range(world):
        main, startup = programs[r] if programs else _program()
        rank_feeds = feeds[r] if feeds else [
            {"x": np.full([2, 3], (r + 1) * 10.0 ** k, "float32")} for k in range(steps)]
        specs[r] = RankSpec(rank=r, main=main, startup=startup, params={},
                            feeds=rank_feeds, watch=["x", "y", "not_a_var"],
                            rings=rings if rings is not None else {0: [list(range(world))]})
    return specs


def _my_workers() -> list[int]:
    """Live rank_worker / launcher processes started on behalf of this process."""
    return sorted(live_processes_marked(f"RANK_POOL_CONTROLLER_PID={os.getpid()}"))


def _pools(world: int = 2) -> list:
    return [p for p in rank_pool.pools() if p.world == world]


@pytest.fixture(scope="module", autouse=True)
def _no_pools_left():
    yield
    rank_pool.shutdown_pools()
    assert _my_workers() == []


@pytest.mark.slow
def test_all_reduce_sums_on_both_ranks():
    results = rank_pool.run_ranks(_specs(steps=2), timeout=60)
    assert sorted(results) == [0, 1]
    for r, res in results.items():
        assert res.error is None, res.error
        assert res.rank == r and len(res.steps) == 2
        for k, step in enumerate(res.steps):
            assert "not_a_var" not in step
            np.testing.assert_array_equal(step["x"], np.full([2, 3], (r + 1) * 10.0 ** k))
            np.testing.assert_array_equal(step["y"], np.full([2, 3], 3 * 10.0 ** k))


@pytest.mark.slow
def test_pool_is_reused_for_the_next_job():
    rank_pool.shutdown_pools()
    start = time.perf_counter()
    first = rank_pool.run_ranks(_specs(), timeout=60)
    cold = time.perf_counter() - start
    pool = _pools()[0]
    start = time.perf_counter()
    second = rank_pool.run_ranks(_specs(), timeout=60)
    warm = time.perf_counter() - start
    print(f"\nfirst job (launch + job): {cold:.3f} s; second job (warm pool): {warm:.3f} s")
    for res in list(first.values()) + list(second.values()):
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))
    assert _pools() == [pool] and pool.jobs == 2


@pytest.mark.slow
def test_other_ring_on_the_world_group_reuses_the_pool():
    rank_pool.run_ranks(_specs(), timeout=60)
    pool = _pools()[0]
    programs = {r: _program(ring=5) for r in range(2)}
    results = rank_pool.run_ranks(_specs(programs=programs, rings={5: [[0, 1]]}),
                                  timeout=60)
    for res in results.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))
    assert _pools() == [pool] and 5 in pool.registered[0]


@pytest.mark.slow
def test_rank_that_raises_is_reported_and_pool_recovers():
    feeds = {0: [{"x": np.ones([2, 3], "float32")}],
             1: [{"x": np.ones([5], "float32")}]}  # wrong shape: rank 1 raises
    results = rank_pool.run_ranks(_specs(feeds=feeds), timeout=30)
    assert results[1].error and "rank 1 raised" in results[1].error
    assert "shape" in results[1].error.lower()
    # rank 0 waited in the all_reduce for rank 1: abandoned, and says why
    assert results[0].error and "rank 1" in results[0].error
    assert _pools() == []

    with pytest.raises(BackendError, match="rank 1 failed: rank 1 raised"):
        rank_pool.raise_for_errors(results)

    again = rank_pool.run_ranks(_specs(), timeout=60)
    for res in again.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))


@pytest.mark.slow
def test_hang_is_killed_after_timeout_and_no_process_is_left():
    rank_pool.run_ranks(_specs(), timeout=60)  # make sure a pool is up
    pool = _pools()[0]
    assert rank_pool.processes_with(pool.id)
    programs = {0: _program(collective=True), 1: _program(collective=False)}
    start = time.perf_counter()
    results = rank_pool.run_ranks(_specs(programs=programs), timeout=3)
    took = time.perf_counter() - start
    assert took < 30  # the 3 s timeout, not the default 120 s
    assert results[0].error and "rank 0" in results[0].error
    assert "did not finish within 3 s" in results[0].error
    assert results[1].error is None  # rank 1 had no collective and finished
    assert rank_pool.processes_with(pool.id) == []
    assert _pools() == []
    others = {pid for p in rank_pool.pools() for pid in rank_pool.processes_with(p.id)}
    assert set(_my_workers()) <= others  # nothing but other live pools' processes


@pytest.mark.slow
def test_sub_group_ring_on_four_ranks():
    rings = {1: [[0, 1], [2, 3]]}
    programs = {r: _program(ring=1) for r in range(4)}
    results = rank_pool.run_ranks(_specs(world=4, programs=programs, rings=rings),
                                  timeout=60)
    for r, res in results.items():
        assert res.error is None, res.error
        expected = 1 + 2 if r < 2 else 3 + 4
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], expected))
    # the same pool then also runs ring 0 as a sub-group (bound already)
    pool = _pools(4)[0]
    programs0 = {r: _program(ring=0) for r in range(4)}
    results = rank_pool.run_ranks(
        _specs(world=4, programs=programs0, rings={0: [[0, 1], [2, 3]]}), timeout=60)
    for r, res in results.items():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"],
                                      np.full([2, 3], 3 if r < 2 else 7))
    assert pool.jobs == 2


def test_two_groups_on_one_rank_are_unsupported_on_gloo():
    if rank_pool._is_gpu():
        pytest.skip("NCCL honours every ring")
    dp_mp = {0: [[0, 1], [2, 3]], 1: [[0, 2], [1, 3]]}

    def two_rings():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2], "float32")
            block = main.global_block()
            y = block.create_var(name="y", shape=[2], dtype="float32")
            z = block.create_var(name="z", shape=[2], dtype="float32")
            block.append_op(type="all_reduce", inputs={"x": [x]}, outputs={"out": [y]},
                            attrs={"ring_id": 0, "reduce_type": 0})
            block.append_op(type="all_reduce", inputs={"x": [y]}, outputs={"out": [z]},
                            attrs={"ring_id": 1, "reduce_type": 0})
        return main.desc.serialize_to_string(), startup.desc.serialize_to_string()

    programs = {r: two_rings() for r in range(4)}
    with pytest.raises(rank_pool.UnsupportedJob, match="first communicator"):
        rank_pool.run_ranks(_specs(world=4, programs=programs, rings=dp_mp))
    assert rank_pool.used_rings(programs[0][0]) == {0, 1}


# ------------------------------------------------ authenticated channel
def _evil_pickle(path: str) -> bytes:
    import pickle

    class Writes:
        def __reduce__(self):
            return (exec, (f"open({path!r}, 'w').write('pwned')",))

    return pickle.dumps(Writes())


def _rogue(addr: str, payload: bytes) -> None:
    """Connect to addr like a worker would, but send a pickle straight away:
    once in the old length-prefixed framing, once framed like a Connection."""
    import socket as socket_mod
    import struct

    host, port = addr.rsplit(":", 1)
    for framed in (struct.pack("!Q", len(payload)) + payload,
                   struct.pack("!i", len(payload)) + payload):
        try:
            with socket_mod.create_connection((host, int(port)), timeout=2) as s:
                s.sendall(framed)
                s.settimeout(2)
                try:
                    s.recv(1024)
                except OSError:
                    pass
        except OSError:
            pass


@pytest.mark.slow
def test_rogue_peer_during_start_up_is_dropped_unpickled(tmp_path, monkeypatch):
    rank_pool.shutdown_pools()
    target = tmp_path / "written_by_unpickling"
    payload = _evil_pickle(str(target))
    real_popen = rank_pool.subprocess.Popen
    seen = {}

    def popen(cmd, *args, env=None, **kwargs):
        # the pool listens now; a rogue local process connects before any rank
        seen["argv"] = " ".join(map(str, cmd))
        _rogue(env["RANK_POOL_ADDR"], payload)
        return real_popen(cmd, *args, env=env, **kwargs)

    monkeypatch.setattr(rank_pool.subprocess, "Popen", popen)
    results = rank_pool.run_ranks(_specs(), timeout=60)
    monkeypatch.undo()
    assert not target.exists(), "a rogue peer's pickle was unpickled"
    pool = _pools()[0]
    assert pool.dropped == 2
    assert pool._authkey.hex() not in seen["argv"]  # the secret is not on argv
    for res in results.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))


def test_wrong_key_is_refused_before_any_pickle(tmp_path):
    """Unit level: a peer with the wrong key is dropped by accept_authenticated."""
    import threading

    from multiprocessing.connection import Client

    target = tmp_path / "written"
    listener = rank_pool.listen()
    addr = listener.getsockname()
    key = rank_pool.new_authkey()

    def client(k):
        try:
            c = Client(addr, family="AF_INET", authkey=k)
            c.send_bytes(_evil_pickle(str(target)))
            c.close()
        except Exception:
            pass

    t = threading.Thread(target=client, args=(b"x" * 32,))
    t.start()
    assert rank_pool.accept_authenticated(listener, key, timeout=2) is None
    t.join(5)
    t = threading.Thread(target=lambda: rank_pool.connect("%s:%d" % addr, key).send("hi"))
    t.start()
    conn = rank_pool.accept_authenticated(listener, key, timeout=2)
    assert conn is not None and conn.recv() == "hi"
    t.join(5)
    conn.close()
    listener.close()
    assert not target.exists()


# ------------------------------------------------ workers killed or stopped
def _worker_pid(rank: int) -> int:
    pool = _pools()[0]
    return pool.pids[rank]


@pytest.mark.slow
def test_worker_killed_mid_job_names_the_rank_and_pool_recovers():
    import signal
    import threading

    rank_pool.run_ranks(_specs(), timeout=60)  # a warm pool
    pool = _pools()[0]
    victim = pool.pids[0]
    # rank 0 waits in an all_reduce that rank 1 never joins: a job in progress
    programs = {0: _program(collective=True), 1: _program(collective=False)}
    timer = threading.Timer(1.5, os.kill, (victim, signal.SIGKILL))
    timer.start()
    start = time.perf_counter()
    results = rank_pool.run_ranks(_specs(programs=programs), timeout=20)
    timer.join()
    assert time.perf_counter() - start < 20
    assert results[0].error and results[0].error.startswith(
        f"rank 0 (pid {victim}) died: killed by SIGKILL"), results[0].error
    assert rank_pool.processes_with(pool.id) == []
    again = rank_pool.run_ranks(_specs(), timeout=60)
    for res in again.values():
        assert res.error is None, res.error
    assert victim not in _pools()[0].pids.values()


@pytest.mark.slow
def test_stopped_worker_times_out_names_the_rank_and_pool_recovers():
    import signal

    rank_pool.run_ranks(_specs(), timeout=60)
    pool = _pools()[0]
    os.kill(pool.pids[1], signal.SIGSTOP)
    try:
        start = time.perf_counter()
        results = rank_pool.run_ranks(_specs(), timeout=3)
        assert time.perf_counter() - start < 20
    finally:
        try:
            os.kill(pool.pids[1], signal.SIGCONT)
        except OSError:
            pass
    assert results[1].error and "did not finish within 3 s" in results[1].error
    assert "rank(s) [1] stopped (SIGSTOP)" in results[1].error
    assert rank_pool.processes_with(pool.id) == []
    again = rank_pool.run_ranks(_specs(), timeout=60)
    for res in again.values():
        assert res.error is None, res.error


def test_crashed_rank_is_a_process_crash_and_a_raising_rank_explains_first():
    """Classification by flag, not by message: a rank whose process died
    raises ProcessCrash (the numeric check is then INCONCLUSIVE); a rank
    that raised is reported before ranks that died or waited for it."""
    import pytest

    from verify.numeric.rank_pool import raise_for_errors
    from verify.numeric.run_spec import BackendError, ProcessCrash, RankResult

    died = {0: RankResult(0, error="rank 0: worker died", crashed=True),
            1: RankResult(1, error="rank 1 did not finish", waited=True)}
    with pytest.raises(ProcessCrash) as exc:
        raise_for_errors(died)
    assert exc.value.rank == 0
    raised = {**died, 2: RankResult(2, error="Traceback ... ValueError")}
    with pytest.raises(BackendError) as exc:
        raise_for_errors(raised)
    assert exc.value.rank == 2 and not isinstance(exc.value, ProcessCrash)


@pytest.mark.slow
def test_a_launcher_that_dies_before_any_rank_connects_is_launched_again(
        tmp_path, monkeypatch):
    """A launcher that exits before every rank connected ran no job (under
    ``pytest -n`` two pools starting at once once made Paddle's TCP store
    abort at start-up): the pool is launched again and the job runs; one
    that keeps dying is reported after ``LAUNCH_ATTEMPTS`` launches.  The
    failure is real: the interpreter the launcher starts with is a script
    that exits 1 on its first start (then runs the real one)."""
    import stat
    import sys

    def interpreter(fail_times):
        marker = tmp_path / f"starts-{fail_times}"
        script = tmp_path / f"python-{fail_times}"
        script.write_text(
            "#!/bin/sh\n"
            f'n=$(cat "{marker}" 2>/dev/null || echo 0)\n'
            f'echo $((n + 1)) > "{marker}"\n'
            f'[ "$n" -lt {fail_times} ] && exit 1\n'
            f'exec "{sys.executable}" "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        return str(script)

    rank_pool.shutdown_pools()
    monkeypatch.setattr(sys, "executable", interpreter(1))
    results = rank_pool.run_ranks(_specs(), timeout=60)
    for res in results.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))
    assert _pools()[0].attempts == 2
    rank_pool.shutdown_pools()
    monkeypatch.setattr(sys, "executable", interpreter(99))
    with pytest.raises(BackendError, match="launched 3 times"):
        rank_pool.run_ranks(_specs(), timeout=60)


# ------------------------------------------------ issue 33: start-up, secrets, deaths
def _silent_peers(addr: str, n: int) -> list:
    """n local sockets connecting to addr (without waiting: the pool's accept
    queue may be short) that never send a byte."""
    import socket as socket_mod

    host, port = addr.rsplit(":", 1)
    socks = []
    for _ in range(n):
        s = socket_mod.socket()
        s.setblocking(False)
        s.connect_ex((host, int(port)))
        socks.append(s)
    return socks


@pytest.mark.slow
def test_silent_connections_during_start_up_do_not_keep_the_pool_down(monkeypatch):
    """25 local sockets connect to the pool's port as it starts and say
    nothing: each is authenticated in a thread of its own and dropped after
    AUTH_TIMEOUT, the ranks are not held up behind them (one after the other
    they took 25 x 5 s, past the 120 s launch limit), and every one of them
    is reported by address."""
    rank_pool.shutdown_pools()
    real_popen = rank_pool.subprocess.Popen
    silent = []

    def popen(cmd, *args, env=None, **kwargs):
        silent.extend(_silent_peers(env["RANK_POOL_ADDR"], 25))
        return real_popen(cmd, *args, env=env, **kwargs)

    monkeypatch.setattr(rank_pool.subprocess, "Popen", popen)
    try:
        results = rank_pool.run_ranks(_specs(), timeout=60)
    finally:
        monkeypatch.undo()
        ports = {"127.0.0.1:%d" % s.getsockname()[1] for s in silent}
        for s in silent:
            s.close()
    for res in results.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))
    pool = _pools()[0]
    # one after the other, the 17 the accept queue held cost 85 s at least
    assert pool.launch_seconds < 60, f"came up after {pool.launch_seconds:.0f} s"
    assert len(ports) == 25
    assert ports <= {peer for peer, _ in pool.refused}, pool.refused
    assert pool.dropped >= 25


@pytest.mark.slow
def test_a_pool_that_does_not_come_up_names_the_peers_it_refused(tmp_path, monkeypatch):
    """No rank ever connects (the launcher is a process that sleeps); 25
    silent local connections: the start-up error says how many peers were
    refused and which (address:port, why)."""
    import stat
    import sys

    script = tmp_path / "sleeper"
    script.write_text("#!/bin/sh\nexec sleep 600\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    real_popen = rank_pool.subprocess.Popen
    silent = []

    def popen(cmd, *args, env=None, **kwargs):
        silent.extend(_silent_peers(env["RANK_POOL_ADDR"], 25))
        return real_popen(cmd, *args, env=env, **kwargs)

    monkeypatch.setattr(rank_pool.subprocess, "Popen", popen)
    monkeypatch.setattr(sys, "executable", str(script))
    pool = rank_pool.Pool(2, False, bind_world=True)
    try:
        with pytest.raises(BackendError) as exc:
            pool.start(timeout=rank_pool.AUTH_TIMEOUT + 3)
    finally:
        monkeypatch.undo()
        ports = ["127.0.0.1:%d" % s.getsockname()[1] for s in silent]
        for s in silent:
            s.close()
        pool.kill()
    text = str(exc.value)
    assert "did not come up" in text
    assert "refused 25 local connection(s)" in text, text
    for port in ports:
        assert f"{port} (silent for 5 s)" in text, text


@pytest.mark.slow
def test_the_pool_secret_is_in_no_launcher_log_nor_environment():
    """Paddle's launcher writes its environment and each rank's to its log
    dir (default.*.log, envlog.R, backup_env.R.json): the pool's key reaches
    the workers through 0600 files they delete, never an environment."""
    rank_pool.shutdown_pools()
    results = rank_pool.run_ranks(_specs(), timeout=60)
    for res in results.values():
        assert res.error is None, res.error
    pool = _pools()[0]
    key = pool._authkey
    needles = [key, key.hex().encode(), key.hex().upper().encode()]
    files = [os.path.join(d, f) for d, _, fs in os.walk(pool.log_dir) for f in fs]
    assert any(os.path.basename(f).startswith("envlog.") for f in files), files
    for path in files:
        data = open(path, "rb").read()
        assert not any(n in data for n in needles), f"the pool's key is in {path}"
    procs = set(pool.pids.values()) | set(rank_pool.processes_with(pool.id)) | {pool.proc.pid}
    for pid in procs:
        environ = open(f"/proc/{pid}/environ", "rb").read()
        assert not any(n in environ for n in needles), f"the key is in pid {pid}'s environment"
    # the key files were read and deleted; the directory is private
    assert [f for f in os.listdir(pool.secret_dir) if f.startswith("key.")] == []
    assert os.stat(pool.secret_dir).st_mode & 0o777 == 0o700


@pytest.mark.slow
def test_a_rank_sigkilled_mid_job_is_named_before_the_survivors_exception():
    """Rank 0 waits in an all_reduce while rank 1 is busy; rank 1 is
    SIGKILLed: rank 0's gloo raises (std::exception), but the job's error
    names rank 1, its pid and the signal, first."""
    import signal
    import threading

    from verify.numeric.run_spec import ProcessCrash

    rank_pool.run_ranks(_specs(), timeout=60)  # a warm pool
    pool = _pools()[0]
    victim = pool.pids[1]
    programs = {0: _program(collective=True), 1: _program(collective=False)}
    feeds = {0: [{"x": np.ones([2, 3], "float32")}],
             1: [{"x": np.ones([2, 3], "float32")}] * 100000}  # busy for ~15 s
    timer = threading.Timer(2.0, os.kill, (victim, signal.SIGKILL))
    timer.start()
    results = rank_pool.run_ranks(_specs(programs=programs, feeds=feeds), timeout=40)
    timer.join()
    assert results[1].error.startswith(
        f"rank 1 (pid {victim}) died: killed by SIGKILL"), results[1].error
    assert results[1].crashed
    assert results[0].error.startswith(
        f"rank 1 (pid {victim}) died: killed by SIGKILL first"), results[0].error
    with pytest.raises(ProcessCrash) as exc:
        rank_pool.raise_for_errors(results)
    assert str(exc.value).startswith(
        f"ranks: rank 1 failed: rank 1 (pid {victim}) died: killed by SIGKILL")
    assert exc.value.rank == 1
    assert rank_pool.processes_with(pool.id) == []


def _listening(pids) -> set:
    """(pid, address, port) of every TCP socket in LISTEN state held by pids,
    from /proc/PID/fd and /proc/net/tcp{,6}."""
    import ipaddress

    owner = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                owner[link[8:-1]] = pid
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in owner:  # 0A: LISTEN
                    continue
                hexaddr, hexport = fields[1].split(":")
                raw = bytes.fromhex(hexaddr)
                # /proc prints the address as 32-bit words in host order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add((owner[fields[9]], str(ipaddress.ip_address(raw)),
                           int(hexport, 16)))
    return found


@pytest.mark.slow
def test_the_ranks_listen_on_loopback_only_during_a_job():
    """While a job runs, every listening socket of the pool's processes (the
    launcher, the keepers, the workers: Paddle's TCP store on rank 0 above
    all, which binds 0.0.0.0 by itself) is on the loopback interface."""
    import ipaddress
    import threading

    rank_pool.shutdown_pools()
    rank_pool.run_ranks(_specs(), timeout=60)
    pool = _pools()[0]
    pids = set(pool.pids.values()) | set(rank_pool.processes_with(pool.id)) | {pool.proc.pid}
    seen, done = set(), threading.Event()

    def sample():
        while not done.is_set():
            seen.update(_listening(pids))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        programs = {0: _program(collective=True), 1: _program(collective=True)}
        results = rank_pool.run_ranks(_specs(programs=programs, steps=30), timeout=60)
    finally:
        done.set()
        sampler.join()
    for res in results.values():
        assert res.error is None, res.error
    master_port = None
    with open(os.path.join(pool.log_dir, "envlog.0")) as f:
        for line in f:
            if line.startswith("PADDLE_MASTER="):
                master_port = int(line.strip().rsplit(":", 1)[1])
    assert master_port and master_port in {port for _, _, port in seen}, seen
    outside = {s for s in seen if not ipaddress.ip_address(s[1]).is_loopback}
    assert outside == set(), (f"listening beyond loopback: {sorted(outside)} "
                              f"(loopback bind library: {getattr(pool, 'loopback_only', None)})")
