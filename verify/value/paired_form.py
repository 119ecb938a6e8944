"""Pair-directed normal forms: the planner relation's proof step between the
linear form (``linear_form.py``) and the full cut expansion
(``expand.py``), used by ``relation.py`` on each (serial, rank) value pair.

Why: the serial program and a rank build one polynomial with its cuts
(``symbolic.Store.cut``) at other places.  A real model's gradient (LLaMA's
RMSNorm weight, measured on ``zoo_llama_tp2``) is, on the serial side, the
weight multiplied into each monomial (``w * x * rsqrt(..) * cut(dY)``, 288
monomials), where the rank holds the weight inside the cut of its
all-reduced piece (``x * rsqrt(..) * cut(w * dY' + ..)``, 32 monomials).
They meet only with the cuts multiplied out, and multiplying out EVERY cut
(``expand.Expander``) of a decoder does not fit any budget the gate can
pay.  Here the two sides are compared with each other, so only what differs
is opened, and only where the other side holds it:

1. each side's linear form (``LinearForm``: split contractions summed back);
   equal ids: proved;
2. the atoms only one side holds are its *own*; every monomial is written
   ``key * rest`` (``key``: its atoms both sides hold, ``rest``: its own
   atoms and coefficient), so a side is ``sum_k k * G(k)``, and the two sides
   are equal if ``G_serial(k) == G_rank(k)`` for every key ``k``: each a
   smaller pair, compared recursively (step 1 first: a lone cut is linear);
3. a pair whose grouping does not split it (one key) and that is one kernel
   application on each side with the same kernel, attributes and
   coefficient is equal if its arguments are (congruence), pairwise,
   recursively;
4. else an own cut atom of one side is replaced by the polynomial it
   abbreviates (multiplied out: the factor goes into the cut, or comes out of
   it) where that polynomial holds an atom the other side holds outside its
   cuts ("where the other side holds it there") and the product stays
   within ``limit`` monomials; then step 1 again on the new pair.  No cut
   qualifies: not proved (opening cuts the other side has nothing of would
   only grow both forms).

Sound (equal forms imply equal polynomials, for every input and every
interpretation of the kernels): every step rewrites a side into a term of
the same value -- the linear form (its own argument), a cut atom replaced by
the polynomial it stands for (its definition), ``sum_k k * G(k)`` is the same
polynomial regrouped (an identity of commutative rings), equal ``G`` for every
key give equal sums, and a kernel applied to equal arguments gives equal
values (congruence).  Only equal hash-consed ids conclude "equal"; a pair
under proof is not assumed (a cycle answers "not proved").  Not proved
proves nothing: the caller goes on (the full expansion, Z3).

Bounded and deterministic: every monomial read, regrouped or multiplied
spends the store's work units (``Store.spend``: :class:`symbolic.Budget`
past its limit), one value's attempt ends, not proved, past ``VALUE_UNITS``
of them, an expansion above ``limit`` monomials is not tried, and
the recursion is at most ``depth`` pairs deep; the answers are memoized per
pair of ids (the values of every rank share them).
"""
from __future__ import annotations

import sys

from .linear_form import LinearForm, _TooLarge
from .symbolic import _accumulate_product

LIMIT = 4096  # monomials of one side after opening its cuts
DEPTH = 400  # nested pairs (a decoder's gradient is opened level by level)
# work units one value's attempt may spend (zoo_llama_tp2's costliest value,
# the attention norm weight's gradient, 16 elements: 6.0 M, the first to open
# the decoder's cuts; later values reuse the memo)
VALUE_UNITS = 8_000_000


class _OverValue(Exception):
    pass


class PairedForm:
    """Pair-directed equality of one store's polynomials (module docstring).
    ``equal`` is a proof when True; :class:`symbolic.Budget` past the
    store's work limit."""

    def __init__(self, store, linear: LinearForm | None = None, limit=LIMIT, depth=DEPTH):
        self.s = store
        self.lin = linear if linear is not None else LinearForm(store)
        self.limit, self.depth = limit, depth
        self.memo = {}  # (a, b), a < b -> bool (False while under proof)
        self.top = {}  # pid -> frozenset of the atoms its monomials hold
        self.level = 0
        self.stop = None  # the work count past which this value's attempt ends

    def _spend(self, units):
        self.s.spend(units, "comparing paired forms")
        if self.stop is not None and self.s.work > self.stop:
            raise _OverValue()

    def _atoms(self, pid) -> frozenset:
        got = self.top.get(pid)
        if got is None:
            items = self.s.polys[pid]
            self._spend(1 + len(items))
            got = self.top[pid] = frozenset(a for m, _ in items for a in m)
        return got

    def _linear(self, pid) -> int:
        try:
            return self.lin.poly(pid)
        except _TooLarge:
            return pid  # its own terms: still the same polynomial

    # -- the recursion ---------------------------------------------------------
    def equal_ids(self, a, b) -> bool:
        """Whether polynomials ``a`` and ``b`` are proved equal."""
        if a == b:
            return True
        key = (a, b) if a < b else (b, a)
        got = self.memo.get(key)
        if got is not None:
            return got
        if self.level >= self.depth:
            return False  # not memoized: a shallower attempt may get through
        self.memo[key] = False  # under proof: not assumed
        self.level += 1
        try:
            ok = self._prove(a, b)
        finally:
            self.level -= 1
        self.memo[key] = ok
        return ok

    def _prove(self, a, b) -> bool:
        pa, pb = self._linear(a), self._linear(b)
        if pa == pb:
            return True
        if (pa, pb) != (a, b) and ((pa, pb) if pa < pb else (pb, pa)) in self.memo:
            return self.equal_ids(pa, pb)
        s = self.s
        A, B = self._atoms(pa), self._atoms(pb)
        own_a, own_b = A - B, B - A
        if not own_a and not own_b:
            return False  # the same atoms, other coefficients: nothing to open
        ga, gb = self._groups(pa, own_a), self._groups(pb, own_b)
        if set(ga) == set(gb) and set(ga) != {()}:
            # step 2: each key's own parts compared apart (keys that differ
            # between the sides: the grouping does not align them, step 4)
            for k in sorted(ga):
                if not self.equal_ids(s._finish(ga[k]), s._finish(gb[k])):
                    return False
            return True
        if self._congruent(pa, pb):  # step 3
            return True
        opened = self._open(pa, pb, own_a, own_b, B, A)  # step 4
        if opened is None:
            return False
        na, nb = opened
        if (na, nb) == (pa, pb):
            return False
        return self.equal_ids(na, nb)

    def _groups(self, pid, own) -> dict:
        """``{key: {own part: coefficient}}``: each monomial's atoms both
        sides hold (the key) and its own atoms (sorted, as the store keeps
        a monomial: the parts are canonical)."""
        out = {}
        items = self.s.polys[pid]
        self._spend(1 + len(items))
        for m, c in items:
            k = tuple(x for x in m if x not in own)
            rest = tuple(x for x in m if x in own)
            g = out.setdefault(k, {})
            v = g.get(rest)
            g[rest] = c if v is None else v + c
        return {k: {m: c for m, c in g.items() if c} for k, g in out.items()}

    def _congruent(self, pa, pb) -> bool:
        s = self.s
        qa, qb = s.polys[pa], s.polys[pb]
        if len(qa) != 1 or len(qb) != 1:
            return False
        (ma, ca), (mb, cb) = qa[0], qb[0]
        if ca != cb or len(ma) != 1 or len(mb) != 1:
            return False
        ka, kb = s.atoms[ma[0]], s.atoms[mb[0]]
        if ka[0] != "uf" or kb[0] != "uf" or ka[1:3] != kb[1:3] or len(ka[3]) != len(kb[3]):
            return False
        self._spend(1 + len(ka[3]))
        return all(self.equal_ids(x, y) for x, y in zip(ka[3], kb[3]))

    # -- opening cuts ----------------------------------------------------------
    def _open(self, pa, pb, own_a, own_b, held_b, held_a):
        """The pair with own cuts opened (step 4), or None when none is."""
        s = self.s
        cuts_a = [x for x in own_a if s.atoms[x][0] == "cut"]
        cuts_b = [x for x in own_b if s.atoms[x][0] == "cut"]
        # where the other side holds an atom of the cut outside its cuts
        pick_a = [x for x in cuts_a if self._atoms(s.atoms[x][1]) & held_b]
        pick_b = [x for x in cuts_b if self._atoms(s.atoms[x][1]) & held_a]
        if not pick_a and not pick_b:
            return None  # nothing the other side holds: opening would only grow
        na = self._opened(pa, set(pick_a)) if pick_a else pa
        nb = self._opened(pb, set(pick_b)) if pick_b else pb
        if na is None and nb is None:
            return None
        return (pa if na is None else na), (pb if nb is None else nb)

    def _opened(self, pid, cuts):
        """``pid`` with each atom of ``cuts`` replaced by the polynomial it
        abbreviates, multiplied out; None past ``limit`` monomials (counted
        before multiplying)."""
        s = self.s
        polys, atoms = s.polys, s.atoms
        items = polys[pid]
        total = 0
        for m, _ in items:
            n = 1
            for x in m:
                if x in cuts:
                    n *= len(polys[atoms[x][1]])
            total += n
        self._spend(1 + len(items))
        if total > self.limit:
            return None
        d = {}
        for m, c in items:
            term = ((tuple(x for x in m if x not in cuts), c),)
            for x in m:
                if x in cuts:
                    p = polys[atoms[x][1]]
                    self._spend(len(term) * len(p))
                    acc = _accumulate_product({}, term, p, s)
                    term = tuple((k, v) for k, v in acc.items() if v)
            self._spend(len(term))
            for k, v in term:
                d[k] = d.get(k, 0) + v
        return s._finish(d)

    def equal(self, pairs, units=VALUE_UNITS) -> bool:
        """Every ``(i, a, b)`` of ``pairs`` proved equal (a proof); False
        proves nothing, and so does an attempt past ``units`` work units
        (one value's share: a pair the form cannot meet gives up at the same
        count on every machine, not after the application's whole budget).
        :class:`symbolic.Budget` past the store's work limit."""
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 100000))
        self.stop = None if units is None else self.s.work + units
        try:
            return all(self.equal_ids(a, b) for _, a, b in pairs)
        except (RecursionError, _OverValue):
            return False
        finally:
            self.stop = None
            sys.setrecursionlimit(old)
