"""The planner relation's cheap normal form (``verify/value/linear_form.py``):
a contraction a rank splits (each half cut, the halves added by an
all-reduce) normalizes to the serial program's whole one, inside a kernel's
argument too; what differs stays apart; equal forms evaluate equal on
concrete values; the work is charged to the deterministic budget."""
from __future__ import annotations

import pytest

from verify.value.linear_form import LinearForm
from verify.value.proof import Evaluator, _probe_values
from verify.value.symbolic import CUT_SIZE, Budget, Store

N = 2 * (CUT_SIZE + 6)  # each half above CUT_SIZE monomials: cut on its own


def _dot(s, xs, ws):
    return s.dot(list(zip(xs, ws)))


def _split(s, wrong=False):
    """(serial, rank): cut(x.w) against cut(x0.w0) + cut(x1.w1) (the rank's
    second half reading w[N-2] for w[N-1] when ``wrong``)."""
    xs = [s.sym(f"x[{i}]") for i in range(N)]
    ws = [s.sym(f"w[{i}]") for i in range(N)]
    serial = s.cut(_dot(s, xs, ws))
    h = N // 2
    ws1 = ws[h:-1] + [ws[-2]] if wrong else ws[h:]
    rank = s.add(s.cut(_dot(s, xs[:h], ws[:h])), s.cut(_dot(s, xs[h:], ws1)))
    return serial, rank


def _values(s, a, b, seed=0):
    ev = Evaluator(s, _probe_values(s, seed), lambda k, attrs, args: sum(args) * 3 + 1)
    return ev.poly(a), ev.poly(b)


def test_a_split_contraction_normalizes_to_the_whole_one():
    s = Store()
    serial, rank = _split(s)
    assert serial != rank  # the plain canonical forms differ: cut at other places
    # as a kernel's argument (a norm of an all-reduced sum), times a symbol
    y = s.sym("y")
    ks, kr = (s.mul(y, s.uf("rsqrt", [p])) for p in (serial, rank))
    lf = LinearForm(s)
    assert lf.equal([(0, serial, rank), (1, ks, kr)])
    for seed in range(3):  # and they are equal on concrete values
        va, vb = _values(s, ks, kr, seed)
        assert va == vb


def test_a_wrong_piece_stays_apart():
    s = Store()
    serial, rank = _split(s, wrong=True)
    y = s.sym("y")
    ks, kr = (s.mul(y, s.uf("rsqrt", [p])) for p in (serial, rank))
    lf = LinearForm(s)
    assert not lf.equal([(0, serial, rank)])
    assert not lf.equal([(1, ks, kr)])
    va, vb = _values(s, serial, rank)
    assert va != vb


def test_normalizing_past_the_work_limit_is_over_budget():
    s = Store()
    serial, rank = _split(s)
    s.work_limit = s.work + 10
    with pytest.raises(Budget, match="work limit"):
        LinearForm(s).equal([(0, serial, rank)])


def test_the_relation_input_cap_is_the_budget_setting_in_force():
    """The planner relation proof's input cap is a budget setting (recorded in
    the memo key with the rest): raised, a plan over the default is attempted;
    at the default it is INCONCLUSIVE "not attempted", never a proof."""
    from verify.value import proof
    from verify.value.relation import input_limit, prove_relation

    rel = {"parameters": {"w": {"shape": [80, 80], "dtype": "float32"}}, "feeds": {}}
    out = prove_relation("planner on x", None, {0: None}, rel, {}, {}, {},
                         by_segments=False)  # the whole proof's cap
    assert out[0].verdict.value == "INCONCLUSIVE" and "not attempted" in out[0].message
    assert "--value-relation-inputs" in out[0].message
    try:
        proof.configure_budget(relation_input_elements=10_000)
        assert input_limit() == 10_000
        assert proof.budget_settings()["relation_input_elements"] == 10_000
    finally:
        proof.configure_budget(relation_input_elements=proof.DEFAULT_BUDGET[
            "relation_input_elements"])
    assert input_limit() == 4096


def test_a_form_above_its_limit_proves_nothing():
    s = Store()
    serial, rank = _split(s)
    assert not LinearForm(s, limit=N // 2).equal([(0, serial, rank)])
    assert LinearForm(s, limit=N).equal([(0, serial, rank)])


def _reference_form(s, pid, memo):
    """The normal form as the module defined it before its fast path: every
    monomial rebuilt and the whole re-interned (the fast path must agree)."""
    if pid in memo:
        return memo[pid]
    d = {}
    for mono, c in s.polys[pid]:
        if len(mono) == 1 and s.atoms[mono[0]][0] == "cut":
            for m, v in s.polys[_reference_form(s, s.atoms[mono[0]][1], memo)]:
                d[m] = d.get(m, 0) + c * v
            continue
        parts, coef = [], c
        for a in mono:
            key = s.atoms[a]
            if key[0] == "cut":
                p = s.polys[s.cut(_reference_form(s, key[1], memo))]
                m2, k = (list(p[0][0]), p[0][1]) if len(p) == 1 else ([a], 1)
            elif key[0] == "sym":
                m2, k = [a], 1
            else:
                (m, k), = s.polys[s.uf(key[1], [_reference_form(s, q, memo)
                                                for q in key[3]], key[2])]
                m2 = list(m)
            parts += m2
            coef = coef * k
        m = tuple(sorted(parts))
        d[m] = d.get(m, 0) + coef
    out = memo[pid] = s._finish(d)
    return out


def test_the_fast_path_gives_the_forms_and_work_of_the_full_rebuild():
    """A polynomial whose monomials are all their own form is returned as it
    is (no re-interning), charged the units the rebuild charged; one whose
    linear cut or kernel argument changes is rebuilt: the same forms as the
    reference on both, right and wrong pieces."""
    for wrong in (False, True):
        s = Store()
        serial, rank = _split(s, wrong=wrong)
        y, z = s.sym("y"), s.sym("z")
        plain = s.add(s.mul(y, z), s.mul(y, s.uf("rsqrt", [s.add(y, z)])))
        mixed = s.add(s.mul(y, s.uf("rsqrt", [rank])), s.add(plain, rank))
        ids = [serial, rank, plain, mixed]
        lf, ref = LinearForm(s), {}
        forms = [lf.poly(p) for p in ids]
        assert forms == [_reference_form(s, p, ref) for p in ids]
        assert forms[2] == plain  # its own form: the same id
        assert (forms[0] == forms[1]) is (not wrong)
        before = s.work
        lf2 = LinearForm(s)
        lf2.poly(plain)
        # 1 + n for reading it, n for what the rebuild's _finish counted,
        # and the kernel's argument (2 monomials) the same way
        assert s.work - before == (1 + 2 * 2) + (1 + 2 * 2)
