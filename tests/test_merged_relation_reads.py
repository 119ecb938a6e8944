"""The merged-schedule relation proof (``verify/value/merged_relation.py``)
fed relation tables as the planner records them (``verify/plan/stages.py``
``relation_table``): an optimizer's gradient by its literal operand, a merge's
accumulator by its keyword (``w@GRAD@MERGE``), whatever the optimize job
writes into that buffer before the optimizer reads it.

With ``avg`` and an optimizer the installed pass does not recognise
(Momentum), the 1/k ``scale_`` is an in-place write of the accumulator; the
optimizer's operand stays the keyword argument.  The proof must compare the
value the optimizer reads (``inplace.read_by``): a merge whose scale comes
before the optimizer (``tests/fixed_passes/gradient_merge_scale_mended.py``)
is proved, its twins with the scale after the optimizer (3.3.1's defect) or
with no scale at all are refuted with a counterexample naming the gradient,
the rank's value k times the serial mean.
"""
from __future__ import annotations

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

from fractions import Fraction  # noqa: E402

import cases  # noqa: E402
import passes  # noqa: E402
from verify.ir.inplace import grads_read  # noqa: E402
from verify.value import merged_application as ma  # noqa: E402
from verify.value.merged_relation import prove_merged_relation  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402

CASE = "pir_gm_momentum_avg_k2"
MENDED = "tests/fixed_passes/gradient_merge_scale_mended.py"


def _merged(pass_file=None):
    """``(case, original snapshot, merged snapshot, {param: grad as the
    planner records it}, loss)`` of the gradient merge pass on ``CASE``."""
    import paddle

    from verify.ir.pass_files import load_pass_file
    from verify.ir.pir_snapshot import snapshot_rank
    from verify.plan.stages import relation_table

    case = cases.all_cases()[CASE]
    loaded = load_pass_file(pass_file) if pass_file else None
    try:
        run = passes.get("grad_merge").apply_local(case, 0)
    finally:
        if loaded is not None:
            loaded.restore()
    assert not run.error
    before, after = snapshot_rank(run.original), snapshot_rank(run.rewritten)
    with paddle.pir_utils.IrGuard():  # the planner's own record of the merged program
        recorded = relation_table(run.rewritten.main, run.rewritten.names)
    grads = {p: v["grad"] for p, v in recorded["params"].items()}
    return case, before, after, grads, run.original.loss


def _prove(before, after, grads, case, loss):
    """The proof on tables at B = 1, the rank's gradients named as recorded."""
    symbols = dict(case.symbols)
    syms = ma._size_symbols([before, after], symbols)
    inst = {s: 1 for s in syms}
    serial_rel = ma.relation_table(before, loss, 0, inst, symbols)
    rank_rel = ma.relation_table(after, loss, 0, inst, symbols)
    for p, g in grads.items():
        rank_rel["params"][p] = {**rank_rel["params"][p], "grad": g}
    (c,) = prove_merged_relation("merged relation on " + CASE, before, {0: after}, serial_rel,
                                 {0: rank_rel}, {0: ma.final_ops(before, after, "gm")}, {},
                                 case.params["k"], case.params["avg"], sizes=inst,
                                 symbols=symbols)
    return c


def _refuted_by_k(c, k):
    assert c.verdict == Verdict.NOT_EQUIVALENT, c.message
    cex = c.counterexample
    assert cex["value"] in ("w@GRAD", "b@GRAD") and cex["replayed"], cex
    assert Fraction(cex["rank_piece_value"]) == k * Fraction(cex["serial_value"]), cex


def test_an_accumulator_scaled_in_place_before_the_optimizer_is_proved():
    case, before, after, grads, loss = _merged(MENDED)
    # the planner names the gradient by the accumulator's keyword ...
    assert grads == {"w": "w@GRAD@MERGE", "b": "b@GRAD@MERGE"}
    # ... which the optimizer reads after the optimize job's scale_ wrote it
    scaled = {o.outputs["out"][0] for o in after.ops if o.type == "pd_op.scale_"}
    assert grads_read(after)["w@GRAD@MERGE"] in scaled
    c = _prove(before, after, grads, case, loss)
    assert c.verdict == Verdict.EQUIVALENT, c.message
    assert {"w@GRAD", "b@GRAD"} <= set(c.details["proved"])
    assert "the mean of the serial micro-step gradients" in c.message


def test_the_scale_after_the_optimizer_is_refuted():
    """3.3.1's defect: the optimizer reads the raw sum (k times the mean)."""
    case, before, after, grads, loss = _merged()
    assert grads == {"w": "w@GRAD@MERGE", "b": "b@GRAD@MERGE"}
    _refuted_by_k(_prove(before, after, grads, case, loss), case.params["k"])


def test_the_scale_dropped_is_refuted():
    """The mended merge with its scale_ ops removed: the optimizer reads the
    accumulator as the accumulate job left it."""
    case, before, after, grads, loss = _merged(MENDED)
    after = after.with_ops([o for o in after.ops if o.type != "pd_op.scale_"])
    _refuted_by_k(_prove(before, after, grads, case, loss), case.params["k"])
