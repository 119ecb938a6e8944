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
    for spec in NAMES:
        assert (spec, "float32") in agreed and (spec, "float64") in agreed, outcomes


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
