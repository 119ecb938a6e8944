"""PIR programs in the one snapshot form every check reads
(``verify/ir/pir_snapshot.py``), and the pairing of passes and cases by IR."""
from __future__ import annotations

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from cases import zoo  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.checks import CheckContext, run_static_checks  # noqa: E402
from verify.ir.pir_snapshot import snapshot_rank  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402


def snap(case_name, rank=0):
    case = cases.all_cases()[case_name]
    rp = case.build(rank)
    return case, rp, snapshot_rank(rp, {"case": case_name})


def test_two_builds_give_equal_snapshots():
    _, _, a = snap("pir_mm_3d")
    _, _, b = snap("pir_mm_3d")
    assert a.to_dict() == b.to_dict()
    assert a.meta["ir"] == "pir"


def test_names_slots_shapes_and_dtypes():
    _, rp, s = snap("pir_mm_3d_nonsquare")
    assert s.feeds == ["x"]
    x, w0, w1 = s.var("x"), s.var("w0"), s.var("w1")
    assert (x.shape, x.dtype, x.is_data, x.is_parameter) == ([2, 4, 8], "float32", True, False)
    assert (w0.shape, w0.is_parameter, w0.persistable) == ([8, 6], True, True)
    assert w1.shape == [6, 4]
    assert s.var(rp.loss).shape == []  # 0-D loss
    lr = s.var("learning_rate_0")
    assert lr.persistable and not lr.is_data  # a global the startup writes, not a feed
    grads = s.ops_of_type("pd_op.matmul_grad")
    assert [sorted(g.inputs) for g in grads] == [["out_grad", "x", "y"]] * 2
    assert [sorted(g.outputs) for g in grads] == [["x_grad", "y_grad"]] * 2
    assert grads[1].inputs["x"] == ["x"] and grads[1].inputs["y"] == ["w0"]
    assert s.shape(grads[1].outputs["y_grad"][0]) == [8, 6]
    assert all(g.attrs["transpose_y"] is False and "chunk_id" in g.attrs for g in grads)
    # the null master_param operand / result of sgd_ are left out of their slots
    sgd = s.ops_of_type("pd_op.sgd_")[0]
    assert sgd.inputs["master_param"] == [] and sgd.outputs["master_param_out"] == []
    # a constant operand is recorded in its consumer's attrs
    assert s.ops_of_type("pd_op.mean")[0].attrs["axis@value"] == []
    assert {"w0", "w1", "learning_rate_0"} <= s.startup_writes()
    names = [n for op in s.ops for n in op.writes()]
    assert len(names) == len(set(names)), "SSA: each value written once"


def test_dynamic_batch_is_minus_one():
    _, _, s = snap("pir_mm_3d_dynamic")
    assert s.var("x").shape == [-1, 4, 8]


def test_vector_typed_results_are_recorded():
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs, value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            a = paddle.static.data("a", [2, 3], "float32")
            b = paddle.static.data("b", [2, 3], "float32")
            paddle.concat([a, b], axis=0)
        s = from_pir_programs(main, startup, value_names(main))
    combine = s.ops_of_type("builtin.combine")[0]
    assert combine.inputs["operands"] == ["a", "b"]
    vec = s.var(combine.outputs["results"][0])
    assert vec.dtype.startswith("vec") and vec.shape == []
    concat = s.ops_of_type("pd_op.concat")[0]
    assert s.shape(concat.outputs["out"][0]) == [4, 3]


def test_rewritten_program_keeps_the_names_of_kept_values():
    case = cases.all_cases()["pir_mm_3d"]
    run = run_pass(passes.get("vpp_split"), case, 0)
    before = snapshot_rank(run.original)
    after = snapshot_rank(run.rewritten)
    kept = {o.render() for o in before.ops if o.type != "pd_op.matmul_grad"} - \
        {o.render() for o in after.ops}
    # only the optimizer ops read new names (the split's dW)
    assert all(r.startswith("pd_op.sgd_") for r in kept), kept
    assert not after.ops_of_type("pd_op.matmul_grad")
    ren = passes.get("vpp_split").renames(case, 0, before, after)
    dx = before.ops_of_type("pd_op.matmul_grad")[1].outputs["x_grad"][0]
    assert dx in ren and ren[dx] in after.vars


def test_static_checks_run_on_pir_snapshots_and_see_breakage():
    case, _, s = snap("pir_mm_3d_nonsquare")
    ctx = CheckContext("identity", case.name, 0, s, s, symbols=dict(case.symbols))
    assert all(r.verdict == Verdict.EQUIVALENT for r in run_static_checks(ctx)), \
        [r.message for r in run_static_checks(ctx) if not r.ok]
    # drop the first matmul: its result is read before anything writes it
    mm = s.ops_of_type("pd_op.matmul")[0]
    broken = s.with_ops([o for o in s.ops if o is not mm])
    res = run_static_checks(CheckContext("drop", case.name, 0, s, broken))
    assert any(r.kind == "dataflow" and r.verdict == Verdict.NOT_EQUIVALENT
               and r.counterexample["var"] == mm.outputs["out"][0] for r in res)
    # feed the 8x6 weight where the 6x4 one belongs: a shape precondition fails
    from dataclasses import replace

    ops = [replace(o, inputs={**o.inputs, "y": ["w0"]}) if o is s.ops_of_type(
        "pd_op.matmul")[1] else o for o in s.ops]
    res = run_static_checks(CheckContext("swap", case.name, 0, s, s.with_ops(ops)))
    assert any(r.kind == "shape" and r.verdict == Verdict.NOT_EQUIVALENT for r in res)
    # read another writer: the second matmul reads x instead of h
    ops = [replace(o, inputs={**o.inputs, "x": ["x"]}) if o is s.ops_of_type(
        "pd_op.matmul")[1] else o for o in s.ops]
    res = run_static_checks(CheckContext("rewire", case.name, 0, s, s.with_ops(ops)))
    assert any(r.kind == "shape" and not r.ok for r in res)


def test_identity_rewrite_of_a_pir_case_is_equivalent():
    """No false alarm: the unrewritten clone is EQUIVALENT on every check."""
    import dataclasses

    from passes.base import PassRun
    from verify.engine.application import RankOutcome
    from verify.numeric.equivalence import numeric_checks
    from verify.value import prove_application

    case = cases.all_cases()["pir_mm_3d_ty_square"]
    a, b = case.build(0), case.build(0)
    sa, sb = snapshot_rank(a), snapshot_rank(b)
    o = RankOutcome(0, sa, sb, run=PassRun(a, dataclasses.replace(b)))
    ctx = CheckContext("identity", case.name, 0, sa, sb)
    assert all(r.ok for r in run_static_checks(ctx))
    num = numeric_checks(case, [o], backends=("simulated",), seed=1)
    assert num and all(r.verdict == Verdict.EQUIVALENT for r in num), [r.message for r in num]
    val = prove_application("identity", [0], {}, {0: sa}, {0: sb}, {0: a.fetches + [a.loss]})
    assert all(r.verdict == Verdict.EQUIVALENT for r in val), [r.message for r in val]


def test_passes_meet_only_cases_of_their_ir():
    from verify.engine import baseline

    overlap, split = passes.get("overlap"), passes.get("vpp_split")
    pir = cases.all_cases()["pir_mm_3d"]
    legacy = cases.all_cases()["col_3d_static"]
    assert not overlap.handles(pir) and not split.handles(legacy)
    assert split.handles(pir) and overlap.handles(legacy)
    with pytest.raises(ValueError, match="not a pair"):
        run_application(overlap, pir)
    keys = baseline.current()["entries"]
    assert baseline.key(split.name, "pir_mm_3d") in keys
    assert baseline.key(overlap.name, "pir_mm_3d") not in keys
    assert baseline.key(split.name, "col_3d_static") not in keys


@pytest.mark.parametrize("case_name", [
    pytest.param(n, marks=[pytest.mark.skip(reason=zoo.left_to_the_benchmark(c))]
                 if zoo.left_to_the_benchmark(c) else [])
    for n, c in cases.all_cases().items()
    if c.ir == "pir" and passes.get("vpp_split").handles(c)])
def test_matcher_agrees_with_the_pir_cases(case_name):
    case, _, s = snap(case_name)
    adapter = passes.get("vpp_split")
    assert adapter.pattern_present(s) == case.expectation(adapter.name).fires


def test_dist_attrs_of_a_sharded_program():
    """Mesh and placements of ops and values; ops without a signature
    (dist_op.*) are read without asking for one (that crashes 3.3.1)."""
    import paddle
    import paddle.distributed as dist

    from verify.ir.pir_snapshot import from_pir_programs, value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
            x = paddle.static.data("x", [4, 8], "float32")
            y = dist.shard_tensor(x, mesh, [dist.Shard(0)])
            y * 2
        s = from_pir_programs(main, startup, value_names(main))
    shard = s.ops_of_type("dist_op.shard_tensor")[0]
    assert shard.inputs == {"operands": ["x"]}
    assert shard.attrs["dist_attr"]["mesh"] == {"shape": [2], "process_ids": [0, 1]}
    assert "Shard(dim=0)" in shard.attrs["dist_attr"]["results"][0]
    out = shard.outputs["results"][0]
    assert s.var(out).shape == [4, 8]  # global
    assert s.meta["dist_values"][out]["local_shape"] == [2, 8]
    assert "Shard(dim=0)" in s.meta["dist_values"][out]["dist_attr"]


def test_nested_blocks_are_noted_and_control_flow_is_read_safely():
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs, value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4], "float32")
            p = paddle.static.data("p", [1], "bool")
            paddle.static.nn.cond(p, lambda: x * 2, lambda: x + 1)
        s = from_pir_programs(main, startup, value_names(main))
    (op,) = s.ops_of_type("pd_op.if")
    # the operand, and what the branches read from outside (def-use sees it)
    assert op.inputs == {"operands": ["p"], "region@reads": ["x"]}
    # each branch's ops are recorded (tests/test_aliasing_regions.py)
    assert [[o["type"] for o in b["ops"]] for b in op.attrs["blocks"]] == \
        [["pd_op.full", "pd_op.scale", "cf.yield"]] * 2
    assert s.meta["nested_blocks"] == [{"program": "main", "op_index": op.idx,
                                        "op_type": "pd_op.if", "ops": [3, 3]}]
    assert all("blocks" not in o.attrs for o in s.ops if o is not op)


def _merged_program():
    """The one-rank merge case's programs after the installed gradient merge:
    its accumulators are keyword block arguments."""
    import paddle
    from paddle.distributed.passes import new_pass

    from cases import pir_gradient_merge
    from verify.ir.pir_snapshot import value_names

    main, startup, _, params_grads, _ = pir_gradient_merge.build_programs(
        {"opt": "sgd", "avg": True, "k": 2})
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        with paddle.static.program_guard(main, startup):
            new_pass("auto_parallel_gradient_merge_pass",
                     {"k_steps": 2, "avg": True, "params_grads": params_grads,
                      "gradient_sync_after_accumulate": True}).apply([main], [startup])
    return main, startup, names


def test_keyword_block_arguments_travel_with_the_program():
    """PIR's serializer drops keyword block arguments (3.3.1): their readers'
    operands come back null.  The export records them with their readers and
    the import puts them back: the imported program snapshots as the one
    exported, and runs the same (the merge's micro-steps, bitwise)."""
    import json

    import numpy as np
    import paddle
    from verify.ir.pir_snapshot import export_programs, from_pir_programs, import_programs
    from verify.numeric.micro_steps import _run, state_names

    main, startup, names = _merged_program()
    with paddle.pir_utils.IrGuard():
        before = from_pir_programs(main, startup, names)
        data = export_programs(main, startup, names)
        assert {kw["name"] for kw in data["kwargs"]} == {"w@GRAD@MERGE", "b@GRAD@MERGE"}
        assert all(kw["uses"] for kw in data["kwargs"])
        bare = dict(data, kwargs=[])  # what the serializer alone gives back
        main2, startup2, names2 = import_programs(data)
        nulls = [sum(not op.operand_source(j).initialized() for op in m.global_block().ops
                     for j in range(op.num_operands()))  # optional operands are null too
                 for m in (import_programs(bare)[0], main2)]
        assert nulls[0] - nulls[1] == sum(len(kw["uses"]) for kw in data["kwargs"])
        after = from_pir_programs(main2, startup2, names2)
        assert json.loads(after.to_json()) == json.loads(before.to_json())
        assert sorted(main2.global_block().kwargs()) == ["b@GRAD@MERGE", "w@GRAD@MERGE"]
        feeds = [("x", [2, 8], "float32"), ("y", [2, 4], "float32")]
        watch = state_names(before)
        runs = [_run(m, s, {}, feeds, watch, 2, 2, 0, merged=True)
                for m, s in ((main, startup), (main2, startup2))]
    assert all(np.array_equal(a[n], b[n]) for ca, cb in zip(*runs) for a, b in zip(ca, cb)
               for n in watch)
