"""The ``value`` check: original == rewritten for ALL inputs, per rank, at
the REAL shapes.

Both versions of every rank's programs (startup, then main; all ranks
together, collectives across their rings) are executed into hash-consed
terms by ``symbolic.py`` at their real shapes; a -1 (batch) dim is
instantiated at each of ``BATCH_SIZES`` (1, where broadcasting and folding
mistakes hide, and two larger sizes) and the message says so ("at
x[B, 4, 8] for B in 1, 2, 3").  A program without -1 dims is proved once,
at its shapes.  Nothing is reduced: a mean's 1/n, an index map, a reshape
are the real ones.  What does not fit the work budget or
``MAX_LEAF_ELEMENTS`` is INCONCLUSIVE, saying so.

For each rank and watched var:
  1. equal canonical forms are a proof (``by_normal_form``);
  2. otherwise probes: the differing elements evaluated with random input
     values and the REAL kernels (``kernels.py``), exactly where the
     kernels are rational; a difference is a counterexample of the real
     program (``refuted_replayed``), found without Z3;
  3. what probes cannot tell apart is evaluated once more exactly, every
     kernel an arbitrary function (``_free_kernel_model``): a model of the
     query Z3 would get.  Where it tells the values apart Z3 cannot prove
     them; its input values are replayed with the real kernels instead of
     a Z3 model's (a difference refutes, none is INCONCLUSIVE: equal, if
     at all, by an identity of the real kernels such as sqrt(4 s) =
     2 sqrt(s), which no term here models), and Z3 is not asked;
  4. what that model cannot tell apart is compared once more, after
     every watched value of the rank was probed and only while none of
     them differs (a refuted rank's verdict cannot change; the others are
     then listed unknown, "not asked of Z3"): by canonical forms with every
     cut expanded (``expand.py``: one polynomial cut at other places, e.g.
     a bias added before or after an all-reduce; equal forms are a proof
     for every kernel interpretation, ``by_expanded_form``; the expansion
     spends work units), and only what stays unequal goes to Z3 (one query, cuts
     expanded, a resource limit per query and per application): unsat
     proves it (``by_z3``); a model is REPLAYED: its input values pushed
     through the terms with the real kernels; a difference there refutes,
     none is INCONCLUSIVE (Z3's interpretation of some kernel is not the
     real one); unknown is INCONCLUSIVE.
A refutation therefore always names inputs, at the real shapes, a user can
feed (``counterexample["inputs"]``), on which the real kernels give
different values.

"All inputs" (``INPUTS``) are every feed and every trainable parameter: a
parameter the startup draws at random or sets to a constant (every zero
bias, a LayerNorm scale of 1, the planner's 0.0 placeholder) is an input
symbol keyed by the op and its attrs, value included (``symbolic.py``),
since training moves it from the first step on: a rewrite that drops or
doubles a zero bias is refuted, not proved at bias 0.  What the startup
sets that is no parameter (optimizer moments and accumulators, the
learning rate) keeps the value the startup computes: a proof covers one
step from those states, at all parameter values and all feeds.

Over the reals a proof ignores rounding: the numeric check stays the
witness of precision.

The budget is deterministic (a rerun on any machine, loaded or not, gives
the same verdicts): the symbolic executions spend work units
(``symbolic.py``: monomials multiplied, added and interned, elements read
and written per op), at most ``work_units`` for the whole application
(both versions, every -1 size); Z3 spends its own deterministic resource
count (``rlimit``, read back from the solver's ``rlimit count``), at most
``z3_rlimit_per_query`` a query and ``z3_rlimit_per_application`` in all,
with ``random_seed`` fixed.  Past either: INCONCLUSIVE, saying how much was
spent of how much.  The one wall clock left is a hang guard around each Z3
query (a Z3 that overran its rlimit): it says so, it is not the budget.
Every value CheckResult records the budget and what it spent
(``details["budget"]``), and the report records the settings.
"""
from __future__ import annotations

import functools
import gc
import hashlib
import math
import random
import time
from fractions import Fraction

import numpy as np
import z3

from verify.ir.inplace import resolved
from verify.ir.snapshot import nested_blocks
from verify.numeric.startup_pieces import Unresolved
from verify.verdicts import CheckResult, Verdict

from .expand import expander
from .kernels import NoReference, NotAnInput, reference, round_to
from .rational import Q, is_exact, to_q
from .semantics import Unsupported, dtype_name
from .symbolic import Budget, ExecError, Store, execute, size_symbol

KIND, NAME = "value", "value proof"
ROUNDING = "a proof over the reals ignores rounding (the numeric check witnesses precision)"
BATCH_SIZES = (1, 2, 3)  # every -1 dim at 1 and two larger sizes
# What "all inputs" covers (one step of the programs from their startup):
# every feed and every trainable parameter, drawn at random or set to a
# constant by the startup (a zero bias, a LayerNorm scale of 1: training
# moves it from the first step on), are symbols (symbolic.py); what the
# startup sets that is no parameter (optimizer moments and accumulators,
# the learning rate) is the value the startup sets.
INPUTS = ("all inputs (every feed and every trainable parameter value, randomly or "
          "constant-initialised; optimizer states, accumulators and learning rate as "
          "the startup sets them)")
REL_TOL = 1e-9  # a float64 replay (transcendental kernels) differs beyond this

# The budget of one application (module docstring).  Work units: the
# heaviest application of the default run, promotion on planned_gpt_tp2,
# spends 114.3 M (~97 CPU s here, ~1.2 M units a CPU second): 300 M is a
# 2.6x margin (benchmarks/README.md).  Z3: the default run's Z3 users, grad
# clip on engine_dp2_sgd_clip and the engine pipeline on
# engine_pipeline_dp2_clip_default, prove 24 values by Z3 with 141.1 M rlimit
# in all, 5.91 M the largest query: 12 M / 300 M are 2.0x / 2.1x margins.
DEFAULT_BUDGET = {
    "work_units": 300_000_000,  # symbolic executions, all sizes, both versions
    # monomials one execution's store may hold (its memory: ~180 bytes each
    # with the memos, so ~9 GB); the largest of the default run, promotion on
    # planned_gpt_tp2, stores 25.3 M (5.0 GB peak RSS; every bias an input)
    "stored_monomials": 50_000_000,
    "z3_rlimit_per_query": 12_000_000,  # Z3's rlimit for one query
    "z3_rlimit_per_application": 300_000_000,  # rlimit count of all queries together
    "z3_random_seed": 0,
    # wall clock, a hang guard only (a Z3 that ignores its rlimit): never the budget
    "z3_hang_guard_s": 600,
    # Z3's heap cap per query, in MB (its global "memory_max_size" while the
    # query is checked: past it the query is unknown, "out of memory";
    # _z3_memory_cap): a query within its rlimit can still
    # grow past 14 GB (nonlinear terms of two attention blocks, verify generate
    # seed 0 plan 18) and take the machine with it; the default run's largest
    # query spends 5.91 M rlimit units, far below
    "z3_max_memory_mb": 4096,
    # the planner relation proof (relation.py) is attempted only where the serial
    # program's parameters, states and feeds hold at most this many elements: the
    # real-model plans (~1.1-1.6 x 10^4) spend the work budget cold (minutes,
    # benchmarks/README.md) and still leave values unproved, so the gate does
    # not pay it; --value-relation-inputs N attempts them
    "relation_input_elements": 4096,
}
_BUDGET = dict(DEFAULT_BUDGET)


def configure_budget(**settings) -> dict:
    """Set the budget of later proofs (``python -m verify run --value-work-units
    ... --z3-rlimit ...``); returns the settings now in force.  Unknown keys
    (an old ``budget_s``, ``timeout_ms``) are an error naming the new ones."""
    bad = sorted(k for k in settings if k not in DEFAULT_BUDGET)
    if bad:
        raise ValueError(f"unknown value-proof budget setting(s) {bad}: the budget is "
                         f"deterministic, in {sorted(DEFAULT_BUDGET)} (no seconds)")
    for k, v in settings.items():
        if v is not None:
            if int(v) <= 0:
                raise ValueError(f"{k} must be > 0, got {v}")
            _BUDGET[k] = int(v)
    return dict(_BUDGET)


def budget_settings() -> dict:
    """The budget settings in force (recorded in reports)."""
    return dict(_BUDGET)


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


def optimizer_watch(snap) -> list:
    """Of every optimizer op (an op reading a ``param`` and a ``grad`` slot,
    by slot names, never op names: sgd_, adam_, adamw_, momentum_, ...; PIR
    ``param``/``grad``, legacy ``Param``/``Grad``): the gradient it reads,
    then what it writes (the parameter after the update, moments,
    accumulators, beta powers), in program order.  Under PIR an in-place
    update's results are new values, so :func:`default_watch` (parameters by
    name) sees only their initial values; a program dir watches these too."""
    out = []
    for op in snap.ops:
        slots = {k.lower(): v for k, v in op.inputs.items()}
        if not (slots.get("param") and slots.get("grad")):
            continue
        out += list(slots["grad"]) + [n for n in op.writes() if n]
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
_FUNCTION_NAMES = {}  # (kernel, attrs, n) -> its name (the data itself is the key)
_FUNCTION_DIGESTS = {}  # the attrs' full digest -> the attrs' text it was made of


def z3_function_name(kernel, attrs, n) -> str:
    """The Z3 function a kernel is (one name: one function, in Z3 as in
    ``_free_kernel_evaluator``): the kernel, the full sha256 of its attrs'
    text and its arity.  Never a truncated digest (issue 34: a 6-hex-digit
    tag is found by brute force in seconds, and two kernels of one tag
    were one function); two texts of one full digest are refused, never
    merged."""
    key = (kernel, attrs, n)
    got = _FUNCTION_NAMES.get(key)
    if got is None:
        text = repr(attrs)
        digest = hashlib.sha256(text.encode()).hexdigest()
        seen = _FUNCTION_DIGESTS.setdefault(digest, text)
        if seen != text:
            raise Unsupported(f"kernel attrs {text[:200]} and {seen[:200]} share the "
                              f"sha256 {digest}: not one function")
        got = _FUNCTION_NAMES[key] = f"{kernel}#{digest}/{n}"
    return got


class Z3Terms:
    """Store polynomials as Z3 terms, in a Z3 context of their own: the same
    application then builds the same terms in the same order, so Z3's models
    (the counterexamples) are the same on every rerun, in one process or not."""

    def __init__(self, store):
        self.s = store
        self.ctx = z3.Context()
        self.pmemo, self.amemo, self.funcs, self.cmemo = {}, {}, {}, {}

    def _app(self, mk, args):
        """``mk`` (Z3_mk_add / Z3_mk_mul) of Real terms, through Z3's C API:
        the very term z3.Sum / z3.Product / ``*`` build, without their
        per-argument sort coercion (most of the time of a large query)."""
        n = len(args)
        arr = (z3.Ast * n)()
        for i, x in enumerate(args):
            arr[i] = x.as_ast()
        return z3.ArithRef(mk(self.ctx.ref(), n, arr), self.ctx)

    def const(self, c):
        e = self.cmemo.get(c)
        if e is None:
            e = self.cmemo[c] = z3.RealVal(f"{c.numerator}/{c.denominator}", self.ctx)
        return e

    def poly(self, pid):
        e = self.pmemo.get(pid)
        if e is None:
            terms = []
            for mono, c in self.s.polys[pid]:
                fs = [self.atom(a) for a in mono]
                coef = self.const(c)
                terms.append(coef if not fs else self._app(z3.Z3_mk_mul, [
                    coef, fs[0] if len(fs) == 1 else self._app(z3.Z3_mk_mul, fs)]))
            e = z3.RealVal(0, self.ctx) if not terms else terms[0] if len(terms) == 1 else \
                self._app(z3.Z3_mk_add, terms)
            self.pmemo[pid] = e
        return e

    def func(self, kernel, attrs, n):
        key = (kernel, attrs, n)
        f = self.funcs.get(key)
        if f is None:
            f = self.funcs[key] = z3.Function(z3_function_name(kernel, attrs, n),
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
    """Exact evaluation of terms: symbols from ``env``, kernels from ``fn``.
    ``domains``: the kernels are the real ones, so each atom's attrs are given
    with the bounds the store keeps on its inputs (``Store.domains``: an id
    outside any table it indexes is no input)."""

    def __init__(self, store, sym_value, uf_value, domains=False):
        self.s, self.sym_value, self.uf_value = store, sym_value, uf_value
        self.domains = store.domains if domains else {}
        self.pm, self.am = {}, {}
        # where the store asks for it (``store.probe_work``: the planner
        # relation), each polynomial evaluated spends 1 + its monomials of the
        # store's work units, each kernel call 1: Budget past the limit
        self.charge = store.spend if getattr(store, "probe_work", False) else None

    def poly(self, pid):
        v = self.pm.get(pid)
        if v is None:
            if self.charge is not None:
                self.charge(1 + len(self.s.polys[pid]), "evaluating probes")
            # exact (int, Fraction, mpq) while every value is; a float64
            # kernel's result makes what it touches a float, as Fraction * float
            # is (mpq * float would be an mpfr)
            v = Q(0)
            atom, am = self.atom, self.am
            for mono, c in self.s.polys[pid]:
                t = c
                for a in mono:
                    x = am.get(a)  # evaluated already: most atoms (no call)
                    if x is None:
                        x = atom(a)
                    t = float(t) * x if x.__class__ is float else \
                        t * float(x) if t.__class__ is float else t * x
                v = v + t if v.__class__ is not float and t.__class__ is not float else \
                    float(v) + float(t)
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
                if self.charge is not None:
                    self.charge(1, "evaluating probes")
                dom = self.domains.get(aid)
                v = self.uf_value(key[1], key[2] + dom if dom else key[2],
                                  tuple(self.poly(p) for p in key[3]))
            if v is None:
                raise ValueError("irrational model value")
            self.am[aid] = v
        return v


def _model_evaluator(store, zt, model):
    """Z3's model: symbols AND kernels as Z3 interprets them."""
    def sym(name):
        return _frac(model.eval(z3.Real(name, zt.ctx), model_completion=True))

    def uf(kernel, attrs, args):
        f = zt.func(kernel, attrs, len(args))
        return _frac(model.eval(f(*[z3.RealVal(f"{a.numerator}/{a.denominator}", zt.ctx)
                                    for a in args]), model_completion=True))
    return Evaluator(store, sym, uf)


def _replay_evaluator(store, sym_value):
    """Input values from ``sym_value`` as the leaf's dtype holds them (a
    float rounded to it, an integer leaf only integers), every kernel the
    REAL one: what the program that runs computes on inputs it can get."""
    def sym(name):
        v = feedable_value(sym_value(name), store.sym_dtype.get(name, ""), name)
        return v if v is None else to_q(v)

    seen = {"inexact": False}

    def uf(kernel, attrs, args):
        if any(isinstance(a, float) for a in args):
            seen["inexact"] = True
            args = tuple(to_q(a) for a in args)
        out = reference(kernel, attrs, args)
        if isinstance(out, float):
            seen["inexact"] = True
            return out
        return to_q(out)
    ev = Evaluator(store, sym, uf, domains=True)
    # a float64 kernel's result, once turned back into a Fraction, would be
    # compared exactly: mathematically equal terms evaluated in another order
    # (a sqrt of sums associated differently) then "differ" by its rounding
    ev.inexact = lambda: seen["inexact"]
    ev.shaken = functools.lru_cache(maxsize=None)(
        lambda k: _shaken_evaluator(store, sym, k))
    return ev


SHAKE = 2.0 ** -30  # the relative nudge of each float64 kernel result
SHAKES = 2  # replays with differently signed nudges
ROUNDING_MARGIN = 2.0 ** 12  # a difference this far past the estimated rounding is real


def _shaken_evaluator(store, sym, k):
    """The replay with every float64 result nudged by a relative ``SHAKE``
    of a sign drawn per nudge (seed ``k``): each kernel result, and each
    term of a sum the replay adds in float64 (a float64 sum rounds each
    partial sum, an error of the terms' size however much they cancel).
    How far a value moves measures how far the replay's roundings (2^-53
    relative each) can move it, cancellation included.  Terms both sides
    share are one atom or polynomial, nudged alike."""
    rng = random.Random(7919 + k)

    def nudge():
        return 1.0 + rng.choice((-1.0, 1.0)) * SHAKE

    def uf(kernel, attrs, args):
        args = tuple(to_q(a) if isinstance(a, float) else a for a in args)
        out = reference(kernel, attrs, args)
        return out * nudge() if isinstance(out, float) else to_q(out)
    return _ShakenEvaluator(store, sym, uf, nudge)


class _ShakenEvaluator(Evaluator):
    """``Evaluator`` whose float64 sums nudge each term (``_shaken_evaluator``)."""

    def __init__(self, store, sym_value, uf_value, nudge):
        super().__init__(store, sym_value, uf_value, domains=True)
        self.nudge = nudge

    def poly(self, pid):
        v = self.pm.get(pid)
        if v is None:
            if self.charge is not None:
                self.charge(1 + len(self.s.polys[pid]), "evaluating probes")
            terms = []
            for mono, c in self.s.polys[pid]:
                t = c
                for a in mono:
                    x = self.am.get(a)
                    if x is None:
                        x = self.atom(a)
                    t = float(t) * x if x.__class__ is float else \
                        t * float(x) if t.__class__ is float else t * x
                terms.append(t)
            if any(t.__class__ is float for t in terms):
                v = math.fsum(float(t) * self.nudge() for t in terms)
            else:
                v = sum(terms, Q(0))
            self.pm[pid] = v
        return v


def rounding_reach(ev, a, b, va, vb) -> float:
    """How far the float64 replay's roundings can move ``va - vb`` (terms
    ``a``, ``b`` replayed by ``ev``): the values' move under ``SHAKES`` nudged
    replays, scaled from ``SHAKE`` down to float64's unit roundoff.  Zero
    for an evaluator that cannot be nudged."""
    shaken = getattr(ev, "shaken", None)
    if shaken is None:
        return 0.0
    move = 0.0
    try:
        for k in range(SHAKES):
            sh = shaken(k)
            move = max(move, abs(float(sh.poly(a)) - float(va))
                       + abs(float(sh.poly(b)) - float(vb)))
    except (NoReference, NotAnInput, ValueError, ArithmeticError):
        return 0.0  # a nudged value no kernel takes: REL_TOL alone decides, as before
    return move * (2.0 ** -53 / SHAKE)


def feedable_value(v, dtype, name=""):
    """``v`` as a value of ``dtype`` (NotAnInput if it cannot be one)."""
    if v is None:
        return None
    dtype = dtype_name(dtype)
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        r = round_to(v, dtype)
        if not math.isfinite(float(r)):
            raise NotAnInput(f"{name} = {v} overflows {dtype}")
        return r
    if "int" in dtype or dtype == "bool":
        if v != int(v) or (dtype == "bool" and v not in (0, 1)):
            raise NotAnInput(f"{name} = {v} is not a {dtype}")
    return v


def _probe_values(store, seed):
    """Random input values (deterministic per seed): small integers for
    integer leaves (ids stay inside small tables), small dyadic rationals
    else."""
    rng = random.Random(seed)
    syms = {}

    def sym(name):
        v = syms.get(name)
        if v is None:
            dtype = store.sym_dtype.get(name, "")
            if "int" in dtype or dtype == "bool":
                v = Q(rng.randint(0, 1 if seed == 0 else 3))
            else:  # dyadic: exact in every float dtype, so casts that widen agree
                v = Q(rng.randint(-9, 9), rng.choice((1, 2, 4, 8)))
            syms[name] = v
        return v
    return sym


def _model_values(zt, model):
    def sym(name):
        return _frac(model.eval(z3.Real(name, zt.ctx), model_completion=True))
    return sym


def differ(va, vb, inexact: bool = False) -> bool:
    """Exact values differ, or values that passed through a float64 kernel
    (``inexact``, or a float) differ beyond ``REL_TOL``."""
    if not inexact and is_exact(va) and is_exact(vb):
        return va != vb
    a, b = float(va), float(vb)
    return abs(a - b) > REL_TOL * max(1.0, abs(a), abs(b))


def _replay(store, ev, pairs):
    """The first (index, va, vb) among ``pairs`` [(i, pid_a, pid_b)] whose
    replayed values differ (through a float64 kernel: beyond ``REL_TOL`` and
    beyond ``ROUNDING_MARGIN`` times the replay's ``rounding_reach``); None
    if none; raises NoReference/NotAnInput."""
    inexact = getattr(ev, "inexact", lambda: False)
    for i, a, b in pairs:
        va, vb = ev.poly(a), ev.poly(b)
        if differ(va, vb, inexact()) and not (
                inexact() and abs(float(va) - float(vb))
                <= ROUNDING_MARGIN * rounding_reach(ev, a, b, va, vb)):
            return i, va, vb
    return None


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


def _reads(store, root):
    """(leaf bases, kernels) every term under ``root`` reads, memoised per
    store (``store.reads``) and built bottom-up, so the counterexamples of a
    rank share one walk of the term graph (each walked all of it: half of a
    broken application's time, measured).  A term's arguments are older ids
    than the term, so the graph has no cycle.  Per term the memo holds two
    bitmasks (bit i: the i-th leaf base / kernel name met), so merging a
    term's arguments is an integer OR, not a set union (a set per term was
    most of a broken stack's counterexamples, measured)."""
    memo = store.reads
    got = memo.get(root)
    if got is None:
        got = _read_masks(store, root)
    names = store.read_names
    return (frozenset(n for n, bit in names[0].items() if got[0] >> bit & 1),
            frozenset(n for n, bit in names[1].items() if got[1] >> bit & 1))


def _read_masks(store, root):
    """``_reads``'s (leaf mask, kernel mask) of ``root``, filling the memo."""
    memo, polys, atoms = store.reads, store.polys, store.atoms
    leaf_bit, kernel_bit = store.read_names
    per_atom = store.read_atoms  # aid -> (leaf mask, kernel mask, child pids)

    def atom_info(a):
        info = per_atom.get(a)
        if info is None:
            key = atoms[a]
            if key[0] == "sym":
                base = key[1].split("[", 1)[0]
                bit = leaf_bit.setdefault(base, len(leaf_bit))
                info = (1 << bit, 0, ())
            elif key[0] == "cut":
                info = (0, 0, (key[1],))
            else:
                bit = kernel_bit.setdefault(key[1], len(kernel_bit))
                info = (0, 1 << bit, tuple(key[3]))
            per_atom[a] = info
        return info

    stack = [(root, False)]
    while stack:
        pid, ready = stack.pop()
        if pid in memo:
            continue
        lm = km = 0
        children = []
        for a in {a for mono, _ in polys[pid] for a in mono}:
            al, ak, ch = atom_info(a)
            lm |= al
            km |= ak
            children.extend(ch)
        if not ready:
            todo = [c for c in children if c not in memo]
            if todo:
                stack.append((pid, True))
                stack.extend((c, False) for c in todo)
                continue
        for c in children:
            cl, ck = memo[c]
            lm |= cl
            km |= ck
        memo[pid] = (lm, km)
    return memo[root]


def _symbols_of(store, pids, limit=400):
    """(up to ``limit`` input symbols, every leaf, every kernel) the terms
    ``pids`` read: leaves and kernels of the whole term graph (``_reads``);
    the symbols the first ``limit`` met depth first."""
    leaves, kernels = set(), set()
    for pid in pids:
        got = _reads(store, pid)
        leaves |= got[0]
        kernels |= got[1]
    seen, out, stack = set(), {}, list(pids)
    polys, atoms = store.polys, store.atoms
    while stack and len(out) < limit:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for mono, _ in polys[pid]:
            for a in mono:
                key = atoms[a]
                if key[0] == "sym":
                    if key[1] not in out and len(out) < limit:
                        out[key[1]] = None
                elif key[0] == "cut":
                    if key[1] not in seen:  # a term already walked adds nothing
                        stack.append(key[1])
                else:
                    stack.extend([c for c in key[3] if c not in seen])
    return list(out), sorted(kernels), sorted(leaves)


# -- one var -------------------------------------------------------------
class _Z3Budget:
    """Z3's rlimit for one application: per query, in all, and what the
    queries spent (read from each solver's ``rlimit count``)."""

    def __init__(self, total, per_query, seed=0, hang_guard_s=600, max_memory_mb=0):
        self.total, self.per_query, self.seed = int(total), int(per_query), int(seed)
        self.max_memory_mb = int(max_memory_mb or 0)  # 0: no cap
        self.hang_guard_ms = int(hang_guard_s * 1000)
        self.spent = 0
        self.max_query = 0  # the most one query spent

    @property
    def left(self):
        return self.total - self.spent


def _rlimit_count(solver) -> int:
    """The rlimit count of the solver's context (cumulative per context)."""
    st = solver.statistics()
    return int(st.get_key_value("rlimit count")) if "rlimit count" in st.keys() else 0


def _compare(store, zt, ta, tb, z3b, stats, ask_z3=True):
    """None if proved; ("refuted", info) or ("unknown", reason); with
    ``ask_z3`` False, what probes cannot tell apart is ("z3", pairs, why_not):
    the caller asks Z3 (``_ask_z3``) only if it still matters."""
    if ta.arr.shape != tb.arr.shape:
        return "refuted", {"reason": f"shapes differ at the real sizes: {list(ta.arr.shape)} "
                                     f"vs {list(tb.arr.shape)}"}
    ea, eb = ta.arr.reshape(-1), tb.arr.reshape(-1)
    diff = [i for i in range(ea.size) if ea[i].i != eb[i].i]
    if not diff:
        stats["normal_form"] += 1
        return None
    pairs = [(i, ea[i].i, eb[i].i) for i in diff]
    # 1. probes: random inputs, the real kernels (Schwartz-Zippel: distinct
    # polynomials differ at random points almost surely)
    why_not = []
    probes = store.probes  # one evaluator per seed per store: shared terms evaluated once
    for seed in range(3):
        if seed not in probes:
            sym = _probe_values(store, seed)
            probes[seed] = (sym, _replay_evaluator(store, sym))
        sym, ev = probes[seed]
        try:
            hit = _replay(store, ev, pairs)
        except NoReference as exc:
            why_not.append(f"kernel {exc} has no reference to replay")
            break
        except (NotAnInput, ValueError) as exc:
            why_not.append(f"probe {seed}: {exc}")
            continue
        if hit is not None:
            stats["probe_refuted"] += 1
            i, va, vb = hit
            return "refuted", {"index": i, "a": ea[i].i, "b": eb[i].i, "va": va, "vb": vb,
                               "sym": sym, "found_by": f"exact evaluation of probe {seed} "
                                                      "with the real kernels (no Z3)"}
    if not ask_z3:
        return "z3", pairs, why_not
    return _ask_z3(store, zt, ea, eb, pairs, why_not, z3b, stats)


FREE_KERNEL_SEED = 3  # the probe seeds are 0, 1, 2


def _free_kernel_evaluator(store, sym, seed):
    """Exact evaluation with every kernel an arbitrary function: each Z3
    function (``z3_function_name``) gives each tuple of argument values a
    random dyadic rational of its own, drawn deterministically in order of
    first use.  With ``sym``'s exact input values this is a model of the
    formula Z3 would be asked (symbols by name, cuts expanded, kernels
    uninterpreted), so terms it evaluates apart cannot be proved equal by
    Z3 (unsat is impossible)."""
    rng = random.Random(1000 + seed)
    table = {}

    def uf(kernel, attrs, args):
        key = (z3_function_name(kernel, attrs, len(args)), args)
        v = table.get(key)
        if v is None:
            v = table[key] = Q(rng.randint(-99, 99), rng.choice((1, 2, 4, 8, 16)))
        return v
    return Evaluator(store, sym, uf)


def _replayed(store, evaluator, pairs, ea, eb, sym, found_by, no_replay, equal):
    """A model's input values ``sym`` replayed with the real kernels
    (``evaluator``) on ``pairs``: (("refuted", counterexample), None) where
    a pair differs, else (None, why): ``no_replay: error`` where the values
    cannot be replayed, ``equal`` where they give equal values."""
    try:
        hit = _replay(store, evaluator, pairs)
    except (NoReference, NotAnInput, ValueError) as exc:
        return None, f"{no_replay} ({exc})"
    if hit is None:
        return None, equal
    i, va, vb = hit
    return ("refuted", {"index": i, "a": ea[i].i, "b": eb[i].i, "va": va, "vb": vb,
                        "sym": sym, "found_by": found_by}), None


def _free_kernel_model(store, ea, eb, pairs, why_not, stats):
    """Before Z3: a model of Z3's query in which the kernels are arbitrary
    functions (``_free_kernel_evaluator``).  Where it tells a pair apart, Z3
    cannot prove the value (no unsat), and what Z3 would return instead, a
    model replayed with the real kernels, this does with its own model: its
    input values replayed with the real kernels (``_replay_evaluator``), a
    difference a refutation as any replay, else ("unknown", why).  None: the
    model tells nothing apart (equal, if at all, by expanding cuts or by
    congruence: Z3's part).  The class: values equal only through an
    identity of the real kernels the terms do not model (sqrt(4 s) = 2
    sqrt(s), relu(2 x) = 2 relu(x)) or differing where no probe looked."""
    probes = store.probes
    key = ("free kernels", FREE_KERNEL_SEED)
    if key not in probes:
        sym = _probe_values(store, FREE_KERNEL_SEED)
        probes[key] = (sym, _free_kernel_evaluator(store, sym, FREE_KERNEL_SEED),
                       _replay_evaluator(store, sym))
    sym, free, real = probes[key]
    try:
        if _replay(store, free, pairs) is None:
            return None
    except (ValueError, ArithmeticError):  # not a model after all: Z3 decides
        return None
    out, why = _replayed(store, real, pairs, ea, eb, sym,
                         "a model with the kernels as arbitrary functions, replayed with "
                         "the real kernels", "its input values do not replay through the "
                         "real kernels", "its input values replayed with the real kernels "
                         "give equal values: equal, if at all, by an identity of the real "
                         "kernels the proof does not model")
    if out is not None:
        stats["probe_refuted"] += 1
        return out
    return "unknown", ("not proved: the terms differ with the kernels as arbitrary functions "
                       "(so Z3 cannot prove them equal; not asked), and " + why
                       + ("; " + "; ".join(why_not[:2]) if why_not else ""))


class _z3_memory_cap:
    """Z3's heap capped at ``mb`` MB (0: no cap) while one query is checked.
    The cap is Z3's global ``memory_max_size``: past it an allocation fails
    and ``check`` answers unknown ("out of memory").  The solver's own
    ``max_memory`` is polled in the search only: the preprocessing rewriter
    (``asserted_formulas::reduce``) grew generated plan 0062's query past
    9 GB under ``max_memory`` 4096 (measured).  Set only around ``check``
    (Z3 exits the process on a failed allocation outside one, e.g. building
    terms) and reset after it; the cap counts all of Z3's heap in the
    process, the terms of the query included."""

    def __init__(self, mb):
        self.mb = int(mb or 0)

    def __enter__(self):
        if self.mb:
            z3.set_param("memory_max_size", self.mb)

    def __exit__(self, *exc):
        if self.mb:
            z3.set_param("memory_max_size", 0)  # 0: Z3's default, no cap
        return False


def _ask_z3(store, zt, ea, eb, pairs, why_not, z3b, stats, model_checked=False):
    """Step 2 of ``_compare``: Z3 for the element ``pairs`` probes could not
    tell apart, within the budget (same returns as ``_compare``); not asked
    where a model with arbitrary kernels already shows it cannot prove
    them (``_free_kernel_model``; ``model_checked``: the caller asked it)."""
    if not model_checked:
        out = _free_kernel_model(store, ea, eb, pairs, why_not, stats)
        if out is not None:
            return out
    if z3b.left <= 0:
        return "unknown", (f"the application's Z3 budget is spent ({z3b.spent} of "
                           f"{z3b.total} rlimit units)")
    stats["queries"] += 1
    solver = z3.Solver(ctx=zt.ctx)
    solver.set("random_seed", z3b.seed)
    limit = max(1, min(z3b.per_query, z3b.left))  # 0 would mean no limit
    solver.set("rlimit", limit)  # deterministic: Z3 counts steps, not time
    solver.set("timeout", z3b.hang_guard_ms)  # a hang guard, not the budget
    solver.add(z3.Or([zt.poly(a) != zt.poly(b) for _, a, b in pairs[:256]]))
    before = _rlimit_count(solver)
    with _z3_memory_cap(z3b.max_memory_mb):
        res = solver.check()
    used = max(0, _rlimit_count(solver) - before)
    z3b.spent += used
    z3b.max_query = max(z3b.max_query, used)
    if res == z3.unsat:
        if len(pairs) <= 256:
            stats["z3_proved"] += 1
            return None
        return "unknown", f"{len(pairs)} differing elements; Z3 was asked about 256"
    if res == z3.sat:
        sym = _model_values(zt, solver.model())
        out, why = _replayed(store, _replay_evaluator(store, sym), pairs, ea, eb, sym,
                             "a Z3 model, replayed with the real kernels",
                             "Z3's counterexample does not replay",
                             "Z3's counterexample holds only for an interpretation of the "
                             "kernels that is not the real one (replayed: equal)")
        if out is not None:
            stats["z3_refuted"] += 1
            return out
        return "unknown", why + ("; " + "; ".join(why_not[:2]) if why_not else "")
    reason = solver.reason_unknown()
    if "resource" in reason or used >= limit:
        return "unknown", (f"Z3 said unknown: over its rlimit ({used} units spent of "
                           f"{limit} for this query; {z3b.spent} of {z3b.total} for the "
                           "application)")
    if "memory" in reason:
        return "unknown", (f"Z3 said unknown: over its memory cap ({reason}; "
                           f"z3_max_memory_mb {z3b.max_memory_mb}, {used} of {limit} rlimit "
                           "units spent)")
    if reason in ("timeout", "canceled"):
        return "unknown", (f"Z3 said unknown: stopped by the hang guard (wall clock, "
                           f"{z3b.hang_guard_ms // 1000} s; not the budget: {used} of {limit} "
                           "rlimit units spent), a rerun may differ")
    return "unknown", f"Z3 said unknown ({reason})"


def _feedable(store, leaves, sym_value, limit=4096):
    """The counterexample's input values as arrays a user can feed:
    {leaf: {"shape", "dtype", "values"}} for every leaf the differing terms
    read (elements never read hold the value the replay would have drawn)."""
    out = {}
    for base in leaves:
        shape, dtype = store.leaves.get(base, (None, ""))
        if shape is None:
            continue
        var = base.split("@", 1)[0]  # the program's var; after "@": whose copy
        n = int(np.prod(shape)) if shape else 1
        if n > limit:
            out[base] = {"var": var, "shape": list(shape), "dtype": dtype,
                         "values": f"<{n} elements; see the per-element inputs>"}
            continue
        vals = []
        for idx in np.ndindex(*shape):
            try:
                v = feedable_value(sym_value(f"{base}{list(idx) if shape else ''}"), dtype)
            except NotAnInput:
                v = None
            vals.append(float(v) if v is not None else None)
        arr = np.array(vals, dtype=object).reshape(shape) if shape else vals[0]
        out[base] = {"var": var, "shape": list(shape), "dtype": dtype,
                     "values": arr.tolist() if shape else arr}
    return out


def _feedable_shared(store, leaves, sym_value):
    """``_feedable``, each leaf's array built once per store and input
    values (``sym_value``: one probe's or one Z3 model's): the
    counterexamples of a rank are mostly one probe's, over the same leaves."""
    memo = store.feeds
    out = {}
    for base in leaves:
        key = (id(sym_value), base)
        got = memo.get(key)
        if got is None or got[0] is not sym_value:
            got = memo[key] = (sym_value, _feedable(store, [base], sym_value))
        out.update(got[1])
    return out


def _counterexample(store, rank, var, ta, info, peer, size_note, batch=None):
    cex = {"rank": rank, "var": var, "shapes": size_note, "batch": batch}
    if peer is not None:
        cex["compared_with_rank"] = peer
    if "index" not in info:
        cex.update(info)
        return cex
    i = info["index"]
    a, b, path = first_difference(store, info["a"], info["b"])
    # the message shows 40 symbols: the walk stops at them (the first 40 of a
    # longer walk are the same ones, in the same order)
    syms, kernels, leaves = _symbols_of(store, [info["a"], info["b"]], limit=40)
    sym = info["sym"]
    values = {}
    for s in syms:
        try:
            values[s] = str(sym(s))
        except Exception:
            pass
    cex.update({
        "element": [int(x) for x in np.unravel_index(i, ta.arr.shape)] if ta.arr.shape else [],
        "shape": list(ta.arr.shape),
        "original_value": str(info["va"]), "rewritten_value": str(info["vb"]),
        "first_differing_subterm": {"path": path, "original": store.render(a, max_chars=600),
                                    "rewritten": store.render(b, max_chars=600)},
        "inputs": values, "feed": _feedable_shared(store, leaves, sym),
        "found_by": info["found_by"], "replayed": True,
        "kernels": kernels,
    })
    if kernels:
        cex["note"] = ("replayed with the real kernels " + ", ".join(kernels))
    return cex


# -- the check -----------------------------------------------------------------
def _same_program(a, b) -> bool:
    """Identical ops, vars, startup ops and feeds (meta aside)."""
    return (a.ops == b.ops and a.vars == b.vars and a.startup_ops == b.startup_ops
            and list(a.feeds) == list(b.feeds))


def _region_ops(befores: dict, afters: dict) -> list:
    """``["the original program of rank r: main op i (pd_op.if)", ...]``: every
    op with nested blocks (:func:`verify.ir.snapshot.nested_blocks`)."""
    out = []
    for which, snaps in (("original", befores), ("rewritten", afters)):
        for r, s in sorted(snaps.items()):
            for part, ops in (("main", s.ops), ("startup", s.startup_ops)):
                out += [f"the {which} program of rank {r}: {part} op {o.idx} ({o.type})"
                        for o in ops if nested_blocks(o)]
    return out


def _symbolic_dims(snaps) -> list:
    """[(var, shape)] of the leaves with -1 dims (feeds first), for the message."""
    out = {}
    for snap in snaps:
        for name in list(getattr(snap, "feeds", []) or []) + sorted(snap.vars):
            v = snap.vars.get(name)
            if v is not None and v.shape and any(int(n) < 0 for n in v.shape):
                out.setdefault(name, list(v.shape))
    return list(out.items())


def _size_symbols(snaps, symbols) -> list:
    """The size symbols the leaves' -1 dims take (``size_symbol``: a fed
    var's declared symbol, else the one default symbol), in order of first
    use: the feeds', then those of vars read before any write."""
    out = {}
    for snap in snaps:
        written = {n for op in list(snap.ops) + list(snap.startup_ops) for n in op.writes()}
        feeds = list(getattr(snap, "feeds", []) or [])
        for name in feeds + sorted(n for n in snap.vars if n not in written):
            v = snap.vars.get(name)
            for i, d in enumerate((v.shape or []) if v is not None else []):
                if int(d) < 0:
                    out.setdefault(size_symbol(symbols, name, i), None)
    return list(out)


def size_instances(syms, sizes=BATCH_SIZES, avoid=None) -> list:
    """The size instances a proof executes: [{symbol: size}] ([None] without
    -1 dims).  Each symbol takes ``len(sizes)`` sizes, ``sizes`` first,
    leaving out the sizes ``avoid`` {symbol: sizes} names (the numeric runs'
    own: so they run at a size no proof covers); several symbols are
    independent: one instance with each at its smallest size, then a
    rotation (symbol j at its ((i + j) mod m)-th size, m >= the number of
    symbols) in which different symbols take different sizes."""
    syms, avoid = list(syms), avoid or {}
    if not syms:
        return [None]
    m = max(len(sizes), len(syms))
    cand = {}
    for s in syms:
        bad = {int(b) for b in avoid.get(s, ())}
        own = [int(b) for b in sizes if int(b) not in bad]
        nxt = max([int(b) for b in sizes] + [0]) + 1
        while len(own) < m:
            if nxt not in bad:
                own.append(nxt)
            nxt += 1
        cand[s] = own
    if len(syms) == 1:
        return [{syms[0]: b} for b in cand[syms[0]][:len(sizes)]]
    out = [{s: min(cand[s]) for s in syms}]
    for i in range(len(sizes)):
        inst = {s: cand[s][(i + j) % m] for j, s in enumerate(syms)}
        if inst not in out:
            out.append(inst)
    return out


def _instance_note(inst) -> str:
    """One instance, as the messages say it."""
    if inst is None:
        return "at the real shapes"
    if len(inst) == 1:
        return f"with every -1 dim = {next(iter(inst.values()))}"
    return "with " + ", ".join(f"{s} = {b}" for s, b in inst.items())


def sizes_label(instances) -> str:
    """"B in 1, 2, 3" or "(B, S) in (1, 1), (1, 2), ...": the sizes proved."""
    insts = [i for i in instances if i]
    if not insts:
        return ""
    syms = list(insts[0])
    if len(syms) == 1:
        return f"{syms[0]} in {', '.join(str(i[syms[0]]) for i in insts)}"
    return (f"({', '.join(syms)}) in "
            + ", ".join(f"({', '.join(str(i[s]) for s in syms)})" for i in insts))


def _shapes_note(dyn, instances, symbols=None) -> str:
    if not dyn or not [i for i in instances if i]:
        return "at the programs' real shapes (no -1 dims)"
    def dims(n, s):
        return ", ".join(size_symbol(symbols, n, i) if int(d) < 0 else str(d)
                         for i, d in enumerate(s))
    shown = ", ".join(f"{n}[{dims(n, s)}]" for n, s in dyn[:3])
    more = f" (and {len(dyn) - 3} more)" if len(dyn) > 3 else ""
    return f"at {shown}{more} for {sizes_label(instances)}"


def _compare_rank(r, store, zt, env_a, env_b, befores, watched, rings, renames, dead,
                  z3b, stats, size_note, batch):
    """One rank at one size: (proved, refuted, unknown, cexs, absent)."""
    must = default_watch(befores[r])
    names = list(dict.fromkeys(must + list((watched or {}).get(r, []))))
    proved, refuted, unknown, cexs, absent, pending = [], [], [], [], [], []
    record = _record(store, r, size_note, batch, proved, refuted, unknown, cexs)
    for name in names:
        if name in dead:
            continue  # stale on purpose and read by nothing (listed in the details)
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
                cexs.append({"rank": r, "var": name, "shapes": size_note,
                             "reason": "the rewritten programs of every rank sharing a "
                                       "ring with this one lost it"})
                continue
            tb = env_b[peer][name]
        out = _compare(store, zt, ta, tb, z3b, stats, ask_z3=False)
        if out is not None and out[0] == "z3":
            # probes could not tell: Z3 after every other value was probed
            pending.append((name, ta, tb, peer, new, out[1], out[2]))
            continue
        record(name, ta, peer, new, out)
    for name, ta, tb, peer, new, pairs, why_not in pending:
        if refuted:  # the rank is NOT_EQUIVALENT whatever Z3 says about this one
            unknown.append((name, "not asked of Z3: another watched value of this rank "
                                  "differs already (probes could not tell this one apart)"))
            continue
        ea, eb = ta.arr.reshape(-1), tb.arr.reshape(-1)
        # apart with arbitrary kernels: no expansion can prove them either (one
        # evaluation, cheaper than expanding: the grad clip's sqrt(4 s))
        out = _free_kernel_model(store, ea, eb, pairs, why_not, stats)
        if out is not None:
            record(name, ta, peer, new, out)
            continue
        try:  # one polynomial cut at other places (expand.py): a proof
            same = expander(store).equal(pairs)
        except Budget as exc:
            record(name, ta, peer, new, ("unknown", f"over budget expanding cuts: {exc} "
                                                    f"({store.work} work units of this "
                                                    f"size's {store.work_limit})"))
            continue
        if same:
            stats["expanded"] = stats.get("expanded", 0) + 1
            record(name, ta, peer, new, None)
            continue
        record(name, ta, peer, new, _ask_z3(store, zt, ea, eb, pairs, why_not, z3b, stats,
                                            model_checked=True))
    return names, proved, refuted, unknown, cexs, absent


def _record(store, r, size_note, batch, proved, refuted, unknown, cexs):
    """``record(name, ta, peer, new, outcome)``: files one compared value."""
    def record(name, ta, peer, new, out):
        if out is None:
            proved.append(name if peer is None and new is None else
                          f"{name} (as {new})" if peer is None else
                          f"{name} (rank {peer}'s copy)")
        elif out[0] == "refuted":
            refuted.append(name)
            if len(cexs) < 5:  # the details keep five; the rest are counted
                cexs.append(_counterexample(store, r, name, ta, out[1], peer, size_note,
                                            batch))
        else:
            unknown.append((name, out[1]))
    return record


def _collector_paused(fn):
    """``fn`` with Python's cyclic garbage collector off: the term store
    allocates millions of tuples, none in a cycle (reference counting frees
    them), and the collector's repeated passes over them cost 15-25 % of a
    large proof (measured on the 16-block stack); back on afterwards."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()
    return paused


@_collector_paused
def prove_application(where: str, ranks: list, rings: dict, befores: dict, afters: dict,
                      watched: dict | None = None, feed_key=None,
                      renames: dict | None = None, unobserved: dict | None = None,
                      sizes=BATCH_SIZES, budget: dict | None = None, symbols=None,
                      avoid_sizes=None, **legacy) -> list:
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
    ``sizes``: the values each size symbol takes, one execution each
    (:func:`size_instances`).  ``symbols``: {fed var: (symbol or None, ...)},
    the case's declared size symbols (each independent; an unnamed -1 dim is
    the default one); ``avoid_sizes``: {symbol: sizes} the numeric runs use,
    left out of the proved ones.  A proof at sampled sizes covers those
    sizes only: ``details["sizes_proved"]`` lists them (the application is
    "proved at sizes ...", ``Application.proof``); a program without -1 dims,
    or an identical one, is proved at every size (``details["all_sizes"]``).
    ``budget``: {setting: value} over :func:`budget_settings` (work units of
    the symbolic executions, Z3 rlimits; module docstring): past it,
    INCONCLUSIVE.  The old seconds (``budget_s``, ``timeout_ms``,
    ``z3_budget_ms``) are refused, naming the deterministic settings.
    """
    if legacy:
        raise TypeError(f"prove_application: {sorted(legacy)} no longer exist(s): the "
                        "budget is deterministic, budget={'work_units': ..., "
                        "'z3_rlimit_per_query': ..., 'z3_rlimit_per_application': ...}")
    bud = {**_BUDGET, **(budget or {})}
    start, cpu0 = time.perf_counter(), time.process_time()
    ranks = list(ranks)
    work = {"spent": 0}  # work units of the finished executions
    z3b = None

    def spent():
        """The budget and what it spent so far (details["budget"])."""
        return {**bud, "work_units_spent": work["spent"],
                "z3_rlimit_spent": z3b.spent if z3b else 0,
                "z3_rlimit_max_query": z3b.max_query if z3b else 0}

    def all_ranks(verdict, msg, **kw):
        secs = round(time.perf_counter() - start, 3)
        return [CheckResult(KIND, NAME, r, verdict, f"{where} rank {r}: {msg}",
                            details={"queries": 0, "seconds": secs, "proved": [],
                                     "refuted": [], "budget": spent(),
                                     **kw.pop("details", {})}, **kw)
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
                        details={"reason": "block kwargs", "not_proved": True})
        for r in out:
            r.advisory = True  # INCONCLUSIVE, shown; never counted as a proof
        return out
    # a read after an in-place write reads the write (verify/ir/inplace.py)
    befores = {r: resolved(s) for r, s in befores.items()}
    afters = {r: resolved(s) for r, s in afters.items()}
    snaps_all = list(befores.values()) + list(afters.values())
    dyn = _symbolic_dims(snaps_all)
    syms = _size_symbols(snaps_all, symbols) if dyn else []
    instances = size_instances(syms, tuple(sizes), avoid_sizes)
    note = _shapes_note(dyn, instances, symbols)
    proved_sizes = [dict(i) for i in instances if i]
    if all(_same_program(befores[r], afters[r]) for r in ranks) and \
            not any((renames or {}).get(r) for r in ranks):
        # the very programs: every value is itself, whatever the shapes
        out = []
        for r in ranks:
            names = list(dict.fromkeys(default_watch(befores[r])
                                       + list((watched or {}).get(r, []))))
            out.append(CheckResult(
                KIND, NAME, r, Verdict.EQUIVALENT,
                f"{where} rank {r}: PROVED {note}: the rewritten programs of every rank are "
                f"the original ones (identical ops, vars and startup), so all {len(names)} "
                f"watched values are equal for {INPUTS}; {ROUNDING}",
                details={"queries": 0, "seconds": round(time.perf_counter() - start, 4),
                         "proved": names, "refuted": [], "unknown": [],
                         "by_identity": len(names), "by_normal_form": 0, "by_z3": 0,
                         "refuted_replayed": 0, "shapes": note, "budget": spent(),
                         "all_sizes": True}))
        return out
    regions = _region_ops(befores, afters)
    if regions:  # never unsound: one SSA execution has no branches or loops
        return all_ranks(Verdict.INCONCLUSIVE, f"not proved: {regions[0]} has nested "
                         "blocks (a branch or loop body); the symbolic execution runs no "
                         f"regions ({len(regions)} such op(s): {'; '.join(regions[:4])})",
                         details={"reason": "nested regions", "not_proved": True,
                                  "region_ops": regions})
    z3b = _Z3Budget(bud["z3_rlimit_per_application"], bud["z3_rlimit_per_query"],
                    bud["z3_random_seed"], bud["z3_hang_guard_s"],
                    bud.get("z3_max_memory_mb", 0))
    per = {r: {"proved": None, "refuted": [], "cexs": [], "unknown": [], "absent": [],
               "names": [], "stats": {"queries": 0, "normal_form": 0, "z3_proved": 0,
                                      "probe_refuted": 0, "z3_refuted": 0}}
           for r in ranks}
    ops_total = 0
    store = None
    for inst in instances:
        size_note = _instance_note(inst)
        # the counterexample's sizes: one int for one symbol (as before)
        b = None if inst is None else (next(iter(inst.values())) if len(inst) == 1
                                       else dict(inst))
        run_at = 1 if inst is None else dict(inst)
        live = [r for r in ranks if not per[r]["refuted"]]
        if not live:
            break  # every rank refuted: larger sizes cannot change that

        def unresolved(which, exc):  # a startup write no placement relates to the main's
            return all_ranks(Verdict.INCONCLUSIVE, f"not proved: the {which} programs' "
                             f"startup value has no known piece: {exc}",
                             details={"reason": str(exc), "not_proved": True,
                                      "unresolved_startup": {"rank": exc.rank,
                                                             "var": exc.var}})

        def over_budget(exc):
            if store.work > (store.work_limit or 0):  # the work budget, not a leaf
                work["spent"] += store.work
                exc = (f"{work['spent']} work units spent of {bud['work_units']} "
                       f"(symbolic execution: {exc})")
            return all_ranks(Verdict.INCONCLUSIVE, f"not proved {note}: over budget "
                             f"{size_note}: {exc}", details={"reason": str(exc),
                                                             "not_proved": True})

        store = Store(work_limit=bud["work_units"] - work["spent"],
                      stored_limit=bud["stored_monomials"])
        try:
            env_a, ops_a = execute({r: befores[r] for r in ranks}, rings, store,
                                   run_at, feed_key, symbols)
        except Unresolved as exc:
            work["spent"] += store.work
            return unresolved("original", exc)
        except (Unsupported, ExecError) as exc:
            work["spent"] += store.work
            return all_ranks(Verdict.INCONCLUSIVE, f"the ORIGINAL cannot be executed "
                             f"symbolically {size_note}: {exc}", details={"reason": str(exc)})
        except Budget as exc:
            return over_budget(exc)
        try:
            env_b, ops_b = execute({r: afters[r] for r in ranks}, rings, store, run_at,
                                   feed_key, symbols)
        except Unresolved as exc:
            work["spent"] += store.work
            return unresolved("rewritten", exc)
        except Unsupported as exc:
            work["spent"] += store.work
            return all_ranks(Verdict.INCONCLUSIVE, f"the rewritten program has an op without "
                             f"meaning: {exc}", details={"reason": str(exc)})
        except Budget as exc:
            return over_budget(exc)
        except ExecError as exc:
            work["spent"] += store.work
            bad = exc.rank if exc.rank is not None else ranks[0]
            out = []
            for r in ranks:
                if r == bad:
                    out.append(CheckResult(
                        KIND, NAME, r, Verdict.NOT_EQUIVALENT,
                        f"{where} rank {r}: the rewritten programs do not run {size_note} "
                        f"where the original ones do: {exc}",
                        counterexample={"rank": r, "error": str(exc), "shapes": size_note},
                        details={"queries": 0,
                                 "seconds": round(time.perf_counter() - start, 3),
                                 "proved": [], "refuted": ["<execution>"],
                                 "budget": spent()}))
                else:
                    out.append(CheckResult(KIND, NAME, r, Verdict.INCONCLUSIVE,
                                           f"{where} rank {r}: not compared: rank {bad}'s "
                                           f"rewritten program does not run ({exc})",
                                           details={"queries": 0, "proved": [],
                                                    "refuted": [], "budget": spent()}))
            return out
        ops_total += ops_a + ops_b
        work["spent"] += store.work
        zt = Z3Terms(store)
        compared = store.work  # the comparisons' expansions spend units too
        for r in live:
            p = per[r]
            names, proved, refuted, unknown, cexs, absent = _compare_rank(
                r, store, zt, env_a, env_b, befores, watched, rings, renames,
                (unobserved or {}).get(r) or {}, z3b, p["stats"], size_note, b)
            p["names"] = names
            p["proved"] = proved if p["proved"] is None else \
                [n for n in p["proved"] if n in proved]
            p["refuted"] += refuted
            p["cexs"] += cexs
            p["unknown"] += [(n, f"{why} ({size_note})") for n, why in unknown]
            p["absent"] = sorted(set(p["absent"]) | set(absent))
        work["spent"] += store.work - compared
    secs = time.perf_counter() - start
    results = []
    for r in ranks:
        p, st = per[r], per[r]["stats"]
        proved, refuted, unknown, names = p["proved"] or [], p["refuted"], p["unknown"], \
            p["names"]
        dead = (unobserved or {}).get(r) or {}
        details = {"queries": st["queries"], "seconds": round(secs, 4),
                   # measured, never deciding: the budget is in work units
                   "cpu_seconds": round(time.process_time() - cpu0, 4),
                   "proved": proved, "refuted": refuted,
                   "unknown": [n for n, _ in unknown], "absent_in_rewritten": p["absent"],
                   "by_normal_form": st["normal_form"],
                   "by_expanded_form": st.get("expanded", 0), "by_z3": st["z3_proved"],
                   "refuted_replayed": st["probe_refuted"] + st["z3_refuted"],
                   "refuted_by_probe": st["probe_refuted"], "refuted_by_z3": st["z3_refuted"],
                   "shapes": note,
                   "batch_sizes": [next(iter(i.values())) for i in proved_sizes
                                   if len(i) == 1],
                   # the sizes proved: every size only without -1 dims (no
                   # argument here extends a proof at sampled sizes to all)
                   "sizes_proved": proved_sizes, "size_symbols": syms,
                   "all_sizes": not proved_sizes,
                   "watched": list(p["names"]),
                   "ops_executed": ops_total, "terms": len(store.polys) if store else 0,
                   "budget": spent()}
        if dead:
            details["unobserved"] = dict(dead)
        if refuted:
            c = p["cexs"][0]
            where_var = f"{c['var']}" + (f" (vs rank {c['compared_with_rank']}'s copy)"
                                         if "compared_with_rank" in c else "")
            val = (f": original {c['original_value']} vs rewritten {c['rewritten_value']} "
                   f"at element {c['element']}, {c['shapes']}, {c['found_by']}"
                   if "element" in c else f": {c.get('reason')} ({c['shapes']})")
            results.append(CheckResult(
                KIND, NAME, r, Verdict.NOT_EQUIVALENT,
                f"{where} rank {r}: REFUTED: {len(set(refuted))} of {len(names)} watched "
                f"values differ on inputs replayed through the real kernels; first "
                f"{where_var}{val} ({ROUNDING})",
                counterexample=c, details={**details, "counterexamples": p["cexs"][:5]}))
        elif unknown:
            results.append(CheckResult(
                KIND, NAME, r, Verdict.INCONCLUSIVE,
                f"{where} rank {r}: UNKNOWN for {unknown[0][0]}: {unknown[0][1]} after "
                f"{work['spent']} work units ({len(proved)} others proved {note}; "
                f"{ROUNDING})",
                details={**details, "reason": unknown[0][1], "not_proved": True}))
        elif not proved:
            results.append(CheckResult(KIND, NAME, r, Verdict.INCONCLUSIVE,
                                       f"{where} rank {r}: nothing to compare",
                                       details={**details, "not_proved": True}))
        else:
            results.append(CheckResult(
                KIND, NAME, r, Verdict.EQUIVALENT,
                f"{where} rank {r}: PROVED {note}: {len(proved)} watched values equal for "
                f"{INPUTS} ({st['normal_form']} by canonical form, "
                f"{st.get('expanded', 0)} by canonical form with cuts expanded, "
                f"{st['z3_proved']} by Z3, {st['queries']} Z3 queries); {ROUNDING}"
                + (f"; not compared, stale on purpose and dead: {', '.join(sorted(dead))}"
                   if dead else ""), details=details))
    return results
