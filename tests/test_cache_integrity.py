"""Caches are not trusted as they are, and nothing in a program dir is code
(issue 33, points 2 and 5).

Every cache entry is one entry of ``verify/cache_files.py``: its key and the
sha256 of its payload are checked on read, and any failure (a flipped byte,
another key, a payload that raises on load or is of the wrong type) is a
miss that is recomputed and rewritten: the same verdict as before, never a
traceback.  The planner's memos live in the user's cache, never in the
program dir a user hands in, so a pickle planted there is never unpickled.
A planned model's dir is sealed with its full key and every file's digest:
a damaged one is planned again.
"""
from __future__ import annotations

import json
import marshal
import os
import pickle
import shutil
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verify import cache_files
from verify.cache_files import MISS, pack_entry, read_entry

REPO = Path(__file__).resolve().parent.parent
FUZZ = settings(derandomize=True, max_examples=20, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
# where to damage an entry: (position, xor) pairs, positions in the header
# (the first ~200 bytes) or anywhere; or the file cut short
FLIPS = st.lists(st.tuples(st.one_of(st.integers(0, 200), st.integers(0, 1 << 24)),
                           st.integers(1, 255)), min_size=1, max_size=3)
DAMAGE = st.one_of(FLIPS.map(lambda f: ("flip", f)),
                   st.integers(0, 1 << 24).map(lambda n: ("cut", n)))


def damaged(data: bytes, how) -> bytes:
    kind, arg = how
    if kind == "cut":
        return data[:arg % max(len(data), 1)]
    b = bytearray(data)
    for pos, xor in arg:
        b[pos % len(b)] ^= xor
    return bytes(b)


# -- the entry format ------------------------------------------------------------
class _Boom:
    """Unpickles into an exception: a class of a module that does not exist."""


def _raising_pickle() -> bytes:
    data = pickle.dumps(_Boom())
    return data.replace(b"test_cache_integrity", b"no_such_module_anywhere")


@FUZZ
@given(how=DAMAGE)
def test_a_damaged_entry_is_a_miss_never_another_value(how):
    payload = pickle.dumps({"verdict": "NOT_EQUIVALENT", "rank": 1, "values": [1.5, 2.5]})
    entry = pack_entry("k" * 64, payload)
    bad = damaged(entry, how)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "e.pkl"
        path.write_bytes(bad)
        value = read_entry(path, "k" * 64, cache_files.unpickle, lambda v: isinstance(v, dict))
    assert value is MISS or pickle.dumps(value) == payload


def test_entries_of_another_key_that_raise_or_of_the_wrong_type_are_misses(tmp_path):
    path = tmp_path / "e.pkl"
    key = "a" * 64
    for entry in (pack_entry("b" * 64, pickle.dumps({"x": 1})),  # another key
                  pack_entry(key, _raising_pickle()),  # ModuleNotFoundError on load
                  pack_entry(key, pickle.dumps([1, 2])),  # the wrong type
                  pack_entry(key, b"\x80\x05K"),  # a torn pickle
                  pickle.dumps({"x": 1})):  # a bare pickle: no header at all
        path.write_bytes(entry)
        assert read_entry(path, key, cache_files.unpickle, lambda v: isinstance(v, dict)) \
            is MISS
    path.write_bytes(pack_entry(key, pickle.dumps({"x": 1})))
    assert read_entry(path, key, cache_files.unpickle, lambda v: isinstance(v, dict)) == {"x": 1}


# -- each kind of cache, its entries damaged in process --------------------------
def _fuzz_entry(path: Path, how, read, same, valid_after):
    """Damage ``path``, ``read()`` through the cache: the value must be
    ``same``'s (a miss recomputed, or an undamaged read), and the entry is
    valid again afterwards (rewritten on a miss)."""
    good = path.read_bytes()
    path.write_bytes(damaged(good, how))
    try:
        same(read())
        assert valid_after(), "the damaged entry was not rewritten"
    finally:
        path.write_bytes(good)


@FUZZ
@given(how=DAMAGE)
def test_compiled_modules(tmp_path_factory, how):
    from verify import bytecode

    d = tmp_path_factory.mktemp("pyc")
    src = d / "probe_integrity.py"
    src.write_text("X = 12345\nY = 'kept'\n")
    cache = d / "cache"
    old = bytecode._INSTALLED.get("dir", "unset")
    bytecode._INSTALLED["dir"] = cache
    try:
        def load():
            loader = bytecode.CachedSourceLoader("probe_integrity", str(src))
            mod = types.ModuleType("probe_integrity")
            exec(loader.get_code("probe_integrity"), mod.__dict__)
            return mod
        load()
        (path,) = cache.rglob("*.code")
        key = bytecode.key_of(str(src), src.read_bytes())

        def same(mod):
            assert (mod.X, mod.Y) == (12345, "kept")
        _fuzz_entry(path, how, load, same, lambda: isinstance(
            read_entry(path, key, marshal.loads), types.CodeType))
    finally:
        if old == "unset":
            bytecode._INSTALLED.pop("dir", None)
        else:
            bytecode._INSTALLED["dir"] = old


@FUZZ
@given(how=DAMAGE)
def test_premerge_results_never_hide_a_finding(tmp_path_factory, how):
    from verify.premerge.cache import Cache, valid_application

    cache = Cache(tmp_path_factory.mktemp("premerge"))
    k = "c" * 64
    rec = {"verdict": "NOT_EQUIVALENT", "evidence": "[value/value rank 1] refuted",
           "identities": [{"check": "value/value proof", "rank": 1, "stage": "",
                           "verdict": "NOT_EQUIVALENT", "op": "", "var": "loss"}],
           "fired": True, "decided": ["value/value proof"]}
    cache.put(k, rec)
    path = cache._path(k)

    def read():
        got = cache.get(k, valid_application)
        if got is None:  # a miss: the run judges again and stores its record
            cache.put(k, rec)
            return rec
        return got

    def same(got):
        assert got == rec
    _fuzz_entry(path, how, read, same, lambda: cache.get(k) == rec)


def test_an_edited_premerge_result_is_a_miss(tmp_path):
    """The probe's case: an entry edited to say the baseline's verdict hid a
    regression (exit 0); its digest no longer holds."""
    from verify.premerge.cache import Cache, valid_application

    cache = Cache(tmp_path)
    k = "d" * 64
    cache.put(k, {"verdict": "NOT_EQUIVALENT", "evidence": "x"})
    path = cache._path(k)
    path.write_bytes(path.read_bytes().replace(b"NOT_EQUIVALENT", b"EQUIVALENT"))
    assert cache.get(k, valid_application) is None
    path.write_bytes(pack_entry(k, json.dumps(["EQUIVALENT"]).encode()))  # the wrong type
    assert cache.get(k, valid_application) is None
    path.write_bytes(pack_entry(k, json.dumps({"verdict": "FINE"}).encode()))
    assert cache.get(k, valid_application) is None


@FUZZ
@given(how=DAMAGE)
def test_numeric_runs(tmp_path_factory, how):
    from verify.numeric import run_memo

    folder = tmp_path_factory.mktemp("runs")
    payload = ("run_exported_ranks", {0: {"main": b"prog"}}, 3)
    want = {0: [{"loss": np.array([0.25, 0.5], "float32")}]}
    old = dict(run_memo._SESSION)
    run_memo.clear()
    try:
        with run_memo.session(folder):
            run_memo.remembered(payload, lambda: want, disk="session")
            (path,) = folder.glob("*.pkl")

            def read():
                run_memo.clear()  # a new process: only the disk remembers
                return run_memo.remembered(payload, lambda: want, disk="session")

            def same(got):
                assert list(got) == [0] and got[0][0]["loss"].tolist() == [0.25, 0.5]
            _fuzz_entry(path, how, read, same, lambda: read_entry(
                path, path.stem, cache_files.unpickle) is not MISS)
    finally:
        run_memo._SESSION.clear()
        run_memo._SESSION.update(old)
        run_memo.clear()


@FUZZ
@given(how=DAMAGE)
def test_rank_snapshots(tmp_path_factory, how):
    from verify.ir import rank_snapshot
    from verify.ir.snapshot import Op, ProgramSnapshot, Var

    folder = tmp_path_factory.mktemp("snapshots")

    class RP:
        def __init__(self):
            from verify.ir.origin import stamp

            self.main, self.startup, self.names, self.origin = object(), object(), None, None
            stamp(self, "stamp-1")

    class Case:
        name, ir = "case_a", "legacy"

    def take(rp, case, rank, which):
        return ProgramSnapshot([Op(0, "pd_op.matmul", {"X": ["a"]}, {"Out": ["b"]},
                                   {"transpose_x": False})],
                               {"a": Var("a", [2, 3], "float32")}, meta={"case": case.name})
    saved = (os.environ.get("PADDLE_PASS_VERIFY_SNAPSHOT_CACHE"), rank_snapshot._snapshot)
    os.environ["PADDLE_PASS_VERIFY_SNAPSHOT_CACHE"] = str(folder)
    rank_snapshot._snapshot = take
    try:
        rank_snapshot.clear()
        first = rank_snapshot.snapshot_of(RP(), Case, 0, "original").to_dict()
        (path,) = folder.glob("*.pkl")

        def read():
            rank_snapshot.clear()
            return rank_snapshot.snapshot_of(RP(), Case, 0, "original")

        def same(got):
            assert got.to_dict() == first
        _fuzz_entry(path, how, read, same, lambda: read_entry(
            path, path.stem, cache_files.unpickle) is not MISS)
    finally:
        if saved[0] is None:
            os.environ.pop("PADDLE_PASS_VERIFY_SNAPSHOT_CACHE", None)
        else:
            os.environ["PADDLE_PASS_VERIFY_SNAPSHOT_CACHE"] = saved[0]
        rank_snapshot._snapshot = saved[1]
        rank_snapshot.clear()


@FUZZ
@given(how=DAMAGE)
def test_recorded_placements(tmp_path_factory, how):
    from cases import program_dirs

    d = tmp_path_factory.mktemp("placements")
    rank = d / "rank0"
    rank.mkdir()
    (rank / "planner.json").write_text(json.dumps({"final_ops": [
        {"type": "builtin.parameter", "results": ["w"], "placements": [["S(1)"]]}]}))
    saved = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    os.environ["PADDLE_PASS_VERIFY_CACHE"] = str(d / "cache")
    try:
        program_dirs._PLACEMENTS.clear()
        assert program_dirs.recorded_placements(rank) == {"w": ["S(1)"]}
        (path,) = (d / "cache" / "placements").glob("*.json")

        def read():
            program_dirs._PLACEMENTS.clear()
            return program_dirs.recorded_placements(rank)

        def same(got):
            assert got == {"w": ["S(1)"]}
        _fuzz_entry(path, how, read, same,
                    lambda: read_entry(path, path.stem, json.loads) == {"w": ["S(1)"]})
    finally:
        if saved is None:
            os.environ.pop("PADDLE_PASS_VERIFY_CACHE", None)
        else:
            os.environ["PADDLE_PASS_VERIFY_CACHE"] = saved
        program_dirs._PLACEMENTS.clear()


@FUZZ
@given(how=DAMAGE)
def test_premerge_import_index(tmp_path_factory, how):
    """The import graph ``verify premerge`` picks the affected passes from
    (an edited graph would leave a changed pass unchecked)."""
    from verify.premerge import affected

    d = tmp_path_factory.mktemp("index")
    root = d / "site"
    (root / "paddle" / "distributed" / "passes").mkdir(parents=True)
    for f in ("paddle/__init__.py", "paddle/distributed/__init__.py",
              "paddle/distributed/passes/__init__.py"):
        (root / f).write_text("")
    (root / "paddle" / "distributed" / "passes" / "a.py").write_text(
        "from paddle.distributed.passes import b\n")
    (root / "paddle" / "distributed" / "passes" / "b.py").write_text("X = 1\n")
    want = affected.build_index(str(root))
    assert affected.cached_index(str(root), str(d / "cache")) == want
    (path,) = (d / "cache").glob("import-index-*.json")
    key = path.stem[len("import-index-"):]

    def same(got):
        assert got == want
    _fuzz_entry(path, how, lambda: affected.cached_index(str(root), str(d / "cache")), same,
                lambda: read_entry(path, key, json.loads) == want)


@settings(derandomize=True, max_examples=5, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(how=FLIPS.map(lambda f: ("flip", f)))
def test_the_compiled_loopback_library(tmp_path_factory, how):
    """A damaged preload library (loaded into every rank process) is built
    again, never loaded."""
    from verify.numeric import loopback_bind as lb

    if not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler")
    saved = (os.environ.get("PADDLE_PASS_VERIFY_CACHE"), lb._BUILT)
    os.environ["PADDLE_PASS_VERIFY_CACHE"] = str(tmp_path_factory.mktemp("lib"))
    try:
        lb._BUILT = None
        path, why = lb.library()
        assert path, why
        good = Path(path).read_bytes()
        Path(path).write_bytes(damaged(good, how))
        lb._BUILT = None  # a new process
        again, _ = lb.library()
        assert again == path and Path(path).read_bytes() == good
    finally:
        if saved[0] is None:
            os.environ.pop("PADDLE_PASS_VERIFY_CACHE", None)
        else:
            os.environ["PADDLE_PASS_VERIFY_CACHE"] = saved[0]
        lb._BUILT = saved[1]


# -- planned models' dirs --------------------------------------------------------
def _fake_planner(calls):
    def plan(model, ranks, mesh=None, out=None, **kw):
        out = Path(out)
        shutil.rmtree(out, ignore_errors=True)
        for r in range(ranks):
            (out / f"rank{r}").mkdir(parents=True)
            (out / f"rank{r}" / "meta.json").write_text(json.dumps({"rank": r}))
            (out / f"rank{r}" / "planner.json").write_text(json.dumps({"stages": [], "r": r}))
            (out / f"rank{r}" / "main.json").write_bytes(bytes(range(256)) * 4)
        (out / "plan.json").write_text(json.dumps({"mesh": list(range(ranks)),
                                                   "rings": {}, "model": model}))
        calls.append(model)
        return out
    return plan


@pytest.mark.parametrize("family", ["zoo", "planned_models"])
@FUZZ
@given(how=DAMAGE, which=st.integers(0, 100))
def test_a_damaged_planned_model_is_planned_again(tmp_path_factory, family, how, which):
    import importlib

    import verify.plan.planner as planner_mod

    mod = importlib.import_module(f"cases.{family}")
    if family == "zoo":
        if mod.UNAVAILABLE:
            pytest.skip(mod.UNAVAILABLE)
        params = dict(mod.DECLARED[0].params)
    else:
        params = dict(mod.CASES[0].params)
    saved = (os.environ.get("PADDLE_PASS_VERIFY_CACHE"), planner_mod.plan)
    os.environ["PADDLE_PASS_VERIFY_CACHE"] = str(tmp_path_factory.mktemp("plans"))
    calls = []
    planner_mod.plan = _fake_planner(calls)
    try:
        first = mod.planned_dir(params)
        files = sorted(p for p in first.rglob("*") if p.is_file() and
                       p.name != cache_files.SEAL)
        want = {p: p.read_bytes() for p in files}
        assert mod.planned_dir(params) == first and len(calls) == 1  # a hit
        victim = files[which % len(files)]
        bad = damaged(want[victim], how)
        if bad == want[victim]:
            return
        victim.write_bytes(bad)
        assert mod.planned_dir(params) == first
        assert len(calls) == 2, f"{victim.name} damaged, not planned again"
        assert {p: p.read_bytes() for p in files} == want
        assert mod.planned_dir(params) == first and len(calls) == 2  # sealed again
    finally:
        if saved[0] is None:
            os.environ.pop("PADDLE_PASS_VERIFY_CACHE", None)
        else:
            os.environ["PADDLE_PASS_VERIFY_CACHE"] = saved[0]
        planner_mod.plan = saved[1]


# -- a program dir, end to end: verify plan, then verify run ---------------------
def _env(cache: Path) -> dict:
    env = dict(os.environ)
    env["PADDLE_PASS_VERIFY_CACHE"] = str(cache)
    env.pop("VERIFY_PLANNER_RUN_MEMO", None)
    env.pop("PADDLE_PASS_VERIFY_SNAPSHOT_CACHE", None)
    env.pop("PADDLE_PASS_VERIFY_RUN_CACHE", None)
    # compiled modules from the user's own cache (no need to compile afresh)
    env.setdefault("PADDLE_PASS_VERIFY_PYCACHE",
                   str(cache_files.memo_dir("PADDLE_PASS_VERIFY_PYCACHE", "pycache") or "0"))
    return env


def _verify(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "verify", *args], cwd=str(REPO), env=env,
                          capture_output=True, text=True, timeout=timeout)


def _run(env, prog: Path, report: Path):
    """``verify run --program-dir`` (every pass that meets it, the planner
    too): exit code, output, each application's verdict and checks."""
    p = _verify(env, "run", "--program-dir", str(prog), "--report-dir", str(report))
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out[-3000:]
    if p.returncode == 2:  # bad input: one line
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        return p.returncode, out, None
    data = json.loads((report / "report.json").read_text())
    checks = sorted((a["pass"], a["verdict"], sorted((c["name"], str(c["rank"]), c["verdict"])
                                                     for c in a["checks"]))
                    for a in data["applications"])
    return p.returncode, out, checks


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = tmp_path_factory.mktemp("program-dir")
    prog, cache = root / "mlp", root / "cache"
    env = _env(cache)
    p = _verify(env, "plan", "examples/tiny_mlp_pir.py", "--ir", "pir", "--ranks", "2",
                "--out", str(prog))
    assert p.returncode == 0, p.stderr[-3000:]
    code, out, checks = _run(env, prog, root / "report0")
    assert code == 0 and checks, out[-3000:]
    return SimpleNamespace(dir=prog, cache=cache, env=env, checks=checks, root=root)


LEGACY_MEMOS = ("stage-checks", "relation-runs", "relation-results", "relation-proofs",
                "job-plan-runs", "job-plan-results")


def test_a_pickle_planted_in_a_program_dir_is_never_unpickled(planned, tmp_path):
    marker = tmp_path / "unpickled"

    class Bomb:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    bomb = pickle.dumps(Bomb())
    prog = tmp_path / "mlp"
    shutil.copytree(planned.dir, prog)
    planted = [p for p in prog.rglob("*") if p.is_file() and
               (p.suffix in (".pkl", ".outcomes") or p.parts[-2] in LEGACY_MEMOS)]
    for sub in LEGACY_MEMOS:  # and where a memo of any key would be
        (prog / sub).mkdir(exist_ok=True)
        planted += [prog / sub / f"{'0' * 20}.pkl", prog / sub / f"{'0' * 64}.pkl",
                    prog / sub / f"{'0' * 64}.outcomes"]
    for p in planted:
        p.write_bytes(bomb)
    try:
        code, out, checks = _run(planned.env, prog, tmp_path / "report")
    finally:
        assert not marker.exists(), "a pickle in the program dir was unpickled"
    assert code == 0 and checks == planned.checks, out[-3000:]


def _entries(cache: Path) -> dict:
    """Every cache entry the run wrote: path -> its key."""
    out = {}
    for p in cache.rglob("*"):
        if not p.is_file() or "pycache" in p.parts or p.name.endswith(".tmp"):
            continue
        if p.name == "static-imports.json":
            out[p] = "static-imports/1"
        elif p.suffix == ".outcomes":
            out[p] = p.stem + ":outcomes"
        elif p.suffix in (".pkl", ".json"):
            out[p] = p.stem
    return out


def test_damaged_entries_are_recomputed_with_the_same_verdicts(planned, tmp_path):
    """Every entry the run keeps (the planner's memos, snapshots, numeric
    runs, the placements, the import table), each damaged in one of the ways the probe found (a flipped
    byte, a payload that raises ModuleNotFoundError or is of the wrong type
    under a valid header, another key's entry): the next run recomputes them
    (same verdicts, exit 0, no traceback) and rewrites every one."""
    entries = _entries(planned.cache)
    memos = [p for p in entries if "planner-memos" in p.parts]
    assert {p.parts[-2] for p in memos} >= {"stage-checks", "relation-results",
                                            "relation-proofs"}, sorted(map(str, entries))
    assert {p.parent.name for p in entries} >= {"snapshots", "runs", "placements"}, \
        sorted(map(str, entries))
    for i, (p, key) in enumerate(sorted(entries.items())):
        good = p.read_bytes()
        kind = i % 4
        if kind == 0:
            p.write_bytes(damaged(good, ("flip", [(len(good) // 2, 0x40)])))
        elif kind == 1:
            p.write_bytes(pack_entry(key, _raising_pickle()))
        elif kind == 2:
            p.write_bytes(pack_entry(key, pickle.dumps(("wrong", "type"), protocol=4)
                                     if p.suffix != ".json" else b'["wrong"]'))
        else:
            p.write_bytes(pack_entry("f" * 64, cache_files.unpack_entry(good, key)))
    code, out, checks = _run(planned.env, planned.dir, tmp_path / "report")
    assert code == 0 and checks == planned.checks, out[-3000:]
    for p, key in _entries(planned.cache).items():
        assert cache_files.unpack_entry(p.read_bytes(), key) is not None, p  # rewritten


@FUZZ
@given(how=DAMAGE, which=st.integers(0, 1000))
def test_planner_memos_damaged_are_misses(planned, how, which):
    """Each of the planner's memo entries (stage checks and their programs,
    runs, results, proofs), bytes flipped: read through the planner's own
    loader, a miss or the very value it held."""
    from passes import planner

    memos = sorted(p for p in planned.cache.joinpath("planner-memos").rglob("*")
                   if p.is_file() and not p.name.endswith(".tmp"))
    assert memos
    path = memos[which % len(memos)]
    sub = path.parent.name
    saved = os.environ.get("VERIFY_PLANNER_RUN_MEMO")
    os.environ["VERIFY_PLANNER_RUN_MEMO"] = str(planned.cache / "planner-memos")
    good = path.read_bytes()
    try:
        memo = object.__new__(planner._run_memo)
        memo._at(sub, path.stem)
        if path.suffix == ".outcomes":
            def load():
                got = read_entry(path, path.stem + ":outcomes", cache_files.unpickle)
                return None if got is MISS else got
        else:
            load = memo.load
        want = cache_files.pickled(load())
        path.write_bytes(damaged(good, how))
        got = load()
        assert got is None or cache_files.pickled(got) == want
    finally:
        path.write_bytes(good)
        if saved is None:
            os.environ.pop("VERIFY_PLANNER_RUN_MEMO", None)
        else:
            os.environ["VERIFY_PLANNER_RUN_MEMO"] = saved
