"""The value rows of ``pd_op.c_embedding`` and its grad (the vocab-parallel
lookup ``auto_parallel_c_embedding_pass`` writes) against Paddle's own CPU
kernels (phi/kernels/cpu/c_embedding_kernel.cc) on generated examples
(``verify/selfcheck/kernel_programs.py``: a local table at global ids
``start .. start + rows - 1``, ids drawn from the whole vocabulary), and a
wrong twin of the row (``start_index`` off by one) caught by the same
examples; then the grad row's terms: the pieces' gradients are the serial
embedding gradient's rows by canonical form (the same selection terms), a
piece written at another rank's rows is refuted, and a table's height
bounds the ids the replay feeds without being part of the terms."""
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


# -- the grad's terms are the serial lookup grad's (the value proof's mechanism) --
def _terms(store):
    """(ids [2, 3] int64 symbols, table [4, 3], dOut [2, 3, 3]) as terms."""
    import numpy as np

    from verify.value.symbolic import T

    T.store = store

    def tensor(shape, tag, dtype):
        arr = np.empty(shape, dtype=object)
        for j, idx in enumerate(np.ndindex(*shape)):
            arr[idx] = T(store.sym(f"{tag}{j}", dtype))
        return S.Tensor(arr, S.leaf_dims(shape), dtype)
    return tensor((2, 3), "ids", "int64"), tensor((4, 3), "w", "float32"), \
        tensor((2, 3, 3), "g", "float32")


def _op(op_type, attrs):
    from verify.ir.snapshot import Op

    return Op(0, op_type, {}, {}, attrs)


def _pieces(ids, w, g, k, starts):
    """Each rank's c_embedding_grad of its 2 rows of the table, at ``starts``."""
    import numpy as np

    return np.concatenate([
        S.ROWS["pd_op.c_embedding_grad"](
            _op("pd_op.c_embedding_grad", {"start_index": s}),
            {"weight": [S.Tensor(w.arr[2 * r:2 * r + 2], S.leaf_dims((2, 3)), w.dtype)],
             "x": [ids], "out_grad": [g]}, k)["weight_grad"][0].arr
        for r, s in enumerate(starts)])


def _serial_grad(ids, w, g, k):
    return S.ROWS["pd_op.embedding_grad"](
        _op("pd_op.embedding_grad", {"padding_idx": -1, "sparse": False}),
        {"x": [ids], "weight": [w], "out_grad": [g]}, k)["weight_grad"][0].arr


def test_the_pieces_grads_are_the_serial_grads_rows_by_canonical_form():
    """The table's gradient a vocab split computes (rank r's c_embedding_grad
    at start_index 2 r, no vocab_size on the op) is, element for element, the
    same term as the serial embedding_grad's rows: a proof by canonical form.
    A rank writing its gradient at another rank's rows (start_index 0 on
    rank 1) is refuted by the proof's probe, with ids the serial table holds."""
    from verify.value.proof import Z3Terms, _compare, _Z3Budget
    from verify.value.symbolic import Kernels, Store

    store = Store()
    ids, w, g = _terms(store)
    k = Kernels(store)
    whole = _serial_grad(ids, w, g, k)
    good, bad = _pieces(ids, w, g, k, (0, 2)), _pieces(ids, w, g, k, (0, 0))
    assert [e.i for e in good.reshape(-1)] == [e.i for e in whole.reshape(-1)]
    stats = dict.fromkeys(("queries", "normal_form", "z3_proved", "probe_refuted",
                           "z3_refuted"), 0)
    z3b = _Z3Budget(20000, 5000)

    class _A:
        def __init__(self, arr):
            self.arr = arr
    assert _compare(store, Z3Terms(store), _A(whole), _A(good), z3b, stats) is None
    out = _compare(store, Z3Terms(store), _A(whole), _A(bad), z3b, stats)
    assert out[0] == "refuted", out
    cex = out[1]
    assert cex["index"] >= 6 and "probe" in cex["found_by"]  # rank 1's rows (2 and 3)
    assert all(0 <= cex["sym"](f"ids{j}") < 4 for j in range(6))
    assert cex["va"] != cex["vb"]


def test_an_id_outside_the_serial_table_is_no_input_of_the_replay():
    """``rows`` bounds the ids, not the value (``kernels.DOMAIN_ATTRS``): the
    atom a c_embedding_grad shares with the serial lookup keeps the serial
    table's bound, so a replay never feeds an id the serial embedding raises
    on; an atom only a c_embedding_grad makes has no bound (its kernel skips
    an id outside its piece: the selection is 0)."""
    from fractions import Fraction

    import pytest

    from verify.value.kernels import NotAnInput
    from verify.value.proof import _replay_evaluator
    from verify.value.symbolic import Kernels, Store

    store = Store()
    ids, w, g = _terms(store)
    k = Kernels(store)
    whole, piece = _serial_grad(ids, w, g, k), _pieces(ids, w, g, k, (0, 2))
    far = _pieces(ids, w, g, k, (6, 8))  # rows 6 .. 9: ids no serial lookup reads there
    for arr in (whole, piece):
        ev = _replay_evaluator(store, lambda name: Fraction(5 if name == "ids0" else 1))
        with pytest.raises(NotAnInput, match="outside a table of 4 rows"):
            ev.poly(arr.reshape(-1)[0].i)
    ev = _replay_evaluator(store, lambda name: Fraction(6 if name == "ids0" else 1))
    assert ev.poly(far.reshape(-1)[0].i) == ev.poly(g.arr.reshape(-1)[0].i)  # row 6: ids0


def test_a_lookup_reinterned_on_expanded_ids_keeps_its_bound():
    """The normal forms that expand cuts (``expand.Expander``,
    ``linear_form.LinearForm``) re-intern a lookup atom on its expanded id:
    the new atom keeps the bound of the one it stands for, the key has no
    ``rows``."""
    from verify.value.expand import Expander
    from verify.value.linear_form import LinearForm
    from verify.value.symbolic import Store

    store = Store()
    ids = store.cut(store.add(store.sym("a", "int64"), store.sym("b", "int64")))
    sel = store.uf("lookup_select", [ids], (("padding_idx", "-1"), ("row", "1"), ("rows", "4")))
    (mono, _), = store.polys[sel]
    assert store.atoms[mono[0]][2] == (("padding_idx", "-1"), ("row", "1"))
    for form in (Expander(store), LinearForm(store)):
        (mono2, _), = store.polys[form.poly(sel)]
        assert mono2 != mono and store.domains[mono2[0]] == (("rows", "4"),), form
