"""``builtin.combine`` in the value proof (``verify/value/semantics.py``):
operands of one layout are stacked even where their dims' factor bookkeeping
differs by size-1 factors or, at the real sizes, by how a dim is factored.

The case that stopped the zoo LLaMA's sequence-parallel relation proof: a
gradient gathered over the ranks (``all_gather`` records its dim 0 as
``((2, 2), (1, 1))`` when each rank holds one row) combined with a tensor
whose dim 0 is ``((2, 2),)``; before, "builtin.combine of unequal shapes"
(INCONCLUSIVE).  Beside it, the same rewrite gathering the wrong rows is
refuted, and operands that really differ are still refused."""
from __future__ import annotations

import numpy as np
import pytest

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value import semantics as S
from verify.value.proof import prove_application
from verify.verdicts import Verdict


def _rank(rank, gathered, row=None):
    """``y = add_n(combine([g, x]))`` on rank ``rank``: ``g`` is ``x`` itself
    (the serial program) or ``x`` rebuilt by an all_gather of each rank's
    row (``row``: the row every rank takes instead of its own)."""
    vs = {"x": Var("x", [2, 4], "float32", is_data=True), "y": Var("y", [2, 4], "float32")}
    ops = []

    def op(t, ins, outs, attrs=None):
        ops.append(Op(len(ops), t, ins, outs, attrs or {}))
    g = "x"
    if gathered:
        r = rank if row is None else row
        op("pd_op.full_int_array", {}, {"out": ["s"]}, {"value": [r], "dtype": "int64"})
        op("pd_op.full_int_array", {}, {"out": ["e"]}, {"value": [r + 1], "dtype": "int64"})
        op("pd_op.slice", {"input": ["x"], "starts": ["s"], "ends": ["e"]}, {"out": ["p"]},
           {"axes": [0], "starts@value": [r], "ends@value": [r + 1], "decrease_axis": [],
            "infer_flags": [1]})
        op("pd_op.all_gather", {"x": ["p"]}, {"out": ["g"]}, {"ring_id": 0, "nranks": 2})
        vs.update({"p": Var("p", [1, 4], "float32"), "g": Var("g", [2, 4], "float32")})
        g = "g"
    op("builtin.combine", {"operands": [g, "x"]}, {"results": ["v"]})
    op("pd_op.add_n", {"inputs": ["v"]}, {"out": ["y"]})
    return ProgramSnapshot(ops=ops, vars=vs, feeds=["x"])


def _prove(row=None):
    before = {r: _rank(r, False) for r in (0, 1)}
    after = {r: _rank(r, True, row) for r in (0, 1)}
    return prove_application("combine", [0, 1], {0: [[0, 1]]}, before, after,
                             {r: ["y"] for r in (0, 1)}, feed_key=lambda r, n: "dp0")


def test_a_gathered_operand_combined_with_a_plain_one_is_proved():
    res = _prove()
    assert [r.verdict for r in res] == [Verdict.EQUIVALENT] * 2, [r.message for r in res]


def test_the_same_combine_of_the_wrong_rows_is_refuted():
    res = _prove(row=0)  # every rank gathers row 0: g is [x0, x0]
    assert all(r.verdict == Verdict.NOT_EQUIVALENT for r in res), [r.message for r in res]
    cex = res[0].counterexample
    assert cex["var"] == "y" and cex["replayed"] and cex["element"][0] == 1


def _t(shape, dims=None):
    arr = np.arange(int(np.prod(shape)), dtype=object).reshape(shape)
    return S.Tensor(arr, dims or S.leaf_dims(shape))


def _combine(*ts):
    op = Op(0, "builtin.combine", {"operands": [f"o{i}" for i in range(len(ts))]},
            {"results": ["v"]}, {})
    return S.ROWS["builtin.combine"](op, {"operands": list(ts)}, None)["results"][0]


def test_layouts_that_differ_only_in_bookkeeping_combine():
    a = _t([2, 4], [((2, 2), (1, 1)), ((4, 4),)])  # a gathered dim of one-row pieces
    b = _t([2, 4], [((2, 2),), ((4, 4),)])
    c = _t([2, 4], [((2, 2),), ((2, 2), (2, 2))])  # a real-size dim factored otherwise
    got = _combine(a, b, c)
    assert got.arr.shape == (3, 2, 4) and got.orig == (3, 2, 4)


@pytest.mark.parametrize("other", [
    _t([4, 2]),  # another shape
    _t([2, 4], [((2, 2),), ((8, 4),)]),  # a reduced dim (8 held at 4): another layout
])
def test_operands_of_another_layout_are_refused(other):
    with pytest.raises(S.Unsupported, match="builtin.combine of unequal shapes"):
        _combine(_t([2, 4]), other)
