"""The ``value`` check: original == rewritten for ALL inputs, per rank.

Both versions of every rank's programs (startup, then main; all ranks
together, collectives across their rings) are executed into hash-consed
terms by ``symbolic.py``.  For each rank and watched var, equal canonical
forms are a proof; otherwise the differing elements go to Z3 as one query
(cuts expanded): unsat proves them, sat gives a model that is confirmed by
evaluating both terms exactly with Fractions (uninterpreted kernels take
the model's interpretation), unknown is INCONCLUSIVE.  When Z3's model is
not rational (nonlinear arithmetic), small random integers are tried and
confirmed the same exact way.  Never a pass without a proof.

Over the reals a proof ignores rounding: the numeric check stays the
witness of precision.
"""
from __future__ import annotations

import hashlib
import random
import time
from fractions import Fraction

import numpy as np
import z3

from verify.verdicts import CheckResult, Verdict

from .semantics import Unsupported
from .symbolic import ExecError, Store, execute

KIND, NAME = "value", "value proof"
ROUNDING = ("a proof over the reals ignores rounding (the numeric check witnesses precision); "
            "shapes reduced to <= 2 per dim")


# -- what to watch -----------------------------------------------------------
def default_watch(snap) -> list:
    """Loss (the var whose @GRAD a fill_constant seeds), every parameter's
    grad, every parameter, every var the startup writes; in that order."""
    seeded = {n[:-5] for op in snap.ops if op.type == "fill_constant"
              for n in op.writes() if n.endswith("@GRAD")}
    params = sorted(n for n, v in snap.vars.items() if v.is_parameter)
    out = sorted(n for n in seeded if n in snap.vars)
    out += [p + "@GRAD" for p in params if p + "@GRAD" in snap.vars]
    out += params + sorted(snap.startup_writes())
    return list(dict.fromkeys(out))


def _peer(rank, name, rings, after_envs):
    """The smallest rank sharing a ring group with ``rank`` whose rewritten
    program still holds ``name`` (the first TP rank keeps the promoted bias)."""
    peers = sorted({m for groups in rings.values() for g in groups if rank in g for m in g})
    for m in peers:
        if m != rank and name in after_envs.get(m, {}):
            return m
    return None


# -- Z3 ----------------------------------------------------------------------
class Z3Terms:
    """Store polynomials as Z3 terms, in a Z3 context of their own: the same
    application then builds the same terms in the same order, so Z3's models
    (the counterexamples) are the same on every rerun, in one process or not."""

    def __init__(self, store):
        self.s = store
        self.ctx = z3.Context()
        self.pmemo, self.amemo, self.funcs = {}, {}, {}

    def poly(self, pid):
        e = self.pmemo.get(pid)
        if e is None:
            terms = []
            for mono, c in self.s.polys[pid]:
                fs = [self.atom(a) for a in mono]
                coef = z3.RealVal(f"{c.numerator}/{c.denominator}", self.ctx)
                terms.append(coef if not fs else coef * (fs[0] if len(fs) == 1 else z3.Product(fs)))
            e = z3.RealVal(0, self.ctx) if not terms else terms[0] if len(terms) == 1 else z3.Sum(terms)
            self.pmemo[pid] = e
        return e

    def func(self, kernel, attrs, n):
        key = (kernel, attrs, n)
        f = self.funcs.get(key)
        if f is None:
            tag = hashlib.sha1(repr(attrs).encode()).hexdigest()[:6]
            f = self.funcs[key] = z3.Function(f"{kernel}#{tag}/{n}",
                                              *([z3.RealSort(self.ctx)] * (n + 1)))
        return f

    def atom(self, aid):
        e = self.amemo.get(aid)
        if e is None:
            key = self.s.atoms[aid]
            if key[0] == "sym":
                e = z3.Real(key[1], self.ctx)
            elif key[0] == "cut":
                e = self.poly(key[1])
            else:
                e = self.func(key[1], key[2], len(key[3]))(*[self.poly(p) for p in key[3]])
            self.amemo[aid] = e
        return e


def _frac(v):
    if z3.is_rational_value(v):
        return Fraction(v.numerator_as_long(), v.denominator_as_long())
    return None


class Evaluator:
    """Exact evaluation of terms: symbols from ``env``, kernels from ``fn``."""

    def __init__(self, store, sym_value, uf_value):
        self.s, self.sym_value, self.uf_value = store, sym_value, uf_value
        self.pm, self.am = {}, {}

    def poly(self, pid):
        v = self.pm.get(pid)
        if v is None:
            v = Fraction(0)
            for mono, c in self.s.polys[pid]:
                t = c
                for a in mono:
                    t *= self.atom(a)
                v += t
            self.pm[pid] = v
        return v

    def atom(self, aid):
        v = self.am.get(aid)
        if v is None:
            key = self.s.atoms[aid]
            if key[0] == "sym":
                v = self.sym_value(key[1])
            elif key[0] == "cut":
                v = self.poly(key[1])
            else:
                v = self.uf_value(key[1], key[2], tuple(self.poly(p) for p in key[3]))
            if v is None:
                raise ValueError("irrational model value")
            self.am[aid] = v
        return v


def _model_evaluator(store, zt, model):
    def sym(name):
        return _frac(model.eval(z3.Real(name, zt.ctx), model_completion=True))

    def uf(kernel, attrs, args):
        f = zt.func(kernel, attrs, len(args))
        return _frac(model.eval(f(*[z3.RealVal(f"{a.numerator}/{a.denominator}", zt.ctx)
                                    for a in args]), model_completion=True))
    return Evaluator(store, sym, uf)


def _random_evaluator(store, seed):
    rng = random.Random(seed)
    syms, ufs = {}, {}

    def sym(name):
        if name not in syms:
            syms[name] = Fraction(rng.randint(-3, 3))
        return syms[name]

    def uf(kernel, attrs, args):
        key = (kernel, attrs, args)
        if key not in ufs:
            ufs[key] = Fraction(rng.randint(-5, 5))
        return ufs[key]
    return Evaluator(store, sym, uf)


# -- reading a difference ---------------------------------------------------
def first_difference(store, a, b, depth=50):
    """Descend through equal kernels and cuts to the first sub-terms that differ."""
    path = []
    for _ in range(depth):
        pa, pb = store.polys[a], store.polys[b]
        one = lambda p: len(p) == 1 and p[0][1] == 1 and len(p[0][0]) == 1  # noqa: E731
        if one(pa) and store.uncut(pa[0][0][0]) is not None:
            a = store.uncut(pa[0][0][0])
            continue
        if one(pb) and store.uncut(pb[0][0][0]) is not None:
            b = store.uncut(pb[0][0][0])
            continue
        if one(pa) and one(pb):
            ka, kb = store.atoms[pa[0][0][0]], store.atoms[pb[0][0][0]]
            if ka[0] == kb[0] == "uf" and ka[1:3] == kb[1:3] and len(ka[3]) == len(kb[3]):
                diff = [i for i, (x, y) in enumerate(zip(ka[3], kb[3])) if x != y]
                if diff:
                    path.append(f"{ka[1]} argument {diff[0]}")
                    a, b = ka[3][diff[0]], kb[3][diff[0]]
                    continue
        break
    return a, b, path


def _symbols_of(store, pids, limit=400):
    seen, out, stack = set(), [], list(pids)
    kernels = set()
    while stack and len(seen) < limit * 20:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for mono, _ in store.polys[pid]:
            for a in mono:
                key = store.atoms[a]
                if key[0] == "sym":
                    if key[1] not in out:
                        out.append(key[1])
                elif key[0] == "cut":
                    stack.append(key[1])
                else:
                    kernels.add(key[1])
                    stack.extend(key[3])
    return out[:limit], sorted(kernels)


# -- one var -------------------------------------------------------------
def _compare(store, zt, ta, tb, timeout_ms, stats):
    """None if proved; ("refuted", info) or ("unknown", reason)."""
    if ta.arr.shape != tb.arr.shape:
        return "refuted", {"reason": f"shapes differ: {list(ta.arr.shape)} vs "
                                     f"{list(tb.arr.shape)} (reduced)"}
    ea, eb = ta.arr.reshape(-1), tb.arr.reshape(-1)
    diff = [i for i in range(ea.size) if ea[i].i != eb[i].i]
    if not diff:
        stats["normal_form"] += 1
        return None
    # Cheap exact probe first (Schwartz-Zippel: distinct polynomials differ
    # at random points almost surely); it picks the element Z3 is asked about.
    probe = None
    for seed in range(3):
        ev = _random_evaluator(store, seed)
        try:
            probe = next((i for i in diff if ev.poly(ea[i].i) != ev.poly(eb[i].i)), None)
        except ValueError:
            probe = None
        if probe is not None:
            break
    asked = [probe] if probe is not None else diff
    stats["queries"] += 1
    solver = z3.Solver(ctx=zt.ctx)
    solver.set("random_seed", 0)
    # a model is only wanted for a difference the probe already confirmed
    solver.set("timeout", int(timeout_ms if probe is None else min(timeout_ms, 1000)))
    solver.add(z3.Or([zt.poly(ea[i].i) != zt.poly(eb[i].i) for i in asked]))
    res = solver.check()
    if res == z3.unsat and probe is None:
        stats["z3_proved"] += 1
        return None
    evs = []
    if res == z3.sat:
        evs.append(("z3 model", _model_evaluator(store, zt, solver.model())))
    evs += [(f"random exact evaluation (seed {s}; Z3 said {res})", _random_evaluator(store, s))
            for s in range(3)]
    for how, ev in evs:
        try:
            for i in asked:
                va, vb = ev.poly(ea[i].i), ev.poly(eb[i].i)
                if va != vb:
                    return "refuted", {"index": i, "found_by": how, "a": ea[i].i,
                                       "b": eb[i].i, "va": va, "vb": vb, "ev": ev}
        except ValueError:
            continue
    return "unknown", f"Z3 said {res} ({solver.reason_unknown() if res == z3.unknown else ''})"


def _counterexample(store, rank, var, ta, info, peer):
    cex = {"rank": rank, "var": var}
    if peer is not None:
        cex["compared_with_rank"] = peer
    if "index" not in info:
        cex.update(info)
        return cex
    i = info["index"]
    a, b, path = first_difference(store, info["a"], info["b"])
    syms, kernels = _symbols_of(store, [info["a"], info["b"]])
    ev = info["ev"]
    values = {}
    for s in syms[:40]:
        try:
            values[s] = str(ev.sym_value(s))
        except Exception:
            pass
    cex.update({
        "element": [int(x) for x in np.unravel_index(i, ta.arr.shape)] if ta.arr.shape else [],
        "reduced_shape": list(ta.arr.shape),
        "original_value": str(info["va"]), "rewritten_value": str(info["vb"]),
        "first_differing_subterm": {"path": path, "original": store.render(a)[:600],
                                    "rewritten": store.render(b)[:600]},
        "inputs": values, "found_by": info["found_by"],
        "uninterpreted_kernels": kernels,
    })
    if kernels:
        cex["note"] = ("values of the uninterpreted kernels " + ", ".join(kernels) +
                       " are the counterexample's interpretation")
    return cex


# -- the check -----------------------------------------------------------------
def prove_application(where: str, ranks: list, rings: dict, befores: dict, afters: dict,
                      watched: dict | None = None, timeout_ms: int = 5000,
                      feed_key=None, reduce_to: int = 2, renames: dict | None = None,
                      unobserved: dict | None = None) -> list:
    """One CheckResult (kind "value") per rank; see module docstring.

    ``watched``: {rank: [var names]} watched IN ADDITION to
    :func:`default_watch` (pass the loss and fetched outputs here).
    ``feed_key(rank, feed) -> str``: ranks with the same key get the same
    feed symbols (default: every rank its own; pass the data-parallel index
    as the numeric runs do, so TP peers see the same batch).
    ``renames``: {rank: {original var: rewritten var}} for values the pass
    moved to a new name; they are compared under it, never dropped.
    ``unobserved``: {rank: {var: reason}} values the pass leaves stale on
    purpose and that are dead in the rewritten program
    (``verify/ir/dead_values.py``): not compared, listed in the details.
    """
    start = time.perf_counter()
    store = Store()
    ranks = list(ranks)

    def all_ranks(verdict, msg, **kw):
        secs = round(time.perf_counter() - start, 3)
        return [CheckResult(KIND, NAME, r, verdict, f"{where} rank {r}: {msg}",
                            details={"queries": 0, "seconds": secs, "proved": [],
                                     "refuted": [], **kw.pop("details", {})}, **kw)
                for r in ranks]

    kwargs = sorted({k for s in list(befores.values()) + list(afters.values())
                     for k in (s.meta or {}).get("block_kwargs", [])})
    if kwargs:  # never unsound: the symbolic executor has no model of them
        out = all_ranks(Verdict.INCONCLUSIVE, f"the programs read keyword block arguments "
                        f"{kwargs} (persistables read by name, updated in place and driven "
                        "by a job schedule, e.g. a gradient-merge accumulator): one SSA "
                        "execution of the program models neither the aliasing of in-place "
                        "writes nor the optimize job running once per k micro-steps; not "
                        "deciding: the pass's own oracle (numeric micro-step runs) decides",
                        details={"reason": "block kwargs"})
        for r in out:
            r.advisory = True  # INCONCLUSIVE, shown; never counted as a proof
        return out
    try:
        env_a, ops_a = execute({r: befores[r] for r in ranks}, rings, store, reduce_to, feed_key)
    except (Unsupported, ExecError) as exc:
        return all_ranks(Verdict.INCONCLUSIVE, f"the ORIGINAL cannot be executed "
                         f"symbolically: {exc}", details={"reason": str(exc)})
    try:
        env_b, ops_b = execute({r: afters[r] for r in ranks}, rings, store, reduce_to, feed_key)
    except Unsupported as exc:
        return all_ranks(Verdict.INCONCLUSIVE, f"the rewritten program has an op without "
                         f"meaning: {exc}", details={"reason": str(exc)})
    except ExecError as exc:
        bad = exc.rank if exc.rank is not None else ranks[0]
        out = []
        for r in ranks:
            if r == bad:
                out.append(CheckResult(
                    KIND, NAME, r, Verdict.NOT_EQUIVALENT,
                    f"{where} rank {r}: the rewritten programs do not run where the original "
                    f"ones do: {exc}", counterexample={"rank": r, "error": str(exc)},
                    details={"queries": 0, "seconds": round(time.perf_counter() - start, 3),
                             "proved": [], "refuted": ["<execution>"]}))
            else:
                out.append(CheckResult(KIND, NAME, r, Verdict.INCONCLUSIVE,
                                       f"{where} rank {r}: not compared: rank {bad}'s rewritten "
                                       f"program does not run ({exc})",
                                       details={"queries": 0, "proved": [], "refuted": []}))
        return out
    zt = Z3Terms(store)
    results = []
    for r in ranks:
        t0 = time.perf_counter()
        stats = {"queries": 0, "normal_form": 0, "z3_proved": 0}
        must = default_watch(befores[r])
        names = list(dict.fromkeys(must + list((watched or {}).get(r, []))))
        proved, refuted, unknown, cexs, absent = [], [], [], [], []
        dead = (unobserved or {}).get(r) or {}
        for name in names:
            if name in dead:
                continue  # stale on purpose and read by nothing (listed below)
            ta = env_a[r].get(name)
            if ta is None:
                continue  # the original never gives it a value
            new = ((renames or {}).get(r) or {}).get(name)
            tb, peer = env_b[r].get(name if new is None else new), None
            if tb is None:
                peer = _peer(r, name, rings, env_b)
                if peer is None and name not in must:
                    absent.append(name)  # a fetched output the rewrite renamed
                    continue
                if peer is None:
                    refuted.append(name)
                    cexs.append({"rank": r, "var": name,
                                 "reason": "the rewritten programs of every rank sharing a "
                                           "ring with this one lost it"})
                    continue
                tb = env_b[peer][name]
            out = _compare(store, zt, ta, tb, timeout_ms, stats)
            if out is None:
                proved.append(name if peer is None and new is None else
                              f"{name} (as {new})" if peer is None else
                              f"{name} (rank {peer}'s copy)")
            elif out[0] == "refuted":
                refuted.append(name)
                cexs.append(_counterexample(store, r, name, ta, out[1], peer))
            else:
                unknown.append((name, out[1]))
        secs = time.perf_counter() - t0
        details = {"queries": stats["queries"], "seconds": round(secs, 4),
                   "proved": proved, "refuted": refuted,
                   "unknown": [n for n, _ in unknown], "absent_in_rewritten": absent,
                   "by_normal_form": stats["normal_form"], "by_z3": stats["z3_proved"],
                   "ops_executed": ops_a + ops_b, "terms": len(store.polys)}
        if dead:
            details["unobserved"] = dict(dead)
        if refuted:
            c = cexs[0]
            where_var = f"{c['var']}" + (f" (vs rank {c['compared_with_rank']}'s copy)"
                                         if "compared_with_rank" in c else "")
            val = (f": original {c['original_value']} vs rewritten {c['rewritten_value']} "
                   f"at element {c['element']}" if "element" in c else f": {c.get('reason')}")
            results.append(CheckResult(
                KIND, NAME, r, Verdict.NOT_EQUIVALENT,
                f"{where} rank {r}: REFUTED: {len(refuted)} of {len(names)} watched values "
                f"differ for some inputs; first {where_var}{val} ({ROUNDING})",
                counterexample=c, details={**details, "counterexamples": cexs[:5]}))
        elif unknown:
            results.append(CheckResult(
                KIND, NAME, r, Verdict.INCONCLUSIVE,
                f"{where} rank {r}: UNKNOWN for {unknown[0][0]}: {unknown[0][1]} after "
                f"{secs:.2f} s ({len(proved)} others proved; {ROUNDING})",
                details={**details, "reason": unknown[0][1]}))
        elif not proved:
            results.append(CheckResult(KIND, NAME, r, Verdict.INCONCLUSIVE,
                                       f"{where} rank {r}: nothing to compare",
                                       details=details))
        else:
            results.append(CheckResult(
                KIND, NAME, r, Verdict.EQUIVALENT,
                f"{where} rank {r}: PROVED: {len(proved)} watched values equal for all inputs "
                f"({stats['normal_form']} by canonical form, {stats['z3_proved']} by Z3, "
                f"{stats['queries']} Z3 queries); {ROUNDING}"
                + (f"; not compared, stale on purpose and dead: {', '.join(sorted(dead))}"
                   if dead else ""), details=details))
    return results
