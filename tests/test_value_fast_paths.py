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
    """A one- or two-atom monomial merged by comparison gives the sorted
    monomial, and the memoised coefficients the exact products and sums."""
    rng = random.Random(0)
    st = Store()
    for _ in range(4000):
        pa = _random_poly(rng, degree=rng.choice((2, 3, 4)))
        pb = _random_poly(rng, degree=rng.choice((3, 4)))
        naive = {}
        for m1, c1 in pa:
            for m2, c2 in pb:
                m = tuple(sorted(m1 + m2))
                naive[m] = naive.get(m, 0) + c1 * c2
        assert _accumulate_product({}, pa, pb, st) == naive, (pa, pb)
    # every position of a one-atom monomial in four atoms and of a two-atom
    # one in three (equal atoms too)
    for m1 in [(x,) for x in range(6)] + [(x, y) for x in range(6) for y in range(x, 6)]:
        for m2 in [(a, b, c) for a in range(5) for b in range(a, 5) for c in range(b, 5)] + \
                [(a, b, c, e) for a in range(5) for b in range(a, 5) for c in range(b, 5)
                 for e in range(c, 5)]:
            got = _accumulate_product({}, ((m1, rational.Q(1, 2)),), ((m2, 3),), st)
            assert got == {tuple(sorted(m1 + m2)): Fraction(3, 2)}, (m1, m2, got)


def test_store_coefficients_are_one_object_per_value(monkeypatch):
    """The store's arithmetic keeps one coefficient object per value (their
    hashes computed once: issue 19's 48-block stack), with the exact values
    of plain arithmetic, also when its memos fill and start again."""
    from verify.value import symbolic
    if rational.FAST:
        st, _, pids = _store_with_polys(3, n=200)
        objs = {}
        for pid in pids:
            for _, c in st.polys[pid]:
                if c.__class__ is rational.Q:
                    assert objs.setdefault((c.numerator, c.denominator), c) is c, c
    for memo in (symbolic.COEF_MEMO, 3):
        monkeypatch.setattr(symbolic, "COEF_MEMO", memo)
        st, rng, pids = _store_with_polys(7, n=120)
        assert all(c != 0 for pid in pids for _, c in st.polys[pid])
        x, y = st.sym("x0"), st.sym("x1")
        half, third = st.const(Fraction(1, 2)), st.const(Fraction(1, 3))
        p = st.add(st.mul(x, half), st.mul(y, third))
        q = st.add(st.mul(p, p), st.mul(p, half), -1)
        expect = {}
        for m1, c1 in st.polys[p]:
            for m2, c2 in st.polys[p]:
                m = tuple(sorted(m1 + m2))
                expect[m] = expect.get(m, 0) + Fraction(c1) * Fraction(c2)
        for m, c in st.polys[p]:
            expect[m] = expect.get(m, 0) - Fraction(c) / 2
        assert {m: Fraction(c) for m, c in st.polys[q]} == \
            {m: c for m, c in expect.items() if c}


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


def test_z3_is_not_asked_once_the_rank_is_refuted(monkeypatch):
    """z comes first and needs Z3; y is refuted by a probe: the rank is
    NOT_EQUIVALENT on y's replayed counterexample without a Z3 query, z is
    listed unknown saying why.  Beside it, the same z difference alone is
    not put to Z3 either: with sin an arbitrary function the two differ, so
    Z3 could not prove them (``test_z3_still_proves_what_only_expanding_cuts_shows``
    is where Z3 is asked), and without a real sin the rank is INCONCLUSIVE.
    sin has a reference kernel (``kernels.REFERENCED``); it is taken away
    here, as for a kernel no reference can replay (``kernels.UNREPLAYABLE``)."""
    from verify.value import kernels
    monkeypatch.setattr(kernels, "REFERENCED",
                        tuple(r for r in kernels.REFERENCED if r != "sin"))
    before = _sin_program(1.0, 1.0)
    res = prove_application("t", [0], {}, {0: before}, {0: _sin_program(2.0, 3.0)},
                            {0: ["z", "y"]})[0]
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == "y" and res.counterexample["replayed"]
    assert res.details["queries"] == 0
    assert "z" in res.details["unknown"]
    alone = prove_application("t", [0], {}, {0: before}, {0: _sin_program(1.0, 3.0)},
                              {0: ["z", "y"]})[0]
    assert alone.details["queries"] == 0, alone.message
    assert alone.verdict == Verdict.INCONCLUSIVE
    assert "arbitrary functions" in alone.message and "sin" in alone.message


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


# -- p19: the rewritten program's execution shares the original's work --------
def _two_layer(rewrite: bool, divide_y_grad: bool = True):
    """h = relu(x @ w); out = h * s (+ a rewrite scaling out's grad path);
    a PIR divide_grad whose y_grad output is there or not."""
    ops = [("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["m"]}, {}),
           ("relu", {"X": ["m"]}, {"Out": ["h"]}, {}),
           ("elementwise_mul", {"X": ["h"], "Y": ["s"]}, {"Out": ["out"]}, {"axis": -1}),
           ("scale", {"X": ["out"]}, {"Out": ["o2"]},
            {"scale": 3.0 if rewrite else 2.0, "bias": 0.0}),
           ("matmul_v2", {"X": ["o2"], "Y": ["w"]}, {"Out": ["dx"]}, {"trans_y": True}),
           ("pd_op.divide", {"x": ["dx"], "y": ["s2"]}, {"out": ["q"]}, {}),
           ("pd_op.divide_grad", {"x": ["dx"], "y": ["s2"], "out": ["q"], "out_grad": ["q"]},
            {"x_grad": ["gx"], "y_grad": ["gy"] if divide_y_grad else []}, {})]
    shapes = {"x": [2, 3], "w": [3, 3], "m": [2, 3], "h": [2, 3], "s": [2, 3],
              "out": [2, 3], "o2": [2, 3], "dx": [2, 3], "s2": [2, 3], "q": [2, 3],
              "gx": [2, 3], "gy": [2, 3]}
    return _snap(ops, shapes, ["x", "w", "s", "s2"])


def _values(store, env, names, seed=5):
    """Every element of ``names`` evaluated exactly on one probe's inputs
    (kernels as arbitrary functions: no float, every difference seen)."""
    from verify.value.proof import _free_kernel_evaluator, _probe_values
    ev = _free_kernel_evaluator(store, _probe_values(store, seed), seed)
    return {n: [ev.poly(e.i) for e in env[n].arr.reshape(-1)] for n in names if n in env}


def test_shared_op_memo_computes_what_a_fresh_store_computes():
    """The rewritten program executed on the store the original ran on (op
    and dot memos shared: dictionary hits) gives, on concrete values, what
    it gives executed alone on a fresh store; and the memo is hit."""
    from verify.value.symbolic import execute
    names = ["m", "h", "out", "o2", "dx", "q", "gx", "gy"]
    for rewrite, y_grad in [(True, True), (True, False), (False, True)]:
        shared = Store()
        execute({0: _two_layer(False, divide_y_grad=not y_grad)}, {}, shared, 1)
        memo_before = len(shared.op_memo)
        env_s, _ = execute({0: _two_layer(rewrite, y_grad)}, {}, shared, 1)
        fresh = Store()
        env_f, _ = execute({0: _two_layer(rewrite, y_grad)}, {}, fresh, 1)
        assert _values(shared, env_s[0], names) == _values(fresh, env_f[0], names)
        # the ops before the rewritten scale were hits: only the rest is new
        assert len(shared.op_memo) - memo_before < len(fresh.op_memo)
        # an op whose outputs differ (divide_grad with / without y_grad) is
        # another key: its y_grad is computed, never a missing value
        assert ("gy" in env_s[0]) == y_grad


def test_dot_memo_is_the_dot():
    """A dot asked twice (a matmul a pass split in two) is the first dot's
    id, which is the canonical form of the sum of the products."""
    for seed in range(3):
        st, rng, pids = _store_with_polys(seed)
        for _ in range(30):
            pairs = [(rng.choice(pids), rng.choice(pids)) for _ in range(rng.randint(1, 6))]
            first = st.dot(pairs)
            swapped = st.dot([(b, a) for a, b in pairs])  # each pair either way round
            assert first == swapped == st.sum_many([st.mul(a, b) for a, b in pairs])


# -- p19: a model with arbitrary kernels before Z3 ---------------------------
def _uf_store(seed):
    """Sums, products, kernels and cuts of symbols, plus pairs equal only by
    expanding a cut (Z3 proves them; canonical forms cannot)."""
    st, rng = Store(), random.Random(seed)
    pids = [st.sym(f"x{i}") for i in range(5)]
    for _ in range(40):
        a, b = rng.choice(pids), rng.choice(pids)
        k = rng.random()
        pids.append(st.add(a, b) if k < 0.35 else st.mul(a, b) if k < 0.6 else
                    st.uf(rng.choice(["f", "g"]), [a], (("k", "1"),)) if k < 0.8 else
                    st.mul(st.cut(st.add(a, b)), rng.choice(pids[:5])))
    equal_by_expansion = []
    for _ in range(8):
        a, b, c = (rng.choice(pids[:5]) for _ in range(3))
        p = st.add(a, b)
        if len(st.polys[p]) < 2:
            continue
        equal_by_expansion.append((st.mul(st.cut(p), c), st.mul(p, c)))
        equal_by_expansion.append((st.uf("f", [st.cut(p)], (("k", "1"),)),
                                   st.uf("f", [p], (("k", "1"),))))
    return st, rng, pids, equal_by_expansion


def test_free_kernel_model_never_contradicts_z3():
    """Where the arbitrary-kernel model tells two terms apart, Z3 does not
    prove them equal (it is a model of Z3's query); where Z3 proves them
    equal (cuts expanded), the model agrees."""
    from verify.value.proof import (FREE_KERNEL_SEED, _free_kernel_evaluator,
                                    _probe_values)
    unsat = sat = 0
    for seed in range(3):
        st, rng, pids, eq = _uf_store(seed)
        zt = Z3Terms(st)
        ev = _free_kernel_evaluator(st, _probe_values(st, FREE_KERNEL_SEED), FREE_KERNEL_SEED)
        pairs = eq + [(rng.choice(pids), rng.choice(pids)) for _ in range(25)]
        for a, b in pairs:
            if a == b:
                continue
            s = z3.Solver(ctx=zt.ctx)
            s.set("timeout", 2000)
            s.add(zt.poly(a) != zt.poly(b))
            res = s.check()
            apart = ev.poly(a) != ev.poly(b)
            assert not (apart and res == z3.unsat), (st.render(a), st.render(b))
            unsat += res == z3.unsat
            sat += apart
    assert unsat >= 6 and sat >= 20, (unsat, sat)


class _Arr:
    def __init__(self, pids):
        from verify.value.symbolic import T
        self.arr = np.array([T(p) for p in pids], dtype=object)


def test_z3_still_proves_what_only_expanding_cuts_shows():
    """Equal only once a cut is expanded: the arbitrary-kernel model agrees,
    so Z3 is asked and proves it (``by_z3``)."""
    from verify.value.proof import _compare, _Z3Budget
    st, _, _, eq = _uf_store(0)
    a, b = eq[0]
    stats = {"queries": 0, "normal_form": 0, "z3_proved": 0, "probe_refuted": 0,
             "z3_refuted": 0}
    T_store = __import__("verify.value.symbolic", fromlist=["T"]).T
    T_store.store = st
    out = _compare(st, Z3Terms(st), _Arr([a]), _Arr([b]), _Z3Budget(20000, 5000), stats)
    assert out is None and stats["queries"] == 1 and stats["z3_proved"] == 1


def _relu_program(scale_first: bool):
    """relu(2 x) or 2 relu(x): equal by an identity of relu (positive
    homogeneity) the terms do not model."""
    if scale_first:
        ops = [("scale", {"X": ["x"]}, {"Out": ["u"]}, {"scale": 2.0, "bias": 0.0}),
               ("relu", {"X": ["u"]}, {"Out": ["y"]}, {})]
    else:
        ops = [("relu", {"X": ["x"]}, {"Out": ["u"]}, {}),
               ("scale", {"X": ["u"]}, {"Out": ["y"]}, {"scale": 2.0, "bias": 0.0})]
    return _snap(ops, {"x": [2, 3], "u": [2, 3], "y": [2, 3]}, ["x"])


def test_a_kernel_identity_is_inconclusive_without_z3():
    """Not the grad clip it was written for (sqrt(4 s) = 2 sqrt(s)): relu(2 x)
    against 2 relu(x).  Equal on the real kernel (checked here against
    Paddle's relu on concrete values), different as terms: INCONCLUSIVE,
    never EQUIVALENT, no Z3 query, saying why; a real difference of the same
    shape (relu(2 x) against relu(x)) is still refuted."""
    import paddle
    x = np.array([[-1.5, 0.0, 2.25], [3.0, -0.5, 1.0]], dtype="float32")
    with paddle.base.dygraph.guard():
        t = paddle.to_tensor(x)
        assert np.array_equal(paddle.nn.functional.relu(2 * t).numpy(),
                              (2 * paddle.nn.functional.relu(t)).numpy())
    res = prove_application("t", [0], {}, {0: _relu_program(True)},
                            {0: _relu_program(False)}, {0: ["y"]})[0]
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert res.details["queries"] == 0
    assert "arbitrary functions" in res.message and "replayed with the real kernels" in \
        res.message
    wrong = _relu_program(True)
    wrong.ops[0] = Op(0, "scale", {"X": ["x"]}, {"Out": ["u"]}, {"scale": 1.0, "bias": 0.0})
    bad = prove_application("t", [0], {}, {0: _relu_program(True)}, {0: wrong},
                            {0: ["y"]})[0]
    assert bad.verdict == Verdict.NOT_EQUIVALENT and bad.counterexample["replayed"]


def test_feeds_shared_across_counterexamples_are_the_feeds():
    """A counterexample's feed arrays, built once per probe and leaf, are
    those ``_feedable`` builds for it alone."""
    from verify.value.proof import _feedable, _feedable_shared, _probe_values
    st = Store()
    for name, shape in [("a@r0", (2, 3)), ("b@r0", (4,)), ("c@r0", ())]:
        st.leaves[name] = (shape, "float32")
        for idx in np.ndindex(*shape):
            st.sym(f"{name}{list(idx) if shape else ''}", "float32")
    sym = _probe_values(st, 0)
    alone = _feedable(st, ["a@r0", "b@r0", "c@r0"], _probe_values(st, 0))
    assert _feedable_shared(st, ["a@r0", "b@r0"], sym) == \
        {k: alone[k] for k in ("a@r0", "b@r0")}
    assert _feedable_shared(st, ["a@r0", "b@r0", "c@r0"], sym) == alone
    assert len(st.feeds) == 3


def _render_reference(st, pid, depth=2, limit=6) -> str:
    """The recursive rendering ``Store.render`` replaced (whole text)."""
    items = st.polys[pid]
    if not items:
        return "0"
    parts = []
    for m, c in items[:limit]:
        factors = [_render_atom_reference(st, a, depth) for a in m]
        coef = "" if c == 1 and factors else str(c) + ("*" if factors else "")
        parts.append(coef + "*".join(factors))
    more = f" + ...({len(items) - limit} more)" if len(items) > limit else ""
    return " + ".join(parts) + more


def _render_atom_reference(st, aid, depth=2) -> str:
    key = st.atoms[aid]
    if key[0] == "sym":
        return key[1]
    if key[0] == "cut":
        return f"({_render_reference(st, key[1], depth, 4)})" if depth > 0 else f"cut{aid}"
    args = ", ".join(_render_reference(st, p, depth - 1, 3) if depth > 0 else "..."
                     for p in key[3][:4])
    return f"{key[1]}({args}{', ...' if len(key[3]) > 4 else ''})"


class _CountingList(list):
    """A store's atom list counting its reads: the work of a rendering."""
    reads = 0

    def __getitem__(self, i):
        _CountingList.reads += 1
        return list.__getitem__(self, i)


def _cut_chain(st, depth):
    """Each level a cut of ``prev * a + 3 prev * f(b)`` (a matmul grad's
    shape: products of cut values): its whole text as a tree is exponential
    in ``depth``, cuts rendering at the same depth."""
    p = st.sym("x")
    for k in range(depth):
        p = st.cut(st.add(st.mul(p, st.sym(f"a{k}")),
                          st.mul(st.const(3), st.mul(p, st.uf("f", [st.sym(f"b{k}")])))))
    return p


def test_bounded_render_is_the_prefix_of_the_whole_text():
    """``render(..., max_chars=n)`` is the first n characters of the whole
    rendering (the recursive one it replaced), and the whole rendering is
    unchanged: sums, products, cuts, kernels with more than 4 arguments, 0."""
    for seed in range(4):
        st, rng, pids = _store_with_polys(seed)
        pids.append(st.uf("h", pids[-6:]))  # more than 4 arguments
        pids.append(st.cut(st.add(pids[-1], pids[-2])))
        pids.append(_cut_chain(st, 5))
        pids.append(st.ZERO)
        for pid in pids:
            for depth, limit in ((2, 6), (0, 6), (1, 2), (3, 4)):
                whole = _render_reference(st, pid, depth, limit)
                assert st.render(pid, depth, limit) == whole
                for n in (1, 7, 40, 600, 10 ** 6):
                    assert st.render(pid, depth, limit, max_chars=n) == whole[:n]


def test_bounded_render_does_not_walk_the_whole_term_graph():
    """A counterexample's 600 characters of a deep cut chain read a few
    hundred atoms, where the whole text reads ~2^depth (measured in reads of
    the store's atoms, not seconds): a broken 4-block stack spent 88 % of
    its proof rendering subterms it then cut to 600 characters."""
    st = Store()
    top = _cut_chain(st, 14)
    st.atoms = _CountingList(st.atoms)
    _CountingList.reads = 0
    whole = st.render(top)
    whole_reads = _CountingList.reads
    _CountingList.reads = 0
    assert st.render(top, max_chars=600) == whole[:600]
    assert _CountingList.reads < 400 < 2 ** 14 < whole_reads
