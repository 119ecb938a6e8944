"""Dtype-aware comparison of two runs of one rank.

The tolerance of a tensor is derived, not picked: a float sum of n terms
accumulates at most about ``sqrt(n)`` rounding errors of ``eps * |value|``
each when errors are random (Higham's probabilistic bound), so

    tol = SAFETY * eps(dtype) * sqrt(depth) * max(1, max|reference|)

where ``depth`` is the program's reduction depth: the largest matmul
contraction dim times the largest collective group, times the steps run
(errors of one step feed the next).  ``SAFETY`` covers the few dependent
roundings random-error bounds ignore.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

EPS = {"float16": 9.77e-4, "bfloat16": 7.82e-3, "float32": 1.19e-7, "float64": 2.22e-16}
SAFETY = 16.0


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

    def to_dict(self) -> dict:
        return asdict(self)


def tolerance(dtype: str, depth: int, ref) -> float:
    eps = EPS.get(dtype, EPS["float32"])
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    return SAFETY * eps * float(np.sqrt(max(depth, 1))) * scale


def compare(name, step, ref, cand, depth, note="") -> TensorDiff:
    """Compare ``cand`` against ``ref`` (numpy arrays)."""
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
    flat = int(np.argmax(diff))
    idx = [int(i) for i in np.unravel_index(flat, diff.shape)] if diff.ndim else []
    rel = diff / np.maximum(np.abs(r), 1e-30)
    tol = tolerance(dtype, depth, ref)
    max_abs = float(diff.reshape(-1)[flat])
    return TensorDiff(name, step, dtype, list(ref.shape), max_abs,
                      float(np.max(np.where(diff > 0, rel, 0.0))), idx,
                      float(r.reshape(-1)[flat]), float(c.reshape(-1)[flat]), tol,
                      bitwise, bitwise or max_abs <= tol, note)
