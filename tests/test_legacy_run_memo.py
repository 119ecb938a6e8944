"""The legacy numeric runs remembered within one gate run
(``verify/numeric/equivalence.py`` ``memo_key``, ``run_memo.session``): a job
whose key is equal is reused and says so; any changed input (a program's op
or attr, a seeded parameter or feed, the watched names, the rings, the
backend) runs again; outside a session nothing is remembered."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)

from verify.numeric import equivalence, run_memo


@pytest.fixture(scope="module")
def specs():
    import cases

    case = cases.all_cases()["col_3d_static"]
    return case, {r: case.build(r) for r in case.ranks}


def _specs_of(case, programs, seed=0):
    return equivalence.make_specs(case, programs, seed, 2)


def _key(backend, specs):
    return run_memo.digest(equivalence.memo_key(backend, specs))


def test_a_rebuilt_program_has_the_same_key_a_changed_one_another(specs):
    """Two builds of the same rank differ in their ops' op_callstack (the
    Python stack that built them) and nothing else that a run reads: one
    key.  Each changed input below gives another key."""
    import cases

    case, programs = specs
    base = _specs_of(case, programs)
    again = _specs_of(case, {r: case.build(r) for r in case.ranks})  # built elsewhere
    key = _key("simulated", base)
    assert base[0].main != again[0].main  # the builds' op_callstacks differ
    assert _key("simulated", again) == key
    # the same values listed in another order: the same job
    shuffled = {r: dataclasses.replace(s, watch=list(reversed(s.watch)),
                                       params=dict(reversed(list(s.params.items()))))
                for r, s in base.items()}
    assert _key("simulated", shuffled) == key

    def changed_attr():
        rp = case.build(0)
        op = next(o for o in rp.main.global_block().ops if o.has_attr("op_role"))
        op._set_attr("scale_probe", 1.0)  # any attr the program carries counts
        return _specs_of(case, {**programs, 0: rp})

    def one(spec0):
        return {**base, 0: spec0}

    s0 = base[0]
    p = next(iter(s0.params))
    variants = {
        "backend": ("ranks", base),
        "program attr": ("simulated", changed_attr()),
        "parameter value": ("simulated", one(dataclasses.replace(
            s0, params={**s0.params, p: s0.params[p] + np.float32(1e-6)}))),
        "feed value": ("simulated", one(dataclasses.replace(
            s0, feeds=[{k: v * 2 for k, v in s0.feeds[0].items()}] + s0.feeds[1:]))),
        "seed": ("simulated", _specs_of(case, programs, seed=1)),
        "watched names": ("simulated", one(dataclasses.replace(s0, watch=s0.watch[:-1]))),
        "rings": ("simulated", one(dataclasses.replace(s0, rings={0: [[0]], 1: [[0, 1]]}))),
        "other case": ("simulated", _specs_of(cases.all_cases()["col_2d"], {
            r: cases.all_cases()["col_2d"].build(r) for r in cases.all_cases()["col_2d"].ranks})),
    }
    for what, (backend, sp) in variants.items():
        assert _key(backend, sp) != key, what


def test_only_inside_a_session_and_shared_through_its_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PADDLE_PASS_VERIFY_RUN_CACHE", raising=False)
    calls = []

    def run():
        calls.append(1)
        return {0: len(calls)}

    run_memo.clear()
    run_memo.remembered(("k",), run, disk="session")
    run_memo.remembered(("k",), run, disk="session")
    assert len(calls) == 2 and run_memo.LAST == {}  # no session: every call runs
    with run_memo.session(tmp_path / "memo"):
        first = run_memo.remembered(("k",), run, disk="session")
        run_memo.clear()  # another process of the run: only the folder is shared
        assert run_memo.remembered(("k",), run, disk="session") == first
        assert run_memo.LAST["reused_from"] == "an earlier job of this run"
        assert len(list((tmp_path / "memo").glob("*.pkl"))) == 1
        run_memo.remembered(("k", "changed"), run, disk="session")
        assert len(calls) == 4
        monkeypatch.setenv("PADDLE_PASS_VERIFY_RUN_CACHE", "0")
        run_memo.remembered(("k",), run, disk="session")
        assert len(calls) == 5 and run_memo.LAST == {}
    run_memo.clear()


def test_an_application_in_a_session_reuses_the_originals_and_says_so(tmp_path):
    """Overlap and promotion on one case in one session: the second
    application's original runs are the first's (said in its checks), its
    verdict is the one it has without the memo; a pass that rewrites runs
    its rewritten programs."""
    import cases
    import passes
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    _, numeric = pick_backend("simulated", 0)
    case = cases.all_cases()["col_3d_static"]
    run_memo.clear()
    alone = run_application(passes.get("promotion"), case, numeric=numeric)
    with run_memo.session(tmp_path):
        fired = run_application(passes.get("overlap"), case, numeric=numeric)
        run_memo.clear()  # as in another xdist worker
        shared = run_application(passes.get("promotion"), case, numeric=numeric)
    run_memo.clear()
    assert fired.fired_ranks  # the overlap pass rewrites this case: its runs were made
    assert not any("run reused" in c.message for c in fired.checks if c.kind == "numeric")
    nums = [c for c in shared.checks if c.kind == "numeric" and c.rank is not None
            and "run reused" in c.message]
    assert nums and all("original" in c.details["run_reused"] for c in nums)
    assert shared.verdict == alone.verdict
    assert [(c.name, c.rank, c.verdict) for c in shared.checks] == \
        [(c.name, c.rank, c.verdict) for c in alone.checks]
