"""Symbolic execution of every rank's programs into hash-consed terms.

Representation, and why (measured in the DESIGN.md spike): element level,
at the REAL shapes.  Tensor-level terms with quantified axioms prove the
promotion rewrite but do not refute its mutants in seconds; element-level,
quantifier-free terms on the cases' small shapes both prove and refute in
about a second per application.

* An element is a polynomial with rational coefficients over atoms, kept in
  a canonical form (sorted monomials, hash-consed: one id per distinct
  polynomial, shared by both programs and all ranks).  Atoms are input
  symbols (a feed, a startup-initialised parameter, one per element), an
  uninterpreted kernel applied to canonical polynomials (gelu(p), adamw
  update(p, g, ...)), or a CUT: a large polynomial abbreviated by one atom
  (an op result's few input-symbol monomials, a bias, kept beside it:
  ``Store.cut_result``).
  Canonical forms decide equality in the theory of commutative rings with
  uninterpreted functions (two polynomials over the reals are equal as
  functions iff their canonical forms are; congruence follows from
  hash-consing the arguments), so an identical form is a proof; a
  different form is compared again with every cut expanded (``expand.py``,
  spending work units), and what stays different goes to Z3
  (``proof.py``), which proves it (unsat) or gives a model the proof
  confirms with Fractions.
* Inputs: feeds, and every trainable parameter the startup initialises,
  drawn at random or set to a constant (``_constant_parameter``: a zero
  bias is an input, not 0); other startup constants (optimizer states,
  the learning rate) are the values the startup computes.
* Cut points keep the cost linear: a value whose polynomial is the same in
  both programs is the same id and the same cut atom, so everything after
  it is shared; an op whose inputs are ids already seen (the other program,
  or the original on the same rank) is a dictionary hit (op-level
  hash-consing), so the rewritten program costs only what the pass changed.
* Ops execute in program order with a current term per var name (SSA by
  versioning: in-place writes such as ``all_reduce(x) -> x`` just rebind).
  Ranks run in lock step; a collective fires when every member of its
  ring's group has reached one on that ring (as the numeric simulator).

Shapes: REAL.  Every leaf (feed, parameter, fill_constant) has its real
shape; a -1 (batch) dim is instantiated at the size the caller gives
(``batch``; ``proof.py`` proves at 1 and two larger sizes and says so).
Constants that depend on sizes (a mean's 1/n) come from the real sizes and
every index map is the real one.  (An earlier reduction of every dim to
<= 2 was unsound: a reshape split [2, 2] of 4 became [2, 1], two head
layouts reduced alike, a mean divided by the reduced count.)
A leaf above ``MAX_LEAF_ELEMENTS`` or an execution past its work budget
raises :class:`Budget`: the proof is then INCONCLUSIVE, never a reduced one.

Work budget, in units that do not depend on the machine (issue 19: a budget
of CPU seconds gave a verdict that depended on the machine's speed and
load).  ``Store.work`` counts what the arithmetic touches: a product of
polynomials of m and n monomials costs m * n, a sum the monomials it adds,
a canonical form the monomials it sorts and interns, every primitive call
(a memo hit too) 1, and every op the elements it reads and writes.  The
count is a function of the programs and the shapes alone (same ops, same
terms in the same order), so a rerun anywhere spends the same units and
stops, past ``Store.work_limit``, at the same op; its correlation with CPU
time is in benchmarks/README.md.
"""
from __future__ import annotations

import hashlib
import sys
from fractions import Fraction
from operator import itemgetter

import numpy as np

from verify.ir.collectives import COLLECTIVES, POINT_TO_POINT, exchanges, root_of

from .executor_disagreements import refusal as executor_refusal
from .kernels import DOMAIN_ATTRS
from .rational import FAST, Q, denom as _denom, numer as _numer, to_q
from verify.ir import op_definitions, read_sets
from .semantics import (RAGGED_READERS, RANDOM_INIT, ROWS, WRAPPED, Ragged, Tensor,
                        Unsupported, attrs_key, check_dtypes, collective, collective_kind,
                        constant, leaf_dims, wrap_modulus)
from .views import Uninitialised, Views

# a product above this many monomials multiplies cut atoms.  Measured on
# promotion x planned_gpt_tp2 once biases are inputs (issue 19): at 64 a
# weight grad x^T dout multiplied each attention output's 16 monomials
# (softmax times v = cut + bias) by dout's 4, 1024 monomials an element,
# and the original program alone stored past the 50 M monomial limit.  At 8
# both programs stored 24.5 M, but the grad-clip proofs' Z3 queries grew;
# at 32, measured in one run (CPU s): promotion x planned_gpt_tp2 EQUIVALENT
# in 55 s (5.5 GB), grad clip x engine_dp2_sgd_clip 12.8 s (at 8: 72, 16:
# 67, 64: 28), the engine pipeline x engine_pipeline_dp2_clip_default 19.8 s
MUL_LIMIT = 32
CUT_SIZE = 24  # a result above this many monomials becomes a cut atom
COEF_MEMO = 1 << 20  # entries of one coefficient memo of a store (Store.coef)
# an op result's monomials that are one input symbol each (a bias, a feed),
# up to this many, stay beside its cut atom (``Store.cut_result``)
PEEL_MAX = 4
POINT_WORK = 4_000_000  # units Store.point_value may spend on one store
MAX_LEAF_ELEMENTS = 1 << 16  # one leaf's elements: above, the proof is over budget
# attrs of a random-init op that say nothing about the distribution
RANDOM_ATTRS_ASIDE = ("seed", "op_role", "op_role_var", "op_namescope", "op_callstack",
                      "op_device", "with_quant_attr")


_ONE = (((), 1),)  # the polynomial 1
_MONOMIAL = itemgetter(0)  # a (monomial, coefficient) pair's sort key


def _merged_one(x, pb) -> list:
    """The sorted monomials ``(x,) + m2`` for every ``m2`` of ``pb``: a
    one-atom monomial (a symbol, a kernel, a cut: most of a matmul's
    factors) merged by comparison into one of up to four atoms, not sorted
    (the same monomials, 2x faster: measured)."""
    out = []
    for m2, _ in pb:
        n = len(m2)
        if n == 1:
            y = m2[0]
            m = (x, y) if x <= y else (y, x)
        elif n == 2:
            y, z = m2
            m = (x, y, z) if x <= y else (y, x, z) if x <= z else (y, z, x)
        elif n == 3:  # most of a matmul grad's products (measured)
            y, z, w = m2
            m = (x, y, z, w) if x <= y else (y, x, z, w) if x <= z else \
                (y, z, x, w) if x <= w else (y, z, w, x)
        elif n == 4:  # a matmul grad's input grad, a dout with cuts
            y, z, w, u = m2
            m = (x, y, z, w, u) if x <= y else (y, x, z, w, u) if x <= z else \
                (y, z, x, w, u) if x <= w else (y, z, w, x, u) if x <= u else \
                (y, z, w, u, x)
        elif n:
            m = tuple(sorted(m2 + (x,)))
        else:
            m = (x,)
        out.append(m)
    return out


def _merged_two(x, y, pb) -> list:
    """The sorted monomials ``(x, y) + m2`` (``x <= y``: a weight grad's
    input row times a dout), a three-atom ``m2`` merged by comparison."""
    out = []
    for m2, _ in pb:
        if len(m2) == 3:
            a, b, z = m2
            if y <= a:
                m = (x, y, a, b, z)
            elif x <= a:
                m = (x, a, y, b, z) if y <= b else (x, a, b, y, z) if y <= z else \
                    (x, a, b, z, y)
            elif x <= b:
                m = (a, x, y, b, z) if y <= b else (a, x, b, y, z) if y <= z else \
                    (a, x, b, z, y)
            elif x <= z:
                m = (a, b, x, y, z) if y <= z else (a, b, x, z, y)
            else:
                m = (a, b, z, x, y)
        else:
            m = tuple(sorted((x, y) + m2)) if m2 else (x, y)
        out.append(m)
    return out


def _accumulate_product(d, pa, pb, store):
    """d += pa * pb (monomials as sorted atom tuples -> coefficients).
    The shorter factor is the outer loop; each of its monomials is merged
    with all of ``pb``'s at once (``_merged_one``, ``_merged_two``: by
    comparison where that is cheaper than sorting).  Coefficients are
    multiplied and added through the store's memos (``Store.times``,
    ``Store.plus``): the store's objects of the exact products and sums."""
    get = d.get
    sums, plus = store.sums, store.plus
    if len(pa) > len(pb):
        pa, pb = pb, pa
    for m1, c1 in pa:
        row = None if c1 == 1 else store.times(c1)
        if len(m1) == 1:
            merged = _merged_one(m1[0], pb)
        elif len(m1) == 2:
            merged = _merged_two(m1[0], m1[1], pb)
        elif m1:
            merged = [tuple(sorted(m1 + m2)) if m2 else m1 for m2, _ in pb]
        else:
            merged = [m2 for m2, _ in pb]
        for m, (_, c2) in zip(merged, pb):
            if row is not None:
                c = row.get(c2)
                if c is None:
                    c = row[c2] = store.coef(c1 * c2)
                c2 = c
            v = get(m)
            if v is None:
                d[m] = c2
            else:
                c = sums.get((v, c2))
                d[m] = plus(v, c2) if c is None else c
    return d


class Store:
    """Hash-consed polynomials (ids) over atoms (ids)."""

    def __init__(self, work_limit=None, stored_limit=None):
        self.work = 0  # units spent (module docstring): deterministic, never seconds
        self.work_limit = work_limit  # past it, Budget (None: no limit)
        # monomials interned: what the store holds, so its memory (~180 bytes
        # a monomial with the memos, measured); past it, Budget.  The work
        # units count arithmetic, and a store that keeps most of what it
        # computes grew past 11 GB within the work budget (promotion on
        # planned_gpt_tp2 with exact layer_norm rows)
        self.stored = 0
        self.stored_limit = stored_limit
        self.atoms = []  # id -> ("sym", name) | ("uf", kernel, attrs, (pid, ...)) | ("cut", pid)
        self.atom_ix = {}
        self.polys = []  # id -> tuple((monomial, coeff), ...), monomial = sorted atom ids
        self.poly_ix = {}
        self.memo = {}
        # op-level hash-consing, shared by every execution on this store (the
        # original's and the rewritten program's: an op the pass left alone,
        # on the same input terms, is a dictionary hit; ``Executor.step``)
        self.op_memo = {}
        self.cut_of = {}  # pid -> cut atom's pid
        self.sym_dtype = {}  # symbol name -> dtype of the leaf it is an element of
        self.domains = {}  # aid -> (name, repr) bounds on its inputs (uf, DOMAIN_ATTRS)
        self.leaves = {}  # leaf name -> (real shape, dtype): a counterexample's feeds
        self.probes = {}  # probe seed -> (values, evaluator) of these terms (proof.py)
        self.reads = {}  # pid -> (leaf mask, kernel mask) its terms read (proof._reads)
        self.read_names = ({}, {})  # leaf base -> bit, kernel -> bit (the masks' bits)
        self.read_atoms = {}  # aid -> (leaf mask, kernel mask, pids it reads)
        self.feeds = {}  # (input values, leaf) -> a counterexample's feed (proof.py)
        self.init_texts = {}  # an initialisation's digest -> its text (init_tag)
        self.coefs = {}  # (numerator, denominator) -> the one coefficient object (coef)
        self.coef_ids = set()  # id() of the objects in coefs
        self.quotients = {}  # lead -> {coefficient: coefficient / lead} (cut)
        self.prods = {}  # a -> {b: a * b} (times)
        self.sums = {}  # (a, b) -> a + b (plus)
        self.negs = {}  # a -> -a (minus)
        self.ONE_Q = self.coef(Q(1))
        self.ZERO = self.intern(())
        self.ONE = self.intern((((), self.ONE_Q),))

    def init_tag(self, data) -> str:
        """The tag of an initialisation's input symbols: the full sha256 of
        ``data``'s text (op type and attrs), the text compared on an equal
        digest (two initialisations of one digest are refused, never one
        input).  Never a truncated digest (issue 34: a ``diag`` init was
        found in seconds whose 6-hex-digit tag equalled a
        ``uniform_random``'s, and a rewrite swapping them was "proved")."""
        text = repr(data)
        digest = hashlib.sha256(text.encode()).hexdigest()
        seen = self.init_texts.setdefault(digest, text)
        if seen != text:
            raise Unsupported(f"initialisations {text[:200]} and {seen[:200]} share the "
                              f"sha256 {digest}: not one input")
        return digest

    def wrap(self, pid, bits: int, signed: bool) -> int:
        """``pid``, an integer-valued polynomial, with every coefficient
        reduced modulo 2^bits (into [-2^(bits-1), 2^(bits-1)) where
        ``signed``): the same value modulo 2^bits wherever every atom is an
        integer.  Unsupported where that is not known: a coefficient that is
        no integer, or a cut atom (it stands for a polynomial divided by its
        lead coefficient, which need not be an integer)."""
        items = self.polys[pid]
        mod = 1 << bits
        half = mod >> 1
        out, changed = [], False
        atoms = self.atoms
        self.work += 1 + len(items)
        for m, c in items:
            if _denom(c) != 1:
                raise Unsupported(f"an integer value with the coefficient {c}")
            for a in m:
                if atoms[a][0] == "cut":
                    raise Unsupported("an integer value abbreviated by a cut")
            n = int(_numer(c)) % mod
            if signed and n >= half:
                n -= mod
            if n != c:
                changed = True
            if n:
                out.append((m, Q(n)))
        return self._finish_sorted(out) if changed else pid

    def spend(self, units: int, doing: str) -> None:
        """Count ``units`` of work; past the limit, Budget saying what was
        being done (the expansion and normal forms above the store spend here)."""
        self.work += units
        if self.work_limit is not None and self.work > self.work_limit:
            raise Budget(f"past the work limit {doing}")

    # -- interning ---------------------------------------------------------
    # -- coefficients: one object per value, products and sums memoised ---
    # gmpy2 caches an mpq's hash in the object, and computing it costs ~4 us
    # (a modular inverse), ~7x a lookup by numerator and denominator; interning
    # a polynomial hashes every coefficient, and plain arithmetic makes a new
    # object of every coefficient it touches: that was most of interning's
    # time on the layer stack (measured).  A program has few distinct
    # coefficients, so the store keeps one object per value and memoises
    # products and sums of them (values, so the same canonical forms; a memo
    # past COEF_MEMO entries starts again: its memory stays bounded).
    def coef(self, c):
        """The store's one object of the value ``c`` (a ``Q``; anything else,
        an int, as it is)."""
        if c.__class__ is not Q:
            return c
        key = (_numer(c), _denom(c))
        coefs = self.coefs
        got = coefs.get(key)
        if got is None:
            if len(coefs) > COEF_MEMO:
                coefs.clear()
                self.coef_ids.clear()
            got = coefs[key] = c
            self.coef_ids.add(id(c))  # kept alive by coefs: the id stays its own
        return got

    def times(self, a) -> dict:
        """{b: a * b} memoised for the coefficient ``a`` (the caller fills it
        with ``coef(a * b)``)."""
        got = self.prods.get(a)
        if got is None:
            if len(self.prods) > COEF_MEMO:
                self.prods.clear()
            got = self.prods[a] = {}
        elif len(got) > COEF_MEMO:
            got.clear()
        return got

    def plus(self, a, b):
        """``a + b``, the store's object, memoised (``sums[(a, b)]``)."""
        sums = self.sums
        if len(sums) > COEF_MEMO:
            sums.clear()
        got = sums[(a, b)] = self.coef(a + b)
        return got

    def minus(self, a):
        """``-a``, the store's object, memoised."""
        got = self.negs.get(a)
        if got is None:
            if len(self.negs) > COEF_MEMO:
                self.negs.clear()
            got = self.negs[a] = self.coef(-a)
        return got

    def intern(self, items) -> int:
        # one lookup: a tuple does not cache its hash, and hashing a large
        # polynomial (every monomial, every coefficient) is most of interning
        n = len(self.polys)
        pid = self.poly_ix.setdefault(items, n)
        if pid == n:
            self.stored += len(items)
            if self.stored_limit is not None and self.stored > self.stored_limit:
                del self.poly_ix[items]
                raise Budget(f"past the memory limit: {self.stored} monomials stored "
                             f"of {self.stored_limit}")
            self.polys.append(items)
        return pid

    def atom(self, key) -> int:
        aid = self.atom_ix.get(key)
        if aid is None:
            aid = len(self.atoms)
            self.atoms.append(key)
            self.atom_ix[key] = aid
        return aid

    def atom_poly(self, key) -> int:
        return self.intern((((self.atom(key),), self.ONE_Q),))

    def const(self, value) -> int:
        c = to_q(value)
        return self.ZERO if c == 0 else self.intern((((), self.coef(c)),))

    def sym(self, name: str, dtype: str = "") -> int:
        if dtype:
            self.sym_dtype.setdefault(name, dtype)
        return self.atom_poly(("sym", name))

    def uf(self, kernel, args, attrs=()) -> int:
        bounds = DOMAIN_ATTRS.get(kernel)
        if bounds is None or not any(name in bounds for name, _ in attrs):
            return self.atom_poly(("uf", kernel, attrs, tuple(args)))
        # attrs that bound the inputs, not the value (kernels.DOMAIN_ATTRS):
        # not part of the atom; the strictest bound on it is kept beside it
        key = ("uf", kernel, tuple(a for a in attrs if a[0] not in bounds), tuple(args))
        pid = self.atom_poly(key)
        aid = self.atom_ix[key]
        have = dict(self.domains.get(aid, ()))
        for name, text in attrs:
            if name in bounds:
                v = int(text)
                have[name] = repr(v if name not in have else bounds[name](int(have[name]), v))
        self.domains[aid] = tuple(sorted(have.items()))
        return pid

    def cut(self, pid) -> int:
        """A one-monomial polynomial equal to ``pid``: ``lead * atom``, the
        atom standing for ``pid / lead`` (``lead`` its first monomial's
        coefficient).  So every multiple of a polynomial cuts to the same
        atom: a rewrite that moves a constant factor across cut values (the
        data-parallel optimization moves 1/n into the loss seed, scaling
        every gradient) keeps equal canonical forms."""
        p = self.polys[pid]
        if len(p) <= 1:
            return pid
        c = self.cut_of.get(pid)
        if c is None:
            lead = p[0][1]
            if lead == 1:
                c = self.atom_poly(("cut", pid))
            else:  # p divided by a nonzero constant: still sorted, nothing cancels
                # few coefficient values (a cut's are mostly 1 / lead): each
                # quotient computed once per store, the same object (``coef``)
                quot = self.quotients.get(lead)
                if quot is None:
                    quot = self.quotients[lead] = {}
                monic = []
                for m, v in p:
                    q = quot.get(v)
                    if q is None:
                        q = quot[v] = self.coef(v / lead)
                    monic.append((m, q))
                monic = self._finish_sorted(monic, own=True)
                c = self.intern((((self.atom(("cut", monic)),), lead),))
            self.cut_of[pid] = c
        return c

    # -- arithmetic --------------------------------------------------------
    def add(self, a, b, sign=1) -> int:
        key = ("+" if sign == 1 else "-", a, b)
        r = self.memo.get(key)
        if r is not None:
            self.work += 1
            return r
        pa, pb = self.polys[a], self.polys[b]
        self.work += 1 + len(pa) + len(pb)
        if not pb:
            r = a
        elif not pa and sign == 1:
            r = b
        else:
            d = dict(pa)
            get, sums, plus, minus = d.get, self.sums, self.plus, self.minus
            for m, c in pb:
                if sign != 1:
                    c = minus(c)
                v = get(m)
                if v is not None:
                    s = sums.get((v, c))
                    c = plus(v, c) if s is None else s
                d[m] = c  # a zero is dropped by _finish
            r = self._finish(d, own=True)
        self.memo[key] = r
        return r

    def sum_many(self, pids) -> int:
        """The sum of many polynomials, interned once (a matmul's or a
        reduction's partial sums are never interned)."""
        d = {}
        get, polys, sums, plus = d.get, self.polys, self.sums, self.plus
        work = 1
        for pid in pids:
            work += 1 + len(polys[pid])
            for m, c in polys[pid]:
                v = get(m)
                if v is None:
                    d[m] = c
                else:
                    s = sums.get((v, c))
                    d[m] = plus(v, c) if s is None else s
        self.work += work
        return self._finish(d, own=True)

    def _factors(self, a, b):
        """The polynomials a product a * b multiplies: ``a`` and ``b``, with
        the larger (then both) cut where the product would exceed MUL_LIMIT
        monomials (a constant factor adds none: never cut).  The decision
        depends on the operands' canonical forms only, so ``mul`` and
        ``dot`` multiply alike."""
        pa, pb = self.polys[a], self.polys[b]
        if len(pa) * len(pb) > MUL_LIMIT and not (
                len(pa) == 1 and not pa[0][0] or len(pb) == 1 and not pb[0][0]):
            a2, b2 = (self.cut(a), b) if len(pa) >= len(pb) else (a, self.cut(b))
            if len(self.polys[a2]) * len(self.polys[b2]) > MUL_LIMIT:
                a2, b2 = self.cut(a2), self.cut(b2)
            pa, pb = self.polys[a2], self.polys[b2]
        return pa, pb

    def mul(self, a, b) -> int:
        if a > b:
            a, b = b, a
        key = ("*", a, b)
        r = self.memo.get(key)
        if r is not None:
            self.work += 1
            return r
        d = {}
        pa, pb = self._factors(a, b)
        self.work += 1 + len(pa) * len(pb)
        _accumulate_product(d, pa, pb, self)
        r = self._finish(d, own=True)
        self.memo[key] = r
        return r

    def dot(self, pairs) -> int:
        """sum(a * b for a, b in pairs), interned once: the same canonical
        form as ``sum_many([mul(a, b) ...])`` (each product's cuts decided
        as ``mul`` decides them; addition is exact, so summing the monomials
        into one dict is the same polynomial), without interning the
        products nobody else reads (a matmul's element products)."""
        pairs = tuple([(a, b) if a <= b else (b, a) for a, b in pairs])
        memo = self.memo
        key = ("dot", pairs)  # the same dot again (a matmul a pass split in two)
        r = memo.get(key)
        if r is not None:
            self.work += 1 + len(pairs)  # a hit: the key's pairs read
            return r
        d = {}
        polys = self.polys
        work = 1
        for a, b in pairs:
            work += 1
            r = memo.get(("*", a, b))
            if r is not None:  # a product already built: its monomials
                work += len(polys[r])
                _accumulate_product(d, polys[r], _ONE, self)
                continue
            pa, pb = polys[a], polys[b]
            if not pa or not pb:
                continue
            if len(pa) * len(pb) > MUL_LIMIT:  # else _factors leaves both as they are
                pa, pb = self._factors(a, b)
            work += len(pa) * len(pb)
            _accumulate_product(d, pa, pb, self)
        self.work += work
        r = memo[key] = self._finish(d, own=True)
        return r

    def _finish(self, d, own=False) -> int:
        """The canonical form of ``d`` ({monomial: coefficient}), interned
        (``own``: every coefficient is the store's object already)."""
        # sorted by monomial alone (the keys are distinct): comparing the
        # (monomial, coefficient) pairs themselves costs 2.7x (measured)
        return self._finish_sorted(sorted(d.items(), key=_MONOMIAL), own)

    def _finish_sorted(self, items, own=False) -> int:
        """The canonical form of ``items``, (monomial, coefficient) pairs
        sorted by distinct monomials: zero coefficients dropped, interned;
        a work unit a pair.  ``own``: every coefficient is the store's
        object already (made by its memos), else each is looked up."""
        self.work += len(items)
        if self.work_limit is not None and self.work > self.work_limit:
            raise Budget("past the work limit")
        if FAST and own:
            return self.intern(tuple([mc for mc in items if mc[1]]))
        if FAST:  # each coefficient the store's one object of its value (``coef``)
            known = self.coef_ids
            out = []
            for mc in items:
                c = mc[1]
                if c:
                    if id(c) not in known:
                        mc = (mc[0], self.coef(c))
                    out.append(mc)
            return self.intern(tuple(out))
        # integral coefficients as ints: Fraction's hash is slow, and equal
        # numbers hash alike, so the canonical form is unchanged
        out = []
        for m, c in items:
            if c.__class__ is Fraction:
                if c._denominator == 1:
                    c = c._numerator
            if c:
                out.append((m, c))
        return self.intern(tuple(out))

    def cut_result(self, pid) -> int:
        """An op result's polynomial above CUT_SIZE monomials, abbreviated:
        ``cut(R) + L``, ``L`` its monomials that are one input symbol each
        (``c * b``: a bias, a feed) where there are 1 to ``PEEL_MAX`` of
        them, ``R`` the rest; else ``cut(p)``.  The same polynomial, and a
        function of its canonical form alone (sound: equal forms, equal
        values).  Why: a pass that adds a bias before a sum instead of after
        it (the promotion: ``S0 + b`` all-reduced with ``S1``) builds ``S +
        b`` where the original builds ``cut(S) + b``; peeled, both are
        ``cut(S) + b``, one canonical form, so everything computed from it
        is shared and proved by canonical form instead of by expanding cuts
        (measured: planned_two_mlp_tp2's promotion 41 of 62 values per rank
        by expansion before)."""
        p = self.polys[pid]
        got = self.cut_of.get(("peel", pid))
        if got is not None:
            return got
        atoms = self.atoms
        lin = [mc for mc in p if len(mc[0]) == 1 and atoms[mc[0][0]][0] == "sym"]
        if not lin or len(lin) > PEEL_MAX:
            got = self.cut(pid)
        else:
            rest = self.intern(tuple([mc for mc in p if not (
                len(mc[0]) == 1 and atoms[mc[0][0]][0] == "sym")]))
            self.work += len(p)
            got = self.add(self.cut(rest), self.intern(tuple(lin)))
        self.cut_of[("peel", pid)] = got
        return got

    def cut_tensor(self, t):
        """An op's result with every element above CUT_SIZE monomials cut
        (``cut_result``).  Cutting only op results (never partial sums
        inside an op) makes the cut depend on the value alone, so equal
        values cut alike in both programs whatever order each op summed in."""
        flat = t.arr.reshape(-1)
        if t.arr.dtype != object or not any(
                isinstance(e, T) and len(self.polys[e.i]) > CUT_SIZE for e in flat):
            return t
        out = np.empty(t.arr.shape, dtype=object)
        of = out.reshape(-1)
        for j, e in enumerate(flat):
            of[j] = T(self.cut_result(e.i)) if isinstance(e, T) and \
                len(self.polys[e.i]) > CUT_SIZE else e
        return Tensor(out, t.dims, t.dtype)

    # -- a value that depends on the polynomial, not on its cuts -----------
    def point_value(self, pid):
        """The exact value of ``pid`` at one fixed point, or None (terms
        nested too deep): every symbol a small integer drawn from its name,
        every kernel a small integer drawn from its name, attrs and its
        arguments' values (an arbitrary function: equal arguments, equal
        values), every cut atom its polynomial's value.  So equal
        polynomials have equal values whatever cuts the programs built them
        with, and ``point_value(c * p) == c * point_value(p)``: the scale a
        homogeneous kernel's linear input is divided by
        (``semantics.uf_opaque_homogeneous``), one for every form of one
        polynomial.  One work unit per monomial read, each term once; past
        ``POINT_WORK`` units on this store (a large model: the first grad
        of a deep network reads nearly every term, measured 5 M terms and
        minutes on planned_gpt_tp2) None for every later call, so the
        caller's fallback (a form's lead coefficient) is one rule for the
        rest of both programs."""
        if self.__dict__.get("point_spent", 0) > POINT_WORK:
            return None  # past the limit once: the caller's fallback from then on
        memo = self.__dict__.setdefault("point_values", {})
        amemo = self.__dict__.setdefault("point_atoms", {})
        seeds = self.__dict__.setdefault("point_seeds", {})
        polys, atoms = self.polys, self.atoms

        def seed(key):  # sha1, not hash(): a str's hash differs between processes
            got = seeds.get(key)
            if got is None:
                got = seeds[key] = int.from_bytes(
                    hashlib.sha1(repr(key).encode()).digest()[:8], "big")
            return got

        def atom(aid):
            key = atoms[aid]
            if key[0] == "sym":
                v = 2 + seed(("sym", key[1])) % 97
            elif key[0] == "cut":
                v = poly(key[1])
            else:  # a tuple of ints hashes alike in every process
                args = tuple([(int(x.numerator), int(x.denominator))
                              for x in map(poly, key[3])])
                v = 2 + hash((seed((key[1], key[2])), args)) % 97
            amemo[aid] = v
            return v

        def poly(q):
            v = memo.get(q)
            if v is None:
                items = polys[q]
                self.work += 1 + len(items)
                self.point_spent = self.__dict__.get("point_spent", 0) + 1 + len(items)
                if self.point_spent > POINT_WORK:
                    raise RecursionError  # over the limit: None, as too deep
                v = 0  # in the coefficients' own exact type (GMP's where installed)
                get = amemo.get
                for mono, c in items:
                    for a in mono:
                        x = get(a)
                        c = c * (atom(a) if x is None else x)
                    v += c
                memo[q] = v
            return v

        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))
        try:
            return poly(pid)
        except RecursionError:
            return None
        finally:
            sys.setrecursionlimit(old)

    # -- reading -----------------------------------------------------------
    def uncut(self, aid):
        """The polynomial a cut atom abbreviates, or None."""
        key = self.atoms[aid]
        return key[1] if key[0] == "cut" else None

    def render(self, pid, depth=2, limit=6, max_chars=None) -> str:
        """The polynomial as text: at most ``limit`` monomials a polynomial,
        kernel arguments ``depth`` levels down (cuts shown inside parentheses,
        at the same depth).  ``max_chars``: only the first ``max_chars``
        characters of that text, produced without rendering the rest (cuts
        nest at the same depth, so the whole text of a deep term graph is
        rendered as a tree: exponential in its depth; a counterexample shows
        600 characters of it)."""
        return self._render([("p", pid, depth, limit)], max_chars)

    def render_atom(self, aid, depth=2) -> str:
        return self._render([("a", aid, depth)], None)

    def _render(self, stack, max_chars) -> str:
        # left to right with an explicit stack (no recursion): a task is text,
        # ("p", pid, depth, limit) or ("a", aid, depth)
        out, n = [], 0
        polys, atoms = self.polys, self.atoms
        while stack:
            task = stack.pop()
            if task.__class__ is str:
                out.append(task)
                n += len(task)
                if max_chars is not None and n >= max_chars:
                    break
                continue
            seq = []
            if task[0] == "p":
                _, pid, depth, limit = task
                items = polys[pid]
                if not items:
                    seq.append("0")
                for k, (m, c) in enumerate(items[:limit]):
                    if k:
                        seq.append(" + ")
                    if not (c == 1 and m):
                        seq.append(str(c) + ("*" if m else ""))
                    for j, a in enumerate(m):
                        if j:
                            seq.append("*")
                        seq.append(("a", a, depth))
                if len(items) > limit:
                    seq.append(f" + ...({len(items) - limit} more)")
            else:
                _, aid, depth = task
                key = atoms[aid]
                if key[0] == "sym":
                    seq.append(key[1])
                elif key[0] == "cut":
                    seq += ["(", ("p", key[1], depth, 4), ")"] if depth > 0 else [f"cut{aid}"]
                else:
                    seq.append(f"{key[1]}(")
                    for j, p in enumerate(key[3][:4]):
                        if j:
                            seq.append(", ")
                        seq.append(("p", p, depth - 1, 3) if depth > 0 else "...")
                    seq.append(", ...)" if len(key[3]) > 4 else ")")
            stack.extend(reversed(seq))
        text = "".join(out)
        return text if max_chars is None else text[:max_chars]


class T:
    """A polynomial id with operators, so numpy object arrays compute on it."""

    __slots__ = ("i",)
    store: Store = None  # the store of the running execution

    def __init__(self, i):
        self.i = i

    def _other(self, o):
        if isinstance(o, T):
            return o.i
        return T.store.const(o)

    def __add__(self, o):
        return T(T.store.add(self.i, self._other(o)))

    __radd__ = __add__

    def __sub__(self, o):
        return T(T.store.add(self.i, self._other(o), -1))

    def __rsub__(self, o):
        return T(T.store.add(self._other(o), self.i, -1))

    def __mul__(self, o):
        if not isinstance(o, T) and o == 1:
            return self
        return T(T.store.mul(self.i, self._other(o)))

    __rmul__ = __mul__

    @staticmethod
    def _id(o):
        return o.i if isinstance(o, T) else T.store.const(o)

    @classmethod
    def total(cls, xs):
        """sum(xs) in one step (``semantics._sum``'s fast path)."""
        return T(T.store.sum_many([cls._id(x) for x in xs]))

    @classmethod
    def dot(cls, xs, ys):
        """sum(x * y) in one step (``semantics._matmul``'s fast path)."""
        ix = cls._id
        return T(T.store.dot([(ix(x), ix(y)) for x, y in zip(xs, ys)]))

    def __neg__(self):
        return T(T.store.add(T.store.ZERO, self.i, -1))

    def __repr__(self):
        return f"T({T.store.render(self.i)})"


def attr_constant(value) -> Fraction:
    """A constant as the proof reads it: exactly the number given (a row
    converts an attr to its tensor's dtype first, ``semantics.constant``: a
    float32 attr is its float32 value, a float64 one exact, an integer one
    truncated).  No rounding to a "simpler" rational: the simplest rational
    within 2^-24 of every float (what this was until issue 34) made
    constants a rewrite changed by less than that the same."""
    if isinstance(value, float) and not (value == value and abs(value) != float("inf")):
        raise Unsupported(f"constant {value!r} (not a finite number)")
    return value if isinstance(value, Fraction) else Fraction(value)


class Kernels:
    """The kernel context rows get (``k`` in semantics.py), for terms."""

    reduce_to = None  # real shapes: semantics.reduce_size keeps every dim

    def __init__(self, store):
        self.store = store

    def const(self, value):
        return T(self.store.const(attr_constant(value)))

    def uf(self, kernel, args, attrs=()):
        return T(self.store.uf(kernel, [a.i if isinstance(a, T) else self.store.const(a)
                                        for a in args], attrs))


def ids(arr) -> tuple:
    # a list, not a generator, and the class compared, not isinstance: every
    # op's memo key reads every input element (T has no subclass)
    return tuple([e.i if e.__class__ is T else e for e in np.asarray(arr).reshape(-1).tolist()])


class ExecError(Exception):
    """The programs cannot be executed symbolically (mismatched collectives,
    a read of a var nothing wrote, ...).  ``rank`` and ``op`` say where."""

    def __init__(self, msg, rank=None, op=None):
        super().__init__(msg)
        self.rank, self.op = rank, op


class Rank:
    """One rank's program state: current term per var name, position."""

    def __init__(self, rank, snap, ops, env):
        self.rank, self.snap, self.ops, self.env, self.pos = rank, snap, ops, env, 0
        self.views = Views()  # coalesce_tensor's fused buffers (views.py)


# the size symbol of a -1 dim no declared symbol names (``Case.symbols``)
DEFAULT_SIZE_SYMBOL = "B"


def size_symbol(symbols, var, i) -> str:
    """The size symbol of dim ``i`` (a -1) of ``var``: the one ``symbols``
    ({var: (symbol or None, ...)}, a case's declaration) names, else
    ``DEFAULT_SIZE_SYMBOL`` (every unnamed -1 dim one size, as the batch)."""
    names = (symbols or {}).get(var) or ()
    return str(names[i]) if i < len(names) and names[i] else DEFAULT_SIZE_SYMBOL


class Budget(Exception):
    """The real shapes do not fit the proof's budget (a leaf too large, or
    the work units spent past ``Store.work_limit``): the proof is
    INCONCLUSIVE, saying which."""


class Executor:
    """Runs the programs of all ranks (one version: original or rewritten)
    at their real shapes, every -1 dim at ``batch``."""

    def __init__(self, store, rings, batch=2, feed_key=None, symbols=None):
        self.store = store
        self.k = Kernels(store)
        self.rings = rings
        # ``batch``: one size for every -1 dim, or {size symbol: size} (each
        # declared symbol its own; ``symbols`` {var: (symbol or None, ...)}
        # names them, an unnamed -1 dim is DEFAULT_SIZE_SYMBOL)
        self.sizes = dict(batch) if isinstance(batch, dict) else {}
        self.batch = int(self.sizes.get(DEFAULT_SIZE_SYMBOL, 2) if self.sizes else batch)
        self.symbols = symbols or {}
        self.feed_key = feed_key or (lambda rank, name: f"r{rank}")
        self.op_memo = store.op_memo
        self.ops_run = 0

    # -- leaves ------------------------------------------------------------
    def leaf(self, name, shape, dtype="", var=None):
        real = [self.dim_size(var, i) if int(n) < 0 else int(n) for i, n in enumerate(shape)]
        if int(np.prod(real)) > MAX_LEAF_ELEMENTS:
            raise Budget(f"{name} has {int(np.prod(real))} elements at {real} "
                         f"(over {MAX_LEAF_ELEMENTS} per tensor)")
        self.store.leaves[name] = (tuple(real), dtype)
        self.store.work += 1 + int(np.prod(real))  # one symbol per element
        dims = leaf_dims(real, None)
        arr = np.empty(real, dtype=object)
        for idx in np.ndindex(*real):
            arr[idx] = T(self.store.sym(f"{name}{list(idx) if real else ''}", dtype))
        return Tensor(arr, dims, dtype)

    def dim_size(self, var, i) -> int:
        """The size of dim ``i`` (a -1) of leaf ``var``: its symbol's."""
        return int(self.sizes.get(size_symbol(self.symbols, var, i), self.batch))

    def wrap_tensor(self, t, op):
        """An integer result (``t.dtype`` int32, int64, ...) with every element
        reduced modulo 2^bits (``Store.wrap``): Paddle's integer arithmetic
        wraps around, and a ring operation's result modulo 2^bits depends on
        its operands modulo 2^bits only, so equal reduced forms are equal
        values; a float result as it is."""
        mod = wrap_modulus(t.dtype)
        if mod is None or t.arr.dtype != object:
            return t
        out = np.empty(t.arr.shape, dtype=object)
        of, flat = out.reshape(-1), t.arr.reshape(-1)
        for j, e in enumerate(flat):
            pid = e.i if isinstance(e, T) else self.store.const(e)
            try:
                of[j] = T(self.store.wrap(pid, *mod))
            except Unsupported as exc:
                raise Unsupported(f"{op.type} in {t.dtype}: {exc}") from None
        return Tensor(out, t.dims, t.dtype)

    def _read(self, st, name, op):
        if st.views:
            st.views.check_access(op, name)
            try:
                if name in st.views.buffers:
                    return st.views.read(name, st.env)
                if name in st.views.dropped:
                    raise Uninitialised(name, st.views.dropped[name])
            except Uninitialised as u:
                raise ExecError(f"rank {st.rank} op {op.idx} ({op.type}) reads {u.view}, a view "
                                f"of a fused buffer whose value coalesce_tensor op {u.at} "
                                "dropped (copy_data=False), before anything wrote it again",
                                st.rank, op) from None
        t = st.env.get(name)
        if t is None:
            v = st.snap.vars.get(name)
            if v is None:
                raise ExecError(f"rank {st.rank} op {op.idx} ({op.type}) reads {name}, "
                                "which has neither a value nor a declaration", st.rank, op)
            # read before any write: an input of the program (a loaded var)
            t = st.env[name] = self.leaf(f"{name}@r{st.rank}", v.shape, v.dtype, var=name)
        return t

    def _write(self, st, name, t, op):
        if st.views:
            st.views.check_access(op, name)
            st.views.write(name, t, st.env)
        else:
            st.env[name] = t

    def _constant(self, value, shape, dtype):
        c = self.k.const(constant(value, dtype))
        arr = np.empty(shape, dtype=object)
        for idx in np.ndindex(*shape):
            arr[idx] = c
        return Tensor(arr, leaf_dims(shape), dtype)

    # -- one op --------------------------------------------------------------
    def step(self, st, op, startup: bool):
        store = self.store
        if store.work_limit is not None and store.work > store.work_limit:
            raise Budget(f"past the work limit before rank {st.rank} op {op.idx} "
                         f"({op.type})")
        if startup and (op.type in RANDOM_INIT or _constant_parameter(st, op)):
            # a random draw is an input symbol keyed by what draws it (type and
            # attrs, the seed aside): a pass that changes the distribution
            # changes the symbol; so is a parameter's constant initialisation
            # (its value in the key: a pass changing the init changes it)
            shape = op.attrs.get("shape") or st.snap.shape(op.writes()[0]) or []
            how = attrs_key(op, skip=RANDOM_ATTRS_ASIDE)
            tag = store.init_tag((op.type, how))
            stored = getattr(st, "param_stores", None) or {}
            for name in op.writes():
                # a PIR parameter's constant is named by the parameter it is
                label = stored.get(name, name) if op.type in CONST_INIT else name
                st.env[name] = self.leaf(f"{label}@r{st.rank}~{op.type}#{tag}", shape,
                                         getattr(st.snap.vars.get(name), "dtype", ""))
            return
        if op.type == "nop":  # names vars for the executor's ordering; reads no data
            self.ops_run += 1
            return
        if op.type == "coalesce_tensor":  # views of one buffer (views.py)
            st.views.coalesce(op, st.env, st.snap, self._constant,
                              lambda name: self._read(st, name, op))
            self.ops_run += 1
            return
        row = ROWS.get(op.type)
        if row is None:
            raise Unsupported(f"no semantics row for op {op.type}")
        # everything the op carries is read by its row or declared irrelevant
        why = read_sets.refusal(op, op_definitions.definition(op.type))
        if why is not None:
            raise Unsupported(why)
        ins = {s: [self._read(st, n, op) for n in names] for s, names in op.inputs.items()
               if names}
        if op.type not in RAGGED_READERS and any(isinstance(t, Ragged)
                                                 for ts in ins.values() for t in ts):
            raise Unsupported(f"{op.type} reads a vector with empty pieces (builtin.combine "
                              "of unequal shapes): only a concat's rows read one")
        # the dtypes its row models, of every tensor it reads and writes (issue 34)
        seen = [(s, n, t.dtype) for s, names in op.inputs.items()
                for n, t in zip(names, ins.get(s, [])) if t is not None] + \
            [(s, n, getattr(st.snap.vars.get(n), "dtype", ""))
             for s, names in op.outputs.items() for n in names]
        check_dtypes(op, seen)
        if (why := executor_refusal(op, [d for _, _, d in seen])):
            raise Unsupported(why)  # Paddle's executors disagree: no one meaning
        key = (op.type, tuple(sorted((a, repr(v)) for a, v in op.attrs.items()
                                     if a not in ("op_role", "op_role_var", "op_namescope",
                                                  "op_callstack", "op_device",
                                                  "execution_stream", "fwd_recompute_id",
                                                  "bwd_recompute_id"))),
               tuple((s, tuple((ids(t.arr), t.arr.shape, t.dims, t.dtype,
                                # a vector's empty pieces: its shape, not its elements
                                tuple((p.arr.shape, p.dims) for p in t.pieces)
                                if isinstance(t, Ragged) else None) for t in ts))
                     for s, ts in sorted(ins.items())),
               # what else a row may read of the op: which outputs it has
               tuple((s, tuple(bool(n) for n in names))
                     for s, names in sorted(op.outputs.items())))
        # the elements the key read, and each op's own call: work units
        store.work += 1 + sum(t.arr.size for ts in ins.values() for t in ts)
        outs = self.op_memo.get(key)
        if outs is None:
            try:
                outs = row(op, ins, self.k)
            except Budget as exc:  # spent inside the op: say where
                raise Budget(f"{exc}, in rank {st.rank} op {op.idx} ({op.type})") from None
            except Unsupported:
                raise
            except Exception as exc:  # shapes that do not fit: the op fails
                shapes = ", ".join(f"{s}={n}{list(t.arr.shape)}" for s, names in
                                   op.inputs.items() for n, t in zip(names, ins.get(s, [])))
                raise ExecError(f"rank {st.rank} op {op.idx} ({op.type}) fails on its "
                                f"shapes ({shapes}): {type(exc).__name__}: {exc}",
                                st.rank, op) from exc
            if op.type in WRAPPED:  # integer results modulo 2^bits (wrap_tensor)
                outs = {slot: [None if t is None else self.wrap_tensor(t, op) for t in ts]
                        for slot, ts in outs.items()}
            outs = {slot: [None if t is None else self.store.cut_tensor(t) for t in ts]
                    for slot, ts in outs.items()}
            store.work += sum(t.arr.size for ts in outs.values() for t in ts if t is not None)
            self.op_memo[key] = outs
        self.ops_run += 1
        for slot, names in op.outputs.items():
            vals = outs.get(slot)
            if vals is None:
                continue  # e.g. XShape: no value
            for n, t in zip(names, vals):
                if t is not None:
                    self._write(st, n, t, op)

    # -- all ranks in lock step -----------------------------------------------
    def _group(self, ring, rank, op):
        for group in self.rings.get(ring, self.rings.get(str(ring), [])):
            if rank in group:
                return list(group)
        raise ExecError(f"rank {rank} op {op.idx} runs {op.type} on ring {ring}, but no "
                        f"group of ring {ring} holds rank {rank} (rings: {self.rings})",
                        rank, op)

    def run(self, states: dict, startup: bool):
        blocked = {}
        done = set()
        mailbox = {}  # (ring, from, to) -> [Tensor]: sends wait in it for their recv
        while len(done) < len(states):
            progress = False
            for r, st in states.items():
                if r in done or r in blocked:
                    continue
                while st.pos < len(st.ops):
                    op = st.ops[st.pos]
                    if exchanges(op.type):
                        break
                    if op.type == "c_identity":
                        self._write(st, op.outputs["Out"][0],
                                    self._read(st, op.inputs["X"][0], op), op)
                    else:
                        try:
                            self.step(st, op, startup)
                        except Unsupported as exc:
                            raise Unsupported(f"rank {r} op {op.idx} ({op.type}): {exc}") \
                                from exc
                    st.pos += 1
                progress = True
                if st.pos >= len(st.ops):
                    done.add(r)
                else:
                    blocked[r] = st.ops[st.pos]
            for r, op in list(blocked.items()):
                if r not in blocked:
                    continue
                ring = int(op.attrs.get("ring_id", 0))
                group = self._group(ring, r, op)
                if op.type in POINT_TO_POINT:
                    if self._point_to_point(r, op, group, ring, states, mailbox):
                        states[r].pos += 1
                        del blocked[r]
                        progress = True
                    continue
                if not all(m in blocked and int(blocked[m].attrs.get("ring_id", 0)) == ring
                           for m in group):
                    gone = [m for m in group if m in done]
                    if gone:
                        raise ExecError(f"rank {r} waits in {op.type} (op {op.idx}, ring "
                                        f"{ring}) but rank(s) {gone} finished without it",
                                        r, op)
                    continue
                ops = [blocked[m] for m in group]
                kinds = {(o.type, collective_kind(o)) for o in ops}
                if len(kinds) != 1:
                    desc = ", ".join(f"rank {m}: {blocked[m].type} op {blocked[m].idx}"
                                     for m in group)
                    raise ExecError(f"ranks meet different collectives on ring {ring}: "
                                    f"{desc}", r, op)
                self._perform(group, ops, states)
                for m in group:
                    states[m].pos += 1
                    del blocked[m]
                progress = True
            if not progress:
                desc = ", ".join(f"rank {r} in {o.type} (op {o.idx}, ring "
                                 f"{o.attrs.get('ring_id', 0)})" for r, o in sorted(blocked.items()))
                raise ExecError(f"collectives do not match up; waiting: {desc}",
                                min(blocked) if blocked else None)
        unread = sorted(key for key, q in mailbox.items() if q)
        if unread:
            ring, src, dst = unread[0]
            raise ExecError(f"rank {src} sent on ring {ring} what rank {dst} never received",
                            src)

    def _point_to_point(self, r, op, group, ring, states, mailbox) -> bool:
        """Rank ``r``'s send (its tensor left in ``mailbox``) or recv (the
        oldest tensor its peer sent it on ``ring``; False while none is
        there), ``peer`` an index in the ring's group as the simulator reads it."""
        peer = int(op.attrs.get("peer", 0))
        if not 0 <= peer < len(group):
            raise ExecError(f"rank {r} op {op.idx} ({op.type}) names peer {peer} on ring "
                            f"{ring}, whose group is {group}", r, op)
        slot_in, slot_out, kind = POINT_TO_POINT[op.type]
        if kind == "send":
            x = self._read(states[r], op.inputs[slot_in][0], op)
            mailbox.setdefault((ring, r, group[peer]), []).append(x)
            return True
        queue = mailbox.get((ring, group[peer], r))
        if not queue:
            return False
        self._write(states[r], op.outputs[slot_out][0], queue.pop(0), op)
        self.ops_run += 1
        return True

    def _perform(self, group, ops, states):
        kind = collective_kind(ops[0])
        slot_in, slot_out, _ = COLLECTIVES[ops[0].type]
        xs = [self._read(states[m], o.inputs[slot_in][0], o) for m, o in zip(group, ops)]
        if any(isinstance(x, Ragged) for x in xs):
            raise Unsupported(f"{ops[0].type} of a vector with empty pieces")
        root = root_of(ops[0].attrs)
        # an index in the ring's group (collectives.root_of; Paddle's comm
        # rank, as the kernels hand it to gloo/NCCL: see
        # verify/checks/collective_validity.py), as the numeric simulator
        # reads it; one outside the group the backend rejects: refused, never
        # read as a global rank
        if kind == "broadcast" or kind.startswith("reduce_") and kind != "reduce_scatter":
            roots = {m: root_of(o.attrs) for m, o in zip(group, ops)}
            if len(set(roots.values())) > 1:
                raise Unsupported(f"the ranks of group {group} name different roots for "
                                  f"{ops[0].type}: {roots}")
            if not 0 <= root < len(group):
                raise Unsupported(f"rank {group[0]} op {ops[0].idx} ({ops[0].type}) has root "
                                  f"{root} on a ring whose group is {group}: the root is an "
                                  "index in the group (the backend rejects this one)")
        for i, (m, o) in enumerate(zip(group, ops)):
            self.store.work += 1 + sum(x.arr.size for x in xs)
            try:
                out = collective(kind, xs, i, root, self.k)
                if wrap_modulus(out.dtype) is not None and kind not in (
                        "identity", "all_gather", "all_to_all", "broadcast", "max",
                        "min"):
                    if kind in ("avg", "reduce_avg"):
                        raise Unsupported(f"an average over {out.dtype} (an integer "
                                          "division) is not modelled")
                    out = self.wrap_tensor(out, o)
            except Budget as exc:
                raise Budget(f"{exc}, in rank {m} op {o.idx} ({o.type})") from None
            except Unsupported as exc:
                raise Unsupported(f"rank {m} op {o.idx} ({o.type}): {exc}") from exc
            self._write(states[m], o.outputs[slot_out][0], self.store.cut_tensor(out), o)
            self.ops_run += 1


# startup ops that initialise a var with a constant (an attr, no operand)
CONST_INIT = {"fill_constant", "assign_value", "pd_op.full", "pd_op.assign_value",
              "pd_op.assign_value_"}


def _constant_parameter(st, op) -> bool:
    """Whether startup ``op`` initialises a trainable parameter with a
    constant: a ``CONST_INIT`` op writing only parameters -- legacy: vars
    the main program declares parameters (``is_parameter``); PIR: values
    ``builtin.set_parameter`` stores.  A parameter changes from the first
    optimizer step on (and the planner's ``pd_op.full`` 0.0 placeholder of
    every parameter is replaced by ``Engine._initialize``), so a proof at
    its initial constant (a bias 0) would be a proof at one point of the
    parameter's values: it is an input symbol keyed by the op and its
    attrs, value included, as a random draw, as the numeric runs draw every
    parameter (``inputs.initial_params``).  Optimizer states, accumulators
    and the learning rate are not parameters: they keep the constants the
    startup computes."""
    if op.type not in CONST_INIT or not op.writes():
        return False
    if op.type.startswith("pd_op."):
        stored = getattr(st, "param_stores", None)
        if stored is None:
            stored = st.param_stores = {n: o.writes()[0] for o in st.snap.startup_ops
                                        if o.type == "builtin.set_parameter" and o.writes()
                                        for n in o.reads()}
        return all(n in stored for n in op.writes())
    return all(getattr(st.snap.vars.get(n), "is_parameter", False) for n in op.writes())


def _startup_pieces(st, rank):
    """Each var the startup wrote at another shape than the main program reads
    it becomes the rank's piece (``verify/numeric/startup_pieces.py``: by the
    recorded placements, the same way on both programs); ``Unresolved``
    (rank, var, both shapes) where no placement says which piece."""
    from verify.numeric.startup_pieces import spec, take

    for var, entry in spec(st.snap).items():
        t = st.env.get(var)
        if t is None or list(t.arr.shape) == entry["main"]:
            continue
        piece = np.array(take(entry, rank, var, t.arr), dtype=object)
        st.env[var] = Tensor(piece, leaf_dims(piece.shape), t.dtype)


def execute(snaps: dict, rings: dict, store: Store, batch=2, feed_key=None,
            symbols=None) -> dict:
    """Run startup then main of every rank's snapshot at the real shapes
    (-1 dims at ``batch``: one size, or {size symbol: size} with ``symbols``
    naming each fed var's dims, :func:`size_symbol`); ``({rank: env}, ops
    executed)``.  The work spent is ``store.work``; past
    ``store.work_limit``, :class:`Budget`."""
    T.store = store
    ex = Executor(store, rings, batch, feed_key, symbols)
    states = {r: Rank(r, s, list(s.startup_ops), {}) for r, s in sorted(snaps.items())}
    ex.run(states, startup=True)
    for r, st in states.items():
        _startup_pieces(st, r)
        for name in st.snap.feeds:
            v = st.snap.vars.get(name)
            if v is not None:
                st.env[name] = ex.leaf(f"{name}@{ex.feed_key(r, name)}", v.shape, v.dtype,
                                       var=name)
        st.ops, st.pos = list(st.snap.ops), 0
    ex.run(states, startup=False)
    if store.work_limit is not None and store.work > store.work_limit:  # the last op's
        raise Budget("past the work limit at the end of the programs")
    return {r: st.env for r, st in states.items()}, ex.ops_run
