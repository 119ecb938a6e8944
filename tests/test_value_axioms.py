"""Every row of ``verify.value.semantics.ROWS`` evaluated on random concrete
tensors against an independent numpy reference (grads against numeric
vector-Jacobian products by central differences, exact for the degree <= 2
ops they check).  The row code is the same code the proof runs on terms, so
a wrong row fails here before it can prove a wrong rewrite.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from verify.ir.snapshot import Op
from verify.value import semantics as S
from verify.value.kernels import NoReference, reference

RNG = np.random.default_rng(0)


class FloatKernels:
    """``k`` for rows on floats: constants are floats, uninterpreted kernels
    are the real ones."""

    reduce_to = 10 ** 6  # no shape reduction: rows must match numpy exactly

    def const(self, v):
        return float(v)

    def uf(self, kernel, args, attrs=()):
        a = [float(x) for x in args]
        at = dict((k, eval(v)) for k, v in attrs)  # noqa: S307 (our own reprs)
        if kernel == "gelu":
            return _gelu(a[0])
        if kernel == "gelu.d":
            return _gelu_d(a[0])
        if kernel == "relu":
            return max(a[0], 0.0)
        if kernel == "relu.mask":
            return 1.0 if a[0] > 0 else 0.0
        if kernel == "sqrt":
            return math.sqrt(a[0])
        if kernel == "inv":
            return 1.0 / a[0]
        if kernel == "max":
            return max(a)
        if kernel == "min":
            return min(a)
        if kernel == "lookup_select":  # the real kernel: the id names this row
            row, pad = int(at["row"]), int(at["padding_idx"])
            return 1.0 if int(a[0]) == row and int(a[0]) != pad else 0.0
        if kernel == "softmax":
            e = [math.exp(v - max(a)) for v in a]
            return e[int(at["index"])] / sum(e)
        if kernel.startswith(("adamw.", "adam.")):
            return _adamw_kernel(kernel.split(".")[1], a, at)
        try:  # the replay's reference (cast, layer_norm): tested against Paddle here
            return float(reference(kernel, attrs, tuple(Fraction(x) for x in a)))
        except NoReference:
            return ("opaque", kernel, len(a))


def _gelu(x):
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_d(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2))) + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _adamw_kernel(slot, a, at):
    p, g, m1, m2, lr, b1p, b2p = a
    b1, b2, eps = at["beta1"], at["beta2"], at["epsilon"]
    coeff = at.get("coeff", 0.0) if at.get("with_decay", True) else 0.0
    m1o = b1 * m1 + (1 - b1) * g
    m2o = b2 * m2 + (1 - b2) * g * g
    lr_t = lr * at.get("lr_ratio", 1.0)
    p2 = p * (1 - lr_t * coeff)
    po = p2 - lr_t * (m1o / (1 - b1p)) / (math.sqrt(m2o) / math.sqrt(1 - b2p) + eps)
    return {"ParamOut": po, "Moment1Out": m1o, "Moment2Out": m2o}[slot]


K = FloatKernels()


def T(a):
    a = np.asarray(a, dtype=float)
    return S.Tensor(a, S.leaf_dims(a.shape, K.reduce_to))


def run(op_type, ins, attrs=None, outs=None):
    op = Op(0, op_type, {s: [f"{s}{i}" for i in range(len(v))] for s, v in ins.items()},
            outs or {}, attrs or {})
    res = S.ROWS[op_type](op, {s: [T(x) for x in v] for s, v in ins.items()}, K)
    return {s: np.asarray(v[0].arr, dtype=float) for s, v in res.items() if v}


def r(*shape):
    return RNG.standard_normal(shape)


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               rtol=tol, atol=tol)


def vjp(f, x, g, h=1e-3):
    """Numeric <g, df/dx> by central differences."""
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        out[idx] = np.sum(g * (f(x + e) - f(x - e))) / (2 * h)
    return out


def _t(a, flag):
    return np.swapaxes(a, -1, -2) if flag else a


# -- matmul ------------------------------------------------------------------
MM_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5))]


@pytest.mark.parametrize("tx", [False, True])
@pytest.mark.parametrize("ty", [False, True])
@pytest.mark.parametrize("sx,sy", MM_SHAPES)
def test_matmul_v2_and_its_grad(sx, sy, tx, ty):
    x = r(*sx)
    y = r(*sy)
    x = _t(x, tx).copy()
    y = _t(y, ty).copy()

    def fwd(x, y):
        return np.einsum("...ij,...jk->...ik", _t(x, tx), _t(y, ty))
    attrs = {"trans_x": tx, "trans_y": ty}
    out = run("matmul_v2", {"X": [x], "Y": [y]}, attrs)["Out"]
    close(out, fwd(x, y))
    if len(sx) == 2:
        close(run("matmul", {"X": [x], "Y": [y]}, {"transpose_X": tx, "transpose_Y": ty,
                                                   "alpha": 0.5})["Out"], 0.5 * fwd(x, y))
    g = r(*out.shape)
    grads = run("matmul_v2_grad", {"X": [x], "Y": [y], "Out@GRAD": [g]}, attrs)
    close(grads["X@GRAD"], vjp(lambda v: fwd(v, y), x, g))
    close(grads["Y@GRAD"], vjp(lambda v: fwd(x, v), y, g))


def test_a_wrong_row_fails_these_tests(monkeypatch):
    """The tests have teeth: a matmul grad row that ignores trans_y is caught."""
    right = S.matmul_grad

    def wrong(op, ins, k):
        return right(Op(0, op.type, {}, {}, {**op.attrs, "trans_y": False}), ins, k)
    monkeypatch.setitem(S.ROWS, "matmul_v2_grad", wrong)
    with pytest.raises(AssertionError):
        test_matmul_v2_and_its_grad((4, 4), (4, 4), False, True)


# -- elementwise ---------------------------------------------------------------
EW_CASES = [((2, 3, 4), (2, 3, 4), -1), ((2, 3, 4), (4,), -1), ((2, 3, 4), (3,), 1),
            ((2, 3, 4), (2, 3), 0), ((3, 4), (1, 4), -1)]
EW_REF = {"elementwise_add": np.add, "elementwise_sub": np.subtract,
          "elementwise_mul": np.multiply, "elementwise_div": np.divide,
          "elementwise_max": np.maximum}


def _paddle_y(x, y, axis):
    if axis == -1 or x.ndim == y.ndim:
        return y
    return y.reshape([1] * axis + list(y.shape) + [1] * (x.ndim - axis - y.ndim))


# grads named in full: test_every_row_is_tested reads the names from this file
EW_GRAD = {"elementwise_add": "elementwise_add_grad", "elementwise_sub": "elementwise_sub_grad",
           "elementwise_mul": "elementwise_mul_grad"}


@pytest.mark.parametrize("op_type", sorted(EW_REF))
@pytest.mark.parametrize("sx,sy,axis", EW_CASES)
def test_elementwise_ops_and_grads(op_type, sx, sy, axis):
    x, y = r(*sx), r(*sy) + (3.0 if op_type == "elementwise_div" else 0.0)
    fwd = lambda a, b: EW_REF[op_type](a, _paddle_y(a, b, axis))  # noqa: E731
    out = run(op_type, {"X": [x], "Y": [y]}, {"axis": axis})["Out"]
    close(out, fwd(x, y))
    grad_op = EW_GRAD.get(op_type)
    assert (grad_op is not None) == (op_type + "_grad" in S.ROWS), op_type
    if grad_op is not None:
        g = r(*out.shape)
        got = run(grad_op, {"X": [x], "Y": [y], "Out@GRAD": [g]}, {"axis": axis})
        close(got["X@GRAD"], vjp(lambda v: fwd(v, y), x, g))
        if "Y@GRAD" in got:
            close(got["Y@GRAD"], vjp(lambda v: fwd(x, v), y, g))


# -- reductions ---------------------------------------------------------------
RED = [({"reduce_all": True, "dim": [], "keep_dim": False}, None, False),
       ({"reduce_all": False, "dim": [1], "keep_dim": False}, (1,), False),
       ({"reduce_all": False, "dim": [0, -1], "keep_dim": True}, (0, 2), True)]


@pytest.mark.parametrize("attrs,axes,keep", RED)
@pytest.mark.parametrize("mean", [True, False])
def test_reductions_and_grads(attrs, axes, keep, mean):
    x = r(2, 3, 4)
    name, grad = ("reduce_mean", "reduce_mean_grad") if mean else ("reduce_sum", "reduce_sum_grad")
    fwd = (lambda v: np.mean(v, axis=axes, keepdims=keep)) if mean else \
        (lambda v: np.sum(v, axis=axes, keepdims=keep))
    out = run(name, {"X": [x]}, attrs)["Out"]
    close(out, fwd(x))
    g = r(*np.shape(fwd(x)))
    close(run(grad, {"X": [x], "Out@GRAD": [g]}, attrs)["X@GRAD"],
          vjp(fwd, x, g))
    if mean and attrs["reduce_all"]:
        close(run("mean", {"X": [x]}, {})["Out"], np.mean(x))
        close(run("mean_grad", {"X": [x], "Out@GRAD": [g]}, {})["X@GRAD"], vjp(np.mean, x, g))


# -- index maps ------------------------------------------------------------------
@pytest.mark.parametrize("shape,target", [((2, 3, 4), [6, 4]), ((6, 4), [2, 3, 4]),
                                          ((2, 3, 4), [0, -1]), ((2, 3, 4), [24])])
def test_reshape(shape, target):
    x = r(*shape)
    ref = x.reshape([shape[i] if t == 0 else t for i, t in enumerate(target)])
    for op_type in ("reshape2", "reshape"):
        close(run(op_type, {"X": [x]}, {"shape": target})["Out"], ref)


def test_reshape_fold_and_unfold_on_reduced_shapes_is_the_identity():
    """[B,S,H] -> [B*S,H] -> [B,S,H] stays consistent when B, S, H are reduced."""
    dims = S.leaf_dims([2, 4, 8], to=2)
    folded = S.reshape_dims(dims, [8, 8], to=2)
    assert [S._prod(r for _, r in d) for d in folded] == [4, 2]
    back = S.reshape_dims(folded, [2, 4, 8], to=2)
    assert back == [tuple(d) for d in dims]


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 2, 1]])
def test_transpose(perm):
    x = r(2, 3, 4)
    for op_type in ("transpose2", "transpose"):
        close(run(op_type, {"X": [x]}, {"axis": perm})["Out"], np.transpose(x, perm))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack(axis):
    xs = [r(2, 3) for _ in range(3)]
    close(run("stack", {"X": xs}, {"axis": axis})["Y"], np.stack(xs, axis=axis))


@pytest.mark.parametrize("shape,axis,attrs", [
    ((4, 2, 3), 0, {"num": 2}), ((2, 6), 1, {"num": 3}), ((2, 6), -1, {"sections": [2, 2, 2]}),
    ((6, 2), 0, {"sections": [3, -1]})])
def test_split(shape, axis, attrs):
    x = r(*shape)
    first = run("split", {"X": [x]}, {"axis": axis, **attrs})["Out"]
    n = attrs.get("num") or len(attrs["sections"])
    ref = np.split(x, n, axis=axis)
    close(first, ref[0])
    op = Op(0, "split", {"X": ["X0"]}, {"Out": [f"o{i}" for i in range(n)]},
            {"axis": axis, **attrs})
    got = S.ROWS["split"](op, {"X": [T(x)]}, K)["Out"]
    assert len(got) == n
    for g, want in zip(got, ref):
        close(g.arr, want)
        assert g.orig == want.shape


def test_split_of_a_gathered_dim_undoes_the_gather():
    """On reduced shapes: all_gather then split gives each rank's tensor
    back with its own dims (what reduce_scatter of the same sum gives)."""
    xs = [S.Tensor(np.array(r(2, 3), dtype=object), S.leaf_dims((4, 3), 2)) for _ in range(2)]
    gathered = S.collective("all_gather", xs, 0, 0, K)
    op = Op(0, "split", {"X": ["g"]}, {"Out": ["a", "b"]}, {"axis": 0, "num": 2})
    parts = S.ROWS["split"](op, {"X": [gathered]}, K)["Out"]
    for p, x in zip(parts, xs):
        assert p.dims == x.dims
        close(p.arr, x.arr)


@pytest.mark.parametrize("op_type", ["cast", "assign", "c_identity"])
def test_identities(op_type):
    x = r(2, 3)
    # a widening cast (float16 -> float32) is the identity on values
    close(run(op_type, {"X": [x]}, {"in_dtype": 4, "out_dtype": 5})["Out"], x)


def test_pir_c_identity_is_the_identity():
    """``pd_op.c_identity`` (paddleformers' parallel_matmul under fleet's
    hybrid group): the identity on any ring and stream (its forward; 3.3.1
    has no CPU kernel for it, numeric runs execute it as assign)."""
    x = r(2, 3)
    out = run("pd_op.c_identity", {"x": [x]},
              {"ring_id": 28, "use_calc_stream": True, "use_model_parallel": True})["out"]
    close(out, x, tol=0)


class _KeyK:
    """``k`` whose uninterpreted kernels return their key: what a term is."""

    reduce_to = 10 ** 6

    def const(self, v):
        return v

    def uf(self, kernel, args, attrs=()):
        return (kernel, tuple(args), attrs)


@pytest.mark.parametrize("mark", ["amp_off_region", "model_cast"])
def test_the_suites_amp_marks_key_no_kernel(mark):
    """The suite's plan-time AMP marks (examples/amp_of.py; read_sets.COMMON:
    no kernel reads them) are not part of a kernel's key: the serial
    program's ``cos`` inside the model's ``auto_cast(enable=False)`` carries
    the mark, the partitioned rank's copy does not, and they are one
    function.  Twin: an attr that is no mark still keys the kernel."""
    x = S.Tensor(np.array([1, 2], dtype=object), S.leaf_dims((2,)), "float32")

    def term(attrs):
        op = Op(0, "pd_op.cos", {"x": ["x"]}, {"out": ["o"]}, attrs)
        return list(S.ROWS["pd_op.cos"](op, {"x": [x]}, _KeyK())["out"][0].arr)
    base = {"stop_gradient": [True], "struct_name": "/Rotary/"}
    assert term({**base, mark: True}) == term(base)
    assert term({**base, "approximate": True}) != term(base)


@pytest.mark.parametrize("src,dst", [(5, 3), (5, 2), (5, 4), (6, 5), (5, 22), (5, 0)])
def test_a_cast_that_rounds_is_paddles_cast(src, dst):
    """float -> int truncates, float32 -> float16/bfloat16 rounds: the row is
    a kernel, whose reference (``verify/value/kernels.py``) is Paddle's."""
    x = np.array([[-2.7, -0.5, 0.4999], [1.0001, 3.5, 6543.21]])
    if dst in (3, 2, 0):
        x = x[:, :2]  # within the int range
    got = run("cast", {"X": [x]}, {"in_dtype": src, "out_dtype": dst})["Out"]
    names = {0: "bool", 2: "int32", 3: "int64", 4: "float16", 5: "float32", 6: "float64",
             22: "bfloat16"}
    want = _pd(lambda paddle: paddle.cast(paddle.to_tensor(x, dtype=names[src]), names[dst])
               .astype("float64").numpy())
    close(got, want, tol=0)
    # PIR's cast: the dtype attr (a DataType name) is the target
    close(run("pd_op.cast", {"x": [x]}, {"dtype": f"DataType.{names[dst].upper()}"})["out"],
          want, tol=0)


def test_fill_constant():
    close(run("fill_constant", {}, {"shape": [2, 3], "value": 0.25})["Out"], np.full((2, 3), 0.25))
    close(run("fill_constant", {}, {"shape": [], "value": 0.0, "str_value": "1.5"})["Out"], 1.5)


# -- arithmetic ------------------------------------------------------------------
@pytest.mark.parametrize("after", [True, False])
def test_scale(after):
    x = r(2, 3)
    out = run("scale", {"X": [x]}, {"scale": 0.5, "bias": 2.0, "bias_after_scale": after})["Out"]
    close(out, x * 0.5 + 2.0 if after else (x + 2.0) * 0.5)


# -- scale in a low dtype against Paddle's CPU kernel, every input ---------------
# phi's ScaleKernel<T> reads its attrs with ``scale.to<T>()`` / ``bias.to<T>()``
# and EigenScale computes ``scale * x + bias`` in T: for bfloat16 and float16
# each operator converts to float32, computes, rounds back to T.  The row is
# over the reals (the proof's ROUNDING disclaimer); what it must get right is
# the constant the kernel multiplies by (``S.scale_constants``).  The rule
# below is that row with each of the kernel's operations rounded: it must
# equal Paddle's output exactly on every finite input of the dtype.
LOW_SCALES = [(1 / math.sqrt(8), 0.0, True),  # the attention's 1/sqrt(head_dim)
              (0.1, 0.7, True), (2.7, 0.3, False), (-1 / 3, -7.0, True),
              (1000.3, 1.9, False), (1 + 2 ** -8 + 2 ** -30, 0.0, True)]


def _low_inputs(dtype):
    """Every finite value of ``dtype`` (bfloat16: of magnitude below 2^100,
    so no product overflows), as float32, and the array Paddle is fed."""
    if dtype == "float16":
        xs = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
        xs = xs[np.isfinite(xs)]
        return xs.astype(np.float32), xs
    bits = np.arange(1 << 16, dtype=np.uint32)
    xs = (bits << 16).view(np.float32)
    keep = np.isfinite(xs) & (np.abs(xs) < 2.0 ** 100)
    return xs[keep], bits[keep].astype(np.uint16)


def _round_low(a, dtype):
    """float32 -> ``dtype`` as phi's CPU conversion: float16 by the
    hardware conversion (round to nearest even), bfloat16 round to nearest
    even on the bits (``cpu_float_to_bfloat16``); back as float32."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return a.astype(np.float16).astype(np.float32)
    b = a.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return b.astype(np.uint32).view(np.float32)


def _paddle_scale(fed, dtype, s, bias, after):
    """The snapshot's ``pd_op.scale`` op and Paddle's output (float32) of a
    PIR program scaling ``fed`` on the CPU executor."""
    from verify.ir.legacy_ir import paddle_module
    from verify.ir.pir_snapshot import from_pir_programs, value_names

    paddle = paddle_module()
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            y = paddle.scale(paddle.static.data("x", [fed.size], dtype), s, bias, after)
        op, = [o for o in from_pir_programs(main, startup, value_names(main)).ops
               if o.type == "pd_op.scale"]
        (out,) = paddle.static.Executor(paddle.CPUPlace()).run(main, feed={"x": fed},
                                                               fetch_list=[y])
    out = np.asarray(out)
    if dtype == "bfloat16":
        out = (out.astype(np.uint32) << 16).view(np.float32)
    return op, out.astype(np.float32)


def _kernel_rule(x, dtype, sv, bv, after):
    """The row's ``x * s + b`` (``(x + b) * s``) with each operation done in
    float32 and rounded to ``dtype``, as EigenScale<T> does."""
    s, b = np.float32(sv), np.float32(bv)
    assert Fraction(float(s)) == sv and Fraction(float(b)) == bv, "constants not float32"
    with np.errstate(over="ignore"):
        if after:
            return _round_low(_round_low(x * s, dtype) + b, dtype)
        return _round_low(_round_low(x + b, dtype) * s, dtype)


def _differing(got, want):
    return int(np.sum(~((got == want) | (np.isnan(got) & np.isnan(want)))))


class _ExactK:
    reduce_to = 10 ** 9

    def const(self, v):
        return Fraction(v)

    def uf(self, kernel, args, attrs=()):
        raise AssertionError(f"scale's row calls no kernel ({kernel})")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_scale_low_precision_against_paddles_kernel(dtype):
    """Every finite input, six (scale, bias, order) settings: Paddle's CPU
    scale kernel equals the row's arithmetic with its constants
    (``S.scale_constants`` of the snapshot's op: the float32 attr rounded
    to ``dtype``) and each operation rounded, exactly; the row itself on
    the snapshot's op is ``x * s + b`` with those constants, and with no
    bias Paddle's output is the row's value rounded once."""
    x, fed = _low_inputs(dtype)
    every = np.arange(0, x.size, max(1, x.size // 512))
    sample = x[every]
    for s, bias, after in LOW_SCALES:
        op, out = _paddle_scale(fed, dtype, s, bias, after)
        attrs = {"scale": op.attrs["scale@value"], "bias": op.attrs["bias"],
                 "bias_after_scale": op.attrs["bias_after_scale"]}
        sv, bv = S.scale_constants(attrs, dtype)
        assert _differing(_kernel_rule(x, dtype, sv, bv, after), out) == 0, (s, bias, after)
        # the row the proof runs, on the snapshot's op, exactly
        arr = np.array([Fraction(float(v)) for v in sample], dtype=object)
        row = S.ROWS["pd_op.scale"](op, {"x": [S.Tensor(arr, S.leaf_dims(arr.shape), dtype)]},
                                    _ExactK())["out"][0].arr
        want = [v * sv + bv if after else (v + bv) * sv for v in arr]
        assert list(row) == want, (s, bias, after)
        if bias == 0.0:
            once = _round_low(np.array([float(v) for v in row], dtype=np.float32), dtype)
            assert _differing(once, out[every]) == 0
    # 1/sqrt(8) in bfloat16 is 181/512: the kernel does not multiply by the
    # float32 0.35355338 (which the row used to refuse); a constant the dtype
    # cannot hold at all is refused (Paddle's kernel would multiply by inf)
    if dtype == "bfloat16":
        assert S.scale_constants({"scale": 1 / math.sqrt(8)}, dtype)[0] == Fraction(181, 512)
    with pytest.raises(S.Unsupported, match="overflows"):
        S.scale_constants({"scale": 65536.0 if dtype == "float16" else 3.4e38}, dtype)


def _double_to_bfloat16(v: float) -> float:
    """``v`` rounded to bfloat16 in one step from the double (nearest even
    on its 52-bit mantissa), not through float32."""
    b = int(np.float64(v).view(np.uint64))
    b = (b + (1 << 44) - 1 + ((b >> 45) & 1)) & ~((1 << 45) - 1)
    return float(np.uint64(b).view(np.float64))


def _dygraph_scale(x, dtype, s, bias, after):
    """Paddle's output of dygraph ``paddle.scale`` (the Scalar a double)."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    with paddle.base.dygraph.guard(paddle.CPUPlace()):
        t = paddle.to_tensor(x).astype(dtype)
        return paddle.scale(t, s, bias, after).astype("float32").numpy()


TWINS = ["exact constant, one rounding", "float32 constant, one rounding in float32",
         "low constants, one rounding of x * s + b", "constant rounded straight from the double"]


@pytest.mark.parametrize("twin", TWINS)
def test_scale_low_precision_wrong_models_are_refuted(twin):
    """Broken twins of the rule above, each refuted by Paddle's outputs on
    the same inputs: the constant exact (the attr as a real, one rounding of
    the exact result); the constants float32, ``x * s + b`` in float32
    rounded once; the low constants with ``x * s + b`` rounded once (the
    bias added before the product's rounding); the constants rounded to
    bfloat16 straight from the double (dygraph hands the kernel the double;
    the kernel goes through float32)."""
    dtype = "bfloat16"
    x, fed = _low_inputs(dtype)
    x64 = x.astype(np.float64)
    refuted = []
    for s, bias, after in LOW_SCALES:
        if twin == TWINS[3]:
            out = _dygraph_scale(x, dtype, s, bias, after)
            sv, bv = (Fraction(_double_to_bfloat16(v)) for v in (s, bias))
            refuted.append(_differing(_kernel_rule(x, dtype, sv, bv, after), out))
            continue
        op, out = _paddle_scale(fed, dtype, s, bias, after)
        sv, bv = float(op.attrs["scale@value"]), float(op.attrs["bias"])
        if twin == TWINS[0]:
            sv, bv = s, bias
        elif twin == TWINS[2]:
            sv, bv = (float(c) for c in S.scale_constants({"scale": sv, "bias": bv}, dtype))
        with np.errstate(over="ignore"):
            if twin == TWINS[1]:
                s32, b32 = np.float32(sv), np.float32(bv)
                got = _round_low(x * s32 + b32 if after else (x + b32) * s32, dtype)
            else:
                got = _round_low((x64 * sv + bv if after else (x64 + bv) * sv)
                                 .astype(np.float32), dtype)
        refuted.append(_differing(got, out))
    assert any(refuted), (twin, refuted)


def test_sum():
    xs = [r(2, 3) for _ in range(3)]
    close(run("sum", {"X": xs})["Out"], xs[0] + xs[1] + xs[2])


def test_square_grad_and_norm():
    x = r(2, 3)
    close(run("square", {"X": [x]})["Out"], x * x)
    g = r(2, 3)
    close(run("square_grad", {"X": [x], "Out@GRAD": [g]})["X@GRAD"], vjp(np.square, x, g))
    close(run("squared_l2_norm", {"X": [x]})["Out"], [np.sum(x * x)])


def test_sgd():
    p, g, lr = r(3, 2), r(3, 2), np.array([0.1])
    close(run("sgd", {"Param": [p], "Grad": [g], "LearningRate": [lr]})["ParamOut"], p - 0.1 * g)


@pytest.mark.parametrize("op_type,ref,grad_ref", [
    ("gelu", np.vectorize(_gelu), None), ("relu", lambda v: np.maximum(v, 0), None),
    ("sqrt", np.sqrt, None)])
def test_unary_kernels(op_type, ref, grad_ref):
    x = np.abs(r(2, 3)) + 0.5 if op_type == "sqrt" else r(2, 3)
    close(run(op_type, {"X": [x]})["Out"], ref(x))


def test_activation_grads():
    x, g = r(2, 3), r(2, 3)
    close(run("gelu_grad", {"X": [x], "Out@GRAD": [g]})["X@GRAD"],
          vjp(np.vectorize(_gelu), x, g), tol=1e-5)
    out = np.maximum(x, 0)
    close(run("relu_grad", {"Out": [out], "Out@GRAD": [g]})["X@GRAD"],
          vjp(lambda v: np.maximum(v, 0), x, g), tol=1e-5)


@pytest.mark.parametrize("op_type", ["adamw", "adam"])
@pytest.mark.parametrize("master", [False, True])
def test_adam_like_rows_pass_the_right_inputs(op_type, master):
    p, g = r(3, 2), r(3, 2)
    m1, m2 = r(3, 2), np.abs(r(3, 2))
    mp = r(3, 2)
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "coeff": 0.01, "lr_ratio": 1.0,
             "with_decay": op_type == "adamw", "multi_precision": master}
    ins = {"Param": [p], "Grad": [g], "Moment1": [m1], "Moment2": [m2],
           "LearningRate": [np.array([0.1])], "Beta1Pow": [np.array([0.9 ** 3])],
           "Beta2Pow": [np.array([0.999 ** 3])]}
    if master:
        ins["MasterParam"] = [mp]
    got = run(op_type, ins, attrs)
    base = mp if master else p
    b1, b2 = 0.9, 0.999
    m1o = b1 * m1 + (1 - b1) * g
    m2o = b2 * m2 + (1 - b2) * g * g
    decay = 0.01 if op_type == "adamw" else 0.0
    po = base * (1 - 0.1 * decay) - 0.1 * (m1o / (1 - b1 ** 3)) / (
        np.sqrt(m2o) / np.sqrt(1 - b2 ** 3) + 1e-8)
    close(got["ParamOut"], po)
    close(got["Moment1Out"], m1o)
    close(got["Moment2Out"], m2o)
    close(got["Beta1PowOut"], [0.9 ** 4])
    close(got["Beta2PowOut"], [0.999 ** 4])
    if master:
        close(got["MasterParamOut"], po)


def _layer_norm_by_paddle(x, sc, b, dy):
    """Paddle's own layer_norm over the last dim (eps 1e-5) and its autograd:
    [y, dx, dscale, dbias]."""
    def ref(paddle):
        xt = paddle.to_tensor(x, dtype="float64", stop_gradient=False)
        st = paddle.to_tensor(sc, dtype="float64", stop_gradient=False)
        bt = paddle.to_tensor(b, dtype="float64", stop_gradient=False)
        y = paddle.nn.functional.layer_norm(xt, [x.shape[-1]], st, bt, 1e-5)
        grads = paddle.grad([y], [xt, st, bt], [paddle.to_tensor(dy, dtype="float64")])
        return [y.numpy()] + [t.numpy() for t in grads]
    return _pd(ref)


def test_layer_norm_and_its_grad_against_paddle():
    """The legacy rows (opaque kernels of all their inputs, evaluated by
    verify/value/kernels.py's reference; the grad homogeneous in Y@GRAD)
    against Paddle's own layer_norm and its autograd."""
    x, sc, b, dy = r(2, 3, 4), r(4), r(4), r(2, 3, 4)
    attrs = {"begin_norm_axis": 2, "epsilon": 1e-5}
    fwd = run("layer_norm", {"X": [x], "Scale": [sc], "Bias": [b]}, attrs)
    y, gx, gs, gb = _layer_norm_by_paddle(x, sc, b, dy)
    close(fwd["Y"], y)
    close(fwd["Mean"], x.mean(-1))  # shape x.shape[:2], as Paddle's
    close(fwd["Variance"], x.var(-1))
    grad = run("layer_norm_grad", {"X": [x], "Scale": [sc], "Bias": [b], "Y@GRAD": [dy],
                                   "Mean": [fwd["Mean"]], "Variance": [fwd["Variance"]]}, attrs)
    close(grad["X@GRAD"], gx)
    close(grad["Scale@GRAD"], gs)
    close(grad["Bias@GRAD"], gb)


def test_pir_layer_norm_row_by_row_against_paddle():
    """``pd_op.layer_norm`` / ``layer_norm_grad`` (row by row: polynomial
    mean and variance, a ``layer_norm.rstd`` kernel of the variance)
    against Paddle's own layer_norm and its autograd; and ``pd_op.relu``,
    ``pd_op.relu_grad``, ``pd_op.share_data_`` on concrete values."""
    x, sc, b, dy = r(2, 3, 4), r(4), r(4), r(2, 3, 4)
    attrs = {"begin_norm_axis": 2, "epsilon": 1e-5}
    fwd = run("pd_op.layer_norm", {"x": [x], "scale": [sc], "bias": [b]}, attrs)
    y, gx, gs, gb = _layer_norm_by_paddle(x, sc, b, dy)
    close(fwd["out"], y)
    close(fwd["mean"], x.mean(-1))
    close(fwd["variance"], x.var(-1))
    grad = run("pd_op.layer_norm_grad", {"x": [x], "scale": [sc], "bias": [b],
                                         "out_grad": [dy], "mean": [fwd["mean"]],
                                         "variance": [fwd["variance"]]}, attrs)
    close(grad["x_grad"], gx)
    close(grad["scale_grad"], gs)
    close(grad["bias_grad"], gb)
    a, g = r(3, 4), r(3, 4)
    close(run("pd_op.relu", {"x": [a]})["out"], np.maximum(a, 0))
    close(run("pd_op.relu_grad", {"out": [np.maximum(a, 0)], "out_grad": [g]})["x_grad"],
          np.where(a > 0, g, 0))
    close(run("pd_op.share_data_", {"x": [a]})["out"], a)


def test_pir_layer_norm_of_a_piece_of_rows_is_the_piece_of_the_whole():
    """Row by row: the layer_norm of rows 2..3 of a batch is rows 2..3 of
    the whole's (the same terms), which the planner relation's proof needs
    for a batch or sequence split over ranks."""
    from verify.value.symbolic import Kernels, Store, T as Term

    store = Store()
    Term.store = store
    k = Kernels(store)
    arr = np.empty((4, 3), dtype=object)
    for j, idx in enumerate(np.ndindex(4, 3)):
        arr[idx] = Term(store.sym(f"x{j}"))
    op = Op(0, "pd_op.layer_norm", {}, {}, {"begin_norm_axis": 1, "epsilon": 1e-5})
    whole = S.ROWS["pd_op.layer_norm"](op, {"x": [S.Tensor(arr, S.leaf_dims((4, 3)))]}, k)
    part = S.ROWS["pd_op.layer_norm"](op, {"x": [S.Tensor(arr[2:], S.leaf_dims((2, 3)))]}, k)
    assert [e.i for e in whole["out"][0].arr[2:].reshape(-1)] == \
        [e.i for e in part["out"][0].arr.reshape(-1)]


def _symbolic_store():
    """A fresh term store, its kernels, and ``sym_tensor(shape, tag)``: a
    Tensor of fresh symbols."""
    from verify.value.symbolic import Kernels, Store, T as Term

    store = Store()
    Term.store = store

    def sym_tensor(shape, tag):
        arr = np.empty(shape, dtype=object)
        for j, idx in enumerate(np.ndindex(*shape)):
            arr[idx] = Term(store.sym(f"{tag}{j}"))
        return S.Tensor(arr, S.leaf_dims(shape))
    return store, Kernels(store), sym_tensor


def test_opaque_kernels_are_keyed_by_slots_and_shapes():
    """One term per (slot, shape): the same values passed in another slot,
    or viewed as [2,4,8] or [8,8], are different kernels' arguments (an
    opaque row: every output element a function of all input elements)."""
    store, k, sym_tensor = _symbolic_store()
    x, c = sym_tensor((2, 4, 8), "x"), sym_tensor((8,), "c")
    x2 = S.Tensor(x.arr.reshape(8, 8), S.leaf_dims((8, 8)))
    row = S.uf_opaque("some_kernel", {"out": ("x", None)})
    op = Op(0, "some_kernel", {}, {}, {"axis": 1})
    as_a = row(op, {"x": [x], "a": [c]}, k)["out"][0].arr
    as_b = row(op, {"x": [x], "b": [c]}, k)["out"][0].arr
    flat = row(op, {"x": [x2], "a": [c]}, k)["out"][0].arr
    assert as_a.reshape(-1)[0].i != as_b.reshape(-1)[0].i
    assert as_a.reshape(-1)[0].i != flat.reshape(-1)[0].i
    again = row(op, {"x": [x], "a": [c]}, k)["out"][0].arr
    assert as_a.reshape(-1)[0].i == again.reshape(-1)[0].i  # a key, not a fresh symbol


def test_layer_norm_grad_is_homogeneous_in_its_dout():
    """The claim the legacy layer_norm_grad row rests on, at concrete values
    through Paddle's autograd: grad(x, c * dy) = c * grad(x, dy) for every
    output (X@GRAD, Scale@GRAD, Bias@GRAD); and the row gives f(x, dy / 3)
    and f(x, dy) / 3 one canonical form, while 2 * dy and dy + dy' stay
    other values (only a common constant is taken out)."""
    x, sc, b, dy = r(2, 3, 4), r(4), r(4), r(2, 3, 4)
    base = _layer_norm_by_paddle(x, sc, b, dy)[1:]
    for c in (0.37, -2.0):
        for got, want in zip(_layer_norm_by_paddle(x, sc, b, c * dy)[1:], base):
            close(got, c * want)
    store, k, sym_tensor = _symbolic_store()
    xs, ss, bs, gs = (sym_tensor((2, 3, 4), "x"), sym_tensor((4,), "s"),
                      sym_tensor((4,), "b"), sym_tensor((2, 3, 4), "g"))
    op = Op(0, "layer_norm_grad", {}, {}, {"begin_norm_axis": 2, "epsilon": 1e-5})
    fwd = S.ROWS["layer_norm"](op, {"X": [xs], "Scale": [ss], "Bias": [bs]}, k)
    row = S.ROWS["layer_norm_grad"]

    def grad(g):
        return row(op, {"X": [xs], "Scale": [ss], "Bias": [bs], "Mean": fwd["Mean"],
                        "Variance": fwd["Variance"], "Y@GRAD": [g]}, k)

    def ids(res):
        return [e.i for s in sorted(res) for t in res[s] for e in t.arr.reshape(-1)]

    third = k.const(Fraction(1, 3))
    scaled = grad(S.Tensor(np.asarray(gs.arr * third), gs.dims))
    after = {s: [S.Tensor(np.asarray(t.arr * third), t.dims) for t in ts]
             for s, ts in grad(gs).items()}
    assert ids(scaled) == ids(after)
    doubled = grad(S.Tensor(np.asarray(gs.arr * k.const(2)), gs.dims))
    assert ids(doubled) != ids(grad(gs))
    other = sym_tensor((2, 3, 4), "h")
    summed = grad(S.Tensor(np.asarray(gs.arr + other.arr), gs.dims))
    one, two = grad(gs), grad(other)
    plus = {s: [S.Tensor(np.asarray(a.arr + b.arr), a.dims)
                for a, b in zip(one[s], two[s])] for s in one}
    assert ids(summed) != ids(plus)  # additivity is not claimed: another kernel call


def test_layer_norm_grad_takes_one_constant_out_of_every_form_of_its_dout():
    """One dout polynomial the programs cut at other places (a bias beside
    a cut sum, ``cut(S) + 3 b``, or inside it, ``cut(S + 3 b)``: different
    lead coefficients, 3 and 1) gives grads of one polynomial:
    the constant taken out is the dout's value at a fixed point, not its
    form's lead coefficient, so the grads are equal once cuts are expanded
    (``expand.py``); a different dout (``6 b``) stays another."""
    from verify.value import expand
    from verify.value.symbolic import T as Term

    store, k, sym_tensor = _symbolic_store()
    xs, ss, bs = sym_tensor((1, 2, 4), "x"), sym_tensor((4,), "s"), sym_tensor((4,), "b")
    op = Op(0, "layer_norm_grad", {}, {}, {"begin_norm_axis": 2, "epsilon": 1e-5})
    fwd = S.ROWS["layer_norm"](op, {"X": [xs], "Scale": [ss], "Bias": [bs]}, k)
    sums = [store.sum_many([store.mul(store.sym(f"u{j}_{i}"), store.sym(f"v{i}"))
                            for i in range(30)]) for j in range(8)]
    bias = store.sym("bias")  # after the sums' symbols: its monomial sorts last

    def dout(scale, inside):
        arr = np.empty((1, 2, 4), dtype=object)
        for j, idx in enumerate(np.ndindex(1, 2, 4)):
            b = store.mul(store.const(scale), bias)
            arr[idx] = Term(store.cut(store.add(sums[j], b)) if inside else
                            store.add(store.cut(sums[j]), b))
        return S.Tensor(arr, S.leaf_dims((1, 2, 4)))

    def ids(g):
        res = S.ROWS["layer_norm_grad"](op, {"X": [xs], "Scale": [ss], "Bias": [bs],
                                             "Mean": fwd["Mean"], "Variance": fwd["Variance"],
                                             "Y@GRAD": [g]}, k)
        return [e.i for s in sorted(res) for t in res[s] for e in t.arr.reshape(-1)]

    def equal(one, two):  # the kernel's arguments compared expanded (congruence)
        return expand.expander(store).equal(list(zip(range(len(one)), one, two)))

    beside, inside = dout(3, False), dout(3, True)
    lead = [store.polys[t.arr.reshape(-1)[0].i][0][1] for t in (beside, inside)]
    assert lead[0] != lead[1]  # the forms' lead coefficients differ (the class)
    assert equal(ids(beside), ids(inside))
    assert not equal(ids(dout(6, True)), ids(beside))


def test_layer_norm_rows_tell_scale_from_bias_and_rows_from_rows():
    """layer_norm's rows (the legacy opaque kernel keyed by slots and
    shapes): the same values as Scale or as Bias,
    or rows of 32 ([2,4,8] from axis 1) against rows of 8 (axis 2), are
    different values (issue 19's classes 3 and 4, on the exact rows)."""
    store, k, sym_tensor = _symbolic_store()
    x, c = sym_tensor((2, 4, 8), "x"), sym_tensor((8,), "c")
    ax2 = Op(0, "layer_norm", {}, {}, {"begin_norm_axis": 2, "epsilon": 1e-5})
    as_scale = S.ROWS["layer_norm"](ax2, {"X": [x], "Scale": [c]}, k)["Y"][0].arr
    as_bias = S.ROWS["layer_norm"](ax2, {"X": [x], "Bias": [c]}, k)["Y"][0].arr
    assert as_scale.reshape(-1)[0].i != as_bias.reshape(-1)[0].i
    ax1 = Op(0, "layer_norm", {}, {}, {"begin_norm_axis": 1, "epsilon": 1e-5})
    rows32 = S.ROWS["layer_norm"](ax1, {"X": [x]}, k)["Y"][0].arr
    rows8 = S.ROWS["layer_norm"](ax2, {"X": [x]}, k)["Y"][0].arr
    assert rows32.reshape(-1)[0].i != rows8.reshape(-1)[0].i


# -- collectives ----------------------------------------------------------------
@pytest.mark.parametrize("kind,ref", [
    ("sum", lambda xs, i: sum(xs)), ("avg", lambda xs, i: sum(xs) / len(xs)),
    ("max", lambda xs, i: np.maximum.reduce(xs)), ("min", lambda xs, i: np.minimum.reduce(xs)),
    ("prod", lambda xs, i: np.multiply.reduce(xs)),
    ("all_gather", lambda xs, i: np.concatenate(xs, 0)),
    ("reduce_scatter", lambda xs, i: np.split(sum(xs), len(xs), 0)[i]),
    ("broadcast", lambda xs, i: xs[1]), ("identity", lambda xs, i: xs[i]),
    # Paddle's GPU kernel: chunk j of rank i's out is rank j's chunk i (dim 0)
    ("all_to_all", lambda xs, i: np.concatenate([np.split(x, len(xs), 0)[i] for x in xs]))])
@pytest.mark.parametrize("n", [2, 4])
def test_collectives(kind, ref, n):
    xs = [r(4, 3) for _ in range(n)]
    for i in range(n):
        out = S.collective(kind, [T(x) for x in xs], i, 1, K)
        close(np.asarray(out.arr, dtype=float), ref(xs, i))


def test_all_to_all_is_not_a_transpose_of_another_order():
    """all_to_all on distinct values: rank 1 of 2 gets rank 0's second chunk
    then its own second chunk; the first chunks, or the chunks in the other
    rank order, are another value (a wrong chunk order is not the row's);
    on a reduced dim 0 cut across its folded factor, no value at all."""
    xs = [np.arange(8.0).reshape(4, 2) + 100 * q for q in range(2)]
    got = np.asarray(S.collective("all_to_all", [T(x) for x in xs], 1, 0, K).arr, dtype=float)
    close(got, np.concatenate([xs[0][2:], xs[1][2:]]))
    assert not np.allclose(got, np.concatenate([xs[0][:2], xs[1][:2]]))
    assert not np.allclose(got, np.concatenate([xs[1][2:], xs[0][2:]]))
    folded = [S.Tensor(np.array(r(2, 3), dtype=object), (((3, 1), (2, 2)), ((3, 3),)))
              for _ in range(2)]
    with pytest.raises(S.Unsupported, match="reduced dim 0"):
        S.collective("all_to_all", folded, 0, 0, K)


def test_reduce_type_codes_are_paddles():
    from paddle.distributed.communication.reduce import ReduceOp
    from verify.ir import collectives

    code = {"sum": ReduceOp.SUM, "max": ReduceOp.MAX, "min": ReduceOp.MIN,
            "prod": ReduceOp.PROD, "avg": ReduceOp.AVG}
    assert {v: k for k, v in collectives.REDUCE_TYPES.items()} == code
    for t, kind in collectives.REDUCE_TYPES.items():
        assert S.collective_kind(Op(0, "all_reduce", {}, {}, {"reduce_type": t})) == kind


# -- PIR ops (slots and attrs as verify/ir/pir_snapshot.py records them) --------------
@pytest.mark.parametrize("tx", [False, True])
@pytest.mark.parametrize("ty", [False, True])
@pytest.mark.parametrize("sx,sy", MM_SHAPES)
def test_pir_matmul_and_its_grad(sx, sy, tx, ty):
    x, y = _t(r(*sx), tx).copy(), _t(r(*sy), ty).copy()

    def fwd(x, y):
        return np.einsum("...ij,...jk->...ik", _t(x, tx), _t(y, ty))
    attrs = {"transpose_x": tx, "transpose_y": ty}
    out = run("pd_op.matmul", {"x": [x], "y": [y]}, attrs)["out"]
    close(out, fwd(x, y))
    g = r(*out.shape)
    grads = run("pd_op.matmul_grad", {"x": [x], "y": [y], "out_grad": [g]}, attrs)
    close(grads["x_grad"], vjp(lambda v: fwd(v, y), x, g))
    close(grads["y_grad"], vjp(lambda v: fwd(x, v), y, g))


@pytest.mark.parametrize("shape,target", [((2, 3, 4), [6, 4]), ((2, 3, 4), [0, -1])])
def test_pir_reshape(shape, target):
    x = r(*shape)
    ref = x.reshape([shape[i] if t == 0 else t for i, t in enumerate(target)])
    close(run("pd_op.reshape", {"x": [x], "shape": [np.array(target)]},
              {"shape@value": target})["out"], ref)


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 2, 1]])
def test_pir_transpose_and_its_grad(perm):
    x = r(2, 3, 4)
    out = run("pd_op.transpose", {"x": [x]}, {"perm": perm})["out"]
    close(out, np.transpose(x, perm))
    g = r(*out.shape)
    close(run("pd_op.transpose_grad", {"out_grad": [g]}, {"perm": perm})["x_grad"],
          vjp(lambda v: np.transpose(v, perm), x, g))


def test_pir_tanh_and_its_grad_in_terms_of_out():
    """``pd_op.tanh`` (its kernel the replay's reference) against numpy, and
    ``pd_op.tanh_grad``, which reads only out and dout, against the numeric
    vector-Jacobian product of tanh at x (out = tanh(x))."""
    x, g = r(2, 3, 4), r(2, 3, 4)
    out = run("pd_op.tanh", {"x": [x]})["out"]
    close(out, np.tanh(x))
    close(run("pd_op.tanh_grad", {"out": [np.tanh(x)], "out_grad": [g]})["x_grad"],
          vjp(np.tanh, x, g), tol=1e-5)


@pytest.mark.parametrize("with_y", [True, False])
def test_pir_swiglu_and_its_grad(with_y):
    """``pd_op.swiglu`` is ``silu(x) * y``, or without ``y`` ``silu(x1) * x2``
    of x's halves on the last axis; its grad against the numeric
    vector-Jacobian product of that function."""
    def silu(v):
        return v / (1.0 + np.exp(-v))
    x, y = r(2, 3, 4), r(2, 3, 4)
    if with_y:
        ins = {"x": [x], "y": [y]}

        def fwd(a, b):
            return silu(a) * b
        out = run("pd_op.swiglu", ins)["out"]
        close(out, fwd(x, y))
        g = r(*out.shape)
        grads = run("pd_op.swiglu_grad", {**ins, "out_grad": [g]})
        close(grads["x_grad"], vjp(lambda v: fwd(v, y), x, g), tol=1e-5)
        close(grads["y_grad"], vjp(lambda v: fwd(x, v), y, g), tol=1e-5)
        return

    def halves(v):
        return silu(v[..., :2]) * v[..., 2:]
    out = run("pd_op.swiglu", {"x": [x]})["out"]
    close(out, halves(x))
    g = r(*out.shape)
    close(run("pd_op.swiglu_grad", {"x": [x], "out_grad": [g]})["x_grad"],
          vjp(halves, x, g), tol=1e-5)


def test_pir_square_mean_and_grads():
    x = r(2, 3, 4)
    close(run("pd_op.square", {"x": [x]})["out"], x * x)
    g = r(2, 3, 4)
    close(run("pd_op.square_grad", {"x": [x], "out_grad": [g]})["x_grad"], vjp(np.square, x, g))
    for axis, keep in (([], False), ([1], False), ([0, 2], True)):
        fwd = (lambda v: np.mean(v, axis=tuple(axis) or None, keepdims=keep))
        attrs = {"axis@value": axis, "keepdim": keep}
        out = run("pd_op.mean", {"x": [x], "axis": [np.array(axis)]}, attrs)["out"]
        close(out, fwd(x))
        gm = r(*np.shape(fwd(x)))
        close(run("pd_op.mean_grad", {"x": [x], "out_grad": [gm], "axis": [np.array(axis)]},
                  attrs)["x_grad"], vjp(fwd, x, gm))


@pytest.mark.parametrize("factor,bias,after", [(0.5, 0.25, True), (-1.0, 0.0, False),
                                               (3.0, -2.0, False)])
def test_pir_scale(factor, bias, after):
    x = r(2, 3)
    ref = x * factor + bias if after else (x + bias) * factor
    close(run("pd_op.scale", {"x": [x], "scale": [np.array([factor])]},
              {"scale@value": factor, "bias": bias, "bias_after_scale": after})["out"], ref)


def test_pir_sgd_and_constants():
    p, g, lr = r(3, 2), r(3, 2), np.array(0.1)
    close(run("pd_op.sgd_", {"param": [p], "learning_rate": [lr], "grad": [g]})["param_out"],
          p - 0.1 * g)
    close(run("pd_op.full", {}, {"shape": [2, 3], "value": 0.25})["out"], np.full((2, 3), 0.25))
    close(run("pd_op.full_int_array", {}, {"value": [8, -1]})["out"], [8, -1])
    x = r(2, 3)
    close(run("pd_op.full_like", {"x": [x], "value": [np.array([1.5])]},
              {"value@value": 1.5})["out"], np.full((2, 3), 1.5))


def test_pir_definitions_and_named_writes():
    """builtin.parameter / pd_op.data bind nothing (the entry's value stays);
    set_parameter / shadow_output write their operand under the name."""
    assert run("builtin.parameter", {}, {"parameter_name": "w"}) == {}
    assert run("pd_op.data", {}, {"name": "x"}) == {}
    x = r(2, 3)
    close(run("builtin.set_parameter", {"operands": [x]})["parameter"], x)
    close(run("builtin.shadow_output", {"operands": [x]})["output"], x)


def test_pir_collective_neighbours():
    """pd_op.assign, split_with_num (its vector held stacked), builtin.slice /
    builtin.split, pd_op.add / add_ / add_grad, against numpy."""
    x = r(4, 6)
    close(run("pd_op.assign", {"x": [x]})["out"], x)
    for axis in (0, 1):
        vec = run("pd_op.split_with_num", {"x": [x]}, {"num": 2, "axis@value": axis})["out"]
        parts = np.split(x, 2, axis=axis)
        close(vec, np.stack(parts))
        for i in (0, 1):
            close(run("builtin.slice", {"operands": [vec]}, {"index": i})["results"], parts[i])
        op = Op(0, "builtin.split", {"operands": ["v"]}, {"results": ["a", "b"]}, {})
        got = S.ROWS["builtin.split"](op, {"operands": [T(vec)]}, K)["results"]
        for t, want in zip(got, parts):
            close(t.arr, want)
    y, b = r(4, 6), r(6)
    close(run("pd_op.add", {"x": [x], "y": [y]})["out"], x + y)
    close(run("pd_op.add_", {"x": [x], "y": [b]})["out"], x + b)
    g = r(4, 6)
    res = run("pd_op.add_grad", {"x": [x], "y": [b], "out_grad": [g]}, {"axis": -1})
    close(res["x_grad"], g)
    close(res["y_grad"], g.sum(axis=0))


# -- the GPT model's ops, against Paddle's own kernels (dygraph, same phi kernels) --
def _pd(fn):
    import paddle
    with paddle.base.dygraph.guard():
        return fn(paddle)


@pytest.mark.parametrize("pad", [-1, 2])
def test_lookup_table_v2_and_its_grad_against_paddle(pad):
    w, g = r(5, 3), r(2, 3, 3)
    ids = np.array([[0, 4, 2], [2, 2, 1]])
    attrs = {"padding_idx": pad}
    got = run("lookup_table_v2", {"Ids": [ids], "W": [w]}, attrs)["Out"]
    dw = run("lookup_table_v2_grad", {"Ids": [ids], "W": [w], "Out@GRAD": [g]},
             attrs)["W@GRAD"]

    def ref(paddle):
        wt = paddle.to_tensor(w, stop_gradient=False)
        out = paddle.nn.functional.embedding(paddle.to_tensor(ids), wt,
                                             padding_idx=None if pad < 0 else pad)
        (out * paddle.to_tensor(g)).sum().backward()
        return out.numpy(), wt.grad.numpy()
    out_ref, dw_ref = _pd(ref)
    close(got, out_ref)
    close(dw, dw_ref)
    # exact in the table: each output element is linear in the row it reads
    assert np.count_nonzero(dw[2]) == 0 if pad == 2 else np.count_nonzero(dw[3]) == 0


@pytest.mark.parametrize("start", [0, 2, 4])
def test_c_embedding_and_its_grad_against_paddle(start):
    """A rank's piece of a vocab-split table (2 rows at ids start, start + 1
    of a vocabulary of 6): the lookup of an id another rank holds is 0, and
    the pieces' lookups sum to the whole table's (float32: Paddle's float64
    grad kernel is wrong, ``test_c_embedding_row.py``)."""
    full, g = r(6, 3), r(2, 3, 3)
    ids = np.array([[0, 5, 2], [3, 2, 1]])
    w = full[start:start + 2]
    attrs = {"start_index": start, "vocab_size": 6}
    got = run("pd_op.c_embedding", {"weight": [w], "x": [ids]}, attrs)["out"]
    dw = run("pd_op.c_embedding_grad", {"weight": [w], "x": [ids], "out_grad": [g]},
             {"start_index": start})["weight_grad"]

    def ref(paddle):
        wt = paddle.to_tensor(w.astype("float32"), stop_gradient=False)
        out = paddle._C_ops.c_embedding(wt, paddle.to_tensor(ids), start, 6)
        (dwt,) = paddle.grad([out], [wt], [paddle.to_tensor(g.astype("float32"))])
        return out.numpy(), dwt.numpy()
    out_ref, dw_ref = _pd(ref)
    close(got, out_ref, 1e-5)
    close(dw, dw_ref, 1e-5)
    pieces = sum(run("pd_op.c_embedding", {"weight": [full[s:s + 2]], "x": [ids]},
                     {"start_index": s, "vocab_size": 6})["out"] for s in (0, 2, 4))
    close(pieces, full[ids])


def test_c_embedding_grads_pieces_are_the_embedding_grad_of_the_whole_table():
    """The grad row reads no vocabulary (the op has no ``vocab_size``): the
    pieces' gradients (start_index 0, 2, 4, two rows each) stacked are
    Paddle's embedding gradient of the whole table, the identity the value
    proof relies on; and ids outside the vocabulary, which Paddle's CPU
    c_embedding_grad skips, add nothing (the row against the kernel)."""
    full, g = r(6, 3), r(2, 3, 3)
    ids = np.array([[0, 5, 2], [3, 2, 1]])
    stacked = np.concatenate([
        run("pd_op.c_embedding_grad", {"weight": [full[s:s + 2]], "x": [ids], "out_grad": [g]},
            {"start_index": s})["weight_grad"] for s in (0, 2, 4)])

    def whole(paddle):
        wt = paddle.to_tensor(full.astype("float32"), stop_gradient=False)
        out = paddle.nn.functional.embedding(paddle.to_tensor(ids), wt)
        (dwt,) = paddle.grad([out], [wt], [paddle.to_tensor(g.astype("float32"))])
        return dwt.numpy()
    close(stacked, _pd(whole), 1e-5)
    far = np.array([[-1, 6, 2], [7, 3, -4]])  # the kernel skips every id but 2 and 3

    def piece(paddle):
        wt = paddle.to_tensor(full[2:4].astype("float32"), stop_gradient=False)
        out = paddle._C_ops.c_embedding(wt, paddle.to_tensor(far), 2, 6)
        (dwt,) = paddle.grad([out], [wt], [paddle.to_tensor(g.astype("float32"))])
        return dwt.numpy()
    got = run("pd_op.c_embedding_grad", {"weight": [full[2:4]], "x": [far], "out_grad": [g]},
              {"start_index": 2})["weight_grad"]
    close(got, _pd(piece), 1e-5)
    close(got, [g[0, 2], g[1, 1]])


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_and_its_grad_against_paddle(axis):
    x, g = r(2, 3, 4), r(2, 3, 4)

    def ref(paddle):
        xt = paddle.to_tensor(x, stop_gradient=False)
        out = paddle.nn.functional.softmax(xt, axis=axis)
        (dx,) = paddle.grad(out, xt, paddle.to_tensor(g))
        return out.numpy(), dx.numpy()
    out_ref, dx_ref = _pd(ref)
    close(run("softmax", {"X": [x]}, {"axis": axis})["Out"], out_ref)
    close(run("softmax_grad", {"Out": [out_ref], "Out@GRAD": [g]}, {"axis": axis})["X@GRAD"],
          dx_ref)


@pytest.mark.parametrize("target,perm", [([0, 12], [2, 0, 1]), ([6, 2, 2], [1, 2, 0])])
def test_reshape2_and_transpose2_grads_against_paddle(target, perm):
    x = r(2, 3, 4)
    xshape = np.zeros((0, 2, 3, 4))  # XShape: [0] + X's shape, no values
    shaped = [x.shape[i] if t == 0 else t for i, t in enumerate(target)]
    g_r, g_t = r(*shaped), r(*np.transpose(x, perm).shape)

    def ref(paddle):
        xt = paddle.to_tensor(x, stop_gradient=False)
        (dr,) = paddle.grad(paddle.reshape(xt, shaped), xt, paddle.to_tensor(g_r))
        (dt,) = paddle.grad(paddle.transpose(xt, perm), xt, paddle.to_tensor(g_t))
        return dr.numpy(), dt.numpy()
    dr_ref, dt_ref = _pd(ref)
    close(run("reshape2_grad", {"Out@GRAD": [g_r], "XShape": [xshape]},
              {"shape": target})["X@GRAD"], dr_ref)
    close(run("transpose2_grad", {"Out@GRAD": [g_t], "XShape": [xshape]},
              {"axis": perm})["X@GRAD"], dt_ref)


# -- the gradient-merge cases' PIR ops (passes/pir_gradient_merge.py) ----------
def test_pir_subtract_sum_and_their_grads():
    x, y, b, g = r(4, 3), r(4, 3), r(3), r(4, 3)
    close(run("pd_op.subtract", {"x": [x], "y": [y]})["out"], x - y)
    close(run("pd_op.subtract", {"x": [x], "y": [b]})["out"], x - b)
    got = run("pd_op.subtract_grad", {"x": [x], "y": [b], "out_grad": [g]}, {"axis": -1})
    close(got["x_grad"], g)
    close(got["y_grad"], -g.sum(0))
    for axis, keep in (([], False), ([0], False), ([1], True)):
        attrs = {"axis@value": axis, "keepdim": keep}
        ref = x.sum(axis=tuple(axis) if axis else None, keepdims=keep)
        close(run("pd_op.sum", {"x": [x], "axis": [np.array(axis)]}, attrs)["out"], ref)
        gs = r(*np.shape(ref)) if np.shape(ref) else np.array(0.7)
        want = np.broadcast_to(gs if keep or not axis else np.expand_dims(gs, axis[0]), x.shape)
        close(run("pd_op.sum_grad", {"x": [x], "out_grad": [gs], "axis": [np.array(axis)]},
                  attrs)["x_grad"], want)


def test_pir_scale_inplace_and_whole_tensor_set_value():
    x = r(2, 3)
    close(run("pd_op.scale_", {"x": [x], "scale": [np.array([0.25])]},
              {"scale@value": 0.25, "bias": 0.0, "bias_after_scale": False})["out"], x * 0.25)
    zero = {"axes": [], "starts@value": [], "ends@value": [], "steps@value": [],
            "none_axes": [], "decrease_axes": [], "values@value": 0.0}
    close(run("pd_op.set_value_with_tensor_", {"x": [x], "values": [np.array([0.0])]},
              zero)["out"], np.zeros((2, 3)))
    row = r(3)
    close(run("pd_op.set_value_with_tensor_", {"x": [x], "values": [row]}, zero)["out"],
          np.broadcast_to(row, (2, 3)))


def test_pir_momentum_against_paddle():
    """Two steps of Paddle's own Momentum (dygraph) vs the row applied twice."""
    p0, g1, g2 = r(3, 2), r(3, 2), r(3, 2)

    def ref(paddle):
        w = paddle.create_parameter([3, 2], "float32",
                                    default_initializer=paddle.nn.initializer.Assign(p0))
        opt = paddle.optimizer.Momentum(0.1, 0.9, parameters=[w])
        for g in (g1, g2):
            w.grad = paddle.to_tensor(g.astype("float32"))
            opt.step()
        return w.numpy()
    want = _pd(ref)
    attrs = {"mu": 0.9, "use_nesterov": False, "regularization_method": "",
             "regularization_coeff": 0.0, "rescale_grad": 1.0}
    p, v = p0, np.zeros((3, 2))
    for g in (g1, g2):
        got = run("pd_op.momentum_", {"param": [p], "grad": [g], "velocity": [v],
                                      "learning_rate": [np.array(0.1)]}, attrs)
        p, v = got["param_out"], got["velocity_out"]
    close(p, want, tol=1e-5)
    close(v, 0.9 * g1 + g2)


@pytest.mark.parametrize("op_type", ["pd_op.adam_", "pd_op.adamw_"])
def test_pir_adam_rows_pass_the_right_inputs(op_type):
    p, g, m1, m2 = r(3, 2), r(3, 2), r(3, 2), np.abs(r(3, 2))
    attrs = {"beta1@value": 0.9, "beta2@value": 0.999, "epsilon@value": 1e-8,
             "multi_precision": False}
    if op_type == "pd_op.adamw_":
        attrs.update({"coeff": 0.01, "lr_ratio": 1.0, "with_decay": True})
    got = run(op_type, {"param": [p], "grad": [g], "moment1": [m1], "moment2": [m2],
                        "learning_rate": [np.array([0.1])],
                        "beta1_pow": [np.array([0.9 ** 3])],
                        "beta2_pow": [np.array([0.999 ** 3])]}, attrs)
    m1o, m2o = 0.9 * m1 + 0.1 * g, 0.999 * m2 + 0.001 * g * g
    decay = 0.01 if op_type == "pd_op.adamw_" else 0.0
    po = p * (1 - 0.1 * decay) - 0.1 * (m1o / (1 - 0.9 ** 3)) / (
        np.sqrt(m2o) / np.sqrt(1 - 0.999 ** 3) + 1e-8)
    close(got["param_out"], po)
    close(got["moment1_out"], m1o)
    close(got["moment2_out"], m2o)
    close(got["beta1_pow_out"], [0.9 ** 4])
    close(got["beta2_pow_out"], [0.999 ** 4])


def test_pir_reshard_index_maps():
    """pd_op.slice (one equal chunk per axis) and pd_op.concat of a stacked
    vector (split_with_num's), against numpy."""
    x = r(4, 6)
    close(run("pd_op.slice", {"input": [x]}, {"axes": [1], "starts@value": [3],
                                           "ends@value": [6]})["out"], x[:, 3:6])
    close(run("pd_op.slice", {"input": [x]}, {"axes": [0, 1], "starts@value": [0, 2],
                                           "ends@value": [2, 4]})["out"], x[0:2, 2:4])
    with pytest.raises(S.Unsupported):
        run("pd_op.slice", {"input": [x]}, {"axes": [1], "starts@value": [1],
                                         "ends@value": [3]})
    vec = np.stack(np.split(x, 2, axis=0))
    close(run("pd_op.concat", {"x": [vec]}, {"axis@value": 1})["out"],
          np.concatenate(np.split(x, 2, axis=0), axis=1))


def test_dependency_rows_compute_nothing():
    """nop (the dependencies pass's ordering op) leaves its Out as it was;
    depend passes X through."""
    x, dep = r(3, 2), r(2)
    assert run("nop", {"X": [dep]}, outs={"Out": ["x"]}) == {}
    close(run("depend", {"X": [x], "Dep": [dep]})["Out"], x)


@pytest.mark.parametrize("kind,fold", [("reduce_sum", sum),
                                       ("reduce_avg", lambda xs: sum(xs) / len(xs))])
@pytest.mark.parametrize("n,root", [(2, 0), (2, 1), (4, 2)])
def test_rooted_reduce_lands_on_the_root_only(kind, fold, n, root):
    """``reduce`` (sharding stage 2): the root (index in the group) gets the
    reduction, every other rank keeps its own x."""
    from verify.ir import collectives

    xs = [r(4, 3) for _ in range(n)]
    for i in range(n):
        out = S.collective(kind, [T(x) for x in xs], i, root, K)
        close(np.asarray(out.arr, dtype=float), fold(xs) if i == root else xs[i])
    op = Op(0, "reduce", {"x": ["g"]}, {"out": ["g"]},
            {"reduce_type": 4 if kind == "reduce_avg" else 0, "root_id": root})
    assert S.collective_kind(op) == kind and collectives.root_of(op.attrs) == root


@pytest.mark.parametrize("axes,starts,ends,decrease", [
    ([2], [0], [4], []), ([2], [4], [8], []), ([1, 2], [1, -4], [3, 100], []),
    ([0], [1], [2], [0])])
def test_slice_and_its_grad_against_paddle(axes, starts, ends, decrease):
    x = r(2, 3, 8)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}
    got = run("slice", {"Input": [x]}, attrs)["Out"]

    def ref(paddle):
        xt = paddle.to_tensor(x, stop_gradient=False)
        out = paddle.slice(xt, axes, starts, ends)
        if decrease:
            out = paddle.squeeze(out, decrease)
        g = paddle.to_tensor(np.arange(out.size, dtype="float64").reshape(out.shape) + 1)
        (dx,) = paddle.grad(out, xt, g)
        return out.numpy(), g.numpy(), dx.numpy()
    out_ref, g, dx_ref = _pd(ref)
    close(got, out_ref)
    close(run("slice_grad", {"Input": [x], "Out@GRAD": [g]}, attrs)["Input@GRAD"], dx_ref)


def test_slice_on_reduced_shapes_takes_the_aligned_chunk():
    """x [2, 6] reduced to [2, 2]: [3:6] is the second of two aligned chunks
    (reduced column 1), as split would give it; an unaligned slice is
    Unsupported (INCONCLUSIVE), never a guess."""
    x = S.Tensor(np.array(r(2, 2), dtype=object), S.leaf_dims((2, 6), 2))
    op = Op(0, "slice", {"Input": ["x"]}, {"Out": ["o"]},
            {"axes": [1], "starts": [3], "ends": [6]})
    out = S.ROWS["slice"](op, {"Input": [x]}, K)["Out"][0]
    assert out.orig == (2, 3)
    close(out.arr, x.arr[:, 1:2])
    bad = Op(0, "slice", {"Input": ["x"]}, {"Out": ["o"]},
             {"axes": [1], "starts": [1], "ends": [4]})
    with pytest.raises(S.Unsupported):
        S.ROWS["slice"](bad, {"Input": [x]}, K)


def test_dropout_rows_agree_with_paddles_kernels():
    """The value rows of ``seed``, ``dropout`` and ``dropout_grad`` against
    the CPU kernels: the mask is a function of the seed's value alone (a
    ``Seed`` tensor from a seed op and a fixed ``seed`` attr of the same
    value draw one mask, whatever X holds; another seed another mask), and
    ``Out = X * Mask / (1 - p)``, ``X@GRAD = Out@GRAD * Mask / (1 - p)``
    with that mask (the rows' uninterpreted mask read from the run)."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    shape, p = [4, 8], 0.5
    main = paddle.static.Program()
    blk = main.global_block()

    def var(name, dtype="float32", shp=shape):
        return blk.create_var(name=name, shape=shp, dtype=dtype)

    attrs = {"dropout_prob": p, "is_test": False,
             "dropout_implementation": "upscale_in_train"}
    for n in ("x", "x2", "dout"):
        v = var(n)
        v.is_data = True
    blk.append_op(type="seed", outputs={"Out": [var("s", "int32", [1])]},
                  attrs={"seed": 11, "force_cpu": True})
    drop1 = blk.append_op(type="dropout", inputs={"X": ["x"]}, outputs={
        "Out": [var("o1")], "Mask": [var("m1", "uint8")]},
        attrs={**attrs, "fix_seed": True, "seed": 11})
    blk.append_op(type="dropout", inputs={"X": ["x2"], "Seed": ["s"]}, outputs={
        "Out": [var("o2")], "Mask": [var("m2", "uint8")]}, attrs=dict(attrs))
    blk.append_op(type="dropout", inputs={"X": ["x"]}, outputs={
        "Out": [var("o3")], "Mask": [var("m3", "uint8")]},
        attrs={**attrs, "fix_seed": True, "seed": 12})
    (grad,), _ = paddle.base.core.get_grad_op_desc(drop1.desc, set(), [])
    desc = blk.desc.append_op()
    desc.copy_from(grad)  # dropout_grad as the grad maker makes it
    desc.set_input("Out@GRAD", ["dout"])
    desc.set_output("X@GRAD", [var("dx").name])
    blk._sync_with_cpp()
    rng = np.random.default_rng(0)
    feed = {n: rng.standard_normal(shape).astype("float32") for n in ("x", "x2", "dout")}
    names = ["o1", "m1", "o2", "m2", "o3", "m3", "dx"]
    got = dict(zip(names, paddle.static.Executor(paddle.CPUPlace()).run(
        main, feed=feed, fetch_list=names)))
    assert (got["m1"] == got["m2"]).all() and not (got["m1"] == got["m3"]).all()
    assert 0 < got["m1"].sum() < got["m1"].size

    class Kernels:  # the mask of seed s read from the run: the rows' one unknown
        reduce_to = 10 ** 6

        def const(self, v):
            return float(v)

        def uf(self, kernel, args, attrs=()):
            assert kernel == "dropout.mask"
            j = int(dict(attrs)["index"])
            m = {11.0: got["m1"], 12.0: got["m3"]}[float(args[0])]
            return float(m.reshape(-1)[j])

    def tensor(a, dtype="float32"):
        a = np.asarray(a, dtype=object)
        return S.Tensor(a, S.leaf_dims(a.shape), dtype)

    k = Kernels()
    (s,) = S.ROWS["seed"](Op(0, "seed", {}, {"Out": ["s"]}, {"seed": 11}), {}, k)["Out"]
    assert list(s.arr) == [11.0]
    for seed_ins, extra, out, mask in (
            ({}, {"fix_seed": True, "seed": 11}, "o1", "m1"),
            ({"Seed": [s]}, {}, "o2", "m2"),
            ({}, {"fix_seed": True, "seed": 12}, "o3", "m3")):
        x = feed["x2"] if out == "o2" else feed["x"]
        op = Op(0, "dropout", {"X": ["x"], **{k2: ["s"] for k2 in seed_ins}},
                {"Out": [out], "Mask": [mask]}, {**attrs, **extra})
        res = S.ROWS["dropout"](op, {"X": [tensor(x.astype(float))], **seed_ins}, k)
        np.testing.assert_allclose(res["Out"][0].arr.astype(float), got[out], rtol=1e-6)
        assert (res["Mask"][0].arr.astype(float) == got[mask]).all()
    op = Op(0, "dropout_grad", {"Out@GRAD": ["dout"], "Mask": ["m1"]}, {"X@GRAD": ["dx"]},
            dict(attrs))
    res = S.ROWS["dropout_grad"](op, {"Out@GRAD": [tensor(feed["dout"].astype(float))],
                                      "Mask": [tensor(got["m1"].astype(float), "uint8")]}, k)
    np.testing.assert_allclose(res["X@GRAD"][0].arr.astype(float), got["dx"], rtol=1e-6)
    # an unseeded dropout and a seed op drawing a random seed are refused
    with pytest.raises(S.Unsupported):
        S.ROWS["dropout"](Op(0, "dropout", {"X": ["x"]}, {"Out": ["o"]}, dict(attrs)),
                          {"X": [tensor(feed["x"].astype(float))]}, k)
    with pytest.raises(S.Unsupported):
        S.ROWS["seed"](Op(0, "seed", {}, {"Out": ["s"]}, {"seed": 0}), {}, k)


def test_clip_against_paddles_kernel():
    """``clip``: ``min(max(x, lo), hi)`` with the bounds cast to x's dtype,
    against the CPU kernel; a bound not exact in bfloat16 and a min above
    the max are refused."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    x = RNG.standard_normal((4, 8)).astype("float32") / 8
    main = paddle.static.Program()
    blk = main.global_block()
    v = blk.create_var(name="x", shape=[4, 8], dtype="float32")
    v.is_data = True
    blk.append_op(type="clip", inputs={"X": ["x"]},
                  outputs={"Out": [blk.create_var(name="o", shape=[4, 8], dtype="float32")]},
                  attrs={"min": -0.05, "max": 0.0625})
    (want,) = paddle.static.Executor(paddle.CPUPlace()).run(main, feed={"x": x},
                                                            fetch_list=["o"])
    assert (want == 0.0625).any() and (want == np.float32(-0.05)).any()
    close(run("clip", {"X": [x]}, {"min": -0.05, "max": 0.0625})["Out"], want)
    op = Op(0, "clip", {"X": ["x"]}, {"Out": ["o"]}, {"min": -0.05, "max": 0.0625})
    with pytest.raises(S.Unsupported):  # -0.05 is not a bfloat16
        S.ROWS["clip"](op, {"X": [S.Tensor(np.asarray(x, dtype=object), S.leaf_dims(x.shape),
                                           "bfloat16")]}, K)
    with pytest.raises(S.Unsupported):
        run("clip", {"X": [x]}, {"min": 0.5, "max": 0.25})

def test_every_row_is_tested():
    """Every row of the semantics table is named by a test of this file (a
    string literal other than a docstring: a ``run``/``ROWS[...]`` call or a
    parametrize list) or of ``test_zoo_op_rules.py``.  Read from the source,
    not from which tests ran: under ``pytest -n`` a worker runs only part of
    this file, so a set filled at run time would depend on the schedule."""
    import ast
    import importlib.util
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    named = {n.value for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and id(n) not in docstrings}
    # the zoo's rows are tested (and their completeness checked) in that file
    spec = importlib.util.spec_from_file_location(
        "_zoo_op_rules", Path(__file__).with_name("test_zoo_op_rules.py"))
    zoo_rules = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo_rules)
    missing = set(S.ROWS) - named - set(zoo_rules.ROWS_TESTED_HERE)
    assert not missing, f"rows without an axiom test: {sorted(missing)}"


# -- the cross entropy with softmax, row by row (semantics.uf_rows) -------------------
@pytest.mark.parametrize("axis", [-1, 1])
def test_paddles_cross_entropy_with_softmax_is_row_by_row(axis):
    """The claim ``uf_rows`` rests on, through Paddle's own kernel and its
    grad: rows 2..3 of a batch (a label at ignore_index among them), run
    alone, give rows 2..3 of the whole batch's softmax, loss and input grad
    (a row reads only its own logits, label and loss grad)."""
    x = r(4, 3, 5) if axis == -1 else r(4, 5, 3)
    lab = RNG.integers(0, 5, (4, 3, 1) if axis == -1 else (4, 1, 3))
    lab.reshape(-1)[7] = -100  # ignore_index: that row's loss and grad are 0
    dl = r(*lab.shape)

    def ce(paddle, xs, ls, ds):
        xt = paddle.to_tensor(xs, dtype="float64", stop_gradient=False)
        sm, loss = paddle._C_ops.cross_entropy_with_softmax(
            xt, paddle.to_tensor(ls, dtype="int64"), False, True, True, -100, axis)
        (dx,) = paddle.grad([loss], [xt], [paddle.to_tensor(ds, dtype="float64")])
        return [sm.numpy(), loss.numpy(), dx.numpy()]
    whole = _pd(lambda p: ce(p, x, lab, dl))
    part = _pd(lambda p: ce(p, x[2:], lab[2:], dl[2:]))
    for w, p in zip(whole, part):
        close(w[2:], p, 1e-12)


def _ce(k, x, lab, axis=-1):
    op = Op(0, "pd_op.cross_entropy_with_softmax", {}, {},
            {"axis": axis, "soft_label": False, "use_softmax": True,
             "numeric_stable_mode": True, "ignore_index": -100})
    return S.ROWS["pd_op.cross_entropy_with_softmax"](op, {"input": [x], "label": [lab]}, k)


def _ce_grad(k, lab, sm, dl):
    op = Op(0, "pd_op.cross_entropy_with_softmax_grad", {}, {},
            {"axis": -1, "soft_label": False, "use_softmax": True,
             "numeric_stable_mode": True, "ignore_index": -100})
    return S.ROWS["pd_op.cross_entropy_with_softmax_grad"](
        op, {"label": [lab], "softmax": [sm], "loss_grad": [dl]}, k)["input_grad"][0]


def _piece(t, sl):
    return S.Tensor(t.arr[sl], S.leaf_dims(t.arr[sl].shape), t.dtype)


def test_cross_entropy_of_a_batch_piece_is_the_piece_of_the_whole():
    """Symbolically: the cross entropy (softmax, loss) and its grad on rows
    2..3 are the whole batch's rows 2..3, the same terms (a data-parallel
    split of the loss is provable); a piece whose labels are another rows'
    (a wrong split of the labels) is not, nor one whose logits are shifted
    by a row; the loss is one element a row along axis, shaped as Paddle's."""
    store, k, sym_tensor = _symbolic_store()
    x, lab, dl = sym_tensor((4, 3, 5), "x"), sym_tensor((4, 3, 1), "l"), \
        sym_tensor((4, 3, 1), "g")
    whole = _ce(k, x, lab)
    assert whole["softmax"][0].arr.shape == (4, 3, 5) and whole["loss"][0].arr.shape == (4, 3, 1)
    part = _ce(k, _piece(x, slice(2, 4)), _piece(lab, slice(2, 4)))

    def ids(a):
        return [e.i for e in a.reshape(-1)]
    for s in ("softmax", "loss"):
        assert ids(whole[s][0].arr[2:]) == ids(part[s][0].arr)
    gw = _ce_grad(k, lab, whole["softmax"][0], dl)
    gp = _ce_grad(k, _piece(lab, slice(2, 4)), part["softmax"][0], _piece(dl, slice(2, 4)))
    assert gw.arr.shape == (4, 3, 5) and ids(gw.arr[2:]) == ids(gp.arr)
    wrong_labels = _ce(k, _piece(x, slice(2, 4)), _piece(lab, slice(0, 2)))
    shifted = _ce(k, _piece(x, slice(1, 3)), _piece(lab, slice(2, 4)))
    for bad in (wrong_labels, shifted):
        for s in ("softmax", "loss"):
            assert not set(ids(whole[s][0].arr[2:])) & set(ids(bad[s][0].arr))
    # axis 1: the rows run along dim 1 (the loss [4, 1, 3])
    x1, l1 = sym_tensor((4, 5, 3), "y"), sym_tensor((4, 1, 3), "m")
    a1 = _ce(k, x1, l1, axis=1)
    assert a1["loss"][0].arr.shape == (4, 1, 3)
    p1 = _ce(k, _piece(x1, slice(2, 4)), _piece(l1, slice(2, 4)), axis=1)
    assert ids(a1["softmax"][0].arr[2:]) == ids(p1["softmax"][0].arr)
