"""A pass that changes how a parameter is initialised in a PIR startup
program is caught by the PIR numeric runs (issue 19: "the numeric runs
execute each case's own startup programs (seeded)"), on each runner: the
one-rank executor (``pir_runner.run_program``), the lock-step simulator
(``pir_ranks``) and the gradient-merge micro-steps (``micro_steps``).  The
counterexample names the parameter, the rank and the startup op; the
faithful pass on the same case still passes.  The edits are made to the
program the real pass built (a program mutant), so nothing here is tuned to
a pass's own startup ops."""
from __future__ import annotations

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402
from verify.ir.snapshot import Op, ProgramSnapshot  # noqa: E402
from verify.numeric.inputs import initial_params, snapshot_inits  # noqa: E402
from verify.selfcheck.program_mutants import Mutation  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402


def _stored(startup, name):
    """The startup op storing parameter ``name`` (``builtin.set_parameter``)."""
    return next(op for op in startup.global_block().ops
                if op.name() == "builtin.set_parameter"
                and op.attrs()["parameter_name"] == name)


def _first_param(snap, kind):
    """The first parameter the snapshot's startup initialises with ``kind``."""
    inits = snapshot_inits(snap)
    return next(n for n, v in sorted(snap.vars.items())
                if v.is_parameter and n in inits and inits[n][0] == kind)


def widen_uniform(main, startup, snap, rank):
    """The draw of the first uniformly initialised parameter gets a range of
    [-50, 50] (new constant operands; the old ones stay, unused)."""
    import paddle

    name = _first_param(snap, "pd_op.uniform")
    with paddle.pir_utils.IrGuard():
        draw = _stored(startup, name).operand_source(0).get_defining_op()
        with paddle.static.program_guard(main, startup):
            paddle.pir.set_insertion_point(draw)
            lo, hi = paddle.full([1], -50.0, "float32"), paddle.full([1], 50.0, "float32")
            paddle.pir.reset_insertion_point_to_end()
        draw.operand(1).set_source(lo)  # (shape, min, max)
        draw.operand(2).set_source(hi)
    return Mutation("widen init", f"{name}: uniform range widened to [-50, 50]")


def refill(main, startup, snap, rank):
    """The first parameter initialised with a constant is stored from a new
    constant 0.5 instead (the old constant erased)."""
    import paddle

    name = _first_param(snap, "pd_op.full")
    with paddle.pir_utils.IrGuard():
        store = _stored(startup, name)
        old = store.operand_source(0)
        with paddle.static.program_guard(main, startup):
            paddle.pir.set_insertion_point(store)
            new = paddle.full(list(old.shape), 0.5, str(old.dtype).replace("paddle.", ""))
            paddle.pir.reset_insertion_point_to_end()
        new.persistable = old.persistable  # a stored value is persistable
        store.operand(0).set_source(new)
        if old.use_empty():
            old.get_defining_op().erase()
    return Mutation("refill init", f"{name}: constant init changed to 0.5")


def _app(pass_name, case_name, mutator=None):
    """The application with its numeric runs (the value proof is not what
    these tests judge: left out, so they stay cheap)."""
    _, numeric = pick_backend("simulated", 0)
    return run_application(passes.get(pass_name), cases.all_cases()[case_name],
                           numeric=numeric, mutator=mutator, value=False)


def _numeric(app):
    return [c for c in app.checks if c.kind == "numeric"]


def _caught(app, rank, op, attr):
    """The numeric check is NOT_EQUIVALENT and its counterexample names the
    parameter the mutant changed, the rank and the startup op."""
    assert app.mutation is not None
    bad = [c for c in _numeric(app) if c.verdict == Verdict.NOT_EQUIVALENT]
    assert bad, [c.message for c in _numeric(app)]
    var = app.mutation.description.split(":")[0]
    for c in bad:
        (ch,) = c.counterexample["init_changes"]
        assert (ch["var"], ch["rank"], ch["op"]) == (var, rank, op), ch
        assert attr in ch["rewritten"], ch
        assert after_op_index(app, rank, ch["op_index"]) == op
        assert f"rank {rank}'s rewritten startup program initialises parameter {var}" \
            in c.message and op in c.message, c.message
        assert c.details["seed"] == 0
    assert app.verdict == Verdict.NOT_EQUIVALENT


def after_op_index(app, rank, idx):
    after = next(o.after for o in app.outcomes if o.rank == rank)
    return after.startup_ops[idx].type


@pytest.mark.parametrize("runner,pass_name,case_name,mutant,rank,op,attr", [
    # one rank: Paddle's executor (pir_runner.run_program)
    ("executor", "vpp_split", "pir_mm_3d", widen_uniform, 0, "pd_op.uniform", "max@value"),
    # two ranks in lock step (pir_ranks), the edit on rank 1 only
    ("simulator", "rs_fuse", "planned_row_sp_pir", refill, 1, "pd_op.full", "value"),
    # the gradient-merge micro-steps (micro_steps), a constant init and a draw
    ("micro-steps", "grad_merge", "pir_gm_sgd_sum_k2", refill, 0, "pd_op.full", "value"),
    ("micro-steps", "grad_merge", "pir_gm_sgd_sum_k2", widen_uniform, 0, "pd_op.uniform",
     "min@value"),
])
def test_a_changed_initialisation_is_caught_and_the_faithful_pass_passes(
        runner, pass_name, case_name, mutant, rank, op, attr):
    faithful = _app(pass_name, case_name)
    assert _numeric(faithful) and all(c.verdict == Verdict.EQUIVALENT
                                      for c in _numeric(faithful)), \
        [c.message for c in _numeric(faithful)]
    assert all("init_changes" not in (c.counterexample or {}) for c in faithful.checks)
    _caught(_app(pass_name, case_name, (rank, mutant)), rank, op, attr)


def _snap(ops):
    return ProgramSnapshot(ops=[], vars={}, startup_ops=ops)


def test_snapshot_inits_follow_the_stored_value_and_map_like_the_legacy_runner():
    """PIR startup ops on concrete values: the uniform's range comes from its
    constant operands (``min@value``), the seed is aside, a draw scaled
    before it is stored is another initialisation (a fresh draw), and
    ``initial_params`` maps a widened range as the legacy runner does."""
    def uniform(lo, hi, seed=0):
        return [Op(0, "pd_op.uniform", {}, {"out": ["s0"]},
                   {"min@value": lo, "max@value": hi, "seed": seed, "chunk_id": -1}),
                Op(1, "builtin.set_parameter", {"operands": ["s0"]}, {"parameter": ["w"]},
                   {"parameter_name": "w"})]

    base = snapshot_inits(_snap(uniform(-0.5, 0.5)))
    assert base["w"][0] == "pd_op.uniform" and base["w"][2] == 0
    shapes = {"w": ([4, 3], "float32")}
    v = initial_params(7, shapes)["w"]
    same = initial_params(7, shapes, None, base, snapshot_inits(_snap(uniform(-0.5, 0.5, 9))))
    np.testing.assert_array_equal(same["w"], v)  # the seed aside: the same draw
    wide = initial_params(7, shapes, None, base, snapshot_inits(_snap(uniform(-50.0, 50.0))))
    np.testing.assert_allclose(wide["w"], v * 100, rtol=1e-5)
    scaled = _snap(uniform(-0.5, 0.5)[:1] + [
        Op(1, "pd_op.scale", {"x": ["s0"]}, {"out": ["s1"]}, {"scale": 100.0}),
        Op(2, "builtin.set_parameter", {"operands": ["s1"]}, {"parameter": ["w"]},
           {"parameter_name": "w"})])
    other = initial_params(7, shapes, None, base, snapshot_inits(scaled))
    assert snapshot_inits(scaled)["w"][0] == "pd_op.scale"
    assert not np.allclose(other["w"], v)


def test_a_pass_file_widening_an_init_is_caught_by_the_micro_steps_in_a_worker():
    """The same change made by a pass (``--pass-file``): the micro-step runs
    re-apply it in an isolation worker (``micro_steps.run_rebuilt``) and get
    the merged side's parameters from its startup initialisation."""
    from verify.engine import isolation
    from verify.ir.pass_files import load_pass_file

    loaded = load_pass_file("tests/gm_mutants/gradient_merge_init_widened.py")
    before = isolation.enabled()  # another test in this process may have turned it off
    isolation.configure(enabled=True)
    try:
        app = _app("grad_merge", "pir_gm_sgd_sum_k2")
    finally:
        isolation.configure(enabled=before)
        loaded.restore()
    (num,) = _numeric(app)
    assert num.verdict == Verdict.NOT_EQUIVALENT, num.message
    (ch,) = num.counterexample["init_changes"]
    assert (ch["var"], ch["rank"], ch["op"]) == ("w", 0, "pd_op.uniform")
    assert ch["rewritten"]["max@value"] == "50.0" and ch["rewritten"]["min@value"] == "-50.0"
    assert "rank 0's rewritten startup program initialises parameter w" in num.message


@pytest.mark.parametrize("case_name", ["pir_mm_3d", "pir_gm_sgd_sum_k2"])
def test_the_reproducers_reader_of_a_live_startup_agrees_with_the_snapshots(case_name):
    """``verify/repro/init_source.py:pir_startup_inits`` (what a PIR
    reproducer embeds) reads a live startup program as ``snapshot_inits``
    reads its snapshot: the same init per parameter, op index included, and
    the same change named once the first uniform draw is widened."""
    import paddle

    from verify.ir.pir_snapshot import snapshot_rank
    from verify.numeric.inputs import init_changes, init_signature
    from verify.repro.init_source import pir_startup_inits

    rp = cases.all_cases()[case_name].build(0)
    before = snapshot_rank(rp)
    params = sorted(n for n, v in before.vars.items() if v.is_parameter)

    def both():
        snap = snapshot_inits(snapshot_rank(rp))
        with paddle.pir_utils.IrGuard():
            live = pir_startup_inits(rp.startup)
        for n in params:
            assert init_signature(*snap[n][:2]) == init_signature(*live[n][:2]), n
            assert snap[n][2] == live[n][2], n
        return snap, live

    snap0, live0 = both()
    widen_uniform(rp.main, rp.startup, before, 0)
    snap1, live1 = both()
    want = init_changes(snap0, snap1, params, 0)
    assert want and want == init_changes(live0, live1, params, 0)
