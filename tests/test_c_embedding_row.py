"""The value rows of ``pd_op.c_embedding`` and its grad (the vocab-parallel
lookup ``auto_parallel_c_embedding_pass`` writes) against Paddle's own CPU
kernels (phi/kernels/cpu/c_embedding_kernel.cc) on generated examples
(``verify/selfcheck/kernel_programs.py``: a local table at global ids
``start .. start + rows - 1``, ids drawn from the whole vocabulary), and a
wrong twin of the row (``start_index`` off by one) caught by the same
examples."""
from __future__ import annotations

import pytest

from verify.selfcheck import kernel_differential as K
from verify.value import semantics as S

NAMES = ["c_embedding", "c_embedding_grad"]


@pytest.fixture(scope="module")
def runs():
    exs = K.build_examples(3, 0, NAMES)
    return exs, K.run_mode("pir", exs)["results"]


def test_rows_agree_with_paddles_cpu_kernels(runs):
    exs, res = runs
    outcomes = [(e.spec, e.dtype, *K.judge(e, res.get(e.id))) for e in exs]
    assert not [o for o in outcomes if o[2] == "disagree"], outcomes
    agreed = {(s, d) for s, d, o, _ in outcomes if o == "agree"}
    assert {("c_embedding", d) for d in ("float16", "float32", "float64")} <= agreed
    assert ("c_embedding_grad", "float32") in agreed, outcomes  # float32 only (below)


def _off_by_one(row):
    def wrong(op, ins, k):
        return row(S._OpView(op, {**op.attrs, "start_index": op.attrs["start_index"] + 1}),
                   ins, k)
    return wrong


@pytest.mark.parametrize("op", ["pd_op.c_embedding", "pd_op.c_embedding_grad"])
def test_a_row_with_start_index_off_by_one_is_caught(runs, monkeypatch, op):
    exs, res = runs
    monkeypatch.setitem(S.ROWS, op, _off_by_one(S.ROWS[op]))
    mine = [e for e in exs if e.spec == op.split(".")[1]]
    caught = [K.judge(e, res.get(e.id)) for e in mine]
    assert any(o == "disagree" for o, _ in caught), caught


def test_paddles_float64_c_embedding_grad_keeps_leftover_memory():
    """Why the grad row models float32 tables only (``semantics.ROW_DTYPES``):
    3.3.1's CPU kernel (phi/kernels/cpu/c_embedding_grad_kernel.cc) zeroes
    ``numel * sizeof(w_grad->dtype())`` bytes, the size of the DataType enum
    (4), so only the first half of a float64 table's gradient is zeroed and
    rows no id selects hold leftover memory.  float32 is right.  This fails
    when Paddle fixes the kernel: then widen the row's dtypes."""
    import numpy as np
    import paddle

    assert S.row_dtypes("pd_op.c_embedding_grad") == {"float32", "int32", "int64"}
    wrong = {"float32": 0, "float64": 0}
    with paddle.base.dygraph.guard():
        for dtype in wrong:
            for _ in range(20):
                w = paddle.to_tensor(np.zeros((4, 2)), dtype=dtype, stop_gradient=False)
                ids = paddle.to_tensor(np.array([0], dtype="int64"))
                out = paddle._C_ops.c_embedding(w, ids, 0, 4)
                junk = paddle.full([4, 2], 7.0, dtype=dtype)  # leave memory behind
                del junk
                (dw,) = paddle.grad([out], [w], [paddle.ones([1, 2], dtype=dtype)])
                got = dw.numpy()
                assert np.array_equal(got[:2], [[1, 1], [0, 0]])  # the zeroed half
                wrong[dtype] += not np.array_equal(got[2:], np.zeros((2, 2)))
    assert wrong["float32"] == 0 and wrong["float64"] > 0, wrong
