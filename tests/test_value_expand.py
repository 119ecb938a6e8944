"""The cut expansion (``verify/value/expand.py``) stays bounded on the
class of terms that blew up once constant-initialised biases became inputs
(issue 19): a gradient several layers deep is a chain of products of an
opaque derivative kernel, a weight and the cut grad of the layer after it
(``kernel'(x) * dout``), so multiplied out it has exponentially many
monomials, while the two programs differ only at the bottom (a bias added
inside or outside a cut).  The expansion must prove such a pair with a
small, fixed number of work units, and must not prove a pair that differs
at the bottom.  Synthetic terms built on a ``Store`` (no case, no Paddle):
``WIDTH`` elements per layer, ``DEPTH`` layers."""
from __future__ import annotations

from verify.value import expand
from verify.value.symbolic import Store

WIDTH, DEPTH = 8, 6


def _chain(s: Store, bottom):
    """``DEPTH`` layers above the ``bottom`` elements: element j of a layer
    is sum_i d_k(h_i) * w_kij * cut(prev_i), every element cut (as the
    executor cuts an op's large results)."""
    prev = bottom
    for k in range(DEPTH):
        layer = []
        for j in range(WIDTH):
            terms = []
            for i in range(WIDTH):
                mask = s.uf("relu.mask", [s.sym(f"h{k}_{i}")])
                terms.append(s.mul(s.mul(mask, s.sym(f"w{k}_{i}_{j}")), s.cut(prev[i])))
            layer.append(s.cut(s.sum_many(terms)))
        prev = layer
    return prev


def _bottoms(s: Store, bias_scale=1):
    """Element i: ``cut(S_i) + b_i`` (the bias after the cut) and
    ``cut(S_i + bias_scale * b_i)`` (the bias inside it), S_i a 32-term
    dot product."""
    after, inside = [], []
    for i in range(WIDTH):
        dot = s.sum_many([s.mul(s.sym(f"x{i}_{t}"), s.sym(f"v{t}")) for t in range(32)])
        b = s.sym(f"b{i}")
        after.append(s.add(s.cut(dot), b))
        inside.append(s.cut(s.add(dot, s.mul(s.const(bias_scale), b))))
    return after, inside


def _top_pairs(bias_scale):
    s = Store()
    after, inside = _bottoms(s, bias_scale)
    ta, tb = _chain(s, after), _chain(s, inside)
    return s, [(j, a, b) for j, (a, b) in enumerate(zip(ta, tb))]


def test_a_deep_chain_of_kernel_products_is_proved_within_a_small_work_bound():
    s, pairs = _top_pairs(1)
    assert all(a != b for _, a, b in pairs)  # the plain canonical forms differ
    # multiplied out, each top form is far past the expansion's limit (the class)
    assert expand.Expander(s).bound(pairs[0][1]) > expand.LIMIT
    s.work = 0
    assert expand.expander(s).equal(pairs)
    # a fixed bound, a small multiple of the terms' own size (WIDTH^2 * DEPTH
    # products per side); trying each form up to LIMIT spent ~2^18 apiece
    assert s.work < 400_000, s.work


def test_a_deep_chain_differing_at_the_bottom_is_not_proved_and_stays_bounded(monkeypatch):
    """Both stages run (the small one cannot prove it); the large one
    multiplies out only forms its bound admits.  Limits scaled down so the
    test stays cheap: the mechanism, not the constants, is under test."""
    monkeypatch.setattr(expand, "LIMIT", 1 << 12)
    monkeypatch.setattr(expand, "SMALL", 1 << 8)
    s, pairs = _top_pairs(2)  # the bias doubled inside the cut
    assert expand.Expander(s).bound(pairs[0][1]) > expand.LIMIT
    s.work = 0
    assert not expand.expander(s).equal(pairs)
    assert s.work < 100 * expand.LIMIT, s.work  # bounded, no hang
    s2, same = _top_pairs(1)  # and the faithful one is proved at these limits too
    assert expand.expander(s2).equal(same)


def test_a_budget_inside_the_expansion_raises_budget():
    from verify.value.symbolic import Budget

    s, pairs = _top_pairs(1)
    s.work_limit = s.work + 1000
    try:
        expand.expander(s).equal(pairs)
    except Budget:
        return
    raise AssertionError("the work limit was not enforced inside the expansion")


def _bias_times_grad(bias_scale):
    """Element: ``sum_t x_t * D_t`` with ``x_t`` a row's output, the bias
    inside its cut sum in one program (``cut(S_t + b)``, as after a bias
    promoted before an all-reduce) and beside it in the other
    (``cut(S_t) + b``), times the same large grad ``D_t`` (a flat sum of
    products, as a gradient fully expanded): a weight grad ``x^T dout``."""
    s = Store()
    one, two = [], []
    b = s.sym("b")
    for t in range(8):
        dot = s.sum_many([s.mul(s.sym(f"x{t}_{i}"), s.sym(f"v{i}")) for i in range(32)])
        grad = s.cut(s.sum_many([s.mul(s.sym(f"g{t}_{j}"), s.sym(f"u{j}")) for j in range(40)]))
        one.append(s.mul(s.add(s.cut(dot), b), grad))
        two.append(s.mul(s.cut(s.add(dot, s.mul(s.const(bias_scale), b))), grad))
    return s, [(0, s.sum_many(one), s.sum_many(two))]


def test_a_bias_inside_or_beside_a_cut_sum_times_a_large_grad_is_proved(monkeypatch):
    """Neither stage may multiply the products out (limits scaled down so
    the product of the two sums is past both): the smaller flat factor is
    multiplied out against the larger one kept as one atom, on both
    sides; a doubled bias is not proved."""
    monkeypatch.setattr(expand, "LIMIT", 1 << 10)
    monkeypatch.setattr(expand, "SMALL", 1 << 8)
    s, pairs = _bias_times_grad(1)
    assert pairs[0][1] != pairs[0][2]
    assert expand.Expander(s).bound(pairs[0][1]) > expand.LIMIT
    assert expand.expander(s).equal(pairs)
    s2, wrong = _bias_times_grad(2)
    assert not expand.expander(s2).equal(wrong)
