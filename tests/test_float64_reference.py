"""``verify/numeric/float64_reference.py`` on Paddle's own executor: the
serial program rewritten to float64 computes the same function as the
float32 program (checked against numpy in float64), so ``|x32 - x64|`` is
the float32 run's rounding error; and the error it measures on a saturated
softmax's weight gradient is far above the old RMS floor."""
from __future__ import annotations

import numpy as np
import pytest

from verify.numeric.compare import rtol


def _softmax_program(scale):
    """A linear layer, a softmax sharpened by ``scale``, a mean loss against
    ``y``; ``(exported, weight name, gradient value name)``."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, value_names

    paddle.enable_static()
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 8], "float32")
            lin = paddle.nn.Linear(8, 8, bias_attr=False)
            s = paddle.nn.functional.softmax(lin(x) * scale)
            loss = paddle.mean(s * paddle.static.data("y", [4, 8], "float32"))
            (param, grad), = paddle.static.append_backward(loss)
        names = value_names(main)
        return export_programs(main, startup, names), param.name, names.name(grad)


def _numpy_grad(x, w, y, scale):
    z = (x @ w) * scale
    s = np.exp(z - z.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    ds = y / y.size
    dz = s * (ds - (s * ds).sum(axis=1, keepdims=True)) * scale
    return x.T @ dz


def test_float64_run_of_a_saturated_softmax_measures_the_float32_error():
    from verify.numeric.float64_reference import SUFFIX
    from verify.numeric.planner_runs import run_serial_measured

    scale = 20.0  # rows nearly one-hot: the backward cancels
    exported, pname, gname = _softmax_program(scale)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((4, 8)).astype("float32") for _ in range(2))
    w = rng.standard_normal((8, 8)).astype("float32")
    out = run_serial_measured(exported, {pname: w}, [{"x": x, "y": y}], [gname], 1, 0)[0]
    g32, g64 = out[gname], out[gname + SUFFIX]
    assert g32.dtype == np.float32 and g64.dtype == np.float64
    exact = _numpy_grad(x.astype(np.float64), w.astype(np.float64), y.astype(np.float64), scale)
    # the same function: float64 agrees with numpy far below float32's error
    err = np.abs(g32 - g64).max()
    assert np.abs(g64 - exact).max() < 1e-6 * err, (np.abs(g64 - exact).max(), err)
    # the cancellation: the float32 error is far above the RMS floor, yet the
    # measured floor still resolves the value (a 2x or 1% change is seen)
    rms = float(np.sqrt(np.mean(g32.astype(np.float64) ** 2)))
    assert err > 10 * rtol("float32", 8 * 3) * rms, (err, rms)
    assert 8 * err < 0.01 * np.abs(g32).max(), (err, np.abs(g32).max())


def test_a_low_precision_program_is_not_rewritten():
    from verify.numeric.float64_reference import float64_text, with_float64

    assert float64_text('{"#":"0.t_bf16"}') is None
    assert float64_text('{"#":"0.t_f32"},{"AT":{"#":"1.a_dtype","D":"float32"}}') == \
        '{"#":"0.t_f64"},{"AT":{"#":"1.a_dtype","D":"float64"}}'
    out = [{"v": np.ones(2, np.float32)}]
    exported = {"main": b'{"#":"0.t_f16"}', "startup": b""}
    assert with_float64(lambda *a: pytest.fail("ran"), exported, {}, [{}], out) is out


def test_a_float64_run_that_raises_measures_nothing():
    from verify.numeric.float64_reference import with_float64

    out = [{"v": np.ones(2, np.float32)}]

    def refuses(*a):
        raise RuntimeError("no float64 kernel")
    assert with_float64(refuses, {"main": b"{}", "startup": b"{}"}, {}, [{}], out) is out
