"""AMP as rounding (verify/value/amp_rounding.py, verify/numeric/amp_runs.py):
the real ``auto_parallel_amp`` is proved equal to the original with
``round_<dtype>`` where Paddle's lists imply; a cast moved, a cast missing, a
wrong dtype and a loss scale applied twice are refuted at the right point."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

import cases
import passes
from verify.ir.snapshot import ProgramSnapshot, from_programs
from verify.value import amp_rounding as ar
from verify.value.kernels import round_to
from verify.verdicts import Verdict


@pytest.fixture(scope="module")
def applied():
    """``{case: (run, before, after)}`` of the real pass on the AMP cases."""
    adapter = passes.get("amp")
    out = {}
    for name in ("amp_mlp_fp16", "amp_mlp_bf16", "amp_mlp_fp16_black_act"):
        run = adapter.apply_local(cases.all_cases()[name], 0)
        assert run.error is None, run.error
        out[name] = (run, from_programs(run.original.main, run.original.startup),
                     from_programs(run.rewritten.main, run.rewritten.startup))
    return out


def _check(applied, name, after=None):
    run, before, real = applied[name]
    dtype = cases.all_cases()[name].params["amp_dtype"]
    watched = list(dict.fromkeys(run.original.fetches + [run.original.loss]))
    (res,) = ar.check_rank("auto_parallel_amp", name, 0, before, after or real, dtype, watched)
    return res


def _resequenced(snap, ops) -> ProgramSnapshot:
    ops = [dataclasses.replace(o, idx=i) for i, o in enumerate(ops)]
    return ProgramSnapshot(ops, snap.vars, snap.startup_ops, snap.feeds, snap.meta)


def _reading(ops, op_type, slot, var):
    return next(i for i, o in enumerate(ops) if o.type == op_type and var in o.inputs.get(slot, []))


def _with_input(op, slot, old, new):
    return dataclasses.replace(op, inputs={**op.inputs, slot: [new if n == old else n
                                                                for n in op.inputs[slot]]})


# -- the axioms and the real pass ------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rounding_axioms_hold_on_concrete_values(dtype):
    """Idempotence and commuting with a power-of-two scale (in range), as the
    model assumes, on the real rounding; fp16 and bf16 differ (no identity)."""
    rng = np.random.default_rng(0)
    top = 65504.0 if dtype == "float16" else 3.0e38
    checked = 0
    for x in rng.standard_normal(200) * 10:
        x = Fraction(float(x))
        r = round_to(x, dtype)
        assert round_to(r, dtype) == r
        assert round_to(r, "float32") == r  # a widening cast is the identity
        for k in (1, 4, 15):
            if abs(x) * 2 ** k < top and abs(x) > 2 ** -10:  # normal range: the axiom's
                assert round_to(x * 2 ** k, dtype) == r * 2 ** k
                checked += 1
    assert checked > 300
    assert round_to(Fraction(1) + Fraction(1, 512), "float16") != \
        round_to(Fraction(1) + Fraction(1, 512), "bfloat16")


@pytest.mark.parametrize("name,rounded", [("amp_mlp_fp16", 11), ("amp_mlp_bf16", 11),
                                           ("amp_mlp_fp16_black_act", 14)])
def test_real_pass_is_the_original_with_roundings(applied, name, rounded):
    """Forward reads x, W1, b1, W2, target (+ the black exp's output); the
    grad ops read them again and the fp32 square_grad's (and exp_grad's) dX."""
    res = _check(applied, name)
    assert res.verdict == Verdict.EQUIVALENT, res.message
    assert res.details["rounded_inputs"] == rounded


def test_expected_points_come_from_paddles_lists(applied):
    """The gray add after the white matmul is low; the loss's square is fp32."""
    _, before, _ = applied["amp_mlp_fp16"]
    prec = ar.precisions(before, ar.amp_lists("float16"))
    by_type = {}
    for op in before.ops:
        by_type.setdefault(op.type, prec.get(op.idx))
    assert by_type["matmul_v2"] is True and by_type["elementwise_add"] is True
    assert by_type["tanh"] is True and by_type["square"] is False
    assert by_type["matmul_v2_grad"] is True and by_type["square_grad"] is False


# -- broken rewrites --------------------------------------------------------
def test_missing_cast_is_refuted_at_its_reader(applied):
    _, _, after = applied["amp_mlp_fp16"]
    ops = list(after.ops)
    i = _reading(ops, "elementwise_sub", "Y", "loss.target.cast_fp16")
    ops[i] = _with_input(ops[i], "Y", "loss.target.cast_fp16", "loss.target")
    res = _check(applied, "amp_mlp_fp16", _resequenced(after, ops))
    assert res.verdict == Verdict.NOT_EQUIVALENT
    cex = res.counterexample
    assert (cex["op_index"], cex["op_type"], cex["slot"], cex["var"]) == \
        (i, "elementwise_sub", "Y", "loss.target")
    assert cex["expected"] == "round_float16(loss.target)" and cex["found"] == "loss.target"
    assert "input" in cex["witness"]  # a value the rounding changes


def test_cast_moved_to_the_wrong_place_is_refuted(applied):
    """The bias's cast moved from the add's input to the activation's input."""
    _, _, after = applied["amp_mlp_fp16"]
    ops = list(after.ops)
    c = next(i for i, o in enumerate(ops) if o.type == "cast"
             and o.inputs["X"] == ["linear_0.b_0"])
    cast = ops.pop(c)
    add = _reading(ops, "elementwise_add", "Y", "linear_0.b_0.cast_fp16")
    ops[add] = _with_input(ops[add], "Y", "linear_0.b_0.cast_fp16", "linear_0.b_0")
    moved = dataclasses.replace(cast, inputs={"X": ["linear_0.tmp_1"]},
                                outputs={"Out": ["linear_0.tmp_1.cast_fp16"]})
    ops.insert(add + 1, moved)
    act = _reading(ops, "tanh", "X", "linear_0.tmp_1")
    ops[act] = _with_input(ops[act], "X", "linear_0.tmp_1", "linear_0.tmp_1.cast_fp16")
    res = _check(applied, "amp_mlp_fp16", _resequenced(after, ops))
    assert res.verdict == Verdict.NOT_EQUIVALENT
    cex = res.counterexample
    assert (cex["op_index"], cex["op_type"], cex["slot"], cex["var"]) == \
        (add, "elementwise_add", "Y", "linear_0.b_0")


def test_wrong_dtype_is_refuted_with_a_witness(applied):
    """float16 where the bf16 lists imply bfloat16 (the cast of x)."""
    _, _, after = applied["amp_mlp_bf16"]
    ops = list(after.ops)
    c = next(i for i, o in enumerate(ops) if o.type == "cast" and o.inputs["X"] == ["x"])
    ops[c] = dataclasses.replace(ops[c], attrs={**ops[c].attrs, "out_dtype": 4})
    res = _check(applied, "amp_mlp_bf16", _resequenced(after, ops))
    assert res.verdict == Verdict.NOT_EQUIVALENT
    cex = res.counterexample
    assert (cex["op_type"], cex["slot"], cex["var"]) == ("matmul_v2", "X", "x.cast_bf16")
    assert cex["expected"] == "round_bfloat16(x)" and cex["found"] == "round_float16(x)"
    w = cex["witness"]
    x = Fraction(w["input"])
    assert round_to(x, "bfloat16") != round_to(x, "float16")


def _scale_twice(main, startup, snap, rank):
    """Multiply the loss's grad by the loss scale once more (in place)."""
    block = main.global_block()
    i = next(i for i, op in enumerate(block.ops) if op.type == "elementwise_mul_grad")
    g = block.ops[i].output("X@GRAD")[0]
    s = block.ops[i].input("Y")[0]
    block._insert_op(i + 1, type="elementwise_mul", inputs={"X": [g], "Y": [s]},
                     outputs={"Out": [g]}, attrs={"axis": -1, "op_role": 1})
    block._sync_with_cpp()
    return None


def test_loss_scale_applied_twice_is_refuted_by_value_and_run():
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    case = cases.all_cases()["amp_mlp_fp16"]
    adapter = passes.get("amp")
    app = run_application(adapter, case, numeric=pick_backend("simulated")[1],
                          mutator=(0, _scale_twice))
    value = [c for c in app.checks if c.kind == "value"]
    numeric = [c for c in app.checks if c.kind == "numeric"]
    assert [c.verdict for c in value] == [Verdict.NOT_EQUIVALENT]
    cex = value[0].counterexample
    assert cex["var"].endswith("@GRAD")
    assert cex["witness"]["loss_scale_exponent"] == {"expected": 0, "found": 1}
    assert [c.verdict for c in numeric] == [Verdict.NOT_EQUIVALENT]
    assert "tol = 2 * u * R" in numeric[0].message and "2^-11" in numeric[0].message


def test_real_pass_runs_within_the_rounding_tolerance():
    """The emulated AMP run against fp32 is within the stated tolerance, and
    the tolerance is not vacuous: the bf16 error is a real nonzero share of it."""
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    for name in ("amp_mlp_fp16", "amp_mlp_bf16"):
        app = run_application(passes.get("amp"), cases.all_cases()[name],
                              numeric=pick_backend("simulated")[1])
        (num,) = [c for c in app.checks if c.kind == "numeric"]
        assert num.verdict == Verdict.EQUIVALENT, num.message
        diffs = num.details["diffs"]
        assert any(d["max_abs"] > 0 for d in diffs)  # the roundings did round
        # the bound is used (the roundings show) yet leaves room
        assert 0.005 < max(d["max_abs"] / d["tol"] for d in diffs) < 0.5
        assert app.verdict == Verdict.EQUIVALENT


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rounding_tolerance_is_not_vacuous(dtype):
    """Evaluated on concrete values: through the 11 roundings of the deepest
    watched gradient, a zeroed or halved tensor is outside the tolerance,
    a value rounded once per point is inside it."""
    from verify.numeric.amp_runs import UNIT_ROUNDOFF, tolerance

    ref = np.random.default_rng(1).standard_normal(64)
    tol = tolerance(dtype, 11, ref)
    assert np.any(np.abs(ref) > tol) and np.any(np.abs(ref / 2) > tol)
    off = ref * (1 + UNIT_ROUNDOFF[dtype]) ** 11  # every rounding at its worst, compounded
    assert np.all(np.abs(off - ref) <= tol)


def test_a_kink_makes_an_out_of_bound_run_inconclusive_not_a_refutation():
    """relu in place of tanh: at this seed a bf16 rounding moves a
    pre-activation across 0 and a gradient leaves the first-order bound; the
    run says why and stays INCONCLUSIVE, while the value check proves the
    rounding points."""
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    base = cases.all_cases()["amp_mlp_bf16"]
    case = dataclasses.replace(base, name="amp_mlp_bf16_relu",
                               params={**base.params, "act": "relu"})
    app = run_application(passes.get("amp"), case,
                          numeric=pick_backend("simulated", seed=20261130)[1])
    (num,) = [c for c in app.checks if c.kind == "numeric"]
    (val,) = [c for c in app.checks if c.kind == "value"]
    assert num.verdict == Verdict.INCONCLUSIVE and "relu" in num.message
    assert val.verdict == Verdict.EQUIVALENT


def test_casts_model_rounding_only_where_values_can_change():
    """float16 -> float32 is the identity, float64 -> float32 is not, float32
    -> bfloat16 after float32 -> float16 is two roundings (no shortcut)."""
    from verify.ir.snapshot import Op

    snap = ProgramSnapshot([], {})
    ev = ar.Evaluator(snap)

    def cast(x, src, dst, out):
        ev.run(Op(0, "cast", {"X": [x]}, {"Out": [out]}, {"in_dtype": src, "out_dtype": dst}))
        return ev.env[out]

    a = ev.read("a")
    assert cast("a", 4, 5, "up") == a
    assert cast("a", 6, 5, "down") != a
    h = cast("a", 5, 4, "h")
    assert cast("h", 4, 4, "h2") == h  # idempotent
    assert ev.terms.roundings(cast("h", 4, 22, "hb").t) == ["bfloat16", "float16"]


def test_unscaled_by_another_variable_is_not_trusted(applied):
    """check_finite_and_unscale dividing by a variable that is not the one the
    loss was multiplied by (even if equal in value): the watched grads are
    refuted, never proved by assuming the two scales cancel."""
    _, _, after = applied["amp_mlp_fp16"]
    ops = list(after.ops)
    i = next(i for i, o in enumerate(ops) if o.type == "check_finite_and_unscale")
    (s,) = ops[i].inputs["Scale"]
    ops[i] = _with_input(ops[i], "Scale", s, "other_scale")
    init = next(o for o in after.startup_ops if s in o.writes())
    startup = list(after.startup_ops) + [dataclasses.replace(
        init, outputs={"Out": ["other_scale"]})]
    snap = ProgramSnapshot(ops, after.vars, startup, after.feeds, after.meta)
    res = _check(applied, "amp_mlp_fp16", snap)
    assert res.verdict == Verdict.NOT_EQUIVALENT
    assert res.counterexample["var"].endswith("@GRAD")


def test_grads_pass_update_loss_scaling_only_under_the_overflow_flag(applied):
    """update_loss_scaling zeroes its X when FoundInfinite is true: fed a flag
    that is not the unscale's, the pass-through is not assumed (refuted)."""
    _, _, after = applied["amp_mlp_fp16"]
    ops = list(after.ops)
    i = next(i for i, o in enumerate(ops) if o.type == "update_loss_scaling")
    (flag,) = ops[i].inputs["FoundInfinite"]
    ops[i] = _with_input(ops[i], "FoundInfinite", flag, "some_other_flag")
    res = _check(applied, "amp_mlp_fp16", _resequenced(after, ops))
    assert res.verdict == Verdict.NOT_EQUIVALENT
    assert res.counterexample["var"].endswith("@GRAD")


def test_a_changed_startup_init_is_refuted_by_value_and_run():
    """The rewrite right, then a parameter's init widened in the startup: the
    proof's inputs are no longer the same symbols (refuted, naming the var),
    and the run draws the widened init (refuted)."""
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    def widen(main, startup, snap, rank):
        op = next(o for o in startup.global_block().ops if o.type == "uniform_random")
        op._set_attr("min", -50.0)
        op._set_attr("max", 50.0)

    app = run_application(passes.get("amp"), cases.all_cases()["amp_mlp_fp16"],
                          numeric=pick_backend("simulated")[1], mutator=(0, widen))
    (val,) = [c for c in app.checks if c.kind == "value"]
    (num,) = [c for c in app.checks if c.kind == "numeric"]
    assert val.verdict == Verdict.NOT_EQUIVALENT
    assert val.counterexample["var"] == "linear_0.w_0"
    assert num.verdict == Verdict.NOT_EQUIVALENT
