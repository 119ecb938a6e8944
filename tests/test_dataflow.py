"""Def-before-use, reaching definitions and stream races: each catches its
historical bug with the right op and var, and passes the real rewrite."""
from conftest import context, snapshots

from verify.checks import def_use, reaching_defs, streams
from verify.snapshot import Op
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
    rd = _bad(reaching_defs.run(context(case, before, broken, 0)))
    assert rd and rd[0].counterexample["var"] == "linear_0.w_0@GRAD"


def test_real_rewrite_of_the_cast_window_is_clean():
    case, before, after, _ = snapshots("overlap", "col_cast_window", 0)
    for check in (def_use.run, reaching_defs.run, streams.run):
        assert not _bad(check(context(case, before, after, 0)))


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
    bad = _bad(reaching_defs.run(context(case, before, after, 0)))
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
