"""The abbreviation of an op result (``Store.cut_result``): the same
polynomial, a function of its canonical form alone, and the bias beside
the cut atom, so a bias added before or after a sum gives one form."""
from __future__ import annotations

from fractions import Fraction

from verify.value.symbolic import CUT_SIZE, MUL_LIMIT, PEEL_MAX, Store, _accumulate_product


def _products(st, n, tag="x"):
    """sum_i x_i * w_i: n monomials of degree 2 (none an input symbol alone)."""
    return st.sum_many([st.mul(st.sym(f"{tag}{i}"), st.sym(f"w{i}")) for i in range(n)])


def _expanded(st, pid):
    """``pid`` with every cut atom replaced by the polynomial it stands for,
    multiplied out in full (no cut), as a dict monomial -> coefficient."""
    total = {}
    for mono, c in st.polys[pid]:
        term = {(): c}
        for a in mono:
            key = st.atoms[a]
            factor = _expanded(st, key[1]) if key[0] == "cut" else {(a,): 1}
            term = _accumulate_product({}, tuple(term.items()), tuple(factor.items()), st)
        for m, v in term.items():
            total[m] = total.get(m, 0) + v
    return {m: v for m, v in total.items() if v}


def _plain(st, pid):
    return dict(st.polys[pid])


def test_a_bias_beside_a_cut_sum_and_inside_it_give_one_form():
    st = Store()
    s = _products(st, CUT_SIZE + 6)
    b = st.sym("b")
    before = st.add(st.cut_result(s), b)  # all_reduce(S) cut, then + b
    after = st.cut_result(st.add(s, b))  # S + b, cut as one op result
    assert before == after
    assert len(st.polys[after]) == 2
    assert _expanded(st, after) == _plain(st, st.add(s, b))  # the same polynomial


def test_every_multiple_cuts_to_one_atom_and_keeps_its_value():
    st = Store()
    s = st.add(_products(st, CUT_SIZE + 3), st.add(st.sym("b"), st.mul(st.const(3), st.sym("c"))))
    for k in (1, Fraction(-1, 8), 5):
        p = st.mul(st.const(k), s)
        cut = st.cut_result(p)
        assert _expanded(st, cut) == _plain(st, p)
        assert len(st.polys[cut]) == 3  # lead * atom + b + 3c, scaled
    atoms = {st.atoms[a] for m, _ in st.polys[st.cut_result(st.mul(st.const(7), s))]
             for a in m if st.atoms[a][0] == "cut"}
    assert atoms == {st.atoms[a] for m, _ in st.polys[st.cut_result(s)] for a in m
                     if st.atoms[a][0] == "cut"}


def test_only_a_few_input_symbols_stay_beside_the_cut():
    """More than PEEL_MAX one-symbol monomials (a sum of feeds): one cut atom;
    a kernel or a product is no input symbol: inside the cut."""
    st = Store()
    feeds = st.sum_many([st.sym(f"y{i}") for i in range(PEEL_MAX + 1)])
    p = st.add(_products(st, CUT_SIZE), feeds)
    assert len(st.polys[st.cut_result(p)]) == 1
    assert _expanded(st, st.cut_result(p)) == _plain(st, p)
    q = st.add(_products(st, CUT_SIZE + 2), st.add(st.uf("gelu", [st.sym("z")]),
                                                   st.mul(st.sym("b"), st.sym("b"))))
    assert len(st.polys[st.cut_result(q)]) == 1


def test_a_product_past_mul_limit_is_the_same_polynomial():
    """Products above MUL_LIMIT multiply cut atoms: expanded, the product."""
    st = Store()
    a = st.sum_many([st.sym(f"a{i}") for i in range(MUL_LIMIT + 1)])
    b = st.add(st.sym("u"), st.sym("v"))
    r = st.mul(a, b)
    assert len(st.polys[r]) < (MUL_LIMIT + 1) * 2  # cut: not multiplied out
    full = st.sum_many([st.mul(st.sym(f"a{i}"), x) for i in range(MUL_LIMIT + 1)
                        for x in (st.sym("u"), st.sym("v"))])
    assert _expanded(st, r) == _plain(st, full)
