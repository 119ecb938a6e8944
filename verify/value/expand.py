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
every machine; a polynomial whose expansion would pass ``limit`` monomials
is expanded one level only (``Expander``); what stays unequal goes on to
the next step (the arbitrary-kernel model, then Z3)."""
from __future__ import annotations

import sys

from .symbolic import Budget, _accumulate_product

LIMIT = 1 << 18  # monomials of one expanded form (the work units bound its cost)


class _TooBig(Exception):
    pass


class Expander:
    """Canonical forms with every cut atom replaced by the polynomial it
    abbreviates, kernels' arguments expanded alike (congruence).  A
    polynomial whose expansion stays within ``limit`` monomials (every
    product and the sum) is expanded in full: equal polynomials, equal
    forms.  A larger one is expanded one level: its monomials over the
    expanded atoms, each factor of several monomials abbreviated by the cut
    atom of its expanded form (the loss, a sum over the batch of squared
    differences, each difference expanded in full): equal where both
    programs build it of equal factors.  Either form is the same polynomial
    as the term, so equal forms are a proof.  One per store: the forms are
    memoised, so the values of every rank share them.  ``equal`` raises
    :class:`Budget` past the store's work limit."""

    def __init__(self, store, limit=None):
        self.s, self.memo, self.amemo = store, {}, {}
        self.limit = LIMIT if limit is None else limit

    def _spend(self, units):
        s = self.s
        s.work += units
        if s.work_limit is not None and s.work > s.work_limit:
            raise Budget("past the work limit expanding cuts")

    def poly(self, pid) -> int:
        got = self.memo.get(pid)
        if got is None:
            try:
                got = self._expanded(pid, full=True)
            except _TooBig:
                got = self._expanded(pid, full=False)
            self.memo[pid] = got
        return got

    def _expanded(self, pid, full):
        s, d = self.s, {}
        polys, atom = s.polys, self.atom
        self._spend(1 + len(polys[pid]))
        for mono, c in polys[pid]:
            plain, wide = [], []  # atoms that stay one atom; expanded polynomials
            for a in mono:
                ap = atom(a)
                p = polys[ap]
                if len(p) == 1 and p[0][1] == 1 and len(p[0][0]) == 1:
                    plain.append(p[0][0][0])
                else:
                    wide.append(ap)
            if not full:
                term = self._abbreviated(plain, c, wide)
            else:
                term = ((tuple(sorted(plain)), c),)
                for ap in wide:
                    p = polys[ap]
                    if len(term) * len(p) > self.limit:
                        raise _TooBig()
                    self._spend(len(term) * len(p))
                    acc = _accumulate_product({}, term, p)
                    term = tuple((m, v) for m, v in acc.items() if v)
            self._spend(len(term))
            for m, v in term:
                d[m] = d.get(m, 0) + v
            if full and len(d) > self.limit:
                raise _TooBig()
        return s._finish(d)  # spends len(d), checks the limit

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
                got = self.s.uf(key[1], [self.poly(p) for p in key[3]], key[2])
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


def expander(store) -> Expander:
    """The store's one Expander (its memo shared by every rank's values)."""
    ex = getattr(store, "expander", None)
    if ex is None:
        ex = store.expander = Expander(store)
    return ex
