"""Dtype-aware comparison of two runs of one rank.

The tolerance is per element and derived, not picked.  A float sum of n
terms accumulates about ``sqrt(n)`` rounding errors of ``eps * |term|``
each when errors are random (Higham's probabilistic bound).  So element i
of a tensor may differ by

    tol_i = rtol * |ref_i| + atol,   rtol = SAFETY * eps(dtype) * sqrt(depth)
                                      atol = rtol * rms(ref)

where ``depth`` is the program's reduction depth (the largest matmul
contraction dim times the largest collective group, times the steps run:
errors of one step feed the next) and ``SAFETY`` covers the few dependent
roundings random-error bounds ignore.  The absolute floor ``atol`` is the
noise of a reduction whose terms have the tensor's own typical magnitude
(its RMS): an element that cancels to near zero still carries the rounding
of the terms that cancelled, which a purely relative bound would call a
difference.  It scales with the tensor, never with 1, so a small tensor
(an fp16 gradient of 0.03) cannot pass zeroed, halved or sign-flipped: that
changes elements by their own size, far above ``rtol`` of it.  An all-zero
reference gets ``TINY`` (the dtype's smallest normal) as floor.

The tensor's RMS is the magnitude of the *result*; where terms cancel
(a saturated softmax's backward makes a gradient 10^-9 of its neighbours,
from terms of the neighbours' size) the rounding error is that of the terms,
orders of magnitude above ``rtol * rms``.  So when the reference program
was also run in float64 (``float64_reference.py``: ``measured``, the same
value with roundings 2^29 times smaller), the floor is at least

    MEASURED_SAFETY * max_j |ref_j - measured_j|

the reference run's own largest float32 error of this tensor, measured.
The candidate is another float32 computation of the same sums (reordered,
split over ranks and summed by a collective): |cand - ref| <= |e_ref| +
|e_cand|, and ``MEASURED_SAFETY`` = 8 lets ``e_cand`` be up to 7 times the
largest error the reference made (|cand - ref| was at most 4.1 times the
largest measured error in 1576 gradient and parameter comparisons of 18
plans, 3 steps: planner_tp2, _dp2_tp2, _dp2, _tp2_ids23, _sub_mesh_ids23,
_gen_cross_p_to_r, _tp2_clip, _shard_opt_dp2, _c_embedding_tp2,
_tp2_recompute, zoo_llama_tp2, zoo_gemma3_tp2, zoo_phi3_tp2,
zoo_ernie4_5_tp2, generated plans 0165, 0182, 0002, 0003).
A defect is still caught where it moves an element by more
than 8 times what float32 rounding moved any element of the tensor; where
even that cannot halve or zero the tensor unseen (the floor reaches half
the tensor's largest magnitude: the float32 value is rounding noise), the
comparison is not ``resolved``: it decides nothing (its caller's verdict
is INCONCLUSIVE for it, never EQUIVALENT).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

EPS = {"float16": 9.77e-4, "bfloat16": 7.82e-3, "float32": 1.19e-7, "float64": 2.22e-16}
TINY = {"float16": 6.1e-5, "bfloat16": 1.18e-38, "float32": 1.18e-38, "float64": 2.23e-308}
SAFETY = 16.0
MEASURED_SAFETY = 8.0  # see the module docstring


@dataclass
class TensorDiff:
    name: str
    step: int
    dtype: str
    shape: list
    max_abs: float
    max_rel: float
    worst_index: list
    reference: float
    candidate: float
    tol: float
    bitwise: bool
    ok: bool
    note: str = ""
    # False: the measured float32 error of the reference is so large that
    # no halving or zeroing of it could be seen (the module docstring)
    resolved: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def rtol(dtype: str, depth: int) -> float:
    """The relative part of the tolerance (see the module docstring)."""
    return SAFETY * EPS.get(dtype, EPS["float32"]) * float(np.sqrt(max(depth, 1)))


def measured_floor(ref, measured) -> float:
    """``MEASURED_SAFETY`` times the largest float32 rounding error of ``ref``
    that its float64 run ``measured`` shows (0 without one)."""
    if measured is None:
        return 0.0
    r = np.asarray(ref, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    if m.shape != r.shape or not r.size:
        return 0.0
    err = np.abs(r - m)
    err = err[np.isfinite(err)]
    return MEASURED_SAFETY * float(err.max()) if err.size else 0.0


def tolerance(dtype: str, depth: int, ref, measured=None):
    """Per-element tolerance array for ``ref``; ``measured``: the same value
    computed in float64 (see the module docstring)."""
    r = np.abs(np.asarray(ref, dtype=np.float64))
    rt = rtol(dtype, depth)
    rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
    atol = max(rt * rms, TINY.get(dtype, TINY["float32"]), measured_floor(ref, measured))
    return rt * r + atol


def compare(name, step, ref, cand, depth, note="", measured=None) -> TensorDiff:
    """Compare ``cand`` against ``ref`` (numpy arrays); ``measured``: ``ref``'s
    float64 run, when there is one (see the module docstring)."""
    dtype = str(ref.dtype)
    if ref.dtype != cand.dtype:
        return TensorDiff(name, step, dtype, list(ref.shape), float("inf"), float("inf"), [],
                          0.0, 0.0, 0.0, False, False,
                          f"dtype {cand.dtype} differs from {ref.dtype}")
    if ref.shape != cand.shape:
        return TensorDiff(name, step, dtype, list(ref.shape), float("inf"), float("inf"), [],
                          0.0, 0.0, 0.0, False, False,
                          f"shape {list(cand.shape)} differs from {list(ref.shape)}")
    r = ref.astype(np.float64)
    c = cand.astype(np.float64)
    bitwise = bool(np.array_equal(ref, cand, equal_nan=True))
    diff = np.abs(r - c)
    nan_mismatch = np.isnan(r) != np.isnan(c)
    if nan_mismatch.any():
        diff = np.where(nan_mismatch, np.inf, diff)
    diff = np.nan_to_num(diff, nan=0.0)
    if diff.size == 0:
        return TensorDiff(name, step, dtype, list(ref.shape), 0.0, 0.0, [], 0.0, 0.0, 0.0,
                          True, True, note)
    tol = tolerance(dtype, depth, r, measured)
    floor = measured_floor(r, measured)
    resolved = not floor or floor < 0.5 * float(np.nanmax(np.abs(r)))
    excess = diff / tol  # > 1 where an element is out of tolerance
    flat = int(np.argmax(excess))  # the worst element relative to its own bound
    idx = [int(i) for i in np.unravel_index(flat, diff.shape)] if diff.ndim else []
    rel = diff / np.maximum(np.abs(r), 1e-30)
    ok = bool(np.all(diff <= tol))
    return TensorDiff(name, step, dtype, list(ref.shape), float(diff.reshape(-1)[flat]),
                      float(np.max(np.where(diff > 0, rel, 0.0))), idx,
                      float(r.reshape(-1)[flat]), float(c.reshape(-1)[flat]),
                      float(tol.reshape(-1)[flat]), bitwise, bitwise or ok, note,
                      resolved or bitwise)
