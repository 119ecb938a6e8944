"""PIR collectives and ``fuse_allreduce_split_to_reducescatter_pass`` (rs_fuse).

Each PIR collective row of ``verify/ir/collectives.py`` on concrete values (the
simulator, the value semantics and the shape rule); the real pass on its
pattern proved and simulated equivalent; the near-misses the 3.3.1 pass
wrongly fuses caught with rank and value counterexamples; broken fusions
(a mutant pass pipeline: a rank keeping the wrong chunk, a MAX where the
program sums) caught the same way.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from cases import zoo  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.ir.collectives import COLLECTIVES  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402

PIR_ROWS = sorted(t for t in COLLECTIVES if t.startswith("pd_op."))
RINGS = {0: [[0, 1]]}
BROADCAST_ROOT = 1  # not 0, so a root read as the first rank is caught


def _collective_program(op_type, reduce_type=0):
    """``x [4, 6] -> op_type -> y``: (main, startup, names, y's name)."""
    import paddle

    from verify.ir.pir_snapshot import value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 6], "float32")
            f = getattr(paddle._C_ops, op_type.split(".", 1)[1])
            # all_reduce: reduce_type; broadcast: the root (rank 1); all_to_all:
            # the ring only; others: nranks
            y = (f(x, 0, reduce_type) if "all_reduce" in op_type
                 else f(x, 0, BROADCAST_ROOT) if op_type == "pd_op.broadcast"
                 else f(x, 0) if op_type == "pd_op.all_to_all" else f(x, 0, 2))
        names = value_names(main)
        return main, startup, names, names.name(y)


def _expected(op_type, reduce_type, xs, rank):
    if "all_reduce" in op_type:
        return np.max(xs, axis=0) if reduce_type == 1 else np.sum(xs, axis=0)
    if op_type == "pd_op.reduce_scatter":
        return np.split(np.sum(xs, axis=0), 2, axis=0)[rank]
    if op_type == "pd_op.all_gather":
        return np.concatenate(xs, axis=0)
    if op_type == "pd_op.broadcast":
        return xs[BROADCAST_ROOT]
    if op_type == "pd_op.all_to_all":  # chunk j: rank j's chunk ``rank``
        return np.concatenate([np.split(x, len(xs), axis=0)[rank] for x in xs], axis=0)
    raise AssertionError(op_type)


ROW_CASES = [(t, 0) for t in PIR_ROWS] + [("pd_op.all_reduce", 1)]


@pytest.mark.parametrize("op_type,reduce_type", ROW_CASES,
                         ids=[f"{t}-rt{r}" for t, r in ROW_CASES])
def test_collective_row_on_concrete_values(op_type, reduce_type):
    """The simulator (every rank's PIR program in lock step) and the value
    semantics give numpy's answer; Paddle's declared result shape agrees
    with the shape rule."""
    import paddle

    from verify.checks import shape_check
    from verify.numeric.pir_ranks import run_exported_ranks
    from verify.ir.pir_snapshot import export_programs, from_pir_programs
    from verify.value.semantics import Tensor, collective, collective_kind, leaf_dims

    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 6)).astype("float32") for _ in range(2)]
    ranks = {}
    for r in (0, 1):
        main, startup, names, y = _collective_program(op_type, reduce_type)
        with paddle.pir_utils.IrGuard():
            ranks[r] = {"exported": export_programs(main, startup, names), "params": {},
                        "feeds": [{"x": xs[r]}], "watch": [y]}
            snap = from_pir_programs(main, startup, names)
    got = run_exported_ranks(ranks, RINGS, steps=1)
    for r in (0, 1):
        np.testing.assert_allclose(got[r][0][y], _expected(op_type, reduce_type, xs, r),
                                   rtol=1e-6, atol=1e-6)

    class K:  # concrete kernels: max/min are the real ones
        reduce_to = 10 ** 6

        def const(self, v):
            return Fraction(v)

        def uf(self, kernel, args, attrs=()):
            return {"max": max, "min": min}[kernel](args)

    op = next(o for o in snap.ops if o.type == op_type)
    kind = collective_kind(op)
    ts = [Tensor(x.astype(float).astype(object), leaf_dims(x.shape, 10 ** 6)) for x in xs]
    for r in (0, 1):
        out = collective(kind, ts, r, BROADCAST_ROOT if kind == "broadcast" else 0, K())
        np.testing.assert_allclose(out.arr.astype(float),
                                   _expected(op_type, reduce_type, xs, r), rtol=1e-6)
    every = set(range(len(snap.ops)))
    checked = shape_check.check_snapshot(snap, 0, "test", {}, every)
    assert all(c.verdict == Verdict.EQUIVALENT for c in checked), [c.message for c in checked]


def test_shape_rule_catches_a_reduce_scatter_declared_unscattered():
    """pd_op.reduce_scatter's rule: dim 0 divided by nranks; a result declared
    with the input's shape is caught."""
    import paddle

    from verify.checks import shape_check
    from verify.ir.pir_snapshot import from_pir_programs
    from verify.ir.snapshot import Var

    main, startup, names, y = _collective_program("pd_op.reduce_scatter")
    with paddle.pir_utils.IrGuard():
        snap = from_pir_programs(main, startup, names)
    assert snap.var(y).shape == [2, 6]
    snap.vars[y] = Var(y, [4, 6], "float32")
    bad = shape_check.check_snapshot(snap, 0, "test", {}, set(range(len(snap.ops))))
    assert any(c.verdict != Verdict.EQUIVALENT and c.counterexample
               and c.counterexample.get("var") == y for c in bad), [c.message for c in bad]


def test_shape_rule_catches_an_all_to_all_declared_resized():
    """pd_op.all_to_all's rule (phi AllToAllInferMeta): out is x's shape; a
    result declared with dim 0 cut by the ring's size (as a reduce_scatter's)
    is caught naming the value, the correct declaration holds."""
    import paddle

    from verify.checks import shape_check
    from verify.ir.pir_snapshot import from_pir_programs
    from verify.ir.snapshot import Var

    main, startup, names, y = _collective_program("pd_op.all_to_all")
    with paddle.pir_utils.IrGuard():
        snap = from_pir_programs(main, startup, names)
    every = set(range(len(snap.ops)))
    assert snap.var(y).shape == [4, 6]
    good = shape_check.check_snapshot(snap, 0, "test", {}, every)
    assert all(c.verdict == Verdict.EQUIVALENT for c in good), [c.message for c in good]
    snap.vars[y] = Var(y, [2, 6], "float32")
    bad = shape_check.check_snapshot(snap, 0, "test", {}, every)
    assert any(c.verdict == Verdict.CONTRACT_BROKEN and c.counterexample
               and c.counterexample.get("var") == y for c in bad), [c.message for c in bad]


def test_all_to_all_of_an_indivisible_dim_is_refused():
    """dim 0 not divisible by the ring's size: the GPU kernel raises; the
    simulator and the value row refuse it (never a proof)."""
    from verify.numeric.simulated_ranks import BackendError, _perform
    from verify.value.semantics import Tensor, Unsupported, collective, leaf_dims

    xs = [np.arange(6.0).reshape(3, 2) + 10 * r for r in range(2)]
    ts = [Tensor(x.astype(object), leaf_dims(x.shape, 10 ** 6)) for x in xs]
    with pytest.raises(Unsupported, match="not divisible"):
        collective("all_to_all", ts, 0, 0, None)

    class State(dict):
        set = dict.__setitem__

    class Coll:
        kind, type, ring, root = "all_to_all", "pd_op.all_to_all", 0, 0

        def __init__(self, index):
            self.index, self.x, self.out = index, "x", "y"

    states = {r: State(x=xs[r]) for r in (0, 1)}
    with pytest.raises(BackendError, match="not divisible"):
        _perform([0, 1], [Coll(3), Coll(3)], states, "test")


# -- the pass -------------------------------------------------------------------
def _app(case_name, adapter=None):
    _, numeric = pick_backend("simulated", 0)
    return run_application(adapter or passes.get("rs_fuse"), cases.all_cases()[case_name],
                           numeric=numeric)


def _by(app, kind, verdict):
    return {c.rank: c for c in app.checks if c.kind == kind and c.verdict == verdict}


def test_matcher_agrees_with_every_pir_case():
    from verify.ir.pir_snapshot import snapshot_rank

    adapter = passes.get("rs_fuse")
    for case in cases.all_cases().values():
        # the zoo's other models: the gate's contract check with --zoo all (cases/zoo.py)
        if not adapter.handles(case) or zoo.left_to_the_benchmark(case):
            continue
        for rank in case.ranks[:2]:
            s = snapshot_rank(case.build(rank), {"rank": rank})
            assert adapter.pattern_present(s) == case.expectation(adapter.name).fires, \
                (case.name, rank)


def test_the_pass_on_its_pattern_is_proved_and_simulated_equivalent():
    app = _app("rs_own_chunk")
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks if not c.ok]
    assert set(_by(app, "value", Verdict.EQUIVALENT)) == {0, 1}
    assert set(_by(app, "numeric", Verdict.EQUIVALENT)) == {0, 1}
    fused = [c for c in app.checks if c.name == "same reduction, axis and chunk"]
    assert len(fused) == 2 and all(c.ok for c in fused)
    for o in app.outcomes:
        assert [op.type for op in o.after.ops if "reduce" in op.type] == ["pd_op.reduce_scatter"]


def test_without_stream_attrs_the_pass_does_nothing_where_its_pattern_is():
    app = _app("rs_no_stream_attrs")
    assert app.verdict == Verdict.NOT_APPLIED
    assert set(_by(app, "contract", Verdict.NOT_APPLIED)) == {0, 1}


def test_foreign_chunk_is_fused_and_each_rank_gets_the_other_ranks_value():
    """rs_other_chunk: rank r kept chunk 1-r; the 3.3.1 pass fuses it anyway.
    The counterexamples name the rank and the value, and the simulated runs
    show the swap: rank 0's rewritten result is rank 1's original one."""
    app = _app("rs_other_chunk")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    contract = _by(app, "contract", Verdict.CONTRACT_BROKEN)
    assert set(contract) == {0, 1}
    chunk = [c for c in app.checks if c.name == "same reduction, axis and chunk"
             and c.rank == 0][0]
    assert chunk.counterexample["chunk"] == 1 and chunk.counterexample["rank_position"] == 0
    value = _by(app, "value", Verdict.NOT_EQUIVALENT)
    assert set(value) == {0, 1}
    assert value[0].counterexample["rank"] == 0 and value[0].counterexample["var"]
    num = _by(app, "numeric", Verdict.NOT_EQUIVALENT)
    assert num[0].counterexample["rank"] == 0 and num[1].counterexample["rank"] == 1
    ref, cand = _swap_runs(app, "rs_other_chunk")
    for r in (0, 1):
        np.testing.assert_allclose(cand[r], ref[1 - r], rtol=1e-5, atol=1e-5)
        assert not np.allclose(cand[r], ref[r])


def _swap_runs(app, case_name, adapter=None):
    """Each rank's watched value, original and rewritten, from one simulated
    step of the programs ``adapter`` builds (its pass applied again)."""
    from verify.numeric.pir_runner import run_ranks

    case = cases.all_cases()[case_name]
    adapter = adapter or passes.get("rs_fuse")
    outs = {o.rank: o for o in app.outcomes}
    runs = {r: run_pass(adapter, case, r) for r in outs}
    watch = {r: list(run.original.fetches) for r, run in runs.items()}
    assert all(w[0] in o.after.vars for w, o in zip(watch.values(), outs.values()))
    ref = run_ranks(case, {r: run.original for r, run in runs.items()},
                    {r: o.before for r, o in outs.items()}, watch, 0, 1)
    cand = run_ranks(case, {r: run.rewritten for r, run in runs.items()},
                     {r: o.after for r, o in outs.items()}, watch, 0, 1)
    return ({r: ref[r][0][watch[r][0]] for r in outs},
            {r: cand[r][0][watch[r][0]] for r in outs})


def test_max_all_reduce_is_fused_into_a_sum():
    app = _app("rs_max")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    value = _by(app, "value", Verdict.NOT_EQUIVALENT)
    sub = value[0].counterexample["first_differing_subterm"]
    assert "max(" in sub["original"] and "max(" not in sub["rewritten"]
    chunk = [c for c in app.checks if c.name == "same reduction, axis and chunk"][0]
    assert chunk.counterexample["reduce_type"] == "max"


def test_split_along_dim_1_is_fused_as_if_dim_0():
    app = _app("rs_axis1")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    shape = [c for c in app.checks if c.kind == "shape" and not c.ok]
    assert shape and shape[0].counterexample["declared"] == [4, 3] and \
        shape[0].counterexample["inferred"] == [2, 6]
    assert set(_by(app, "numeric", Verdict.NOT_EQUIVALENT)) == {0, 1}


# -- broken fusions (a mutant pass pipeline: the real pass, then an edit) --------
class _MutantFusion(type(passes.get("rs_fuse"))):
    """The real pass, then on every rank the reduce_scatter replaced by an
    all-reduce (``reduce_type``) split along dim 0 keeping piece ``piece(rank)``."""

    isolated = False  # a test's own class: applied in this process

    def __init__(self, reduce_type, piece):
        self.reduce_type, self.piece = reduce_type, piece

    def apply_local(self, case, rank):
        import paddle

        run = super().apply_local(case, rank)
        main = run.rewritten.main
        with paddle.pir_utils.IrGuard():
            rs = next(o for o in main.global_block().ops if o.name() == "pd_op.reduce_scatter")
            x, out = rs.operand_source(0), rs.result(0)
            with paddle.static.program_guard(main):
                paddle.pir.set_insertion_point_after(rs)
                total = paddle._C_ops.all_reduce(x, 0, self.reduce_type)
                parts = paddle.split(total, 2, axis=0)
                out.replace_all_uses_with(parts[self.piece(rank)])
                paddle.pir.reset_insertion_point_to_end()
            rs.erase()
        return run


def test_a_fusion_keeping_the_wrong_chunk_is_caught_on_the_rank():
    mutant = _MutantFusion(0, lambda rank: 1 - rank)
    app = _app("rs_own_chunk", mutant)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    value = _by(app, "value", Verdict.NOT_EQUIVALENT)
    assert set(value) == {0, 1} and value[1].counterexample["rank"] == 1
    assert set(_by(app, "numeric", Verdict.NOT_EQUIVALENT)) == {0, 1}
    ref, cand = _swap_runs(app, "rs_own_chunk", mutant)
    np.testing.assert_allclose(cand[0], ref[1], rtol=1e-5, atol=1e-5)
    assert set(_by(app, "contract", Verdict.CONTRACT_BROKEN)) == {0, 1}


def test_a_fusion_that_takes_the_max_is_caught():
    app = _app("rs_own_chunk", _MutantFusion(1, lambda rank: rank))
    assert app.verdict == Verdict.NOT_EQUIVALENT
    value = _by(app, "value", Verdict.NOT_EQUIVALENT)
    sub = value[0].counterexample["first_differing_subterm"]
    assert "max(" in sub["rewritten"] and "max(" not in sub["original"]
    assert set(_by(app, "numeric", Verdict.NOT_EQUIVALENT)) == {0, 1}


def test_shape_rules_of_the_reshard_index_maps():
    """pd_op.slice on a program Paddle built (its own inference declared the
    result); pd_op.concat of a stacked vector, and a wrong declared shape of
    each caught."""
    import paddle

    from verify.checks import shape_check
    from verify.ir.pir_snapshot import from_pir_programs
    from verify.ir.snapshot import Op, ProgramSnapshot, Var

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 6], "float32")
            paddle.slice(x, axes=[1], starts=[2], ends=[4])
        snap = from_pir_programs(main, startup)
    sl = next(o for o in snap.ops if o.type == "pd_op.slice")
    out = sl.outputs["out"][0]
    assert snap.var(out).shape == [4, 2]
    every = set(range(len(snap.ops)))
    ok = shape_check.check_snapshot(snap, 0, "test", {}, every)
    assert all(c.verdict == Verdict.EQUIVALENT for c in ok), [c.message for c in ok]
    snap.vars[out] = Var(out, [2, 2], "float32")
    assert any(not c.ok for c in shape_check.check_snapshot(snap, 0, "test", {}, every))

    ops = [Op(0, "pd_op.split_with_num", {"x": ["g"]}, {"out": ["v"]},
              {"num": 2, "axis@value": 0}),
           Op(1, "pd_op.concat", {"x": ["v"]}, {"out": ["c"]}, {"axis@value": 1})]
    vars_ = {"g": Var("g", [4, 3], "float32"),
             "v": Var("v", [], "vec[tensor<2x3xf32>,tensor<2x3xf32>]"),
             "c": Var("c", [2, 6], "float32")}
    good = ProgramSnapshot(ops, vars_, feeds=["g"])
    ok = shape_check.check_snapshot(good, 0, "test", {}, {0, 1})
    assert all(c.verdict == Verdict.EQUIVALENT for c in ok), [c.message for c in ok]
    vars_["c"] = Var("c", [4, 3], "float32")
    bad = shape_check.check_snapshot(ProgramSnapshot(ops, vars_, feeds=["g"]), 0, "test", {},
                                     {0, 1})
    assert any(not c.ok and c.counterexample.get("var") == "c" for c in bad)


def test_the_pass_cannot_fire_on_what_the_planner_emits():
    """planned_row_sp_pir (examples/row_sp_pir.py planned by dist.to_static):
    the row-parallel partial sum is a pd_op.all_reduce followed by add(bias)
    and pd_op.slice; no builtin.slice anywhere: the pass is left alone, the
    programs proved and simulated unchanged."""
    from verify.ir.pir_snapshot import snapshot_rank

    case = cases.all_cases()["planned_row_sp_pir"]
    s = snapshot_rank(case.build(0), {"rank": 0})
    types = [o.type for o in s.ops]
    assert "pd_op.all_reduce" in types and "pd_op.all_reduce_" not in types
    assert "pd_op.slice" in types and "builtin.slice" not in types
    app = _app("planned_row_sp_pir")
    assert app.status == "LEFT_ALONE", [c.message for c in app.checks if not c.ok]
    assert set(_by(app, "numeric", Verdict.EQUIVALENT)) == {0, 1}
