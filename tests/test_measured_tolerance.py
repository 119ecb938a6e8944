"""The planner relation's tolerance floor measured by the serial program's
float64 run (``verify/numeric/compare.py``, ``float64_reference.py``).

The claim: a float32 value's rounding error scales with the terms summed to
make it, not with the value; where terms cancel, ``rtol * rms(value)`` is
far below it (generated plans 0165 and 0182: a saturated softmax's q/k weight
gradients, 1e-9 of their neighbours, refuted at 20x the old floor).  The
floor ``MEASURED_SAFETY * max |x32 - x64|`` accepts that rounding, on
concrete values, and still refuses a 1% defect, a gradient 2x off, a dropped
partial addend and a wrong shard of the same tensor.
"""
from __future__ import annotations

import numpy as np
import pytest

from verify.numeric.compare import MEASURED_SAFETY, compare, tolerance

DEPTH = 64 * 2 * 3  # contraction 64, two ranks, three steps (planner_runs._depth)


def _cancelling_terms(seed=0, rows=8, n=64, left=1e-2):
    """float32 terms of size ~1 per row whose exact sum is ~``left``: the
    last term cancels the others (a softmax backward's ``p * (dp - sum)``)."""
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((rows, n)).astype(np.float32)
    rest = t[:, :-1].astype(np.float64).sum(axis=1)
    t[:, -1] = (-rest + left * rng.standard_normal(rows)).astype(np.float32)
    return t


def _sequential(t):
    """Row sums in float32, left to right (the serial program)."""
    acc = np.zeros(t.shape[0], np.float32)
    for j in range(t.shape[1]):
        acc = (acc + t[:, j]).astype(np.float32)
    return acc


def _split(t, parts=2):
    """Row sums as ``parts`` ranks compute them: each its half, reversed
    (another kernel order), then the collective's float32 sum."""
    pieces = []
    for p in np.array_split(np.arange(t.shape[1]), parts):
        acc = np.zeros(t.shape[0], np.float32)
        for j in reversed(p):
            acc = (acc + t[:, j]).astype(np.float32)
        pieces.append(acc)
    total = pieces[0]
    for p in pieces[1:]:
        total = (total + p).astype(np.float32)
    return total, pieces


def _runs():
    t = _cancelling_terms()
    ref = _sequential(t)
    cand, pieces = _split(t)
    exact = t.astype(np.float64).sum(axis=1)  # the float64 run of the same sums
    return ref, cand, pieces, exact


def test_cancelled_sum_rounding_exceeds_the_old_floor_and_is_within_the_measured_one():
    ref, cand, _, exact = _runs()
    diff = np.abs(ref.astype(np.float64) - cand)
    old = tolerance("float32", DEPTH, ref)
    assert (diff > old).any(), "the case must be one the RMS floor refuted"
    assert not compare("g", 0, ref, cand, DEPTH).ok
    new = compare("g", 0, ref, cand, DEPTH, measured=exact)
    assert new.ok and new.resolved, new
    # the measured floor: 8 times the serial run's largest float32 error
    err = np.abs(ref.astype(np.float64) - exact).max()
    assert new.tol >= MEASURED_SAFETY * err
    # and it is far below the values it protects (it resolves a 1% change)
    assert MEASURED_SAFETY * err < 0.01 * np.abs(ref).max()


@pytest.mark.parametrize("defect", ["1% off", "2x off", "dropped partial addend",
                                    "wrong shard", "sign flipped"])
def test_a_real_defect_of_the_cancelled_sum_is_still_caught(defect):
    ref, cand, pieces, exact = _runs()
    bad = {"1% off": cand * np.float32(1.01),
           "2x off": cand * np.float32(2),
           "dropped partial addend": pieces[0],
           "wrong shard": np.roll(cand, 1),
           "sign flipped": -cand}[defect].astype(np.float32)
    d = compare("g", 0, ref, bad, DEPTH, measured=exact)
    assert not d.ok, f"{defect} passed with tol {d.tol}"


def test_a_value_that_is_rounding_noise_is_not_resolved():
    """Terms cancelling exactly: the float32 value is rounding error alone;
    a tolerance covering that error covers zeroing it: not resolved."""
    t = _cancelling_terms(left=0.0)
    ref = _sequential(t)
    cand, _ = _split(t)
    d = compare("g", 0, ref, np.zeros_like(ref), DEPTH,
                measured=t.astype(np.float64).sum(axis=1))
    assert d.ok and not d.resolved, d
    assert compare("g", 0, ref, cand, DEPTH, measured=t.astype(np.float64).sum(axis=1)).ok


def test_without_a_measurement_the_tolerance_is_the_depth_derived_one():
    ref = _sequential(_cancelling_terms())
    assert np.array_equal(tolerance("float32", DEPTH, ref),
                          tolerance("float32", DEPTH, ref, None))
    assert np.array_equal(tolerance("float32", DEPTH, ref),
                          tolerance("float32", DEPTH, ref, ref.astype(np.float64)))


# -- the planner relation's comparison ---------------------------------------
REP = {"process_ids": [0, 1], "mesh_shape": [2], "dims_mapping": [-1], "partial": {}}
PARTIAL = {**REP, "partial": {"0": "SUM"}}


def _relation(grad_placement):
    serial_rel = {"loss": None, "params": {"w": {"param": "w", "grad": "g", "shape": [8]}}}
    rank_rels = {r: {"params": {"w": {"param": "w", "grad": "g", "placement": REP,
                                      "grad_placement": grad_placement}}} for r in (0, 1)}
    return serial_rel, rank_rels


def _compare(serial_g, exact, rank_g, placement=PARTIAL):
    from verify.numeric.float64_reference import SUFFIX
    from verify.numeric.planner_runs import compare_runs

    w = np.ones(8, np.float32)
    serial = [{"w": w, "g": serial_g, "w" + SUFFIX: w.astype(np.float64), "g" + SUFFIX: exact}]
    ranks = {r: [{"w": w, "g": rank_g[r]}] for r in (0, 1)}
    serial_rel, rank_rels = _relation(placement)
    return compare_runs("t", serial_rel, rank_rels, {}, serial, ranks, 1)


def test_relation_accepts_the_ranks_partial_sums_of_a_cancelled_gradient():
    """Each rank holds its addend (Partial(SUM)); their sum is the serial
    gradient's float32 rounding away: EQUIVALENT with the measurement,
    NOT_EQUIVALENT as it was without one."""
    ref, _, pieces, exact = _runs()
    got = _compare(ref, exact, {0: pieces[0], 1: pieces[1]})
    assert [c.verdict.value for c in got] == ["EQUIVALENT"] * 2, [c.message for c in got]
    assert got[0].details["measured"] == 2
    before = _compare(ref, ref.astype(np.float64), {0: pieces[0], 1: pieces[1]})
    assert [c.verdict.value for c in before] == ["NOT_EQUIVALENT"] * 2


@pytest.mark.parametrize("defect", ["dropped addend", "addend doubled", "1% off"])
def test_relation_refutes_a_defective_partial_gradient(defect):
    ref, _, pieces, exact = _runs()
    p1 = {"dropped addend": np.zeros_like(pieces[1]), "addend doubled": pieces[1] * 2,
          "1% off": (pieces[0] + pieces[1]) * np.float32(0.01) + pieces[1]}[defect]
    got = _compare(ref, exact, {0: pieces[0], 1: p1.astype(np.float32)})
    assert [c.verdict.value for c in got] == ["NOT_EQUIVALENT"] * 2, [c.message for c in got]
    assert got[0].counterexample["value"] == "w@GRAD"


def test_relation_of_a_gradient_that_is_rounding_noise_is_inconclusive():
    t = _cancelling_terms(left=0.0)
    ref = _sequential(t)
    got = _compare(ref, t.astype(np.float64).sum(axis=1),
                   {0: np.zeros_like(ref), 1: np.zeros_like(ref)})
    assert [c.verdict.value for c in got] == ["INCONCLUSIVE"] * 2, [c.message for c in got]
    assert "rounding noise" in got[0].message
