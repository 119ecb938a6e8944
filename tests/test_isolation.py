"""Isolation: a pass (or a numeric run) that hangs, exits, crashes or eats
memory costs one application, never the run (verify/engine/isolation.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.ir.pass_files import load_pass_file  # noqa: E402
from verify.engine import isolation  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402
from verify.ir.snapshot import from_programs  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402
from conftest import live_processes_marked  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = os.path.join(ROOT, "tests", "mutants", "faults")
CASE = "col_3d_static"  # 2 ranks, the overlap pass fires, EQUIVALENT today
# every legacy case, each through the first pass that handles it (issue 34
# item 8: the transport keeps every attr of every op)
LEGACY_CASES = [n for n, c in cases.all_cases().items() if getattr(c, "ir", "legacy") != "pir"]


def _my_workers() -> set:
    """Live isolation workers started by this process."""
    return live_processes_marked(f"VERIFY_ISOLATION_PARENT={os.getpid()}")


@pytest.fixture(autouse=True)
def _isolated():
    before = isolation.settings()
    isolation.configure(enabled=True)
    yield
    isolation.configure(**before)
    # nothing but the idle pool may be left
    assert _my_workers() <= set(isolation.workers())


@pytest.fixture(scope="module", autouse=True)
def _no_worker_left():
    yield
    isolation.shutdown()
    assert _my_workers() == set()


def _plain(snapshot) -> dict:
    """The whole snapshot, every attr of every op (none excluded)."""
    return snapshot.to_dict()


def _all_attrs(program) -> list:
    """Every attr (extra ones too) of every op of every block, from the desc;
    ``op_callstack`` by its presence (the Python stack of the process that
    built the op: the worker's is another)."""
    out = []
    for b in range(program.desc.num_blocks()):
        block = program.desc.block(b)
        for i in range(block.op_size()):
            op = block.op(i)
            out.append((b, i, op.type(), sorted(
                (n, str(op.attr_type(n, True)),
                 "" if n == "op_callstack" else repr(op.attr(n, True)))
                for n in op.attr_names(True)
                if str(op.attr_type(n, True)).rsplit(".", 1)[-1] not in ("BLOCK", "BLOCKS"))))
    return out


@pytest.mark.parametrize("pass_name,case_name", [
    ("overlap", "col_3d_static"), ("promotion", "row_mp_o0_adamw_tp2"),
    ("overlap", "col_2d"), ("promotion", "row_mp_sp_o0_sgd_tp2")])
def test_rebuilt_program_is_the_one_the_pass_built(pass_name, case_name):
    adapter, case = passes.get(pass_name), cases.all_cases()[case_name]
    for rank in case.ranks:
        local = adapter.apply_local(case, rank)
        iso = isolation.apply_pass(adapter, case, rank)
        assert (iso.error is None) == (local.error is None)
        assert iso.error_type == local.error_type and iso.crash is None
        sides = ("original", "rewritten")
        if local.error:
            # a pass that raised can leave Python's op list behind its desc;
            # the worker sends the desc (what the pass really built)
            for prog in ("main", "startup"):
                a, b = getattr(local.rewritten, prog), getattr(iso.rewritten, prog)
                assert a.desc.block(0).op_size() == len(b.global_block().ops)
                assert [a.desc.block(0).op(i).type() for i in range(a.desc.block(0).op_size())] \
                    == [op.type for op in b.global_block().ops]
            sides = ("original",)
        for side in sides:
            a, b = getattr(local, side), getattr(iso, side)
            assert _plain(from_programs(a.main, a.startup)) == \
                _plain(from_programs(b.main, b.startup)), (side, rank)
            assert [(p.name, g.name) for p, g in a.params_grads] == \
                [(p.name, g.name) for p, g in b.params_grads]
            assert [type(p).__name__ for p, _ in b.params_grads] == \
                [type(p).__name__ for p, _ in a.params_grads]
            assert (a.feeds, a.fetches, a.loss) == (b.feeds, b.fetches, b.loss)


@pytest.mark.parametrize("case_name", LEGACY_CASES)
def test_transport_keeps_every_attr_of_every_op(case_name):
    """Every op of every legacy case through the worker: each rank's program
    as the worker's pass left it (the first pass that handles the case; one
    that leaves it alone sends back every original op) comes back with every
    attr, Paddle's extra ones too (``mkldnn_data_type``: the dataflow check
    read a lost one as a change, issue 34)."""
    case = cases.all_cases()[case_name]
    adapter = next(a for a in passes.adapters().values() if a.handles(case))
    for rank in case.ranks:
        local = adapter.apply_local(case, rank)
        iso = isolation.apply_pass(adapter, case, rank)
        if local.error:
            # a pass that raised (engine_pipeline_tp2_clip: a CUDA-only pass
            # unregistered; its worker may then die of SIGSEGV, as before the
            # transport kept attrs) leaves a half-rewritten program behind
            continue
        assert iso.crash is None and iso.error is None, (adapter.name, rank, iso.crash)
        a, b = local.rewritten, iso.rewritten
        for prog in ("main", "startup"):
            got, want = _all_attrs(getattr(b, prog)), _all_attrs(getattr(a, prog))
            assert len(got) == len(want), (adapter.name, rank, prog)
            for x, y in zip(got, want):
                assert x == y, (adapter.name, rank, prog, x[:3],
                                sorted(set(y[3]) ^ set(x[3])))
        assert _plain(from_programs(a.main, a.startup)) == \
            _plain(from_programs(b.main, b.startup)), (adapter.name, rank)


def test_numeric_checks_agree_in_and_out_of_process():
    from verify.engine.matrix_runner import pick_backend

    _, numeric = pick_backend("simulated")
    adapter, case = passes.get("promotion"), cases.all_cases()["row_mp_o0_sgd_tp2"]
    got = {}
    for on in (False, True):
        isolation.configure(enabled=on)
        app = run_application(adapter, case, numeric=numeric)
        got[on] = [(c.kind, c.name, c.rank, c.verdict, c.message) for c in app.checks]
    assert got[True] == got[False]
    assert any(k == "numeric" and v == Verdict.EQUIVALENT for k, _, _, v, _ in got[True])


# ----------------------------------------------------------- fault passes
FAULT_CASES = [
    # file, settings, expected words in the PASS_CRASHED message
    ("loops.py", dict(timeout=4), "timed out after 4 s"),
    ("exits.py", {}, "the worker exited with code 3"),
    ("system_exit.py", {}, "SystemExit: 4"),
    ("segfault.py", {}, "killed by SIGSEGV"),
    ("allocates.py", dict(memory_mb=512), "exceeded the memory limit of 512 MB"),
]


@pytest.mark.parametrize("fault,limits,expected", FAULT_CASES,
                         ids=[f[0][:-3] for f in FAULT_CASES])
def test_fault_pass_is_pass_crashed_and_the_next_application_is_judged(
        fault, limits, expected):
    isolation.configure(timeout=limits.get("timeout", 30),
                        memory_mb=limits.get("memory_mb", 4096))
    adapter, case = passes.get("overlap"), cases.all_cases()[CASE]
    start = time.perf_counter()
    loaded = load_pass_file(os.path.join(FAULTS, fault))
    try:
        app = run_application(adapter, case, source=loaded.path)
    finally:
        loaded.restore()
    assert time.perf_counter() - start < 40
    assert app.verdict == Verdict.PASS_CRASHED
    crashed = [c for c in app.checks if c.verdict == Verdict.PASS_CRASHED]
    assert len(crashed) == len(case.ranks)  # every rank, each in a worker
    for c in crashed:
        assert expected in c.message, c.message
    if fault == "loops.py":  # where it was: the worker's Python stack
        tb = crashed[0].details["traceback"]
        assert "Python stack of the worker" in tb and "loops.py" in tb, tb
    if fault == "system_exit.py":  # the half-rewritten program came back
        assert app.outcomes[0].after is not None
        assert len(app.outcomes[0].after.ops) == len(app.outcomes[0].before.ops) - 1
    # the next application (the installed pass) is judged normally
    nxt = run_application(adapter, case)
    assert nxt.verdict == Verdict.EQUIVALENT, [c.message for c in nxt.checks]


def test_threads_are_not_memory_a_correct_pass_with_400_threads_is_judged():
    """The memory limit is on resident memory: 400 idle threads (stacks and
    malloc arenas, ~28 GB of address space) under the default 4096 MB limit
    leave the pass's verdict as it is (RLIMIT_AS failed them with EAGAIN)."""
    isolation.configure(timeout=60, memory_mb=4096)
    adapter, case = passes.get("overlap"), cases.all_cases()[CASE]
    loaded = load_pass_file(os.path.join(FAULTS, "many_threads.py"))
    try:
        app = run_application(adapter, case, source=loaded.path)
    finally:
        loaded.restore()
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks]


def _kill_worker_when_named(times: int):
    """A thread that SIGKILLs the worker applying killed_from_outside.py,
    ``times`` times (each time it names itself), as an operator would."""
    import tempfile
    import threading

    path = os.path.join(tempfile.gettempdir(), f"verify_outside_kill_{os.getpid()}.pid")
    killed = []

    def watch():
        deadline = time.monotonic() + 60
        while len(killed) < times and time.monotonic() < deadline:
            try:
                pid = int(open(path).read())
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            os.unlink(path)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t, killed, path


@pytest.mark.parametrize("kills", [1, 2])
def test_a_worker_killed_from_outside_is_not_the_passes_fault(kills):
    """kill -9 of the worker while it applies a correct pass: rerun once in a
    fresh worker (one kill: the pass's own verdict); killed again:
    INCONCLUSIVE naming the environment, never PASS_CRASHED."""
    isolation.configure(timeout=60, memory_mb=4096)
    adapter, case = passes.get("overlap"), cases.all_cases()[CASE]
    loaded = load_pass_file(os.path.join(FAULTS, "killed_from_outside.py"))
    t, killed, path = _kill_worker_when_named(kills)
    try:
        run = run_pass(adapter, case, case.ranks[0])
    finally:
        loaded.restore()
        t.join(timeout=5)
        if os.path.exists(path):
            os.unlink(path)
    assert len(killed) == kills
    if kills == 1:
        assert run.error is None and run.crash is None, run.error
        assert not run.environment
    else:
        assert run.environment and "from outside" in run.environment, run.error
        assert "twice" in run.environment and run.crash is None


def test_resident_watch_kills_a_growing_process_and_spares_threads():
    """The watch on concrete processes: one that touches 600 MB is killed
    past a 200 MB limit; one that starts 300 threads and touches little is not."""
    from verify.engine.resident_watch import ResidentWatch

    grow = ("import time\nh=[]\nfor _ in range(60):\n h.append(bytearray(10<<20))\n"
            " time.sleep(0.02)\ntime.sleep(5)")
    threads = ("import threading,time\ne=threading.Event()\nts=[threading.Thread("
               "target=e.wait) for _ in range(300)]\n[t.start() for t in ts]\n"
               "time.sleep(1.5)\ne.set()")
    for code, limit, killed in ((grow, 200, True), (threads, 200, False)):
        p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        time.sleep(0.1)
        w = ResidentWatch(p.pid, limit)
        try:
            rc = p.wait(timeout=30)
        finally:
            w.stop()
        assert (w.tripped is not None) == killed, (rc, w.peak)
        if killed:
            assert rc == -signal.SIGKILL and w.tripped > w.limit_bytes
            assert "exceeded the memory limit of 200 MB" in w.summary()
        else:
            assert rc == 0


def test_a_failure_of_the_environment_leads_its_message():
    """The first line of a failed run names the environment's failure, not a
    symptom; a worker crash's first line is its summary, not its stack."""
    from verify.numeric.run_spec import ProcessCrash
    from verify.verdicts import failure_line

    crash = ProcessCrash("planner on c: overran its time limit: timed out after 600 s\n"
                         "Thread 0x1 (most recent call first):\nCurrent thread 0x2:\n"
                         "  File \"x.py\", line 1 in run")
    assert failure_line(crash) == "planner on c: overran its time limit: timed out after 600 s"
    eagain = RuntimeError("Traceback (most recent call last):\n  File \"e.py\"\n"
                          "RuntimeError: Resource temporarily unavailable")
    line = failure_line(eagain)
    assert line.startswith("checker environment: a thread or process could not be started")
    assert "Resource temporarily unavailable" in line
    assert failure_line(ValueError("shapes differ")) == "shapes differ"


def test_pass_file_change_is_seen_by_the_worker(tmp_path):
    """A worker reloads the pass file when it changes on disk."""
    path = tmp_path / "changing.py"
    src = open(os.path.join(FAULTS, "system_exit.py")).read()
    path.write_text(src)
    adapter, case = passes.get("overlap"), cases.all_cases()[CASE]
    loaded = load_pass_file(str(path))
    try:
        assert "SystemExit" in (isolation.apply_pass(adapter, case, 0).error or "")
        time.sleep(0.01)
        path.write_text(src.replace("raise SystemExit(4)", "raise KeyError('changed')"))
        os.utime(path, (time.time() + 5, time.time() + 5))
        assert "changed" in (isolation.apply_pass(adapter, case, 0).error or "")
    finally:
        loaded.restore()


# ----------------------------------------------------------- numeric runs
# Loaded by the worker's interpreter at start (a sitecustomize on PYTHONPATH):
# once the simulator is imported, rank 1 segfaults when it runs a main piece,
# as Paddle's executor does on some ill-formed programs.
_SEGV_SITECUSTOMIZE = """
import importlib.abc, importlib.util, sys

class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "verify.numeric.simulated_ranks":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            advance = module._Rank.advance

            def crashing(st):
                if st.rank == 1 and st.items is st.main:
                    import ctypes
                    ctypes.string_at(0)
                return advance(st)

            module._Rank.advance = crashing

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Hook())
"""


def test_executor_crash_in_a_simulated_run_names_rank_and_program(monkeypatch, tmp_path):
    """A SIGSEGV while the simulator executes is a WorkerCrash (INCONCLUSIVE
    for numeric_checks), naming the rank and the program; the next run works."""
    from verify.numeric.equivalence import make_specs

    case = cases.all_cases()["row_mp_o0_sgd_tp2"]
    runs = {r: run_pass(passes.get("promotion"), case, r) for r in case.ranks}
    specs = make_specs(case, {r: run.rewritten for r, run in runs.items()}, 0, 1)
    (tmp_path / "sitecustomize.py").write_text(_SEGV_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    isolation.shutdown()  # the next worker starts with the crashing simulator
    with pytest.raises(isolation.WorkerCrash) as err:
        isolation.run_simulated(specs, "simulated run of X (rewritten)", timeout=30)
    msg = str(err.value)
    assert "simulated run of X (rewritten): rank 1 (main program) crashed the executor" \
        in msg, msg
    assert "killed by SIGSEGV" in msg and err.value.rank == 1
    monkeypatch.delenv("PYTHONPATH")
    isolation.shutdown()
    results = isolation.run_simulated(specs, "sim", timeout=30)
    assert set(results) == {0, 1} and all(not r.error for r in results.values())


def test_simulated_run_over_time_is_a_worker_crash():
    from verify.numeric.equivalence import make_specs

    case = cases.all_cases()["row_mp_o0_sgd_tp2"]
    runs = {r: run_pass(passes.get("promotion"), case, r) for r in case.ranks}
    specs = make_specs(case, {r: run.rewritten for r, run in runs.items()}, 0, 5000)
    with pytest.raises(isolation.WorkerCrash, match=r"timed out after 0.5 s"):
        isolation.run_simulated(specs, "sim", timeout=0.5)


# ----------------------------------------------------------- the command line
def _cli(*args, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "verify", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kw)


def test_cli_run_survives_a_looping_pass(tmp_path):
    out = tmp_path / "rep"
    p = _cli("run", "--pass", "overlap", "--case", "col_3d_static", "--case", "col_seq1",
             "--pass-file", os.path.join(FAULTS, "loops.py"), "--backend", "none",
             "--timeout", "3", "--report-dir", str(out), timeout=90)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    rep = json.loads((out / "report.json").read_text())
    assert [a["verdict"] for a in rep["applications"]] == ["PASS_CRASHED"] * 2
    msg = next(c["message"] for c in rep["applications"][0]["checks"]
               if c["verdict"] == "PASS_CRASHED")
    assert "timed out after 3 s" in msg


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_run_writes_a_partial_report(tmp_path, signum, code):
    out = tmp_path / "rep"
    proc = subprocess.Popen(
        [sys.executable, "-m", "verify", "run", "--pass", "overlap", "--case", "col_3d_static",
         "--case", "col_seq1", "--case", "col_trans_y", "--pass-file",
         os.path.join(FAULTS, "loops.py"), "--backend", "none", "--timeout", "60",
         "--report-dir", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "FAULT_STARTED": str(tmp_path / "started")})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "started").exists():
        time.sleep(0.2)  # a busy worker: the looping pass runs (one exists from start-up)
    workers = _children_of(proc.pid)
    time.sleep(1.0)
    os.kill(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr[-2000:]
    assert "Traceback" not in stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["interrupted"] and len(rep["not_run"]) == 3 - len(rep["applications"])
    assert {"pass": "allreduce_matmul_grad_overlapping", "case": "col_trans_y"} \
        in rep["not_run"]
    gone_by = time.monotonic() + 15  # a loaded machine reaps slowly
    while time.monotonic() < gone_by and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    assert workers and not any(_alive(pid) for pid in workers)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _children_of(parent: int) -> set:
    return live_processes_marked(f"VERIFY_ISOLATION_PARENT={parent}")


def test_report_dir_vanishing_mid_run_is_one_clear_error(tmp_path):
    """The report dir is removed and replaced by a file while the run goes on."""
    out = tmp_path / "rep"
    proc = subprocess.Popen(
        [sys.executable, "-m", "verify", "run", "--pass", "overlap", "--case", "col_3d_static",
         "--pass-file", os.path.join(FAULTS, "loops.py"), "--backend", "none",
         "--timeout", "4", "--report-dir", str(out)], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FAULT_STARTED": str(tmp_path / "started")})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "started").exists():
        time.sleep(0.2)  # the run goes on: the looping pass runs in its worker
    import shutil

    shutil.rmtree(out)  # it holds the run's lock file (verify/report/write.py DirLock)
    out.write_text("not a directory any more")
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 2, stderr[-2000:]
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("error: cannot write the report")
    assert "PASS_CRASHED" in stdout  # the summary is still printed


def test_a_prestarted_worker_is_the_first_jobs_and_shutdown_aborts_one_starting():
    """``python -m verify run`` starts its first worker beside its own
    start-up (``isolation.prestart``): the first job takes that worker; a
    shutdown while one starts leaves no process behind."""
    isolation.shutdown()
    assert not _my_workers()
    isolation.prestart()
    isolation.shutdown()  # at once: the starting worker gives up and is killed
    assert not isolation._STARTING and not isolation.workers()
    deadline = time.monotonic() + 10
    while _my_workers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _my_workers()
    isolation.prestart()
    w = isolation._acquire()  # waits for the prestarted one and takes it
    try:
        assert w.alive() and _my_workers() == {w.pid}
    finally:
        isolation._release(w)
    assert isolation.workers() == [w.pid]
