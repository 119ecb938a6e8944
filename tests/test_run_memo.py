"""Numeric runs remembered by their payload (``verify/numeric/run_memo.py``):
a byte-identical payload is not run again, any changed byte (a program, a
seeded value, the step count) runs, a failed run is not kept, and no caller
can alter what another gets."""
from __future__ import annotations

import numpy as np
import pytest

from verify.numeric import run_memo


def _payload(program=b"prog", value=1.0, steps=3):
    return ("run_exported_ranks", {0: {"exported": {"main": program},
                                       "params": {"w": np.full((2, 2), value, "float32")}}},
            {0: [[0, 1]]}, steps)


def test_same_payload_runs_once_a_changed_one_runs_again():
    run_memo.clear()
    calls = []

    def run():
        calls.append(1)
        return {0: [{"loss": np.array(float(len(calls)))}]}

    first = run_memo.remembered(_payload(), run)
    again = run_memo.remembered(_payload(), run)
    assert len(calls) == 1 and again[0][0]["loss"] == first[0][0]["loss"]
    for changed in (_payload(program=b"prog2"), _payload(value=1.0 + 1e-7), _payload(steps=2)):
        run_memo.remembered(changed, run)
    assert len(calls) == 4 and run_memo.STATS == {"hits": 1, "misses": 4}


def test_results_are_copies_and_failures_are_not_kept():
    run_memo.clear()
    got = run_memo.remembered(_payload(), lambda: {0: [{"loss": np.zeros(1)}]})
    got[0][0]["loss"][0] = 99.0  # a caller scribbling on its result
    assert run_memo.remembered(_payload(), lambda: None)[0][0]["loss"][0] == 0.0

    def boom():
        raise RuntimeError("executor crashed")

    with pytest.raises(RuntimeError):
        run_memo.remembered(_payload(program=b"bad"), boom)
    assert run_memo.remembered(_payload(program=b"bad"), lambda: "ran") == "ran"


def test_disk_memo_reuses_across_processes_says_so_and_keys_the_runner_sources(
        tmp_path, monkeypatch):
    """``disk=True``: a result is kept under the cache's ``runs/``; a fresh
    process (the in-process memo cleared) reuses it and ``LAST`` names the
    key and the file; another runner source (the fingerprint) or the cache
    turned off runs again; without ``disk`` nothing is written."""
    monkeypatch.setenv("PADDLE_PASS_VERIFY_CACHE", str(tmp_path))
    monkeypatch.delenv("PADDLE_PASS_VERIFY_RUN_CACHE", raising=False)
    calls = []

    def run():
        calls.append(1)
        return {0: [{"loss": np.array(float(len(calls)))}]}

    run_memo.clear()
    run_memo.remembered(_payload(), run)  # no disk: nothing kept there
    assert not (tmp_path / "runs").exists()
    run_memo.clear()
    first = run_memo.remembered(_payload(), run, disk=True)
    assert run_memo.LAST == {} and len(list((tmp_path / "runs").glob("*.pkl"))) == 1
    run_memo.clear()  # as a new process would start
    again = run_memo.remembered(_payload(), run, disk=True)
    assert len(calls) == 2 and again[0][0]["loss"] == first[0][0]["loss"]
    assert run_memo.LAST["reused_from"].startswith(str(tmp_path / "runs"))
    assert run_memo.LAST["key"] in run_memo.LAST["reused_from"]
    saved = list(run_memo._FINGERPRINT)
    try:
        run_memo.clear()
        run_memo._FINGERPRINT[:] = [b"another runner source"]
        run_memo.remembered(_payload(), run, disk=True)
        assert len(calls) == 3 and run_memo.LAST == {}
    finally:
        run_memo._FINGERPRINT[:] = saved
    run_memo.clear()
    monkeypatch.setenv("PADDLE_PASS_VERIFY_RUN_CACHE", "0")
    run_memo.remembered(_payload(), run, disk=True)
    assert len(calls) == 4
    run_memo.clear()


def test_a_pir_application_says_which_numeric_runs_it_reused(tmp_path, monkeypatch):
    """The same PIR application twice in a fresh memo: the second one's
    numeric checks name the key and file of each reused run; verdicts equal."""
    from verify.ir import legacy_ir  # noqa: F401  (before paddle)

    import cases
    import passes
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    monkeypatch.setenv("PADDLE_PASS_VERIFY_CACHE", str(tmp_path))
    monkeypatch.delenv("PADDLE_PASS_VERIFY_RUN_CACHE", raising=False)
    _, numeric = pick_backend("simulated", 0)
    case = cases.all_cases()["pir_mm_3d_nonsquare"]
    run_memo.clear()
    first = run_application(passes.get("vpp_split"), case, numeric=numeric)
    run_memo.clear()
    second = run_application(passes.get("vpp_split"), case, numeric=numeric)
    run_memo.clear()
    nums = [c for c in first.checks if c.kind == "numeric"]
    again = [c for c in second.checks if c.kind == "numeric"]
    assert nums and [c.verdict for c in nums] == [c.verdict for c in again]
    assert all("reused" not in c.message for c in nums)
    for c in again:
        got = c.details["run_reused"]
        assert set(got) == {"original", "rewritten"}, c.message
        assert f"original run reused: key {got['original']['key']}" in c.message


def test_the_key_is_by_value_not_by_which_objects_a_payload_shares():
    """Two ranks holding one array object, or two equal arrays: one key (a
    left-alone rewrite's payload is built afresh and shares less than the
    original's); a changed value is another key."""
    w = np.full((2, 2), 1.0, "float32")
    shared = {0: {"params": {"w": w}}, 1: {"params": {"w": w}}}
    apart = {0: {"params": {"w": w.copy()}}, 1: {"params": {"w": w.copy()}}}
    name = "x" * 40
    assert run_memo.digest(shared) == run_memo.digest(apart)
    assert run_memo.digest([name, name]) == run_memo.digest([name, "".join(["x"] * 40)])
    other = {0: {"params": {"w": w}}, 1: {"params": {"w": w + 1}}}
    assert run_memo.digest(shared) != run_memo.digest(other)
