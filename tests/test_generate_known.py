"""The generator's ``KNOWN`` Paddle defects (``verify/generate/run.py``)
matched on what the reshard stage says: a Known with a ``pattern`` matches
its own defect's dist attrs and not a near miss (another mesh, another
status), so a new reshard gap is still a finding."""
from __future__ import annotations

from verify.generate.run import KNOWN

_NO = "AssertionError: There is no reshard function that matches "


def _attr(shape, ids, dm, placement, partial=False):
    p = ", partial(0,SUM)" if partial else ""
    return (f"mesh_shape:[{shape}],process_ids:[{ids}],dims_mappings:[{dm}]{p}, "
            f"placements:[{placement}]")


def _msg(src, dst):
    return f"{_NO}src_dist_attr: {src} and dst_dist_attr: {dst}, Operation((%0) = ...)"


def _known(text):
    return [k.name for k in KNOWN if k.matches("PASS_CRASHED", text)]


P = "Partial(reduce_type=SUM)"


def test_shard_to_partial_on_one_mesh_is_the_missing_s_to_p():
    # verify generate seed 0 plan 7 (after decompose_reshard_pass) and plan 134
    assert _known(_msg(_attr("1", "1", "-1,-1,0", "Shard(dim=2)"),
                       _attr("1", "1", "-1,-1,-1", P, True))) == ["no_s_to_p_reshard"]
    assert _known(_msg(_attr("2", "2,3", "0,-1,-1", "Shard(dim=0)"),
                       _attr("2", "2,3", "-1,-1,-1", P, True))) == ["no_s_to_p_reshard"]


def test_a_same_status_move_to_a_sub_mesh_is_the_decomposed_global_to_sub():
    # verify generate seed 0 plans 103 and 153
    assert _known(_msg(_attr("2", "2,3", "-1,-1,-1", P, True),
                       _attr("1", "2", "-1,-1,-1", P, True))) == ["decomposed_global_to_sub"]
    assert _known(_msg(_attr("2", "0,1", "-1,0", "Shard(dim=1)"),
                       _attr("1", "0", "-1,0", "Shard(dim=1)"))) == ["decomposed_global_to_sub"]


def test_near_misses_stay_findings():
    # Shard to Partial across two meshes: not what the missing s_to_p says
    assert _known(_msg(_attr("1", "0", "-1,-1,0", "Shard(dim=2)"),
                       _attr("1", "1", "-1,-1,-1", P, True))) == []
    # the same status between meshes of one shape: SameStatusReshardFunction's, not this
    assert _known(_msg(_attr("2", "0,1", "-1,-1,-1", P, True),
                       _attr("2", "2,3", "-1,-1,-1", P, True))) == []
    # a status change onto a sub-mesh (not the decomposed same-status step)
    assert _known(_msg(_attr("2", "0,1", "-1,-1,-1", P, True),
                       _attr("1", "0", "-1,-1,0", "Shard(dim=2)"))) == []
    # Replicate to Partial, Partial to Shard: other functions' business
    assert _known(_msg(_attr("2", "0,1", "-1,-1,-1", "Replicate()"),
                       _attr("2", "0,1", "-1,-1,-1", P, True))) == []


def test_a_layer_norm_grad_divergence_at_the_partition_is_the_partial_x():
    # verify generate seed 0 plan 193 (the proof's and the relation's words)
    rel = ("planner on p: rank 2's layer_norm_0.w_0.dist@GRAD at step 0 is not the serial "
           "program's through its placement [Replicate()] (index [6]: serial -0.00987141, "
           "rank 0.0484232); first divergence: rank 2 op 37 (pd_op.layer_norm_grad) value "
           "%29, stage partition (pd_op.layer_norm_grad %29)")
    assert [k.name for k in KNOWN if k.matches("NOT_EQUIVALENT", rel)] == \
        ["layer_norm_grad_partial_x"]
    # the same op blamed on another stage (a reshard function's) is another defect
    other = rel.replace("stage partition", "stage reshard")
    assert [k.name for k in KNOWN if k.matches("NOT_EQUIVALENT", other)] == []


def test_a_divergence_at_a_reshard_zero_fill_is_r_to_p_off_rank0():
    # verify generate seed 0 plans 158 (read directly) and 0 (through a chain)
    head = ("planner on p: rank 1's layer_norm_0.w_0.dist@GRAD at step 0 is not the serial "
            "program's through its placement [Replicate()] (index [2]: serial 0.12726, rank "
            "-0.0177113); first divergence: rank 1 op 18 (pd_op.layer_norm_grad) value %15, ")
    for blamed in ("stage reshard (pd_op.full %1)",
                   "stage reshard (pd_op.slice %20, from pd_op.full %18)"):
        assert [k.name for k in KNOWN if k.matches("NOT_EQUIVALENT", head + blamed)] == \
            ["r_to_p_zeros_off_rank0"]
    # another reshard op blamed, or a zero fill another stage made: not this defect
    for blamed in ("stage reshard (pd_op.slice %20)",
                   "stage reshard (pd_op.slice %20, from pd_op.recv_v2 %18)",
                   "stage gradient_merge (pd_op.full %1)"):
        assert [k.name for k in KNOWN if k.matches("NOT_EQUIVALENT", head + blamed)] == []
