"""``fused_gemm_epilogue_pass`` (C++, ``strategy.fused_passes``) on the
``pir_gemm_epilogue`` family, on a CPU build.

The installed pass fuses the bfloat16 linear and its grad (contract holds)
and leaves float32 (its own dtype guard) and a 2-D addend alone.  It is C++,
so no pass file can replace it: broken rewrites are fed to the contract as
snapshots (a transposed weight read untransposed, the fused grad reading
another out_grad) and caught with the op and operand.  Why its values stay
INCONCLUSIVE here: the fused ops have no CPU kernel (asserted below).
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

import cases
import passes
from verify.ir.rank_snapshot import snapshot_of as _snapshot
from verify.verdicts import Verdict


def _apply(case_name):
    adapter = passes.get("gemm_epilogue")
    case = cases.all_cases()[case_name]
    run = adapter.apply_local(case, 0)
    b = _snapshot(run.original, case, 0, "original")
    a = _snapshot(run.rewritten, case, 0, "rewritten")
    return adapter, case, b, a, run


def test_bf16_linear_and_its_grad_are_fused():
    adapter, case, before, after, run = _apply("pir_gemm_bf16")
    assert run.error is None and adapter.pattern_present(before)
    types = [o.type for o in after.ops]
    assert "pd_op.fused_gemm_epilogue" in types and "pd_op.fused_gemm_epilogue_grad" in types
    assert "pd_op.matmul" not in types and "pd_op.matmul_grad" not in types
    results = adapter.contract(case, 0, before, after)
    assert {r.verdict for r in results} == {Verdict.EQUIVALENT}, [r.message for r in results]
    assert [r.name for r in results] == ["fired", "linear fused"]


@pytest.mark.parametrize("name", ["pir_gemm_fp32", "pir_gemm_bf16_bias2d"])
def test_float32_and_a_2d_addend_are_left_alone(name):
    adapter, case, before, after, _ = _apply(name)
    assert not adapter.pattern_present(before)
    assert [o.render() for o in before.ops] == [o.render() for o in after.ops]
    (left,) = adapter.contract(case, 0, before, after)
    assert left.name == "left alone" and left.verdict == Verdict.EQUIVALENT


def test_contract_catches_a_transpose_flag_and_a_foreign_out_grad():
    adapter, case, before, after, _ = _apply("pir_gemm_bf16")
    flipped = copy.deepcopy(after)
    (f,) = flipped.ops_of_type("pd_op.fused_gemm_epilogue")
    f.attrs["trans_y"] = True
    (bad,) = [c for c in adapter.contract(case, 0, before, flipped) if not c.ok]
    assert bad.name == "linear fused" and bad.counterexample["op_index"] == f.idx
    assert bad.counterexample["var"] == "x" and "trans_x/trans_y (False, True)" in \
        bad.counterexample["problems"][0]

    foreign = copy.deepcopy(after)
    (g,) = foreign.ops_of_type("pd_op.fused_gemm_epilogue_grad")
    (ag,) = before.ops_of_type("pd_op.add_grad")
    g.inputs["out_grad"] = ["x"]
    (bad,) = [c for c in adapter.contract(case, 0, before, foreign) if not c.ok]
    assert bad.name == "linear grad fused"
    assert bad.counterexample["var"] == ag.inputs["out_grad"][0]
    assert bad.counterexample["op_type"] == "pd_op.matmul_grad"


def _linear_program(dtype):
    """x @ w + b with its backward, every operand fed."""
    import paddle

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [4, 8], dtype)
            w = paddle.static.data("w", [8, 16], dtype)
            b = paddle.static.data("b", [16], dtype)
            for v in (x, w, b):
                v.stop_gradient = False
            loss = paddle.mean(paddle.add(paddle.matmul(x, w), b))
            paddle.static.append_backward(loss)
        pm = paddle.pir.PassManager()
        pm.add_pass("fused_gemm_epilogue_pass", {})
        pm.run(main)
    return main, loss


def test_the_fused_ops_have_no_cpu_kernel():
    """Why a firing application's values are INCONCLUSIVE on this build."""
    import paddle

    main, loss = _linear_program("bfloat16")
    feed = {k: np.ones(s, "float32").astype(np.uint16)
            for k, s in (("x", [4, 8]), ("w", [8, 16]), ("b", [16]))}
    with paddle.pir_utils.IrGuard():
        assert "pd_op.fused_gemm_epilogue" in [op.name() for op in main.global_block().ops]
        exe = paddle.static.Executor(paddle.CPUPlace())
        with pytest.raises(RuntimeError, match="The kernel `fused_gemm_epilogue` is not "
                                               "registered"):
            exe.run(main, feed=feed, fetch_list=[loss])
