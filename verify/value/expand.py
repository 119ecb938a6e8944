"""Canonical forms with the cuts expanded: the proof step between the plain
canonical form and Z3, used by the value proof (``proof.py``) and the
planner's relation proof (``relation.py``).

The symbolic executor abbreviates a large polynomial by a fresh "cut" atom
(``symbolic.py``).  Two programs that compute one polynomial but cut it at
different places get different plain canonical forms: a bias added before
or after an all-reduce (the promotion pass, once the bias is an input, not
the constant 0), a DP rank's half-batch sum against the serial program's
whole-batch sum.  Expanding every cut back into the polynomial it stands
for (and every kernel's arguments alike: congruence) makes equal
polynomials equal forms again.  Equal expanded forms are a proof for every
interpretation of the kernels, so for the real ones: the expanded form of a
term is the same polynomial over the same atoms, only written without
abbreviations.

Bounded and deterministic: every monomial multiplied, added and interned
spends ``Store.work`` units, as the symbolic execution does, so the step
stops (:class:`Budget`) past the store's work limit, at the same place on
every machine; a polynomial whose expansion could pass ``limit`` monomials
(an upper bound counted before multiplying, ``Expander.bound``) is expanded
one level only, without trying; what stays unequal goes on to Z3.

Why the bound (issue 19, measured): an activation's grad is ``kernel'(x) *
dout`` (``semantics.uf_linear_grad``), so a gradient several layers deep is
a chain of products of an opaque derivative, weights and the cut grad of
the layer after it.  Multiplied out, a bias grad of the planned two-MLP
case is ~7e7 monomials; trying each such form up to ``limit`` before giving
up spent 2^18 units on every one of hundreds of forms (the promotion proof
ran past the application's 300 M units: > 6 CPU minutes).  The programs
differ only deep inside (the bias added before or after the all-reduce),
and the one-level forms meet there: a weight grad ``x^T dout`` whose
``x`` is ``cut(S) + b`` in one program and ``cut(S + b)`` in the other
meets once the small flat factor is multiplied out against the large grad
kept as one atom (``_split``; measured: without it the promotion proof on
the planned two-MLP case left 256 elements unequal to Z3, past 250 s).  Lazily, too: ``Staged.equal`` first
compares with a small ``limit`` (``SMALL``: cheap forms, most values) and
only the values still unequal with the large one (the loss, a sum of
squares of a cut difference, equal only multiplied out)."""
from __future__ import annotations

import sys

from .symbolic import _accumulate_product

LIMIT = 1 << 18  # monomials of one expanded form (the work units bound its cost)
SMALL = 1 << 10  # the first, cheap stage's limit (``Staged``)


class _TooBig(Exception):
    pass


class Expander:
    """Canonical forms with every cut atom replaced by the polynomial it
    abbreviates, kernels' arguments expanded alike (congruence).  A
    polynomial whose expansion stays within ``limit`` monomials (every
    product and the sum) is expanded in full: equal polynomials, equal
    forms.  A larger one is expanded one level: its monomials over the
    expanded atoms, in each monomial the largest factor of several
    monomials abbreviated by the cut atom of its expanded form and the
    smaller ones multiplied out where they have no cut atom (``_split``;
    all abbreviated where that passes ``limit``): equal where both programs
    build it of equal factors, wherever a bias sits in a cut sum.  Either form is the same polynomial
    as the term, so equal forms are a proof.  One per store: the forms are
    memoised, so the values of every rank share them.  ``equal`` raises
    :class:`Budget` past the store's work limit."""

    def __init__(self, store, limit=None):
        self.s, self.memo, self.amemo, self.bounds = store, {}, {}, {}
        self.flat = {}  # expanded form -> whether it has no cut atom
        self.limit = LIMIT if limit is None else limit

    def bound(self, pid) -> int:
        """An upper bound of the monomials of ``pid`` multiplied out (each
        monomial the product of its cut atoms' bounds, before like terms
        merge), capped just past ``limit``: an expansion above it is not
        tried.  Cut atoms only (a kernel's arguments are expanded on their
        own); one unit per monomial read, each form once."""
        got = self.bounds.get(pid)
        if got is not None:
            return got
        s, cap = self.s, self.limit + 1
        atoms, polys, total = s.atoms, s.polys, 0
        self._spend(1 + len(polys[pid]))
        for mono, _ in polys[pid]:
            n = 1
            for a in mono:
                key = atoms[a]
                if key[0] == "cut":
                    n *= self.bound(key[1])
                    if n >= cap:
                        break
            total += n
            if total >= cap:
                total = cap
                break
        self.bounds[pid] = total
        return total

    def _spend(self, units):
        self.s.spend(units, "expanding cuts")

    def poly(self, pid) -> int:
        got = self.memo.get(pid)
        if got is None:
            got = None
            if self.bound(pid) <= self.limit:  # else multiplying out is not tried
                try:
                    got = self._expanded(pid, full=True)
                except _TooBig:  # not expected (the bound holds); kept as a guard
                    got = None
            if got is None:
                got = self._expanded(pid, full=False)
            self.memo[pid] = got
        return got

    def _expanded(self, pid, full):
        s, d = self.s, {}
        polys, atom = s.polys, self.atom
        self._spend(1 + len(polys[pid]))
        monos = []  # (coefficient, atoms that stay one atom, expanded wide factors)
        for mono, c in polys[pid]:
            plain, wide = [], []
            for a in mono:
                ap = atom(a)
                p = polys[ap]
                if len(p) == 1 and p[0][1] == 1 and len(p[0][0]) == 1:
                    plain.append(p[0][0][0])
                else:
                    wide.append(ap)
            monos.append((c, plain, wide))
        if full:
            for c, plain, wide in monos:
                term = self._product(((tuple(sorted(plain)), c),), wide, _TooBig)
                self._spend(len(term))
                for m, v in term:
                    d[m] = d.get(m, 0) + v
                if len(d) > self.limit:
                    raise _TooBig()
            return s._finish(d)  # spends len(d), checks the limit
        # one level: in each monomial the largest factor stays one atom and the
        # smaller flat ones are multiplied out (``_split``), where the whole
        # form stays within ``limit`` (counted before multiplying); else
        # every factor stays one atom
        plans = [self._split(wide) for _, _, wide in monos]
        total = 0
        for spread, _ in plans:
            n = 1
            for x in spread:
                n *= len(polys[x])
            total += n
        self._spend(len(monos))
        fits = total <= self.limit
        for (c, plain, wide), (spread, kept) in zip(monos, plans):
            if not fits:
                spread, kept = [], wide
            term = self._abbreviated(plain, c, kept)
            if spread:
                term = self._product(term, spread, None)
            self._spend(len(term))
            for m, v in term:
                d[m] = d.get(m, 0) + v
        return s._finish(d)

    def _split(self, wide):
        """(factors to multiply out, factors to keep as one atom) of one
        monomial's expanded ``wide`` factors: the largest (by monomials,
        then id: one choice for equal factors) kept, and every other factor
        with a cut atom; the smaller flat ones multiplied out.  So a bias
        added inside a cut sum or beside it, times the same large grad,
        gives the same monomials: ``(S + b) * D`` and ``S * D + b * D``
        both become ``sum(m * cut(D))``."""
        if len(wide) <= 1:
            return [], wide
        order = sorted(wide, key=lambda x: (len(self.s.polys[x]), x))
        spread = [x for x in order[:-1] if self._flat(x)]
        kept = [x for x in order[:-1] if not self._flat(x)] + order[-1:]
        return spread, kept

    def _product(self, term, factors, too_big):
        """``term`` times every polynomial of ``factors`` multiplied out
        (``too_big`` raised past ``limit`` monomials, if given)."""
        polys = self.s.polys
        for ap in factors:
            p = polys[ap]
            if too_big is not None and len(term) * len(p) > self.limit:
                raise too_big()
            self._spend(len(term) * len(p))
            acc = _accumulate_product({}, term, p, self.s)
            term = tuple((m, v) for m, v in acc.items() if v)
        return term

    def _flat(self, pid) -> bool:
        """Whether the expanded form ``pid`` has no cut atom (a polynomial
        over input symbols and kernels: its monomials are its own, whatever
        cuts the programs built it from)."""
        got = self.flat.get(pid)
        if got is None:
            atoms = self.s.atoms
            self._spend(1 + len(self.s.polys[pid]))
            got = self.flat[pid] = not any(atoms[a][0] == "cut"
                                           for m, _ in self.s.polys[pid] for a in m)
        return got

    def _abbreviated(self, plain, c, wide):
        """The monomial ``c * plain * prod(wide)`` too large multiplied out:
        each factor of several monomials abbreviated by the cut atom of its
        expanded (canonical) form, so equal factors give equal atoms; a
        one-monomial factor (``2 x y``) merged as it is."""
        s, polys = self.s, self.s.polys
        atoms = list(plain)
        for x in wide:
            p = polys[x]
            if len(p) == 1:
                (m, k), = p
                atoms.extend(m)
                c = c * k
            else:  # the cut is ``lead * atom`` (symbolic.Store.cut): both kept
                (m, k), = polys[s.cut(x)]
                atoms.extend(m)
                c = c * k
        return ((tuple(sorted(atoms)), c),)

    def atom(self, aid) -> int:
        got = self.amemo.get(aid)
        if got is None:
            key = self.s.atoms[aid]
            if key[0] == "cut":
                got = self.poly(key[1])
            elif key[0] == "sym":
                got = self.s.intern((((aid,), 1),))
            else:
                # the bounds on its inputs carried over (Store.domains)
                got = self.s.uf(key[1], [self.poly(p) for p in key[3]],
                                key[2] + self.s.domains.get(aid, ()))
            self.amemo[aid] = got
        return got

    def equal(self, pairs) -> bool:
        """Every ``(i, a, b)`` of ``pairs`` equal once expanded (a proof);
        False when one differs (or the terms nest too deep);
        :class:`Budget` past the store's work limit."""
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))
        try:
            return all(self.poly(a) == self.poly(b) for _, a, b in pairs)
        except RecursionError:
            return False
        finally:
            sys.setrecursionlimit(old)


class Staged:
    """Two expanders on one store: values are compared with the small
    ``SMALL`` limit first (cheap forms: a grad deep in a network, whose
    programs differ only at a cut deep inside, meets there one level at a
    time), and only the pairs still unequal with the large ``LIMIT`` (the
    loss: a sum of squares of a cut difference, equal only multiplied
    out).  Both are proofs when equal; both spend the store's units."""

    def __init__(self, store):
        self.small = Expander(store, min(SMALL, LIMIT))
        self.large = Expander(store, LIMIT) if LIMIT > SMALL else None

    def equal(self, pairs) -> bool:
        """Every ``(i, a, b)`` equal once expanded (``Expander.equal``)."""
        rest = [(i, a, b) for i, a, b in pairs if not self.small.equal([(i, a, b)])]
        return not rest or (self.large is not None and self.large.equal(rest))


def expander(store) -> Staged:
    """The store's one staged expander (its memos shared by every rank's
    values)."""
    ex = getattr(store, "expander", None)
    if ex is None:
        ex = store.expander = Staged(store)
    return ex
