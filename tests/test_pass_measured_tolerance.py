"""The PIR passes' own numeric check (``pir_runner.pir_numeric_checks``:
original vs rewritten program) takes the tolerance floor measured by the
ORIGINAL program's float64 run, as the planner relation does
(``tests/test_measured_tolerance.py``, ``compare.py``).

The original computes ``y = ((x + C) + u) - C``: the ``C`` terms cancel,
and ``y`` keeps the float32 roundings of the two sums at 1000 (ulp(1000)/2 =
3e-5 each), far above the RMS floor (``rtol * rms(y)`` ~ 5e-6 at this depth:
``rtol`` = 16 eps sqrt(3 steps) = 3.3e-6).  A rewrite to ``x + u``
(the reassociation a pass may make) is the same function: the RMS floor
alone refuted it; the measured one (8 times the original's largest float32
error of ``y``) accepts it, and still refutes ``y`` 1% off, 2x off, or
with the addend ``u`` dropped.  A value that is rounding noise in the
original (``(x * 1e-4 + C) - C``: multiples of ulp(1000)) decides nothing:
INCONCLUSIVE; a rewrite that zeroes it is never EQUIVALENT.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

C = 1000.0
SHAPE = (4, 16)


def _rank_program(form: str):
    """A one-rank PIR RankProgram fetching ``y`` computed as ``form`` says."""
    import paddle

    from cases.base import FeedSpec
    from cases.pir_matmul_grad import PirRankProgram
    from verify.ir.pir_snapshot import value_names

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", list(SHAPE), "float32")
            u = paddle.static.data("u", list(SHAPE), "float32")
            c = paddle.full(list(SHAPE), C, "float32")
            y = {"cancelled": lambda: ((x + c) + u) - c,
                 "reassociated": lambda: x + u,
                 "1% off": lambda: (x + u) * 1.01,
                 "2x off": lambda: (x + u) * 2.0,
                 "addend dropped": lambda: (x + c) - c,
                 "noise": lambda: (x * 1e-4 + c) - c,
                 "small": lambda: x * 1e-4,
                 "zeroed": lambda: x * 0.0}[form]()
        names = value_names(main)
        return PirRankProgram(rank=0, main=main, startup=startup, dist_context=None,
                              params_grads=[], feeds=[FeedSpec("x", SHAPE), FeedSpec("u", SHAPE)],
                              loss=None, fetches=[names.name(y)], names=names)


def _check(original: str, rewritten: str):
    """The numeric check of one rank, ``original`` rewritten to ``rewritten``;
    the rewritten ``y`` is declared the original's under its own name."""
    from cases.pir_matmul_grad import PirCase
    from verify.ir.pir_snapshot import snapshot_rank
    from verify.numeric import run_memo
    from verify.numeric.pir_runner import pir_numeric_checks

    ro, rr = _rank_program(original), _rank_program(rewritten)
    case = PirCase(name="measured_floor_test", family="test", summary="", mesh=[0],
                   builder=None, expect={}, ir="pir")
    outcome = SimpleNamespace(rank=0, run=SimpleNamespace(original=ro, rewritten=rr),
                              before=snapshot_rank(ro), after=snapshot_rank(rr))
    adapter = SimpleNamespace(renames=lambda case, rank, before, after:
                              {ro.fetches[0]: rr.fetches[0]})
    run_memo.clear()
    (got,) = pir_numeric_checks(case, [outcome], adapter=adapter)
    return got


def test_the_cancelled_sum_exceeds_the_rms_floor_and_is_within_the_measured_one():
    from verify.numeric.compare import MEASURED_SAFETY
    from verify.verdicts import Verdict

    got = _check("cancelled", "reassociated")
    assert got.verdict == Verdict.EQUIVALENT, got.message
    assert "3 with the original's float32 error measured" in got.message, got.message
    # the difference accepted is the original's own rounding, beyond the RMS
    # floor (rtol * |y| + rtol * rms(y) < 2e-5 for every |y| < 4)
    err = float(got.message.split("largest abs err ")[1].split()[0])
    tol = float(got.message.split("(tol ")[1].split(")")[0])
    assert 2e-5 < err <= tol <= MEASURED_SAFETY * 2 * 3.1e-5 + 1e-4, got.message


@pytest.mark.parametrize("defect", ["1% off", "2x off", "addend dropped"])
def test_a_real_defect_of_the_cancelled_sum_is_still_refuted(defect):
    from verify.verdicts import Verdict

    got = _check("cancelled", defect)
    assert got.verdict == Verdict.NOT_EQUIVALENT, got.message
    assert got.counterexample["abs_err"] > got.counterexample["tol"]


def test_a_value_that_is_rounding_noise_in_the_original_decides_nothing():
    from verify.verdicts import Verdict

    got = _check("noise", "small")
    assert got.verdict == Verdict.INCONCLUSIVE, got.message
    assert "rounding noise" in got.message
    # zeroed: refuted where an element exceeds the floor, else undecided; never EQUIVALENT
    assert _check("noise", "zeroed").verdict != Verdict.EQUIVALENT
