"""A planner stage checked on its dense clone (reshard, remove, gradient
merge: local shapes) keeps the dist attrs of the reshards still in it:
``verify/plan/stages.py`` records each one's operand and result placements
(mesh shape, process ids, dims mapping, partial dims) and global shapes
before the clone strips them, so the ``dist_op.reshard`` shape rule checks
it and the ops downstream of it are checked (they were "could not be
checked" on every pipeline plan: issue 36).  Twins: a recorded dims mapping
that does not give the operand's local shape, and a result declared at the
wrong local shape, are shape findings naming stage, rank, op and value."""
from __future__ import annotations

import copy
import json

import pytest

import cases
from passes.planner import _snap, planner_dir
from verify.checks import CheckContext, shape_check
from verify.checks.shape_rules import RULES, RuleError, Shapes
from verify.ir.read_sets import DECLARED
from verify.plan.stages import DIST_ATTR_OPS, LOCAL_STAGES

CASE = "planner_pp2"


def test_recorded_ops_are_the_rules_that_read_dist_attrs():
    assert set(DIST_ATTR_OPS) == {t for t, d in DECLARED.items() if "dist_attr" in d.reads}


def _stage(case_name, stage):
    """``[(rank, previous stage's snapshot, this stage's snapshot)]``."""
    case = cases.all_cases()[case_name]
    folder = planner_dir(case)
    out = []
    for r in case.ranks:
        rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
        names = [st["stage"] for st in rec["stages"]]
        st = rec["stages"][names.index(stage)]
        prev = rec["stages"][names.index(stage) - 1]
        out.append((r, _snap(folder, r, prev["snapshot"]), _snap(folder, r, st["snapshot"])))
    return out


def _check(rank, before, after, stage="reshard"):
    ctx = CheckContext(pass_name=f"planner stage {stage}", case_name=CASE, rank=rank,
                       before=before, after=after)
    return shape_check.run(ctx)


def _reshards(snap):
    return [op for op in snap.ops if op.type == "dist_op.reshard"]


@pytest.mark.parametrize("stage", LOCAL_STAGES)
def test_a_pipeline_stage_on_local_shapes_is_checked_through_its_reshards(stage):
    seen = 0
    for r, before, snap in _stage(CASE, stage):
        assert (snap.meta or {}).get("shapes") == "local"
        for op in _reshards(snap):
            dist = op.attrs.get("dist_attr") or {}
            assert "dims_mappings:" in dist["operands"][0] and dist["shapes"]["operands"], op
            seen += 1
        res = _check(r, before, snap, stage)
        assert all(c.ok for c in res), [c.message for c in res if not c.ok]
        assert not any("could not be checked" in c.message for c in res), \
            [c.message for c in res]
    if stage == "reshard":  # one left on each rank (beside its send); remove erases them
        assert seen >= 2


def _twin(edit):
    r, before, snap = _stage(CASE, "reshard")[0]
    bad = copy.deepcopy(snap)
    op = _reshards(bad)[0]
    edit(bad, op)
    got = [c for c in _check(r, before, bad) if not c.ok and not c.advisory]
    return r, op, got


def test_a_dims_mapping_that_does_not_give_the_operands_local_shape_is_caught():
    def edit(snap, op):  # the operand recorded as split over 2 on dim 0: local dim 0 would be 1
        text = op.attrs["dist_attr"]["operands"][0]
        op.attrs["dist_attr"]["operands"][0] = text.replace("mesh_shape:[1]", "mesh_shape:[2]") \
            .replace("dims_mappings:[-1,", "dims_mappings:[0,")

    r, op, got = _twin(edit)
    x = op.inputs["operands"][0]
    assert got, "the twin passed"
    msg = got[0].message
    assert msg.startswith(f"planner stage reshard on {CASE} rank {r}: op {op.idx} "
                          "(dist_op.reshard):"), msg
    assert f"operand {x} dim 0 is 2, not 1" in msg, msg
    assert got[0].counterexample["op_index"] == op.idx and got[0].counterexample["rank"] == r


def test_a_result_declared_at_the_wrong_local_shape_is_caught():
    def edit(snap, op):
        y = op.outputs["results"][0]
        snap.vars[y].shape = [snap.vars[y].shape[0], snap.vars[y].shape[1] * 2]

    r, op, got = _twin(edit)
    y = op.outputs["results"][0]
    assert got, "the twin passed"
    assert any(c.message.startswith(f"planner stage reshard on {CASE} rank {r}: op {op.idx} "
                                    f"(dist_op.reshard): output {y} dim 1 is declared")
               and c.counterexample.get("var") == y for c in got), [c.message for c in got]


def _op(src, dst, g_in, g_out):
    from verify.ir.snapshot import Op

    fmt = "mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[{}], placements:[]"
    return Op(0, "dist_op.reshard", {"operands": ["x"]}, {"results": ["y"]},
              {"dist_attr": {"operands": [fmt.format(src)], "results": [fmt.format(dst)],
                             "shapes": {"operands": [g_in], "results": [g_out]}}})


def test_with_global_shapes_a_changed_mapping_is_derived():
    """Replicate -> Shard(0) of a [5, 8] value on a 2 x 2 mesh: the operand
    is [5, 8] on every rank, the result ceil(5 / 2) = 3 rows (Paddle's
    InferLocalDDim); an operand that is not its global shape under its
    mapping, or a global shape the reshard changes, is a broken need."""
    rule = RULES["dist_op.reshard"]
    s = Shapes(_op("-1,-1", "0,-1", [5, 8], [5, 8]), {"operands": [[5, 8]]}, "local")
    assert rule(s) == {"results": [[3, 8]]} and all(c is True for c, _ in s.needs)
    s = Shapes(_op("0,-1", "-1,-1", [5, 8], [5, 8]), {"operands": [[5, 8]]}, "local")
    rule(s)
    assert [w for c, w in s.needs if c is False] == [
        "operand x dim 0 is 5, not 3: its global shape [5, 8] under dims mapping [0, -1] "
        "on mesh [2, 2]"]
    s = Shapes(_op("-1,-1", "-1,-1", [5, 8], [4, 8]), {"operands": [[5, 8]]}, "local")
    rule(s)
    assert any(c is False and "changes the global shape" in w for c, w in s.needs)
    with pytest.raises(RuleError, match="no axis of mesh"):
        rule(Shapes(_op("3,-1", "-1,-1", [5, 8], [5, 8]), {"operands": [[5, 8]]}, "local"))
