"""Def-before-use, reaching definitions and stream races: each catches its
historical bug with the right op and var, and passes the real rewrite."""
from conftest import context, snapshots

from verify.checks import def_use, reaching_defs, streams
from verify.ir.snapshot import Op
from verify.verdicts import Verdict


def _bad(results):
    return [r for r in results if r.verdict == Verdict.NOT_EQUIVALENT]


def _old_overlap_rewrite(after):
    """The older Paddle behaviour: the window op (a cast of Y@GRAD) stays
    right after the allreduce, *before* the dY matmul that now writes Y@GRAD."""
    ops = list(after.ops)
    cast = next(o for o in ops if o.type == "cast")
    ops.remove(cast)
    ar = next(i for i, o in enumerate(ops) if o.type == "c_allreduce_sum")
    ops.insert(ar + 1, cast)
    return after.with_ops(ops)


def test_cast_reading_dy_before_the_dy_matmul_is_caught():
    case, before, after, _ = snapshots("overlap", "col_cast_window", 0)
    broken = _old_overlap_rewrite(after)
    du = _bad(def_use.run(context(case, before, broken, 0)))
    assert du and du[0].counterexample["var"] == "linear_0.w_0@GRAD"
    assert du[0].counterexample["op_type"] == "cast"
    rd = _bad(reaching_defs.run(context(case, before, broken, 0, adapter="overlap")))
    assert rd and rd[0].counterexample["var"] == "linear_0.w_0@GRAD"


def test_real_rewrite_of_the_cast_window_is_clean():
    case, before, after, _ = snapshots("overlap", "col_cast_window", 0)
    for check in (def_use.run, reaching_defs.run, streams.run):
        assert not _bad(check(context(case, before, after, 0, adapter="overlap")))


def test_startup_init_deleted_on_one_rank_is_caught():
    case, before, after, _ = snapshots("promotion", "row_mp_o0_sgd_tp2", 1)
    startup = [o for o in after.startup_ops if "linear_0.w_0" not in o.writes()]
    broken = after.with_ops(after.ops, startup_ops=startup)
    bad = _bad(def_use.run(context(case, before, broken, 1)))
    assert bad and bad[0].counterexample["var"] == "linear_0.w_0"
    assert bad[0].counterexample["program"] == "main" and bad[0].rank == 1
    assert not _bad(def_use.run(context(case, before, after, 1)))


def test_window_op_reading_reduced_dx_is_caught_on_the_real_pass():
    case, before, after, _ = snapshots("overlap", "col_window_reads_xgrad", 0)
    bad = _bad(reaching_defs.run(context(case, before, after, 0, adapter="overlap")))
    assert bad and bad[0].counterexample["op_type"] == "scale"
    assert bad[0].counterexample["var"] == "linear_0.x_id@GRAD"


def _share_dx_buffer(after):
    """A memory-reuse rewrite: ``share_data`` makes the dY product's output
    alias dX's buffer, while the mp-stream allreduce may still be reading dX.
    By names the executor sees no dependence between the two, so nothing
    orders them."""
    ops = list(after.ops)
    ar = next(i for i, o in enumerate(ops) if o.type == "c_allreduce_sum")
    dx = ops[ar].inputs["X"][0]
    mm = next(o for o in ops[ar:] if o.type == "matmul_v2")
    out = mm.outputs["Out"][0]
    ops.insert(ops.index(mm), Op(0, "share_data", {"X": [dx]}, {"Out": [out]}))
    return after.with_ops(ops)


def test_allreduce_on_mp_stream_unordered_with_dx_writer_is_caught():
    case, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    broken = _share_dx_buffer(after)
    bad = _bad(streams.run(context(case, before, broken, 0)))
    assert bad, "race not found"
    cex = bad[0].counterexample
    assert cex["first"]["op_type"] == "c_allreduce_sum"
    assert cex["first"]["stream"] == "auto_parallel_mp"
    assert cex["second"]["op_type"] == "matmul_v2"
    assert cex["second"]["start"] < cex["first"]["end"]  # the schedule overlaps


def test_same_rewrite_on_one_stream_is_ordered():
    case, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    broken = _share_dx_buffer(after)
    for o in broken.ops:
        o.stream = "default"
    assert not _bad(streams.run(context(case, before, broken, 0)))


def test_real_overlap_streams_are_ordered():
    case, before, after, _ = snapshots("overlap", "col_two_layers", 1)
    res = streams.run(context(case, before, after, 1))
    assert res and all(r.verdict == Verdict.EQUIVALENT for r in res)
    assert "cross-stream" in res[0].message


def test_dp_broadcast_deleted_with_the_tp_one_is_caught():
    import passes

    case, before, after, _ = snapshots("promotion", "row_dp_mp_o0_sgd", 0)
    adapter = passes.get("promotion")
    assert all(r.ok for r in adapter.contract(case, 0, before, after))
    startup = [o for o in after.startup_ops
               if not (o.type == "broadcast" and o.inputs["x"] == ["linear_0.b_0"])]
    broken = after.with_ops(after.ops, startup_ops=startup)
    bad = [r for r in adapter.contract(case, 0, before, broken) if not r.ok]
    assert bad and bad[0].counterexample["var"] == "linear_0.b_0"
    assert bad[0].counterexample["program"] == "startup"


# -- reaching definitions by writer, not by count ----------------------------
def _swap_writers(snap, var):
    """Two writers of ``var`` exchanged: the number of writes every read
    sees is unchanged, the value is not."""
    ops = list(snap.ops)
    idx = [i for i, o in enumerate(ops) if var in o.writes()]
    i, j = idx[0], idx[1]
    ops[i], ops[j] = ops[j], ops[i]
    return snap.with_ops(ops)


def test_two_writers_swapped_is_caught_with_both_writers():
    from verify.ir.snapshot import ProgramSnapshot, Var

    v = {n: Var(n, [2], "float32") for n in ("x", "t", "u", "y")}
    ops = [Op(0, "scale", {"X": ["x"]}, {"Out": ["t"]}, {"scale": 2.0}),
           Op(1, "relu", {"X": ["t"]}, {"Out": ["u"]}),
           Op(2, "scale", {"X": ["x"]}, {"Out": ["t"]}, {"scale": 3.0}),
           Op(3, "assign", {"X": ["t"]}, {"Out": ["y"]})]
    before = ProgramSnapshot(ops, v, feeds=["x"])
    after = _swap_writers(before, "t")
    ctx = __import__("verify.checks", fromlist=["CheckContext"]).CheckContext(
        "p", "hand", 0, before, after)
    bad = _bad(reaching_defs.run(ctx))
    assert bad, "a swap of two writers keeps write counts and must still be caught"
    cex = {(b.counterexample["op_type"], b.counterexample["var"]): b.counterexample for b in bad}
    assert ("assign", "t") in cex and ("relu", "t") in cex
    assert "scale" in cex[("assign", "t")]["writer_original"]
    assert cex[("assign", "t")]["writer_original"] != cex[("assign", "t")]["writer_rewritten"]
    # the same programs, unswapped, are clean
    ok = __import__("verify.checks", fromlist=["CheckContext"]).CheckContext(
        "p", "hand", 0, before, before)
    assert not _bad(reaching_defs.run(ok))


def test_changed_producer_with_same_write_count_is_caught():
    """A producer outside the pass's region computes something else (its
    attr changed): every read keeps its write count, but sees a changed op."""
    case, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    ops = list(after.ops)
    k = next(i for i, o in enumerate(ops) if o.type == "square")
    o = ops[k]
    ops[k] = Op(o.idx, "scale", o.inputs, o.outputs,
                {"scale": 2.0, "bias": 0.0, "bias_after_scale": True}, o.role, o.stream)
    broken = after.with_ops(ops)
    bad = _bad(reaching_defs.run(context(case, before, broken, 0, adapter="overlap")))
    assert bad and bad[0].counterexample["var"] == o.outputs["Out"][0]
    assert "scale" in bad[0].counterexample["writer_rewritten"]
    assert "square" in bad[0].counterexample["writer_original"]
    assert not _bad(reaching_defs.run(context(case, before, after, 0, adapter="overlap")))
