"""A plan made with gradient merge averaged (``avg``) and Momentum
(``planner_gm_momentum``): each optimizer reads its accumulator by its
keyword (the planner records the gradient as ``<param>@GRAD@MERGE``, a
keyword block argument, with the placement recorded by its name before
dist2dense), and the 1/k scale is an in-place
``scale_`` of that accumulator, so what the optimizer reads is decided by
where the scale runs, not by the operand's name.

3.3.1's pass puts the scale after the optimizer: refuted by the value proof
(the gradients the optimizer reads, twice the serial mean, and every update
after them) and by the numeric relation (the gradient, twice the serial
mean).  With the scale loop mended (``tests/planner_mutant_edits.py``
``gm_scale_mended``, a test-time edit through ``--paddle-file``'s overlay)
the scale runs before the optimizer: the value proof proves the plan,
gradients included, and the numeric relation relates it.  Before the
relation read the gradient as the optimizer reads it (``inplace.grads_read``),
the mended plan was falsely refuted by the numeric relation (it read the
accumulator unscaled from the scope) and left unproved by the value proof.
"""
from __future__ import annotations

from tests.test_planner import _apply
from verify.verdicts import Verdict

CASE = "planner_gm_momentum"


def _checks(app, name):
    return [c for c in app.checks if c.name == name]


def test_the_scale_after_the_optimizer_is_refuted():
    app = _apply(CASE)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (proof,) = _checks(app, "planner relation proof")
    assert proof.verdict == Verdict.NOT_EQUIVALENT, proof.message
    refuted = proof.details["refuted"]
    assert any("@GRAD" in lb for lb in refuted), refuted
    assert all("@GRAD" in lb or lb.endswith("(after the step)") for lb in refuted), refuted
    cx = proof.counterexample
    assert cx["replayed"] and cx["var"].endswith("@GRAD"), cx
    # the rank's gradient is the sum of the 2 micro-steps' where the serial is their mean
    from fractions import Fraction
    assert Fraction(cx["rewritten_value"]) == 2 * Fraction(cx["original_value"]), cx
    (num,) = _checks(app, "planner relation")
    assert num.verdict == Verdict.NOT_EQUIVALENT, num.message
    cex = num.counterexample
    assert cex["value"].endswith("@GRAD") and cex["step"] == 0, cex
    assert abs(cex["rank_piece"] - 2 * cex["serial"]) <= 1e-5 * abs(cex["rank_piece"]), cex


def test_the_scale_before_the_optimizer_is_proved(monkeypatch):
    import json

    import cases
    from passes.planner import planner_dir

    app = _apply(CASE, ["gm_scale_mended"], monkeypatch)
    case = cases.all_cases()[CASE]
    rec = json.loads((planner_dir(case) / "rank0" / "planner.json").read_text())
    # the planner's record names each gradient by the accumulator's keyword
    assert all(p["grad"].endswith("@GRAD@MERGE") and p["grad_placement"] is not None
               for p in rec["relation"]["params"].values()), rec["relation"]["params"]
    (proof,) = _checks(app, "planner relation proof")
    assert proof.verdict == Verdict.EQUIVALENT, proof.message
    assert "4 gradients the optimizer reads (the mean" in proof.message
    (num,) = _checks(app, "planner relation")
    assert num.verdict == Verdict.EQUIVALENT, num.message
    assert app.verdict == Verdict.EQUIVALENT
