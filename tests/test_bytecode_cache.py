"""The project's compiled modules kept in its cache dir (verify/bytecode.py):
a changed source is compiled afresh, never a stale module; only the
project's own files go through it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

from verify import bytecode


def _load(path, folder, monkeypatch):
    monkeypatch.setitem(bytecode._INSTALLED, "dir", folder)
    loader = bytecode.CachedSourceLoader("probe_mod", str(path))
    mod = types.ModuleType("probe_mod")
    exec(loader.get_code("probe_mod"), mod.__dict__)
    return mod


def test_a_changed_source_misses_and_an_unchanged_one_hits(tmp_path, monkeypatch):
    src, cache = tmp_path / "probe_mod.py", tmp_path / "cache"
    src.write_text("X = 1\n")
    before = dict(bytecode.STATS)
    assert _load(src, cache, monkeypatch).X == 1
    assert bytecode.STATS["misses"] == before["misses"] + 1
    assert len(list(cache.rglob("*.code"))) == 1
    assert _load(src, cache, monkeypatch).X == 1
    assert bytecode.STATS["hits"] == before["hits"] + 1
    # same size, same mtime, one byte changed: another key, compiled afresh
    st = src.stat()
    src.write_text("X = 2\n")
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _load(src, cache, monkeypatch).X == 2
    assert len(list(cache.rglob("*.code"))) == 2


def test_a_torn_cache_file_is_compiled_again(tmp_path, monkeypatch):
    src, cache = tmp_path / "probe_mod.py", tmp_path / "cache"
    src.write_text("X = 3\n")
    _load(src, cache, monkeypatch)
    (code,) = cache.rglob("*.code")
    code.write_bytes(b"\x00garbage")
    assert _load(src, cache, monkeypatch).X == 3


def test_the_key_follows_bytes_and_path():
    assert bytecode.key_of("/a/m.py", b"X = 1") != bytecode.key_of("/a/m.py", b"X = 2")
    assert bytecode.key_of("/a/m.py", b"X = 1") != bytecode.key_of("/b/m.py", b"X = 1")


def test_in_force_for_the_project_only_where_no_bytecode_is_written(tmp_path):
    """A fresh interpreter without bytecode: the project's modules load
    through the cache (hits the second time), the standard library does not;
    ``PADDLE_PASS_VERIFY_PYCACHE=0`` and an interpreter that writes its own
    bytecode leave Python's loader alone."""
    probe = ("import json, sys, verify.verdicts, verify.bytecode as b; "
             "print(json.dumps({'stats': b.STATS, "
             "'ours': type(sys.modules['verify.verdicts'].__loader__).__name__, "
             "'stdlib': type(sys.modules['json'].__loader__).__name__}))")
    root = str(bytecode.ROOT)

    def run(**env):
        e = dict(os.environ, PYTHONPATH=root, PADDLE_PASS_VERIFY_PYCACHE=str(tmp_path),
                 PYTHONDONTWRITEBYTECODE="1")
        e.update(env)
        e = {k: v for k, v in e.items() if v is not None}
        out = subprocess.run([sys.executable, "-c", probe], env=e, cwd=root, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    first, second = run(), run()
    assert first["ours"] == second["ours"] == "CachedSourceLoader"
    assert first["stdlib"] != "CachedSourceLoader"
    assert first["stats"]["misses"] >= 1 and second["stats"]["misses"] == 0
    assert second["stats"]["hits"] == first["stats"]["misses"] + first["stats"]["hits"]
    assert run(PADDLE_PASS_VERIFY_PYCACHE="0")["ours"] == "SourceFileLoader"
    # (its own bytecode kept under tmp_path, not beside the checkout's sources)
    assert run(PYTHONDONTWRITEBYTECODE=None,
               PYTHONPYCACHEPREFIX=str(tmp_path / "own"))["ours"] == "SourceFileLoader"
