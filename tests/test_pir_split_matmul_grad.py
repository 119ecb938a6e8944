"""The VPP backward split on PIR programs: its findings carry their evidence."""
from __future__ import annotations

from verify import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.application import run_application  # noqa: E402
from verify.matrix_runner import pick_backend  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402


def _app(case_name):
    _, numeric = pick_backend("simulated", 0)
    return run_application(passes.get("vpp_split"), cases.all_cases()[case_name],
                           numeric=numeric)


def _check(app, kind):
    return [c for c in app.checks if c.kind == kind]


def test_untransposed_split_is_proved_and_run():
    app = _app("pir_mm_3d_nonsquare")
    assert app.verdict == Verdict.EQUIVALENT and app.status == "EQUIVALENT"
    assert [c.verdict for c in _check(app, "value")] == [Verdict.EQUIVALENT]
    assert [c.verdict for c in _check(app, "numeric")] == [Verdict.EQUIVALENT]
    assert all(c.ok for c in _check(app, "shape") + _check(app, "dataflow"))


def test_transposed_weight_split_as_if_untransposed_is_refuted():
    app = _app("pir_mm_3d_ty_square")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (num,) = _check(app, "numeric")
    assert num.verdict == Verdict.NOT_EQUIVALENT
    cex = num.counterexample
    assert {"tensor", "index", "original", "rewritten"} <= set(cex)
    assert abs(cex["original"] - cex["rewritten"]) > cex["tol"]
    (val,) = _check(app, "value")
    assert val.verdict == Verdict.NOT_EQUIVALENT and val.counterexample["var"]
    # shapes agree (square weight), so only the values tell
    assert all(c.ok for c in _check(app, "shape"))


def test_transposed_x_with_equal_dims_is_refuted_too():
    app = _app("pir_mm_3d_tx_square")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    assert any(c.verdict == Verdict.NOT_EQUIVALENT for c in _check(app, "value"))


def test_dynamic_batch_reshapes_to_minus_four():
    app = _app("pir_mm_3d_dynamic")
    assert app.verdict == Verdict.PASS_CRASHED
    (crash,) = _check(app, "pass")
    assert "[-4, 8]" in crash.message and "Traceback" in crash.details["traceback"]


def test_non_square_transposed_weight_crashes_in_the_pass():
    app = _app("pir_mm_3d_ty_nonsquare")
    assert app.verdict == Verdict.PASS_CRASHED
    assert "matmul" in _check(app, "pass")[0].message
