"""Empty pieces in the value executor (``verify/value/semantics.py``):
``pd_op.slice`` with Paddle's bounds (a negative bound counts from the end,
both clamped; an empty slice at the real size), and ``builtin.combine`` of
one layout beside empty pieces (``Ragged``: a partial rotary's pass-through
of no lanes, Gemma 3's empty prefix).  A concat of it is its non-empty
pieces side by side, its grad gives the empty pieces empty grads, and any
other reader is refused (INCONCLUSIVE, never a guessed meaning)."""
from __future__ import annotations

import pytest

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value.semantics import Unsupported
from verify.value.symbolic import Store, execute


def _slice(i, src, dst, start, end):
    return Op(i, "pd_op.slice", {"input": [src]}, {"out": [dst]},
              {"axes": [1], "starts@value": [start], "ends@value": [end], "decrease_axis": [],
               "infer_flags": [1]})


def _snap(ops, extra=()):
    vars_ = {"x": Var("x", [2, 4], "float32"), "g": Var("g", [2, 4], "float32")}
    vars_.update({n: Var(n, s, "float32") for n, s in extra})
    return ProgramSnapshot(ops, vars_)


def _terms(store, t):
    return [store.render(e.i) for e in t.arr.reshape(-1)]


def _with_empty(reader_ops, front=True):
    ops = [_slice(0, "x", "e", 4, 4),
           Op(1, "builtin.combine", {"operands": ["e", "x"] if front else ["x", "e"]},
              {"results": ["v"]}, {})]
    return _snap(ops + reader_ops, [("e", [2, 0]), ("y", [2, 4])])


@pytest.mark.parametrize("front", [True, False])
def test_a_concat_with_an_empty_piece_and_its_grad(front):
    concat = Op(2, "pd_op.concat", {"x": ["v"]}, {"out": ["y"]}, {"axis@value": 1})
    grad = Op(3, "pd_op.concat_grad", {"x": ["v"], "out_grad": ["g"]}, {"x_grad": ["w"]},
              {"axis@value": 1})
    split = Op(4, "builtin.split", {"operands": ["w"]}, {"results": ["ge", "gx"]
                                                         if front else ["gx", "ge"]}, {})
    store = Store()
    envs, _ = execute({0: _with_empty([concat, grad, split], front)}, {}, store)
    env = envs[0]
    assert _terms(store, env["y"]) == _terms(store, env["x"])
    assert _terms(store, env["gx"]) == _terms(store, env["g"])
    assert env["ge"].arr.shape == (2, 0)


@pytest.mark.parametrize("reader", [
    Op(2, "pd_op.add_n", {"inputs": ["v"]}, {"out": ["y"]}, {}),
    Op(2, "pd_op.stack", {"x": ["v"]}, {"out": ["y"]}, {"axis": 0})])
def test_any_other_reader_of_a_vector_with_empty_pieces_is_refused(reader):
    with pytest.raises(Unsupported, match="empty pieces"):
        execute({0: _with_empty([reader])}, {}, Store())


def test_a_combine_of_two_non_empty_layouts_is_still_refused():
    ops = [_slice(0, "x", "a", 0, 2), _slice(1, "x", "b", 0, 1),
           Op(2, "builtin.combine", {"operands": ["a", "b"]}, {"results": ["v"]}, {})]
    with pytest.raises(Unsupported, match="unequal shapes"):
        execute({0: _snap(ops, [("a", [2, 2]), ("b", [2, 1])])}, {}, Store())


def test_slice_bounds_are_paddles():
    """[-4095:8) of 4 is the whole dim, [-2:4) the last half, [4:4) and
    [3:1) empty: as Paddle's slice clamps them."""
    ops = [_slice(0, "x", "w", -4095, 8), _slice(1, "x", "h", -2, 4),
           _slice(2, "x", "e", 4, 4), _slice(3, "x", "f", 3, 1)]
    store = Store()
    envs, _ = execute({0: _snap(ops, [("w", [2, 4]), ("h", [2, 2]), ("e", [2, 0]),
                                       ("f", [2, 0])])}, {}, store)
    env = envs[0]
    x = env["x"].arr
    assert _terms(store, env["w"]) == _terms(store, env["x"])
    assert [store.render(e.i) for e in x[:, 2:].reshape(-1)] == _terms(store, env["h"])
    assert env["e"].arr.shape == env["f"].arr.shape == (2, 0)
