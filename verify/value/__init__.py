"""Value proofs: original and rewritten programs of all ranks compute the
same values for ALL inputs (Z3), or a confirmed counterexample, or
INCONCLUSIVE.  ``semantics`` (the op table), ``symbolic`` (execution into
hash-consed terms on reduced shapes), ``proof`` (the check)."""
from .proof import default_watch, prove_application  # noqa: F401
