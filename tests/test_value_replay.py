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


def _cancelling_pair(extra):
    """Terms A = cut(C s + 1) - C s and B = 1 + ``extra``, s = sqrt(x) a
    float64 kernel, C = 2^60: mathematically A = 1, but the float64 replay
    loses the 1 in C s + 1 (its ulp is 256), a cancellation past REL_TOL."""
    from verify.value.symbolic import Store

    store = Store()
    s = store.uf("sqrt", [store.sym("x", "float32")])
    big = store.mul(store.const(2 ** 60), s)
    a = store.add(store.cut(store.add(big, store.const(1))), big, sign=-1)
    return store, a, store.const(1 + extra)


def _replayed_difference(store, a, b):
    from verify.value.proof import _replay, _replay_evaluator

    ev = _replay_evaluator(store, lambda name: Fraction(2))
    return _replay(store, ev, [(0, a, b)])


def test_a_cancelled_float64_rounding_is_not_a_refutation():
    # the replay's values differ by 1 (beyond REL_TOL of max(1, |a|, |b|)),
    # all of it the rounding of a sum of terms 2^60 large
    store, a, b = _cancelling_pair(0)
    assert _replayed_difference(store, a, b) is None


def test_a_real_difference_beside_a_float64_kernel_is_still_one():
    # the same terms, B off by 2^24: far past what the roundings can reach
    store, a, b = _cancelling_pair(2 ** 24)
    hit = _replayed_difference(store, a, b)
    assert hit is not None and hit[0] == 0
