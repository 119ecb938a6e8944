"""A refutation must not rest on the rounding of a float64 replay kernel:
mathematically equal values whose replay passed through one (a sqrt of sums
associated differently) are not a counterexample; a real difference still is."""
from fractions import Fraction

from verify.value.proof import REL_TOL, differ


def test_a_float64_rounding_difference_is_not_a_refutation():
    a = Fraction(653514185854352713483, 5187212337467903065456640)
    b = Fraction(653514185854352713483, 5187212337467903736545280)  # 1.3e-16 apart
    assert differ(a, b)  # exactly, they differ
    assert not differ(a, b, inexact=True)  # through a float64 kernel: rounding only


def test_a_real_difference_through_a_float64_kernel_is_still_one():
    a = Fraction(1, 3)
    assert differ(a, a * (1 + 100 * Fraction(REL_TOL)), inexact=True)
    assert differ(0.5, 0.25)
