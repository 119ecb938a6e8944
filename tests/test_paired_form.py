"""The planner relation's pair-directed normal form
(``verify/value/paired_form.py``): a factor the serial program multiplies
into each monomial and a rank holds inside the cut of its all-reduced piece
meets once the rank's cut is opened; a kernel of such values meets by
congruence; a wrong piece is never proved; equal forms evaluate equal on
concrete values; the work is charged to the deterministic budget."""
from __future__ import annotations

import random

import pytest

from verify.value.linear_form import LinearForm
from verify.value.paired_form import PairedForm
from verify.value.proof import Evaluator, _probe_values
from verify.value.symbolic import CUT_SIZE, Budget, Store

J = CUT_SIZE + 6  # terms of the weighted sum: above CUT_SIZE, so a rank's half is cut
K = CUT_SIZE + 2  # each D_j a cut of K monomials


def _grads(s, wrong=False):
    """(serial, rank) of the class measured on LLaMA's norm weight grad:
    serial ``x * sum_j w_j * D_j`` multiplied out (``w_j * x * cut(D_j)``),
    rank ``x * (cut(sum_{j<h} w_j D_j) + cut(sum_{j>=h} w_j D_j))`` (the
    all-reduced pieces, the weight inside their cuts); ``wrong``: the rank's
    second piece reads ``w[J-2]`` for ``w[J-1]``."""
    ys = [s.sym(f"y[{i}]") for i in range(K)]
    ds = [s.cut(s.dot([(ys[i], s.sym(f"z[{i},{j}]")) for i in range(K)])) for j in range(J)]
    ws = [s.sym(f"w[{j}]") for j in range(J)]
    x = s.mul(s.sym("x"), s.uf("rsqrt", [s.sym("v")]))
    serial = s.sum_many([s.mul(x, s.mul(ws[j], ds[j])) for j in range(J)])
    h = J // 2
    ws1 = ws[h:-1] + [ws[-2]] if wrong else ws[h:]
    p0 = s.cut(s.dot(list(zip(ws[:h], ds[:h]))))
    p1 = s.cut(s.dot(list(zip(ws1, ds[h:]))))
    rank = s.mul(x, s.add(p0, p1))
    return serial, rank


def _values(s, a, b, seed):
    ev = Evaluator(s, _probe_values(s, seed), lambda k, attrs, args: sum(args) * 3 + 1)
    return ev.poly(a), ev.poly(b)


def test_a_factor_held_inside_the_other_sides_cut_meets():
    s = Store()
    serial, rank = _grads(s)
    assert serial != rank
    lin = LinearForm(s)
    assert not lin.equal([(0, serial, rank)])  # the linear form cannot meet them
    # as a kernel's argument too (an optimizer update of the grad): congruence
    m = s.sym("m")
    us, ur = (s.uf("adamw", [g, m]) for g in (serial, rank))
    pf = PairedForm(s, lin)
    assert pf.equal([(0, serial, rank), (1, us, ur)])
    for seed in range(3):  # equal forms, equal values
        va, vb = _values(s, us, ur, seed)
        assert va == vb


def test_a_wrong_piece_is_not_proved():
    s = Store()
    serial, rank = _grads(s, wrong=True)
    m = s.sym("m")
    us, ur = (s.uf("adamw", [g, m]) for g in (serial, rank))
    pf = PairedForm(s)
    assert not pf.equal([(0, serial, rank)])
    assert not pf.equal([(1, us, ur)])
    assert any(va != vb for va, vb in (_values(s, serial, rank, seed) for seed in range(3)))


def test_proved_pairs_evaluate_equal_on_random_programs():
    """Soundness on concrete values: random sums of products of cut pieces,
    regrouped (a factor moved into or out of a cut, pieces cut at other
    places) or changed (one coefficient, one symbol); whatever the form
    proves equal evaluates equal, and every changed pair evaluates apart
    and is not proved."""
    rng = random.Random(7)
    proved = 0
    for trial in range(12):
        s = Store()
        n = CUT_SIZE + 2
        cs = [s.cut(s.dot([(s.sym(f"a{t}[{i}]"), s.sym(f"b{t}[{i}]")) for i in range(n)]))
              for t in range(4)]
        fs = [s.sym(f"f[{t}]") for t in range(4)]
        k = s.uf("tanh", [s.sym("u")])
        # serial: sum_t f_t * k * c_t multiplied out; rank: k * cut(sum_t f_t c_t)
        serial = s.sum_many([s.mul(k, s.mul(fs[t], cs[t])) for t in range(4)])
        inner = [(fs[t], cs[t]) for t in range(4)]
        change = trial % 3
        if change == 1:  # one factor another symbol
            t = rng.randrange(4)
            inner[t] = (fs[(t + 1) % 4], cs[t])
        pieces = s.dot(inner)
        rank = s.mul(k, s.cut(pieces) if trial % 2 else pieces)
        if change == 2:  # one coefficient off
            rank = s.add(rank, s.mul(s.const(rng.choice((2, 3))), s.mul(k, cs[0])))
        ok = PairedForm(s).equal([(0, serial, rank)])
        vals = [_values(s, serial, rank, seed) for seed in range(3)]
        if ok:
            assert all(va == vb for va, vb in vals)
        if change:
            assert not ok
            assert any(va != vb for va, vb in vals)
        proved += ok
    assert proved >= 3  # the unchanged pairs are proved


def test_opening_past_the_work_limit_is_over_budget():
    s = Store()
    serial, rank = _grads(s)
    s.work_limit = s.work + 50
    with pytest.raises(Budget, match="work limit"):
        PairedForm(s).equal([(0, serial, rank)])


def test_one_values_share_of_the_work_ends_its_attempt_only():
    """Past ``units`` one value's attempt is not proved (deterministic: the
    same count everywhere), and the next value starts its own share."""
    s = Store()
    serial, rank = _grads(s)
    pf = PairedForm(s)
    w0 = s.work
    assert not pf.equal([(0, serial, rank)], units=20)
    assert s.work - w0 < 20 + 5000  # stopped at its share (one step past it at most)
    s2 = Store()
    serial2, rank2 = _grads(s2)
    assert PairedForm(s2).equal([(0, serial2, rank2)], units=10_000_000)


def test_a_product_of_cuts_is_opened_within_the_limit_only():
    """``cut(P) * cut(Q)`` against the product multiplied out: no key to
    group by, so the cuts are opened (step 4), within ``limit`` only."""
    s = Store()
    n = CUT_SIZE + 1
    ps = [s.mul(s.sym(f"p[{i}]"), s.sym(f"r[{i}]")) for i in range(n)]
    qs = [s.mul(s.sym(f"q[{i}]"), s.sym(f"t[{i}]")) for i in range(n)]
    cut_side = s.mul(s.cut(s.sum_many(ps)), s.cut(s.sum_many(qs)))
    flat = s.sum_many([s.mul(p, q) for p in ps for q in qs])
    assert not PairedForm(s, limit=n * n - 1).equal([(0, cut_side, flat)])
    assert PairedForm(s).equal([(0, cut_side, flat)])
    assert all(va == vb for va, vb in (_values(s, cut_side, flat, seed) for seed in range(2)))


def test_the_relations_probes_spend_work_units():
    """A store that asks for it (``probe_work``: the planner relation's)
    charges the probes' exact evaluation to its work units, deterministically,
    and stops past the limit; the value proof's stores do not charge it."""
    def spent(flag, limit=None):
        s = Store()
        serial, rank = _grads(s)
        s.probe_work = flag
        s.work_limit = None if limit is None else s.work + limit
        w0 = s.work
        _values(s, serial, rank, 0)
        return s.work - w0

    units = spent(True)
    assert units > 0 and spent(True) == units and spent(False) == 0
    with pytest.raises(Budget, match="evaluating probes"):
        spent(True, limit=units // 2)
