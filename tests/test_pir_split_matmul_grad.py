"""The VPP backward split on PIR programs: its findings carry their evidence."""
from __future__ import annotations

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402
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
    assert any(c.advisory for c in _check(app, "shape"))  # the plan was checked too


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
    # shapes agree (square weight), so only the values tell (the advisory
    # prediction names the ignored flag)
    assert all(c.ok for c in _check(app, "shape") if not c.advisory)


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


def test_predictions_explain_each_finding_before_the_pass_runs():
    dyn = _app("pir_mm_3d_dynamic")
    pred = [c for c in dyn.checks if c.advisory and not c.ok]
    assert any("[-4, 8]" in c.message for c in pred)
    ty = _app("pir_mm_3d_ty_square")
    assert any("split as if untransposed" in c.message for c in ty.checks if c.advisory)
    ok = _app("pir_mm_3d")
    assert all(c.ok for c in ok.checks if c.advisory)


def test_pir_reproducers_need_only_paddle(tmp_path):
    """An EQUIVALENT application's reproducer exits 0, a finding's 1 (the
    findings' are also run by tests/test_repro.py)."""
    import os
    import subprocess
    import sys

    from verify.repro import reproducer as repro

    adapter = passes.get("vpp_split")
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("PADDLE_", "VERIFY_", "FLAGS_"))}
    for case_name, code, needle in (("pir_mm_3d_nonsquare", 0, "no defect"),
                                    ("pir_mm_3d_ty_square", 1, "NOT_EQUIVALENT")):
        path = repro.write(adapter, cases.all_cases()[case_name],
                           str(tmp_path / f"{case_name}.py"))
        text = open(path).read()
        for mod in ("verify", "cases", "passes"):
            assert f"import {mod}" not in text and f"from {mod}" not in text
        p = subprocess.run([sys.executable, "-I", path], cwd=str(tmp_path), env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == code and needle in p.stdout, p.stdout + p.stderr[-2000:]


def test_pir_application_in_an_isolation_worker_equals_the_in_process_one():
    from verify.engine import isolation
    from verify.ir.pir_snapshot import snapshot_rank

    adapter = passes.get("vpp_split")
    for case_name in ("pir_mm_3d_ty_square", "pir_mm_3d_dynamic"):
        case = cases.all_cases()[case_name]
        local = adapter.apply_local(case, 0)
        remote = isolation.apply_pass(adapter, case, 0)
        assert isolation.workers(), "the job ran in a worker"
        assert snapshot_rank(remote.rewritten).to_dict() == \
            snapshot_rank(local.rewritten).to_dict()
        assert (remote.error is None) == (local.error is None)
        assert remote.error_type == local.error_type


def test_pir_numeric_runs_go_to_a_worker_and_agree_with_in_process_runs():
    import numpy as np

    from verify.engine import isolation
    from verify.numeric import pir_runner
    from verify.ir.pir_snapshot import snapshot_rank

    case = cases.all_cases()["pir_mm_3d_nonsquare"]
    rp = case.build(0)
    s = snapshot_rank(rp)
    watch = list(rp.fetches) + [rp.loss]
    before = isolation.enabled()  # another test in this process may have turned it off
    isolation.configure(enabled=True)
    try:
        remote = pir_runner.run_program(rp, s, watch, 0, 2)
        assert isolation.workers()
        isolation.configure(enabled=False)
        local = pir_runner.run_program(rp, s, watch, 0, 2)
        isolation.configure(enabled=True)
        for a, b in zip(remote, local):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        # a failure inside the worker comes back as one line, not a bare traceback
        try:
            pir_runner.run_program(rp, s, ["%no_such_value"], 0, 1)
        except RuntimeError as exc:
            assert "no value named %no_such_value" in pir_runner._why(exc)
        else:
            raise AssertionError("a missing value must fail")
    finally:
        isolation.configure(enabled=before)


def test_a_mended_guard_leaves_transposed_grads_alone_and_the_findings_go_away():
    """What the gate sees once Paddle's VPP guard reads PIR's transpose_x /
    transpose_y: the transposed cases are left alone (FIXED findings), the
    untransposed ones still split and proved."""
    from paddle.distributed.passes.pass_base import PassBase
    from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_vpp import (
        PipelineVirtualPipelinePass, _pir_split_matmul_grad_to_matmul)

    from verify.engine import isolation

    class Mended(PipelineVirtualPipelinePass):
        def _pir_split_matmul_grad_ops_to_matmul(self, program):
            for block in program.blocks:
                ids = [i for i, op in enumerate(block.ops) if op.name() == "pd_op.matmul_grad"
                       and not op.attrs().get("transpose_x")
                       and not op.attrs().get("transpose_y")]
                for i in reversed(ids):
                    _pir_split_matmul_grad_to_matmul(block, i)

    registry = PassBase._REGISTERED_PASSES
    saved, before = registry.get("pipeline_scheduler_VPP"), isolation.enabled()
    registry["pipeline_scheduler_VPP"] = Mended
    isolation.configure(enabled=False)  # the worker would load the installed pass
    try:
        for name in ("pir_mm_3d_ty_square", "pir_mm_3d_ty_nonsquare", "pir_mm_3d_tx"):
            app = _app(name)
            assert app.status == "LEFT_ALONE", (name, app.verdict)
        assert _app("pir_mm_3d").status == "EQUIVALENT"
    finally:
        registry["pipeline_scheduler_VPP"] = saved
        isolation.configure(enabled=before)
