"""The snapshot caches (issue 21, speed): rendered op lines remembered by
content, snapshots of stamped programs remembered on disk, the pickle
``to_dict``.  A stale reuse would be a false verdict ("the pass changed
nothing"), so each test changes one byte and expects another key."""
import copy
import dataclasses
import pickle

import pytest

from verify.ir import rank_snapshot
from verify.ir import snapshot as sm
from verify.ir.snapshot import Op, ProgramSnapshot, Var, changed, diff, render_key, rendered


def _op(i=0, **kw):
    base = dict(idx=i, type="pd_op.matmul", inputs={"x": ["a"], "y": ["w"]},
                outputs={"out": [f"%{i}"]}, attrs={"transpose_x": False, "scale": 1,
                                                   "dist_attr": {"mesh": [0, 1]}},
                role=0, stream="default")
    base.update(kw)
    return Op(**base)


def _snap(ops, startup=()):
    return ProgramSnapshot(ops=list(ops), vars={"a": Var("a", [2, -1], "float32")},
                           startup_ops=list(startup), feeds=["a"], meta={"case": "c"})


@pytest.mark.parametrize("edit", [
    lambda o: dataclasses.replace(o, type="pd_op.add"),
    lambda o: dataclasses.replace(o, inputs={"x": ["b"], "y": ["w"]}),
    lambda o: dataclasses.replace(o, outputs={"out": ["%9"]}),
    lambda o: dataclasses.replace(o, stream="auto_parallel_mp"),
    lambda o: dataclasses.replace(o, attrs={**o.attrs, "scale": 2}),
    lambda o: dataclasses.replace(o, attrs={**o.attrs, "scale": 1.0}),   # 1 == 1.0, not "1"
    lambda o: dataclasses.replace(o, attrs={**o.attrs, "scale": True}),  # 1 == True
    lambda o: dataclasses.replace(o, attrs={**o.attrs, "dist_attr": {"mesh": [0, 2]}}),
])
def test_any_changed_field_render_reads_is_another_key(edit):
    a = [_op(0), _op(1)]
    b = [a[0], edit(a[1])]
    assert render_key(a) != render_key(b)
    assert rendered(b) == [o.render() for o in b]
    assert changed(_snap(a), _snap(b)) == (a[1].render() != b[1].render())


def test_negative_zero_and_fields_render_ignores():
    a = [_op(0, attrs={"v": 0.0})]
    assert render_key(a) != render_key([_op(0, attrs={"v": -0.0})])
    # idx and role are not rendered: same lines, same key
    assert render_key(a) == render_key([_op(7, attrs={"v": 0.0}, role=1, outputs={"out": ["%0"]})])


def test_values_that_are_not_plain_data_are_never_looked_up():
    np = pytest.importorskip("numpy")

    class Tag(str):
        def __str__(self):
            return "tag:" + super().__str__()

    for odd in (np.float64(1.0), np.int64(1), Tag("x")):
        ops = [_op(0, attrs={"v": odd})]
        assert render_key(ops) is None
        assert rendered(ops) == [ops[0].render()]


def test_an_op_edited_in_place_is_rendered_again():
    ops = [_op(0), _op(1)]
    before = _snap(copy.deepcopy(ops))
    after = _snap(ops)
    assert not changed(before, after) and diff(before, after) == ""
    ops[1].attrs["scale"] = 3  # a mutant editing the snapshot in place
    assert changed(before, after)
    assert "+pd_op.matmul" in diff(before, after) and "scale=3" in diff(before, after)


def test_to_dict_is_what_asdict_makes_and_a_copy():
    np = pytest.importorskip("numpy")
    s = _snap([_op(0), _op(1)], startup=[_op(0, type="pd_op.full")])
    want = {"schema": sm.SCHEMA, "ops": [dataclasses.asdict(o) for o in s.ops],
            "vars": {k: dataclasses.asdict(v) for k, v in s.vars.items()},
            "startup_ops": [dataclasses.asdict(o) for o in s.startup_ops],
            "feeds": ["a"], "meta": {"case": "c"}}
    got = s.to_dict()
    assert got == want
    got["ops"][0]["attrs"]["dist_attr"]["mesh"].append(5)
    assert s.ops[0].attrs["dist_attr"]["mesh"] == [0, 1]
    odd = _snap([_op(0, attrs={"v": np.float64(2.0)})])  # asdict's way, same result
    assert odd.to_dict()["ops"][0]["attrs"]["v"] == 2.0


# -- snapshots of stamped programs, on disk ---------------------------------------
class _RP:
    def __init__(self, key):
        from verify.ir.origin import stamp

        self.main, self.startup, self.names, self.origin = object(), object(), None, None
        stamp(self, key)


class _Case:
    name, ir = "case_a", "legacy"


def test_disk_snapshot_memo_hits_only_the_same_stamp(tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_PASS_VERIFY_SNAPSHOT_CACHE", str(tmp_path))
    taken = []

    def take(rp, case, rank, which):
        taken.append(rp.origin.key)
        return _snap([_op(0, attrs={"stamp": rp.origin.key})])
    monkeypatch.setattr(rank_snapshot, "_snapshot", take)
    rank_snapshot.clear()
    first = rank_snapshot.snapshot_of(_RP("k1"), _Case, 0, "original")
    assert taken == ["k1"] and rank_snapshot.STATS["disk_writes"] == 1
    rank_snapshot.clear()  # a new process: only the disk remembers
    again = rank_snapshot.snapshot_of(_RP("k1"), _Case, 0, "rewritten")
    assert taken == ["k1"] and rank_snapshot.STATS["disk_hits"] == 1
    assert again.to_dict()["ops"] == first.to_dict()["ops"]
    assert again.meta["program"] == "rewritten"
    again.ops[0].attrs["stamp"] = "edited"  # each caller has its own copy
    assert rank_snapshot.snapshot_of(_RP("k1"), _Case, 0, "original").ops[0].attrs["stamp"] == "k1"
    # another stamp (one changed byte of the files it names), rank or case: taken afresh
    rank_snapshot.snapshot_of(_RP("k2"), _Case, 0, "original")
    rank_snapshot.snapshot_of(_RP("k1"), _Case, 1, "original")
    assert taken == ["k1", "k2", "k1"]
    # a torn file is a miss, not an error
    for f in tmp_path.glob("*.pkl"):
        f.write_bytes(f.read_bytes()[:10])
    rank_snapshot.clear()
    rank_snapshot.snapshot_of(_RP("k1"), _Case, 0, "original")
    assert taken == ["k1", "k2", "k1", "k1"]
    rank_snapshot.clear()


def test_disk_key_names_paddle_and_the_overlay(monkeypatch):
    from verify.ir import paddle_overlay

    base = rank_snapshot.disk_key("s", "c", 0)
    assert len({base, rank_snapshot.disk_key("t", "c", 0), rank_snapshot.disk_key("s", "d", 0),
                rank_snapshot.disk_key("s", "c", 1)}) == 4
    monkeypatch.setattr(paddle_overlay, "fingerprint", lambda: "abc")
    overlaid = rank_snapshot.disk_key("s", "c", 0)
    assert overlaid != base
    from verify.ir.legacy_ir import paddle_module

    monkeypatch.setattr(paddle_module(), "__version__", "0.0.0")
    assert rank_snapshot.disk_key("s", "c", 0) not in (base, overlaid)


def test_an_unstamped_program_is_never_remembered(monkeypatch, tmp_path):
    monkeypatch.setenv("PADDLE_PASS_VERIFY_SNAPSHOT_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(rank_snapshot, "_snapshot",
                        lambda rp, case, rank, which: calls.append(1) or _snap([_op(0)]))
    rp = _RP("k1")
    rp.main = object()  # its programs are no longer the stamped ones
    rank_snapshot.snapshot_of(rp, _Case, 0, "original")
    rank_snapshot.snapshot_of(rp, _Case, 0, "original")
    assert len(calls) == 2 and not list(tmp_path.iterdir())
    assert pickle.loads(pickle.dumps(_snap([_op(0)]))).to_dict() == _snap([_op(0)]).to_dict()


def test_renames_of_an_untouched_program_and_of_a_renamed_read():
    from verify.ir.renames import consumer_renames

    ops = [_op(0), _op(1, inputs={"x": ["%0"], "y": ["w"]})]
    assert consumer_renames(_snap(ops), _snap(copy.deepcopy(ops))) == {}
    moved = copy.deepcopy(ops)
    moved[0].outputs = {"out": ["%0@promote"]}
    moved[1].inputs = {"x": ["%0@promote"], "y": ["w"]}
    assert consumer_renames(_snap(ops), _snap(moved)) == {"%0": "%0@promote"}


def test_attr_order_is_not_a_change_but_a_nested_value_is():
    a = [_op(0, attrs={"x": 1, "y": [1, 2]})]
    b = [_op(0, attrs={"y": [1, 2], "x": 1})]  # an imported program's attr order
    assert a[0].render() == b[0].render()
    assert not changed(_snap(a), _snap(b)) and diff(_snap(a), _snap(b)) == ""
    sa, sb = _snap(copy.deepcopy(a)), _snap(copy.deepcopy(b))
    sm.canonical(sa)
    sm.canonical(sb)  # as the engine takes snapshots: equal keys, nothing rendered
    assert render_key(sa.ops) == render_key(sb.ops) and list(sb.ops[0].attrs) == ["x", "y"]
    c = [_op(0, attrs={"x": 1, "y": [2, 1]})]
    assert render_key(a) != render_key(c) and changed(_snap(a), _snap(c))
    sc = _snap(copy.deepcopy(c))
    sm.canonical(sc)  # a nested value keeps its order: still a change
    assert render_key(sa.ops) != render_key(sc.ops) and changed(sa, sc)


def test_canonical_keeps_the_operands_order():
    """Slot order is operand order (an in-place op writes its first operand):
    canonical sorts attrs only."""
    ops = [_op(0, inputs={"x": ["acc"], "values": ["%0"], "starts": ["%1"]},
               attrs={"z": 1, "a": 2})]
    s = _snap(copy.deepcopy(ops))
    sm.canonical(s)
    assert list(s.ops[0].inputs) == ["x", "values", "starts"]
    assert next(iter(s.ops[0].inputs.values())) == ["acc"]
    assert list(s.ops[0].attrs) == ["a", "z"]


def test_a_remembered_diff_follows_the_content():
    ops = [_op(0), _op(1)]
    edited = copy.deepcopy(ops)
    edited[1].attrs["scale"] = 5
    first = diff(_snap(ops), _snap(edited))
    assert "scale=5" in first and diff(_snap(ops), _snap(edited)) == first
    edited[1].attrs["scale"] = 6  # in place: another key, another diff
    assert "scale=6" in diff(_snap(ops), _snap(edited))
    assert diff(_snap(ops), _snap(copy.deepcopy(ops))) == ""


def test_recorded_placements_follow_the_bytes_of_planner_json(tmp_path, monkeypatch):
    """Remembered by the digest of planner.json's bytes (in process and on
    disk): one changed placement in the file is another key, never the old
    record; a torn memo file is a miss."""
    import json

    from cases import program_dirs

    monkeypatch.setenv("PADDLE_PASS_VERIFY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(program_dirs, "_PLACEMENTS", {})
    rank = tmp_path / "rank0"
    rank.mkdir()

    def write(placement):
        (rank / "planner.json").write_text(json.dumps({"final_ops": [
            {"type": "builtin.parameter", "results": ["w"], "placements": [placement]},
            {"type": "pd_op.matmul", "results": ["y"], "placements": [["S(0)"]]}]}))
    write(["S(1)"])
    assert program_dirs.recorded_placements(rank) == {"w": ["S(1)"]}
    write(["R"])
    assert program_dirs.recorded_placements(rank) == {"w": ["R"]}
    from verify.cache_files import read_entry

    (memo,) = [p for p in (tmp_path / "cache" / "placements").iterdir()
               if read_entry(p, p.stem, json.loads) == {"w": ["R"]}]
    monkeypatch.setattr(program_dirs, "_PLACEMENTS", {})  # a new process: the disk
    got = program_dirs.recorded_placements(rank)
    got["w"].append("edited")  # each caller has its own copy
    assert program_dirs.recorded_placements(rank) == {"w": ["R"]}
    memo.write_text("{torn")
    monkeypatch.setattr(program_dirs, "_PLACEMENTS", {})
    assert program_dirs.recorded_placements(rank) == {"w": ["R"]}
    (rank / "planner.json").unlink()
    assert program_dirs.recorded_placements(rank) == {}


def test_an_outcome_takes_identical_again_for_another_snapshot():
    from verify.engine.application import RankOutcome

    o = RankOutcome(0, _snap([_op(0)]), _snap([_op(0)]))
    assert o.identical() and o.identical()
    o.after = _snap([_op(0, type="pd_op.add")])  # another object: judged afresh
    assert not o.identical()
