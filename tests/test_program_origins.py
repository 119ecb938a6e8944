"""Stamps (``verify/ir/origin.py``, ``verify/engine/origins.py``): programs
imported from bytes and untouched since are keyed by those bytes, so every
pass applied to a case shares its originals' snapshots and numeric runs find
their memo key without re-serializing.  A stamp must never outlive the
programs it names: another program, an edit in place, a changed plan file
all key afresh."""
from __future__ import annotations

import dataclasses
import shutil

import pytest

from verify.ir import legacy_ir  # noqa: F401
from verify.ir.origin import forget, key_of, stamp


@dataclasses.dataclass
class _RP:
    main: object
    startup: object
    origin: object = None


def test_a_stamp_names_only_the_programs_it_was_made_for():
    rp = _RP(object(), object())
    assert key_of(rp) is None
    stamp(rp, "k")
    assert key_of(rp) == "k"
    # a copy holding other programs (how a PIR adapter builds its rewritten
    # side from the original) carries the field but not a valid stamp
    assert key_of(dataclasses.replace(rp, main=object())) is None
    assert key_of(dataclasses.replace(rp, startup=object())) is None
    assert key_of(dataclasses.replace(rp)) == "k"  # the same programs: still them
    forget(rp)  # about to be edited in place
    assert key_of(rp) is None


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """tiny_mlp_pir planned for 2 ranks (shared with test_pir_plan.py)."""
    from conftest import built_once
    from test_program_dir import ROOT, run

    def plan(path):
        code, stdout, err = run("plan", f"{ROOT}/examples/tiny_mlp_pir.py", "--ir", "pir",
                                "--ranks", "2", "--out", str(path / "tiny_pir"))
        assert code == 0, stdout + err

    return built_once(tmp_path_factory, "plan-tiny_mlp_pir", plan) / "tiny_pir"


def test_only_an_untouched_build_from_the_files_is_stamped_and_a_changed_file_rekeys(
        planned, tmp_path):
    from cases.program_dirs import load_program_dir
    from verify.engine.origins import stamp_built

    case = load_program_dir(str(planned))
    a, b = case.build(0), case.build(0)
    assert stamp_built(a) and stamp_built(b) and key_of(a) == key_of(b)
    # a pass applied inside the build (``then``): no digest, no stamp
    touched = case.build(0, then=lambda rp: None)
    assert touched.plan_digest is None and not stamp_built(touched)
    # any byte of any file the build reads changes the key
    copy = tmp_path / "copy"
    shutil.copytree(planned, copy)
    for name in ("main.json", "startup.json", "meta.json", "names.json"):
        target = copy / "rank0" / name
        saved = target.read_bytes()
        target.write_bytes(saved + b" ")
        other = load_program_dir(str(copy)).build(0)
        assert stamp_built(other) and key_of(other) != key_of(a), name
        target.write_bytes(saved)
    same = load_program_dir(str(copy)).build(0)
    assert stamp_built(same) and key_of(same) == key_of(a)  # content, not path


def test_engine_applications_share_the_originals_snapshot_and_runs_keyed_by_stamp(
        planned, tmp_path, monkeypatch):
    """Two applications of one pass: the second takes the originals'
    snapshots from the memo (equal to a fresh snapshot) and its numeric runs
    from the run memo by stamp; with the run cache on disk emptied and the
    in-process memos cleared (a new process, another stamp), the stamp key
    misses and the run is found by the programs' canonical bytes."""
    import passes
    from cases.program_dirs import load_program_dir
    from verify.engine import isolation
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend
    from verify.ir import rank_snapshot
    from verify.ir.rank_snapshot import _snapshot
    from verify.numeric import run_memo

    monkeypatch.setenv("PADDLE_PASS_VERIFY_RUN_CACHE", str(tmp_path / "runs"))
    case = load_program_dir(str(planned))
    adapter = passes.get("rs_fuse")  # leaves the tiny MLP alone: its runs are the originals'
    _, numeric = pick_backend("simulated")
    if not isolation.enabled():
        pytest.skip("stamps are made by the isolation path")
    rank_snapshot.clear()
    run_memo.clear()
    first = run_application(adapter, case, numeric=numeric, value=False)
    hits = rank_snapshot.STATS["hits"]
    second = run_application(adapter, case, numeric=numeric, value=False)
    assert rank_snapshot.STATS["hits"] >= hits + len(case.ranks)
    assert first.verdict == second.verdict
    for o in second.outcomes:
        fresh = _snapshot(case.build(o.rank), case, o.rank, "original")
        assert o.before.to_dict() == fresh.to_dict()
    num = [c for c in second.checks if c.kind == "numeric"]
    assert num and all(c.details.get("run_reused", {}).get("original") for c in num), \
        [c.message for c in num]
    # as a new process with another stamp key: the bytes key finds the run on disk
    run_memo.clear()
    rank_snapshot.clear()
    from verify.engine import origins

    monkeypatch.setattr(origins, "_CODE_KEY", ["another importer"])
    third = run_application(adapter, case, numeric=numeric, value=False)
    num = [c for c in third.checks if c.kind == "numeric"]
    assert third.verdict == first.verdict
    assert num and all("runs" in c.details["run_reused"]["original"]["reused_from"]
                       for c in num), [c.message for c in num]


def test_canonical_serialization_orders_named_attributes_only():
    from verify.ir.pir_snapshot import canonical_serialization

    a = b'{"ops":[{"A":[{"AT":1,"N":"b"},{"AT":2,"N":"a"}],"I":[3,1,2]}]}'
    b = b'{"ops":[{"A":[{"AT":2,"N":"a"},{"AT":1,"N":"b"}],"I":[3,1,2]}]}'
    c = b'{"ops":[{"A":[{"AT":2,"N":"a"},{"AT":1,"N":"b"}],"I":[1,3,2]}]}'  # operands moved
    d = b'{"ops":[{"A":[{"AT":2,"N":"b"},{"AT":1,"N":"a"}],"I":[3,1,2]}]}'  # values swapped
    assert canonical_serialization(a) == canonical_serialization(b)
    assert canonical_serialization(a) != canonical_serialization(c)
    assert canonical_serialization(a) != canonical_serialization(d)
    assert canonical_serialization(b"not json") == b"not json"


def test_a_planned_rank_is_deserialized_only_when_read_and_a_stamp_survives_the_read(
        planned, monkeypatch):
    """A program dir's rank and a rewrite imported from a worker's bytes are
    deserialized on first read (``LazyPirRankProgram``): stamping and keying
    read nothing; the stamp holds across the read and is lost when a program
    is replaced; an application whose snapshots are remembered by stamp
    deserializes neither side, and takes the same snapshots."""
    import passes
    from cases.program_dirs import load_program_dir
    from verify.engine import isolation
    from verify.engine.application import run_application
    from verify.engine.origins import stamp_built
    from verify.ir import pir_snapshot, rank_snapshot
    from verify.ir.rank_snapshot import _snapshot

    imports = []
    real = pir_snapshot.import_programs
    monkeypatch.setattr(pir_snapshot, "import_programs",
                        lambda data: imports.append(1) or real(data))
    case = load_program_dir(str(planned))
    imports.clear()
    rp = case.build(0)
    assert stamp_built(rp) and key_of(rp) and not rp.loaded() and not imports
    key = key_of(rp)
    n_ops = len(rp.main.global_block().ops)  # read: deserialized once, the stamp kept
    assert rp.loaded() and len(imports) == 1 and key_of(rp) == key and n_ops
    assert rp.names is not None and len(imports) == 1
    other = case.build(0)
    stamp_built(other)
    other.startup = rp.startup  # another program: the stamp no longer names it
    assert key_of(other) is None
    if not isolation.enabled():
        pytest.skip("stamps of rewrites are made by the isolation path")
    adapter = passes.get("rs_fuse")
    rank_snapshot.clear()
    first = run_application(adapter, case, value=False)  # snapshots taken (or on disk)
    imports.clear()
    second = run_application(adapter, case, value=False)
    assert not imports, "a remembered application deserialized a program"
    assert second.verdict == first.verdict
    for a, b in zip(first.outcomes, second.outcomes):
        assert a.before.to_dict() == b.before.to_dict()
        assert a.after.to_dict() == b.after.to_dict()
    fresh = case.build(0)
    assert second.outcomes[0].before.to_dict() == _snapshot(fresh, case, 0,
                                                            "original").to_dict()
