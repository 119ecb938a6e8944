"""Survivors of ``python -m verify mutate`` and what closed them (issue 34).

The sibling-operand survivor on the data-parallel optimization pass
(``engine_dp2_tp2_sgd_clip`` rank 2: the pass's ``coalesce_tensor`` reads
``layer_norm_0.b_0`` instead of ``linear_0.b_0@GRAD`` in ``Input``) is an
equivalent mutant: phi's ``coalesce_tensor`` kernel without ``copy_data``
reads its inputs' dims only (it sizes the fused buffer and copies nothing),
and Paddle's executor computes the same with either input.  Two mechanisms
follow from the kernel:

* the value row reads what the kernel reads: with ``copy_data`` the view
  ``Output[i]`` gets ``Input[i]``'s value (the model kept the view's own
  value, so a pass copying the wrong tensor in was proved EQUIVALENT);
* the mutation operators take no site at a read no kernel uses for values
  (``coalesce_tensor``'s ``Input`` without ``copy_data``, ``nop``'s inputs,
  ``layer_norm_grad``'s ``Bias``, and its ``Scale`` when it writes no
  ``X@GRAD``).

Each program here is run by Paddle's executor too: the model and the
operator's choice are checked against what Paddle computes.
"""
from __future__ import annotations

import numpy as np

from verify.ir import legacy_ir  # noqa: F401  (before paddle)
from verify.ir.snapshot import from_programs
from verify.value.proof import prove_application
from verify.verdicts import Verdict

X = np.arange(6, dtype="float32").reshape(2, 3) / 4 - 0.5
Y = np.array([1.5, -2.0, 0.25, 3.0], dtype="float32")


def _program(inputs, copy_data):
    """c = 5x, a = 2x, b = y + 1, then ``coalesce_tensor(Input=inputs,
    Output=[a, b])`` into ``fused`` (after the producers when ``copy_data``,
    before a's and b's producers otherwise, as the data-parallel pass puts
    it), then ``fused`` scaled by 3 in place."""
    paddle = legacy_ir.paddle_module()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle.static.data("y", [4], "float32")
        blk = main.global_block()
        v = {n: blk.create_var(name=n, shape=s, dtype="float32")
             for n, s in (("a", [2, 3]), ("b", [4]), ("c", [2, 3]))}
        fused = blk.create_var(name="fused", dtype="float32")
        coalesce = dict(type="coalesce_tensor", inputs={"Input": [v[n] for n in inputs]},
                        outputs={"Output": [v["a"], v["b"]], "FusedOutput": [fused]},
                        attrs={"copy_data": copy_data, "use_align": True,
                               "dtype": fused.dtype, "concated_shapes": [2, 3, 4],
                               "concated_ranks": [2, 1]})
        blk.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [v["c"]]},
                      attrs={"scale": 5.0})
        if not copy_data:
            blk.append_op(**coalesce)
        blk.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [v["a"]]},
                      attrs={"scale": 2.0})
        blk.append_op(type="scale", inputs={"X": [y]}, outputs={"Out": [v["b"]]},
                      attrs={"scale": 1.0, "bias": 1.0})
        if copy_data:
            blk.append_op(**coalesce)
        blk.append_op(type="scale", inputs={"X": [fused]}, outputs={"Out": [fused]},
                      attrs={"scale": 3.0})
    return paddle, main, startup


def _by_paddle(paddle, main, startup):
    from tests.test_value_views import _by_paddle as run

    return run(paddle, main, startup, X, Y)


def _prove(before, after):
    return prove_application("coalesce", [0], {}, {0: from_programs(*before[1:])},
                             {0: from_programs(*after[1:])}, {0: ["a", "b"]},
                             feed_key=lambda r, n: "dp0", sizes=(None,))[0]


def test_copy_data_of_a_sibling_input_is_refuted_naming_the_view():
    """copy_data with ``Input`` c where the view is a: Paddle copies c (15x
    after the scale, not 6x), and the value proof refutes it, naming the
    view a; the twin with ``Input`` a is proved."""
    original, sibling = _program(["a", "b"], True), _program(["c", "b"], True)
    a0, b0 = _by_paddle(*original)
    a1, b1 = _by_paddle(*sibling)
    np.testing.assert_allclose(a0, 6 * X, rtol=1e-6)
    np.testing.assert_allclose(a1, 15 * X, rtol=1e-6)  # the kernel copies Input, not Output
    np.testing.assert_allclose(b1, b0)

    res = _prove(original, sibling)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == "a", res.counterexample
    assert res.counterexample["rank"] == 0

    same = _prove(original, _program(["a", "b"], True))
    assert same.verdict == Verdict.EQUIVALENT, same.message


def test_without_copy_data_a_sibling_input_computes_the_same():
    """No copy_data: the kernel reads ``Input``'s dims only; Paddle computes
    the same with c as with a, and the proof agrees (no false alarm)."""
    original, sibling = _program(["a", "b"], False), _program(["c", "b"], False)
    for got, want in zip(_by_paddle(*sibling), _by_paddle(*original)):
        np.testing.assert_array_equal(got, want)
    res = _prove(original, sibling)
    assert res.verdict == Verdict.EQUIVALENT, res.message


def test_no_mutation_site_where_no_kernel_reads_the_value():
    """On the data-parallel pass's program (``engine_dp2_tp2_sgd_clip``
    rank 2): the coalesce_tensor's ``Input`` (copy_data=False), the nops'
    inputs, layer_norm_grad's ``Bias`` and (no ``X@GRAD``) its ``Scale``
    are no value reads, so no in-region operator takes them as a site."""
    import cases
    import passes
    from verify.engine.isolation import run_pass
    from verify.selfcheck import program_mutants as pm

    adapter = passes.get("dp_opt")
    case = cases.all_cases()["engine_dp2_tp2_sgd_clip"]
    run = run_pass(adapter, case, 2)
    assert not run.error, run.error
    before, after = pm.snapshots(run, case, 2)
    reg = pm.region(before, after)
    # (this layer_norm_grad writes no X@GRAD: x is fed, so its Scale is not read)
    skipped = {("coalesce_tensor", "Input"), ("nop", "X"), ("layer_norm_grad", "Bias"),
               ("layer_norm_grad", "Scale")}
    seen = set()
    for i in reg.sites():
        op = after.ops[i]
        for slot in op.inputs:
            if (op.type, slot) in skipped:
                seen.add((op.type, slot))
                assert not pm.reads_value(op, slot), (op.idx, op.type, slot)
    assert seen == skipped, seen  # the region holds every one of them
    for rank in case.ranks:
        plan = pm.sibling_operand.plan(before, after, rank)
        assert plan is not None
        op = after.ops[plan.mutation.site["op_index"]]
        assert (op.type, plan.mutation.site["slot"]) not in skipped, plan.mutation.description
    # the scale operators' sites need a value reader after them: not a nop
    for op, var, _, readers in pm._tensor_sites(after, reg):
        assert any(pm.reads_value(o, s) for o, s in pm._readers(after, var, op.idx)), var


def test_reads_value_follows_copy_data():
    """The coalesce row's read set depends on its attrs, as the kernel's."""
    from verify.ir.snapshot import Op
    from verify.selfcheck import program_mutants as pm

    def co(copy):
        return Op(0, "coalesce_tensor", {"Input": ["g"]},
                  {"Output": ["g"], "FusedOutput": ["f"]}, {"copy_data": copy})
    assert pm.reads_value(co(True), "Input")
    assert not pm.reads_value(co(False), "Input")
    assert not pm.reads_value(Op(0, "nop", {"X": ["g"]}, {"Out": ["f"]}, {}), "X")
    # layer_norm_grad reads the scale for X@GRAD only (phi's CPU kernel)
    ln = Op(0, "layer_norm_grad", {"Scale": ["s"], "Bias": ["b"]},
            {"X@GRAD": ["dx"], "Scale@GRAD": ["ds"]}, {})
    assert pm.reads_value(ln, "Scale") and not pm.reads_value(ln, "Bias")
    ln.outputs = {"Scale@GRAD": ["ds"], "Bias@GRAD": ["db"]}
    assert not pm.reads_value(ln, "Scale")


def test_the_sibling_mutant_now_chosen_on_that_rank_is_killed_and_the_pass_is_not():
    """The sibling operand the operator now picks on ``engine_dp2_tp2_sgd_clip``
    rank 2 reads a value: the application is killed by the value proof with a
    counterexample on rank 2; the unmutated pass stays EQUIVALENT."""
    import cases
    import passes
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend
    from verify.selfcheck import program_mutants as pm

    adapter = passes.get("dp_opt")
    case = cases.all_cases()["engine_dp2_tp2_sgd_clip"]
    numeric = pick_backend("none")[1]
    assert run_application(adapter, case, numeric=numeric).verdict == Verdict.EQUIVALENT
    mutator = pm.prepare(pm.sibling_operand, adapter, case, 2)
    assert mutator is not None
    app = run_application(adapter, case, numeric=numeric, mutator=(2, mutator))
    assert app.mutation is not None and mutator.replays and all(mutator.replays)
    assert app.verdict == Verdict.NOT_EQUIVALENT, mutator.mutation.description
    killed = [c for c in app.checks if c.kind == "value" and c.rank == 2
              and c.verdict == Verdict.NOT_EQUIVALENT]
    assert killed, [(c.kind, c.rank, c.verdict.value, c.message[:120]) for c in app.checks]
    cex = killed[0].counterexample
    assert cex["rank"] == 2 and cex["var"], cex
