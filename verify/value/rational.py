"""The exact rational type of the value proof's coefficients and probes.

``Q`` is GMP's rational (``gmpy2.mpq``) where gmpy2 is installed (a
dependency, see pyproject.toml), else Python's ``fractions.Fraction``.  Both
are exact: the same numbers, the same equalities, the same hashes (gmpy2
follows Python's numeric hash, so ``mpq(1, 2)`` and ``Fraction(1, 2)`` are
one dict key and equal tuples of them hash alike), so canonical forms,
proofs and refutations do not depend on which one runs; ``mpq`` multiplies,
adds and hashes about ten times faster (measured: 0.27 against 3.3 us a
product, 0.12 against 1.3 us a hash), and interning polynomials hashes
every coefficient (benchmarks/README.md, issue 19's speed part).
"""
from __future__ import annotations

import numbers
from fractions import Fraction

try:  # GMP's rationals, exact like Fraction and ~10x faster
    from gmpy2 import denom, numer
    from gmpy2 import mpq as Q
    FAST = True
except ImportError:  # pragma: no cover - the dependency is declared
    Q = Fraction
    FAST = False

    def numer(q):
        return q.numerator

    def denom(q):
        return q.denominator

__all__ = ["Q", "FAST", "denom", "is_exact", "numer", "to_q", "to_fraction"]


def to_q(v):
    """``v`` (int, float, Fraction, mpq, a numpy integer) exactly as a ``Q``."""
    if v.__class__ is Q:
        return v
    if isinstance(v, numbers.Rational):  # a Fraction may hold mpz parts (trunc of an mpq)
        return Q(int(v.numerator), int(v.denominator))
    if isinstance(v, numbers.Real):  # float, numpy floats: exactly their binary value
        return Q(float(v))
    return Q(v)


def is_exact(v) -> bool:
    """An exact rational (int, Fraction, mpq), not a float."""
    return isinstance(v, numbers.Rational)


def to_fraction(v) -> Fraction:
    """``v`` (int, Fraction, mpq) as a Fraction (reports, kernels)."""
    if isinstance(v, Fraction):
        return v
    return Fraction(int(v.numerator), int(v.denominator))
