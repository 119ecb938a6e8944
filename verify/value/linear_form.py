"""Canonical forms with the cuts that stand alone expanded: the planner
relation's cheap normal form (``relation.py`` tries it before the full
expansion of ``expand.Expander``).

Why: a cut atom (``symbolic.Store.cut``) abbreviates a large polynomial,
cut where an op's result grew past ``CUT_SIZE``.  The serial program sums a
whole contraction (a row-parallel matmul over all of K, a batch mean) into
one polynomial, cut once; a tensor-parallel rank sums its half, cut, and the
all-reduce adds the halves' cut atoms: ``cut(P0) + cut(P1)`` against
``cut(P0 + P1)``, equal polynomials cut at different places.  Expanding
EVERY cut (``Expander``) multiplies products out and, on the real-model
plans (~10^4 input elements, LLaMA's decoder), did not finish in 15 CPU
minutes.  Here only a cut that is a monomial by itself (``c * cut(P)``: a
linear occurrence, what an all-reduce of cut pieces makes) is replaced by
its polynomial; a cut inside a product stays one atom, re-cut on the
normal form of what it abbreviates, and a kernel's arguments are normal
forms too.  So the form grows no larger than the polynomials the programs
already hold (no product is multiplied out), and a split contraction
normalizes to the whole one.

Sound: ``cut(P)`` equals ``P`` (it is its abbreviation), re-cutting a
polynomial gives an atom equal to it, and a kernel applied to equal
arguments is equal (congruence), so two terms with equal normal forms are
equal for every input and every interpretation of the kernels.  Unequal
normal forms prove nothing (the caller goes on to the full expansion).
Work is charged to the store's deterministic work units (``Store.work``,
its ``work_limit``): past it, :class:`symbolic.Budget`.
"""
from __future__ import annotations

import sys



class _TooLarge(Exception):
    pass


class LinearForm:
    """Normal forms of one store's polynomials (memoized per id); a form
    above ``limit`` monomials gives up (proves nothing: the caller goes on)."""

    def __init__(self, store, limit=4096):
        self.s, self.limit, self.memo, self.amemo = store, limit, {}, {}

    def _charge(self, units):
        self.s.spend(units, "normalizing cuts")

    def poly(self, pid) -> int:
        """The normal form (a polynomial id of the same store) of ``pid``."""
        got = self.memo.get(pid)
        if got is not None:
            if got < 0:
                raise _TooLarge()
            return got
        s = self.s
        items = s.polys[pid]
        self._charge(1 + len(items))
        atoms, amemo = s.atoms, self.amemo
        d = None  # built from the first monomial that changes on: most are their own form
        for i, (mono, c) in enumerate(items):
            if len(mono) == 1 and atoms[mono[0]][0] == "cut":  # linear: expanded
                if d is None:
                    d = dict(items[:i])
                sub = s.polys[self.poly(atoms[mono[0]][1])]
                self._charge(len(sub))
                for m, v in sub:
                    d[m] = d.get(m, 0) + c * v
                if len(d) > self.limit:
                    self.memo[pid] = -1
                    raise _TooLarge()
                continue
            parts, coef, same = [], c, True
            for a in mono:
                got = amemo.get(a)
                m2, k = got if got is not None else self.atom(a)
                parts += m2
                if k != 1:  # most atoms are their own form (a Fraction product is slow)
                    coef = coef * k
                same = same and len(m2) == 1 and m2[0] == a
            if same and coef is c and d is None:
                continue  # this monomial is its own form, as every one before it
            if d is None:
                d = dict(items[:i])
            m = mono if same else tuple(sorted(parts))
            d[m] = d.get(m, 0) + coef
        if d is None:
            # every monomial its own form: the polynomial is (a stored
            # polynomial is canonical, so _finish would intern it to pid);
            # the units _finish would count, so the budget stays the same
            s.spend(len(items), "normalizing cuts")
            self.memo[pid] = pid
            return pid
        out = self.memo[pid] = s._finish(d)
        return out

    def atom(self, aid):
        """``(atoms, coefficient)``: the one monomial atom ``aid`` normalizes to."""
        got = self.amemo.get(aid)
        if got is None:
            s = self.s
            key = s.atoms[aid]
            if key[0] == "cut":
                p = s.polys[s.cut(self.poly(key[1]))]
                # a normal form of one monomial is itself; of none (0) the cut stays
                got = (list(p[0][0]), p[0][1]) if len(p) == 1 else ([aid], 1)
            elif key[0] == "sym":
                got = ([aid], 1)
            else:
                (m, k), = s.polys[s.uf(key[1], [self.poly(p) for p in key[3]],
                                       key[2] + s.domains.get(aid, ()))]  # its bounds too
                got = (list(m), k)
            self.amemo[aid] = got
        return got

    def equal(self, pairs) -> bool:
        """Every ``(i, a, b)`` of ``pairs`` has equal normal forms (a proof);
        False proves nothing.  :class:`Budget` past the work limit."""
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 50000))  # nested cuts: one frame pair each
        try:
            return all(self.poly(a) == self.poly(b) for _, a, b in pairs)
        except (RecursionError, _TooLarge):
            return False
        finally:
            sys.setrecursionlimit(old)
