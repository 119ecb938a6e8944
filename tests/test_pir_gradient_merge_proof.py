"""The value proof of the PIR gradient merge's own application
(``verify/value/merged_application.py``, called by
``passes/pir_gradient_merge.py``): the rewritten program run as the
Engine's job schedule ``[forward, backward] * k + [optimize]`` against the
original program's k micro-steps with the gradients merged, for all
parameters, states and micro-batches, at sampled micro-batch sizes.

The faithful merges (avg=False with SGD, Momentum, Adam, AdamW) are proved;
wrong merges are refuted with a counterexample naming the value, the
element and the op the pass made: the 1/k scale dropped (a mutant of the
pass), 3.3.1's Momentum avg=True defect (the scale after the optimizer), and
edits of a correct merge's program: the accumulator never zeroed (refuted
at the second optimizer step), the optimizer reading the last micro-step's
raw gradient, the average divided by the wrong k.  A merge whose startup
initialises a parameter differently is not proved (the relation starts both
from equal states).
"""
from __future__ import annotations

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

from fractions import Fraction  # noqa: E402

import pytest  # noqa: E402

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.ir.snapshot import Op  # noqa: E402
from verify.value.merged_application import prove_merged_application  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402

MUTANT = "tests/gm_mutants/gradient_merge_scale_dropped.py"
PASS = "auto_parallel_gradient_merge_pass"


def _value(app):
    (val,) = [c for c in app.checks if c.kind == "value"]
    return val


def _app(name, pass_file=None):
    from verify.ir.pass_files import load_pass_file

    loaded = load_pass_file(pass_file) if pass_file else None
    try:  # no numeric runs: the value proof is what is tested
        return run_application(passes.get("grad_merge"), cases.all_cases()[name])
    finally:
        if loaded is not None:
            loaded.restore()


@pytest.mark.parametrize("name", ["pir_gm_sgd_sum_k2", "pir_gm_momentum_sum_k2",
                                  "pir_gm_adam_sum_k4", "pir_gm_adamw_sum_k2"])
def test_a_faithful_merge_is_proved(name):
    app = _app(name)
    k = cases.all_cases()[name].params["k"]
    val = _value(app)
    assert app.verdict == Verdict.EQUIVALENT and val.verdict == Verdict.EQUIVALENT, val.message
    assert app.proof.startswith("proved at sizes B in"), app.proof
    assert not val.advisory and f"[forward, backward] * {k} + [optimize]" in val.message
    proved = val.details["proved"]
    assert {f"loss (micro-step {i + 1})" for i in range(k)} <= set(proved)
    assert {"w@GRAD", "b@GRAD"} <= set(proved)
    assert {f"{p}@GRAD@MERGE (rank-only state, back to its start value after the step)"
            for p in ("w", "b")} <= set(proved)
    assert val.details["sizes_proved"] and not val.details["unknown"]


def test_a_dropped_average_scale_is_refuted():
    """The pass with its 1/k scale dropped (avg=True, k=2): the optimizer
    reads twice the mean; the first divergence is an op the pass made."""
    app = _app("pir_gm_sgd_avg_k2", MUTANT)
    val = _value(app)
    assert app.verdict == Verdict.NOT_EQUIVALENT and val.verdict == Verdict.NOT_EQUIVALENT
    cex = val.counterexample
    assert cex["value"] in ("w@GRAD", "b@GRAD") and cex["replayed"], cex
    assert Fraction(cex["rank_piece_value"]) == 2 * Fraction(cex["serial_value"])
    assert cex["stage"] == PASS and cex["sizes"], cex


def test_the_momentum_average_scaled_after_the_update_is_refuted():
    """3.3.1's defect: Momentum with avg=True reads the raw sum (its 1/k
    scale_ ops come after the optimizer and the zeroing)."""
    app = _app("pir_gm_momentum_avg_k4")
    val = _value(app)
    assert val.verdict == Verdict.NOT_EQUIVALENT, val.message
    cex = val.counterexample
    assert cex["value"] in ("w@GRAD", "b@GRAD"), cex
    assert Fraction(cex["rank_piece_value"]) == 4 * Fraction(cex["serial_value"])


# -- edits of a correct merge's program (snapshots: one application, many proofs) --
def _programs(name):
    case = cases.all_cases()[name]
    run = passes.get("grad_merge").apply_local(case, 0)
    assert not run.error
    from verify.ir.pir_snapshot import snapshot_rank

    return case, run.original.loss, snapshot_rank(run.original), snapshot_rank(run.rewritten)


def _prove(name, edit=None):
    case, loss, before, after = _programs(name)
    if edit is not None:
        after = after.with_ops(edit(list(after.ops)))
    (c,) = prove_merged_application(f"{PASS} on {name}", 0, before, after, loss,
                                    case.params["k"], case.params["avg"],
                                    symbols=dict(case.symbols), pass_name=PASS)
    return c


def _never_zeroed(ops):
    return [o for o in ops if not (o.role == 2 and o.type == "pd_op.set_value_with_tensor_")]


def _raw_gradient(ops):
    """Each optimizer reads the gradient the backward just made (the
    accumulated value's addend), not the accumulator."""
    added = {o.inputs["x"][0]: o.inputs["y"][0] for o in ops if o.type == "pd_op.add_"}
    return [Op(o.idx, o.type, {**o.inputs, "grad": [added[o.inputs["grad"][0]]]}, o.outputs,
               o.attrs, o.role, o.stream) if o.type == "pd_op.sgd_" else o for o in ops]


def _divided_by(n):
    """The average's scale (and its constant operand) made 1/n."""
    def edit(ops):
        consts = {o.inputs["scale"][0] for o in ops if o.type == "pd_op.scale_" and o.role == 2}
        out = []
        for o in ops:
            if o.type == "pd_op.full" and o.outputs["out"][0] in consts:
                o = Op(o.idx, o.type, o.inputs, o.outputs, {**o.attrs, "value": 1 / n},
                       o.role, o.stream)
            elif o.type == "pd_op.scale_" and o.role == 2:
                o = Op(o.idx, o.type, o.inputs, o.outputs, {**o.attrs, "scale@value": 1 / n},
                       o.role, o.stream)
            out.append(o)
        return out
    return edit


def test_the_twin_programs_unedited_are_proved():
    for name in ("pir_gm_sgd_sum_k2", "pir_gm_sgd_avg_k2"):
        c = _prove(name)
        assert c.verdict == Verdict.EQUIVALENT, c.message
        assert "in program order" in c.message and c.details["sizes_proved"]


def test_an_accumulator_never_zeroed_is_refuted_at_the_second_step():
    c = _prove("pir_gm_sgd_sum_k2", _never_zeroed)
    assert c.verdict == Verdict.NOT_EQUIVALENT, c.message
    cex = c.counterexample
    assert "@GRAD" in cex["value"] and cex["value"].endswith("(step 2)"), cex
    assert any("@GRAD@MERGE" in lb for lb in c.details["rank_only_not_back"])


def test_an_optimizer_reading_the_raw_gradient_is_refuted():
    c = _prove("pir_gm_sgd_sum_k2", _raw_gradient)
    assert c.verdict == Verdict.NOT_EQUIVALENT, c.message
    assert c.counterexample["value"] in ("w@GRAD", "b@GRAD") and c.counterexample["replayed"]


def test_an_average_divided_by_the_wrong_k_is_refuted():
    c = _prove("pir_gm_sgd_avg_k2", _divided_by(4))  # k = 2 (1/4: exact in binary)
    assert c.verdict == Verdict.NOT_EQUIVALENT, c.message
    cex = c.counterexample
    assert cex["value"] in ("w@GRAD", "b@GRAD"), cex
    assert 4 * Fraction(cex["rank_piece_value"]) == 2 * Fraction(cex["serial_value"])


def test_a_changed_initialisation_is_not_proved():
    """The relation starts both programs from the same parameters and
    states: a merge whose startup widens w's draw
    (``tests/gm_mutants/gradient_merge_init_widened.py``) is not proved
    (INCONCLUSIVE, naming w; the numeric runs, which execute both startups,
    catch it: ``tests/test_pir_init_changes.py``); the faithful merge's
    startup keeps every initialisation (proved above)."""
    app = _app("pir_gm_sgd_sum_k2", "tests/gm_mutants/gradient_merge_init_widened.py")
    val = _value(app)
    assert val.verdict == Verdict.INCONCLUSIVE and val.advisory, val.message
    assert val.details["startup_differs"] == ["w"] and "initialises w differently" in \
        val.message
    assert app.proof != "proved" and not app.proof.startswith("proved")
