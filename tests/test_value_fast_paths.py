"""The value proof's fast paths compute what the slow ones did (issue 19,
speed): every shortcut is checked against the plain computation it
replaces, so a faster proof cannot be a different proof."""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import z3

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value import rational
from verify.value.proof import Z3Terms, prove_application
from verify.value.symbolic import MUL_LIMIT, Store, _accumulate_product
from verify.verdicts import Verdict


def _random_poly(rng, atoms=8, terms=4, degree=3):
    return tuple((tuple(sorted(rng.choices(range(atoms), k=rng.randint(0, degree)))),
                  rng.choice([1, -2, Fraction(1, 3), Fraction(-5, 8)]))
                 for _ in range(rng.randint(1, terms)))


def test_merged_monomials_are_the_sorted_ones():
    """A one-atom monomial merged by comparison gives the sorted monomial."""
    rng = random.Random(0)
    for _ in range(2000):
        pa, pb = _random_poly(rng), _random_poly(rng)
        naive = {}
        for m1, c1 in pa:
            for m2, c2 in pb:
                m = tuple(sorted(m1 + m2))
                naive[m] = naive.get(m, 0) + c1 * c2
        assert _accumulate_product({}, pa, pb) == naive, (pa, pb)


def _store_with_polys(seed, n=60):
    """A store holding sums and products of symbols, some large enough that a
    product of two is cut (MUL_LIMIT)."""
    st, rng = Store(), random.Random(seed)
    pids = [st.sym(f"x{i}") for i in range(10)]
    for _ in range(n):
        a, b = rng.choice(pids), rng.choice(pids)
        kind = rng.random()
        pids.append(st.add(a, b) if kind < 0.5 else st.mul(a, st.const(Fraction(1, 3)))
                    if kind < 0.6 else st.mul(a, b))
    big = st.sum_many(pids[:12] + [st.mul(pids[0], pids[1])])
    return st, rng, pids + [big]


def test_one_step_dot_is_the_sum_of_the_products():
    """``Store.dot`` (products never interned) is the canonical form of
    ``sum_many([mul(a, b)])``, cuts included, in the same store."""
    for seed in range(5):
        st, rng, pids = _store_with_polys(seed)
        for _ in range(40):
            pairs = [(rng.choice(pids), rng.choice(pids)) for _ in range(rng.randint(1, 6))]
            pairs.append((pids[-1], pids[-1]))  # a product that is cut (MUL_LIMIT)
            fast = st.dot(pairs)
            assert fast == st.sum_many([st.mul(a, b) for a, b in pairs])
        assert st.cut_of, "no product was large enough to be cut"
        assert any(len(st.polys[a]) * len(st.polys[b]) > MUL_LIMIT for a, b in pairs)


def test_fast_z3_terms_are_the_z3_api_terms():
    """Terms built through Z3's C API are the very ASTs z3.Sum/Product build."""
    st, _, pids = _store_with_polys(7)
    pids.append(st.uf("g", [pids[-1], pids[3]]))
    zt = Z3Terms(st)

    def api(pid):
        terms = []
        for mono, c in st.polys[pid]:
            fs = [api_atom(a) for a in mono]
            coef = z3.RealVal(f"{c.numerator}/{c.denominator}", zt.ctx)
            terms.append(coef if not fs else coef * (fs[0] if len(fs) == 1 else z3.Product(fs)))
        return z3.RealVal(0, zt.ctx) if not terms else terms[0] if len(terms) == 1 else \
            z3.Sum(terms)

    def api_atom(aid):
        key = st.atoms[aid]
        if key[0] == "sym":
            return z3.Real(key[1], zt.ctx)
        if key[0] == "cut":
            return api(key[1])
        return zt.func(key[1], key[2], len(key[3]))(*[api(p) for p in key[3]])
    for pid in pids[-30:]:
        assert zt.poly(pid).eq(api(pid)), pid


def test_rationals_are_exact_and_hash_like_fractions():
    """Q (GMP's mpq where installed) is Fraction's numbers: equal, same hash,
    so a canonical form is one dict key whichever type built it."""
    for num, den in [(1, 3), (-5, 8), (7, 1), (0, 1), (10 ** 30 + 1, 3 ** 40)]:
        q, f = rational.Q(num, den), Fraction(num, den)
        assert q == f and hash(q) == hash(f) and rational.is_exact(q)
    assert rational.to_q(0.1) == Fraction(0.1)  # the binary value, exactly
    assert rational.to_q(np.float32(0.5)) == Fraction(1, 2)
    assert rational.to_q(np.int64(-3)) == -3
    # a Fraction over mpz parts (a truncating cast of an mpq) converts too
    assert rational.to_q(Fraction(rational.Q(7, 2).__trunc__())) == 3
    assert not rational.is_exact(0.5)


def _snap(ops, shapes, feeds):
    vs = {n: Var(n, list(s), "float32") for n, s in shapes.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs, [], list(feeds))


def _sin_program(y_scale, z_scale):
    """y = scale(x, y_scale); z = sin(scale(x, z_scale)): sin has no real
    kernel here, so only Z3 can tell z apart (probes cannot replay it)."""
    ops = [("scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": y_scale, "bias": 0.0}),
           ("scale", {"X": ["x"]}, {"Out": ["u"]}, {"scale": z_scale, "bias": 0.0}),
           ("pd_op.sin", {"x": ["u"]}, {"out": ["z"]}, {})]
    return _snap(ops, {"x": [2, 3], "y": [2, 3], "u": [2, 3], "z": [2, 3]}, ["x"])


def test_z3_is_not_asked_once_the_rank_is_refuted():
    """z comes first and needs Z3; y is refuted by a probe: the rank is
    NOT_EQUIVALENT on y's replayed counterexample without a Z3 query, z is
    listed unknown saying why.  Beside it, the same z difference alone is
    put to Z3 (one query)."""
    before = _sin_program(1.0, 1.0)
    res = prove_application("t", [0], {}, {0: before}, {0: _sin_program(2.0, 3.0)},
                            {0: ["z", "y"]})[0]
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == "y" and res.counterexample["replayed"]
    assert res.details["queries"] == 0
    assert "z" in res.details["unknown"]
    alone = prove_application("t", [0], {}, {0: before}, {0: _sin_program(1.0, 3.0)},
                              {0: ["z", "y"]})[0]
    assert alone.details["queries"] == 1, alone.message
    assert alone.verdict != Verdict.EQUIVALENT


def _symbols_walked(store, pids, limit):
    """The walk ``proof._symbols_of`` did before it shared ``_reads``."""
    seen, out, stack = set(), {}, list(pids)
    kernels, leaves = set(), set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for mono, _ in store.polys[pid]:
            for a in mono:
                key = store.atoms[a]
                if key[0] == "sym":
                    if key[1] not in out:
                        leaves.add(key[1].split("[", 1)[0])
                        if len(out) < limit:
                            out[key[1]] = None
                elif key[0] == "cut":
                    stack.append(key[1])
                else:
                    kernels.add(key[1])
                    stack.extend(key[3])
    return list(out), sorted(kernels), sorted(leaves)


def test_shared_walk_reads_what_the_full_walk_read():
    """Symbols (in order, up to the limit), leaves and kernels of a term are
    those of a full walk of its graph, with the walk memoised across calls."""
    from verify.value.proof import _symbols_of

    st, rng = Store(), random.Random(3)
    pids = [st.sym(f"leaf{i % 4}[{i}]") for i in range(16)]
    for _ in range(200):
        a, b = rng.choice(pids), rng.choice(pids)
        kind = rng.random()
        pids.append(st.add(a, b) if kind < 0.4 else st.mul(a, b) if kind < 0.7 else
                    st.uf(rng.choice(["f", "g"]), [a, b]) if kind < 0.85 else st.cut(a))
    for limit in (3, 10, 400):
        for _ in range(30):
            roots = [rng.choice(pids), rng.choice(pids)]
            assert _symbols_of(st, roots, limit) == _symbols_walked(st, roots, limit)
    assert st.reads
