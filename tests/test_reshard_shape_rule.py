"""The shape rule of ``dist_op.reshard`` (``verify/checks/shape_rules.py``):
a reshard changes a value's placements, never its global shape.  The claim
is evaluated on what Paddle's planner itself built (every reshard of a
planned pipeline's serial and partition stages: global shapes equal, the
local shapes Paddle records agree with the placements), a reshard made to
change the shape is caught naming the op, and the ops downstream of a
reshard are checked, not left "could not be checked"."""
from __future__ import annotations

import copy
import json
import math
import re

import pytest

import cases
from passes.planner import _snap, planner_dir
from verify.checks import CheckContext, shape_check
from verify.checks.shape_rules import RULES


def _stage_snaps(case_name, stages=("serial", "partition")):
    case = cases.all_cases()[case_name]
    folder = planner_dir(case)
    out = []
    for r in case.ranks:
        rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
        for st in rec["stages"]:
            if st["stage"] in stages and st.get("snapshot"):
                out.append((case, r, st["stage"], _snap(folder, r, st["snapshot"])))
    return out


def _local(shape, dist_attr):
    """The local shape a dist attr's dims mapping gives ``shape`` (Paddle
    splits a dim of n over m processes as ceil(n / m) on all but the last)."""
    mesh = [int(x) for x in re.search(r"mesh_shape:\[([\d,]*)\]", dist_attr).group(1).split(",")
            if x]
    dims = [int(x) for x in re.search(r"dims_mappings:\[([-\d,]*)\]", dist_attr).group(1)
            .split(",") if x]
    return [math.ceil(n / mesh[d]) if d >= 0 else n for n, d in zip(shape, dims)]


def test_paddle_reshards_keep_the_global_shape():
    seen = 0
    for case, r, stage, snap in _stage_snaps("planner_pp2"):
        dist = (snap.meta or {}).get("dist_values", {})
        for op in snap.ops:
            if op.type != "dist_op.reshard":
                continue
            x, y = op.inputs["operands"][0], op.outputs["results"][0]
            assert list(snap.vars[x].shape) == list(snap.vars[y].shape), (stage, r, op.idx)
            for v in (x, y):
                if v in dist:
                    assert dist[v]["local_shape"] == _local(snap.vars[v].shape,
                                                            dist[v]["dist_attr"]), (v, dist[v])
            seen += 1
    assert seen >= 2


def _check(snap, before=None):
    ctx = CheckContext(pass_name="planner stage partition", case_name="planner_pp2", rank=0,
                       before=before or snap, after=snap)
    return shape_check.run(ctx)


def test_a_reshard_that_changes_the_shape_is_caught():
    _, _, _, snap = next(s for s in _stage_snaps("planner_pp2", ("partition",)) if s[1] == 0
                         and any(o.type == "dist_op.reshard" for o in s[3].ops))
    bad = copy.deepcopy(snap)
    op = next(o for o in bad.ops if o.type == "dist_op.reshard")
    y = op.outputs["results"][0]
    bad.vars[y].shape = [d * 2 for d in bad.vars[y].shape]
    got = [c for c in _check(bad, snap) if not c.ok and not c.advisory]
    assert got, [c.message for c in _check(bad, snap)]
    assert any(f"(dist_op.reshard): output {y} dim 0 is declared" in c.message for c in got), \
        [c.message for c in got]


@pytest.mark.parametrize("stage", ["serial", "partition"])
def test_ops_downstream_of_a_reshard_are_checked(stage):
    assert "dist_op.reshard" in RULES
    for _, r, _, snap in _stage_snaps("planner_pp2", (stage,)):
        res = _check(snap)
        assert all(c.ok for c in res), [c.message for c in res if not c.ok]
        assert not any("could not be checked" in c.message for c in res), \
            [c.message for c in res]


def _reshard_op(src, dst):
    from verify.ir.snapshot import Op

    fmt = "mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[{}], placements:[]"
    return Op(0, "dist_op.reshard", {"operands": ["x"]}, {"results": ["y"]},
              {"dist_attr": {"operands": [fmt.format(src)], "results": [fmt.format(dst)]}})


def test_on_local_shapes_a_changed_mapping_is_not_derived():
    """A stage checked on its dense clone (local shapes) may still hold a
    reshard (a pipeline's other-stage reshards, until the remove stage):
    Replicate -> Shard(0) halves the local dim 0 there, so the global-shape
    claim must not be applied (it was: a false "declared 1 but is 2",
    found by ``verify generate``, seed 2, plan 6); the rule says it cannot
    derive the local shape instead.  A reshard that keeps every dim's
    mapping keeps the local shape, and on global shapes the shape is kept."""
    from verify.checks.shape_rules import RuleError, Shapes

    rule = RULES["dist_op.reshard"]
    changed = _reshard_op("-1,-1", "0,-1")
    with pytest.raises(RuleError, match="not derived"):
        rule(Shapes(changed, {"operands": [[2, 8]]}, "local"))
    assert rule(Shapes(changed, {"operands": [[2, 8]]}, "global")) == {"results": [[2, 8]]}
    kept = _reshard_op("0,-1", "0,-1")
    assert rule(Shapes(kept, {"operands": [[1, 8]]}, "local")) == {"results": [[1, 8]]}


def test_paddle_local_reshards_fit_the_rule():
    """On what Paddle built: every reshard left in a local-shape stage either
    keeps its mapping (and then its local shape) or is not derived."""
    from verify.checks.shape_rules import RuleError, Shapes

    seen = 0
    for case_name in ("planner_pp2", "planner_pp2_tp2"):
        for _, r, stage, snap in _stage_snaps(case_name, ("reshard", "remove")):
            assert (snap.meta or {}).get("shapes") == "local", (stage, snap.meta)
            for op in snap.ops:
                if op.type != "dist_op.reshard":
                    continue
                x, y = op.inputs["operands"][0], op.outputs["results"][0]
                try:
                    got = RULES["dist_op.reshard"](Shapes(op, {"operands": [snap.vars[x].shape]},
                                                          "local"))
                except RuleError:
                    continue
                assert got["results"][0] == list(snap.vars[y].shape), (case_name, stage, op.idx)
                seen += 1
    # (no case here has one that keeps its mapping; the count is for the reader)
