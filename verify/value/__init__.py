"""Value proofs: original and rewritten programs of all ranks compute the
same values for ALL inputs at their real shapes (canonical forms, Z3), or a
counterexample replayed through the real kernels, or INCONCLUSIVE.
``semantics`` (the op table), ``symbolic`` (execution into hash-consed
terms at the real shapes, -1 dims at given sizes), ``kernels`` (the real
kernels a refutation is replayed with), ``proof`` (the check)."""
from .proof import default_watch, prove_application  # noqa: F401
