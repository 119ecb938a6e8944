"""Numeric equivalence: each historical bug is caught by the runs, with the
tensor, step and element; the correct rewrite is EQUIVALENT."""
import numpy as np
import pytest

import cases
import passes
from cases.base import Case
from cases.program_builder import FORWARD, LOSS, ProgramBuilder
from passes.base import PassRun
from verify.selfcheck import program_mutants as pm
from verify.engine.application import RankOutcome, run_application
from verify.engine.matrix_runner import pick_backend
from verify.numeric.compare import compare, tolerance
from verify.numeric.equivalence import numeric_checks

_, SIM = pick_backend("simulated", 11)


def _numeric(app):
    return [c for c in app.checks if c.kind == "numeric"]


def test_correct_overlap_rewrite_is_numerically_equivalent():
    app = run_application(passes.get("overlap"), cases.all_cases()["col_3d_static"],
                          numeric=SIM)
    num = _numeric(app)
    assert num and all(c.verdict.value == "EQUIVALENT" for c in num)
    assert all(c.details["tensors"] for c in num)


def test_window_op_reading_reduced_dx_is_caught_numerically():
    app = run_application(passes.get("overlap"), cases.all_cases()["col_window_reads_xgrad"],
                          numeric=SIM)
    bad = [c for c in _numeric(app) if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad
    cex = bad[0].counterexample
    assert cex["tensor"] == "linear_0.x_id@GRAD@scaled" and cex["abs_err"] > cex["tol"]
    assert "index" in cex and "step" in cex


def test_dropped_allreduce_of_dx_is_caught_numerically():
    case = cases.all_cases()["col_3d_static"]
    app = run_application(passes.get("overlap"), case, numeric=SIM,
                          mutator=(1, pm.remove_collective))
    bad = [c for c in _numeric(app) if c.verdict.value == "NOT_EQUIVALENT"]
    # rank 1 no longer joins rank 0's allreduce: the run names the culprit
    assert bad and bad[0].rank == 1 and bad[0].counterexample["rank"] == 1
    assert "finished without it" in bad[0].counterexample["error"]


def test_double_bias_is_caught_numerically():
    from verify.ir.pass_files import load_pass_file
    import os

    path = os.path.join(os.path.dirname(__file__), "mutants", "promotion_bias_every_rank.py")
    loaded = load_pass_file(path)
    try:
        app = run_application(passes.get("promotion"), cases.all_cases()["row_mp_o0_sgd_tp2"],
                              numeric=SIM)
    finally:
        loaded.restore()
    bad = [c for c in _numeric(app) if c.verdict.value == "NOT_EQUIVALENT"]
    # the forward output (renamed by the pass, compared under its new name)
    # and the loss both differ on every rank
    assert bad and {c.rank for c in bad} == {0, 1}
    for c in bad:
        wrong = {t["name"] for t in c.details["tensors"] if not t["ok"]}
        assert {"mean_0.tmp_0", "linear_0.tmp_2"} <= wrong, wrong
    good = run_application(passes.get("promotion"), cases.all_cases()["row_mp_o0_sgd_tp2"],
                           numeric=SIM)
    assert all(c.verdict.value == "EQUIVALENT" for c in _numeric(good))


# -- AMP O1: a cast to float16 moved before the allreduce ----------------------
def _o1_build(case, rank):
    """matmul -> all_reduce (fp32) -> cast fp16 -> cast fp32 -> mean; with
    ``moved`` the fp16 cast runs before the all_reduce (sum of rounded values
    instead of the rounded sum)."""
    b = ProgramBuilder(case, rank)
    x = b.data("x", [4, 8], [4, 8])
    w = b.param("w", [8, 8], mapping=[-1, 0])
    h = b.var("h", [4, 8])
    b.op("matmul_v2", {"X": [x], "Y": [w]}, {"Out": [h]}, {"trans_x": False, "trans_y": False})
    h16 = b.var("h16", [4, 8], "float16")
    back = b.var("back", [4, 8])
    loss = b.var("loss", [])
    if case.params["moved"]:
        b.op("cast", {"X": [h]}, {"Out": [h16]}, {"in_dtype": h.dtype, "out_dtype": h16.dtype})
        b.op("all_reduce", {"x": [h16]}, {"out": [h16]}, {"ring_id": 0, "reduce_type": 0})
    else:
        b.op("all_reduce", {"x": [h]}, {"out": [h]}, {"ring_id": 0, "reduce_type": 0})
        b.op("cast", {"X": [h]}, {"Out": [h16]}, {"in_dtype": h.dtype, "out_dtype": h16.dtype})
    b.op("cast", {"X": [h16]}, {"Out": [back]}, {"in_dtype": h16.dtype, "out_dtype": back.dtype})
    b.op("reduce_mean", {"X": [back]}, {"Out": [loss]},
         {"dim": [], "keep_dim": False, "reduce_all": True}, FORWARD | LOSS)
    b.loss = loss.name
    b.fetches += [loss.name]
    return b.finish()


def _o1_case(moved):
    return Case(name=f"o1_cast_{'moved' if moved else 'kept'}", family="test", summary="",
                mesh=[0, 1], builder=_o1_build, expect={}, rings={0: [[0, 1]]},
                sharded_params=frozenset({"w"}), amp_level="o1", params={"moved": moved})


def _o1_outcomes(moved):
    ref, cand = _o1_case(False), _o1_case(moved)
    return ref, [RankOutcome(r, None, None, run=PassRun(ref.build(r), cand.build(r)))
                 for r in ref.ranks]


def test_amp_o1_cast_moved_before_the_allreduce_is_caught():
    case, outs = _o1_outcomes(moved=True)
    res = numeric_checks(case, outs, seed=5)
    bad = [c for c in res if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in res]
    assert bad[0].counterexample["tensor"] == "loss"


def test_amp_o1_cast_kept_in_place_is_equivalent():
    case, outs = _o1_outcomes(moved=False)
    res = numeric_checks(case, outs, seed=5)
    assert res and all(c.verdict.value == "EQUIVALENT" for c in res)


# -- tolerances ---------------------------------------------------------------
def test_tolerance_grows_with_depth_and_dtype():
    ref = np.ones(4, np.float32)
    assert (tolerance("float32", 100, ref) > tolerance("float32", 1, ref)).all()
    assert (tolerance("float16", 1, ref) > 1000 * tolerance("float32", 1, ref)).all()


def _fp16_grad(seed=3, shape=(8, 8), scale=0.03):
    """A low-precision tensor of the size fp16 weight grads have here."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float16)


@pytest.mark.parametrize("damage", ["zeroed", "halved", "sign-flipped", "one element zeroed"])
def test_small_fp16_tensor_damaged_is_caught(damage):
    """The old floor max(1, |ref|) gave ~0.1 absolute on a tensor of ~0.03:
    zeroing it passed.  Per-element tolerances scale with the tensor."""
    ref = _fp16_grad()
    cand = {"zeroed": np.zeros_like(ref), "halved": ref / 2, "sign-flipped": -ref,
            "one element zeroed": np.where(np.arange(ref.size).reshape(ref.shape) == 5,
                                           0, ref).astype(np.float16)}[damage]
    d = compare("w@GRAD@fp16", 0, ref, cand, depth=96)  # depth of the cases: K*tp*steps
    assert not d.ok, f"{damage} tensor passed with tol {d.tol}"


def test_reassociation_noise_in_fp16_and_fp32_is_accepted():
    """True rounding noise: the same matmul summed in another order (blocked,
    reversed, pairwise), in the tensor's own precision, passes."""
    rng = np.random.default_rng(0)
    for dt, k in ((np.float16, 64), (np.float32, 256)):
        for trial in range(20):
            a = rng.standard_normal((6, k)).astype(dt)
            b = rng.standard_normal((k, 5)).astype(dt)
            ref = np.zeros((6, 5), dt)
            for i in range(k):  # sequential, in dt
                ref = (ref + np.outer(a[:, i], b[i]).astype(dt)).astype(dt)
            alt = np.zeros((6, 5), dt)
            for i in reversed(range(k)):  # reversed order
                alt = (alt + np.outer(a[:, i], b[i]).astype(dt)).astype(dt)
            half = (a[:, : k // 2] @ b[: k // 2]).astype(dt)
            pair = (half + (a[:, k // 2:] @ b[k // 2:]).astype(dt)).astype(dt)
            for cand in (alt, pair):
                d = compare("mm", 0, ref, cand, depth=k)
                assert d.ok, (dt, trial, d)


def test_bias_added_in_another_order_is_noise_not_a_difference():
    """The promotion's own reassociation, (x0W0 + x1W1) + b against
    (x0W0 + b) + x1W1, in float32: within tolerance even where values cancel."""
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal((16, 6)).astype(np.float32)
    p1 = (-p0 + rng.standard_normal((16, 6)).astype(np.float32) * 1e-3)  # near-cancelling
    bias = rng.standard_normal(6).astype(np.float32)
    ref = (p0 + p1) + bias
    cand = (p0 + bias) + p1
    assert compare("out", 0, ref, cand, depth=8 * 2 * 3).ok


def test_compare_reports_worst_element_and_bitwise():
    ref = np.arange(6, dtype=np.float32).reshape(2, 3)
    same = compare("t", 0, ref, ref.copy(), 8)
    assert same.ok and same.bitwise and same.max_abs == 0
    off = ref.copy()
    off[1, 2] += 0.5
    d = compare("t", 0, ref, off, 8)
    assert not d.ok and d.worst_index == [1, 2] and d.max_abs == pytest.approx(0.5)
    tiny = ref.copy()
    tiny[0, 1] = np.nextafter(tiny[0, 1], np.float32(2))
    t = compare("t", 0, ref, tiny, 8)
    assert t.ok and not t.bitwise


@pytest.mark.slow
def test_simulator_agrees_with_real_ranks():
    case = cases.all_cases()["col_3d_static"]
    _, both = pick_backend("both", 3)
    app = run_application(passes.get("overlap"), case, numeric=both)
    agree = [c for c in app.checks if c.name == "simulator vs ranks"]
    assert len(agree) == len(case.ranks)
    assert all(c.verdict.value == "EQUIVALENT" for c in agree), [c.message for c in agree]
    backends = {c.details.get("backend") for c in app.checks if c.kind == "numeric"}
    assert {"simulated", "ranks"} <= backends
