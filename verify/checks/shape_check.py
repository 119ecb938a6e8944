"""Symbolic shapes in Z3: every op's preconditions hold and every inferred
output equals its declared shape, for ALL values of the symbolic dims.

Each dim of a fed var is a Z3 integer > 0 when it is -1 (named by the case,
e.g. ``B``, so vars that share it share the symbol) and a constant
otherwise.  Shapes then flow through the rule table in ``shape_rules.py``:
inferred, not declared, shapes flow on, so a wrong fold is seen downstream
too.  An obligation that simplifies to a constant needs no solver; the rest
are asked as "is there an assignment of the symbols that breaks it?" and a
model found is the counterexample.  An op with no rule, or a query Z3
answers ``unknown``, makes the check INCONCLUSIVE naming it.

Reshapes the pass inserted are also checked for their *folding*: a reshape
that feeds a ``matmul_v2`` must fold exactly the leading dims into one, as
the matmul grad kernel's FoldInitDims does (``[B, S, H] -> [B*S, H]``), so
the element order is the one the consumer expects.
"""
from __future__ import annotations

import re

import z3

from ..ir import op_definitions, read_sets
from ..verdicts import CheckResult, Verdict
from .shape_rules import RULES, RuleError, Shapes, is_static, prod

KIND = "shape"
# VarType codes of the dtypes a cast can produce (paddle's framework.proto)
_DTYPES = {0: "bool", 1: "int16", 2: "int32", 3: "int64", 4: "float16", 5: "float32",
           6: "float64", 22: "bfloat16"}
# Z3's budget per query is its deterministic resource count (the same answer
# on any machine, loaded or not); the wall clock is a hang guard only.
RLIMIT = 20_000_000
HANG_GUARD_MS = 60_000
# how many queries Z3 left undecided in this process: an "unknown" may be the
# hang guard's (machine-dependent), so a memo never keeps such a result
UNKNOWN_ANSWERS = [0]


class _Solver:
    """One solver per program: the symbol constraints, then push/pop per query."""

    def __init__(self):
        self.solver = z3.Solver()
        self.solver.set("timeout", HANG_GUARD_MS)
        self.symbols = {}
        self.queries = 0

    def symbol(self, name: str):
        if name not in self.symbols:
            sym = z3.Int(name)
            self.symbols[name] = sym
            self.solver.add(sym > 0)
        return self.symbols[name]

    def refute(self, cond):
        """None when ``cond`` holds for all symbol values; else a model dict,
        or the string 'unknown'."""
        if cond is True:
            return None
        if cond is False:  # broken for every value: show one assignment
            cond = z3.BoolVal(False)
        cond = z3.simplify(cond) if isinstance(cond, z3.ExprRef) else cond
        if z3.is_true(cond):
            return None
        self.queries += 1
        self.solver.push()
        try:
            self.solver.set("rlimit", RLIMIT)  # per check: counted from here
            self.solver.add(z3.Not(cond))
            res = self.solver.check()
            if res == z3.unsat:
                return None
            if res == z3.unknown:
                UNKNOWN_ANSWERS[0] += 1
                return "unknown"
            m = self.solver.model()
            return {str(d): m[d].as_long() for d in m.decls()}
        finally:
            self.solver.pop()


def _show(shape, model) -> list:
    """A shape with the counterexample's values substituted."""
    out = []
    for d in shape:
        if is_static(d):
            out.append(d)
        else:
            subs = [(z3.Int(k), z3.IntVal(v)) for k, v in (model or {}).items()]
            val = z3.simplify(z3.substitute(d, *subs)) if subs else d
            out.append(val.as_long() if z3.is_int_value(val) else str(val))
    return out


def declared_shape(solver, snap, name, symbols) -> list:
    """A var's declared shape as dims; -1 dims become symbols."""
    v = snap.var(name)
    if v is None:
        return None
    names = symbols.get(name) or ()
    dims = []
    for i, d in enumerate(v.shape):
        if d is None or d < 0:
            sym = names[i] if i < len(names) and names[i] else f"{name}[{i}]"
            dims.append(solver.symbol(sym))
        else:
            dims.append(int(d))
    return dims


def is_fold_for_matmul(solver, x, out):
    """The condition that ``out`` is FoldInitDims of ``x``."""
    if len(x) < 2:
        return len(out) == len(x) and all(a == b for a, b in zip(out, x)) or False
    want = [prod(x[:-1]), x[-1]] if len(x) > 2 else list(x)
    if len(out) != len(want):
        return False
    conds = [a == b for a, b in zip(out, want)]
    if all(c is True for c in conds):
        return True
    if any(c is False for c in conds):
        return False
    return z3.And(*[c for c in conds if c is not True])


def check_snapshot(snap, rank, where: str, symbols=None, inserted=None,
                   name: str = "shapes", start=None, capture=None) -> list:
    """Run the rule table over ``snap``'s main ops; a list of CheckResults.

    ``inserted`` is the set of op indices the pass inserted (their reshapes
    get the folding check).  ``start`` (a ``(solver, env)`` captured earlier)
    continues from the shapes inferred up to some op instead of from the
    declared ones; ``capture`` (a dict keyed by op index) receives such a
    state just before each of its ops, so a caller checking several plans
    against one program infers that program's shapes once.
    """
    symbols = symbols or {}
    inserted = inserted or set()
    solver, env = (start[0], dict(start[1])) if start else (_Solver(), {})
    findings, unknowns = [], []
    consumers = {}
    for op in snap.ops:
        for v in op.reads():
            consumers.setdefault(v, []).append(op)

    def shape_of(var):
        if var not in env:
            env[var] = declared_shape(solver, snap, var, symbols)
        return env[var]

    def fail(op, why, model, precondition=True, crashes=None, **extra):
        """A broken precondition (the op cannot run: NOT_EQUIVALENT, and the
        executor may crash on it), or a declared shape or dtype that is
        stale (the op runs; CONTRACT_BROKEN: the program's metadata lies)."""
        cex = {"rank": rank, "op_index": op.idx, "op_type": op.type,
               "dims": {k: v for k, v in (model or {}).items()}}
        cex.update(extra)
        dims = ", ".join(f"{k}={v}" for k, v in sorted((model or {}).items()))
        verdict = Verdict.NOT_EQUIVALENT if precondition else Verdict.CONTRACT_BROKEN
        findings.append(CheckResult(
            KIND, name if precondition else "declared shapes", rank, verdict,
            f"{where}: op {op.idx} ({op.type}): {why}" + (f" when {dims}" if dims else ""),
            counterexample=cex,
            details={"crashes_executor": precondition if crashes is None else crashes}))

    poisoned = set()  # outputs of ops already found broken, or without a rule
    skipped = []
    for op in snap.ops:
        if capture is not None and op.idx in capture:
            capture[op.idx] = (solver, dict(env))
        if poisoned & set(op.reads()):
            # downstream of a finding or of an op without a rule: unknown
            poisoned.update(op.writes())
            skipped.append(op.idx)
            continue
        rule = RULES.get(op.type)
        if rule is None:
            unknowns.append(f"op {op.idx} ({op.type}) has no shape rule")
            poisoned.update(op.writes())  # their shapes are unknown from here on
            continue
        # the rule interprets every slot and attr the op carries, or it is not applied
        why = read_sets.refusal(op, op_definitions.definition(op.type), shape=True)
        if why is not None:
            unknowns.append(why)
            poisoned.update(op.writes())
            continue
        ins = {slot: [shape_of(v) if v else None for v in names]
               for slot, names in op.inputs.items()}
        s = Shapes(op, ins, (snap.meta or {}).get("shapes"))
        try:
            outs = rule(s) or {}
        except RuleError as exc:
            unknowns.append(f"op {op.idx} ({op.type}): {exc}")
            poisoned.update(op.writes())  # unknown shapes: never read as declared
            continue
        broken = False
        for cond, why in s.needs:
            model = solver.refute(cond)
            if model == "unknown":
                unknowns.append(f"op {op.idx} ({op.type}): Z3 unknown on '{why}'")
            elif model is not None:
                fail(op, why, model, rule=why,
                     inputs={k: [_show(x, model) if x is not None else None for x in v]
                             for k, v in ins.items()})
                broken = True
        if broken:
            poisoned.update(op.writes())
            continue
        for slot, shapes in outs.items():
            for var, inferred in zip(op.outputs.get(slot, []), shapes or []):
                if not var or inferred is None:
                    continue
                declared = snap.var(var)
                if declared is not None and str(declared.dtype).startswith("vec"):
                    declared = None  # a PIR vector: its rule gives the pieces stacked
                if declared is not None and len(declared.shape) != len(inferred):
                    fail(op, f"output {var} is declared rank {len(declared.shape)} "
                             f"{list(declared.shape)}, the rule infers rank {len(inferred)}",
                         {}, precondition=False, var=var, inferred=_show(inferred, {}))
                    continue
                if declared is not None:
                    for i, (dd, di) in enumerate(zip(declared.shape, inferred)):
                        if dd is None or dd < 0:
                            continue
                        model = solver.refute(di == dd)
                        if model == "unknown":
                            unknowns.append(f"op {op.idx}: Z3 unknown on {var} dim {i}")
                        elif model is not None:
                            fail(op, f"output {var} dim {i} is declared {dd} but is "
                                     f"{_show([di], model)[0]}", model, precondition=False,
                                 var=var,
                                 declared=list(declared.shape),
                                 inferred=_show(inferred, model))
                            break
                env[var] = inferred if hasattr(inferred, "pieces") else list(inferred)
        if op.type == "cast" and "out_dtype" in op.attrs:
            out_var = snap.var((op.outputs.get("Out") or [""])[0])
            want = _DTYPES.get(int(op.attrs["out_dtype"]))
            if out_var is not None and want and out_var.dtype != want:
                fail(op, f"cast produces {want} but {out_var.name} is declared "
                         f"{out_var.dtype}", {}, precondition=False, rule="cast dtype",
                     var=out_var.name)
        if op.type == "reshape2" and op.idx in inserted:
            x = shape_of(op.inputs["X"][0])
            out = env.get(op.outputs["Out"][0])
            feeds_matmul = any(c.type == "matmul_v2" for c in
                               consumers.get(op.outputs["Out"][0], []))
            if out is not None and feeds_matmul:
                model = solver.refute(is_fold_for_matmul(solver, x, out))
                if model == "unknown":
                    unknowns.append(f"op {op.idx}: Z3 unknown on the fold")
                elif model is not None:
                    want = [prod(x[:-1]), x[-1]] if len(x) > 2 else list(x)
                    fail(op, f"reshape {_show(x, model)} -> {_show(out, model)} does not "
                             f"fold the leading dims as the matmul's FoldInitDims does "
                             f"({_show(want, model)})", model,
                         crashes=False, rule="FoldInitDims", var=op.outputs["Out"][0],
                         input=_show(x, model), target=_show(out, model),
                         expected=_show(want, model))
    results = list(findings)
    if skipped and not findings:
        unknowns.append(f"{len(skipped)} op(s) downstream of those not checked: "
                        f"{skipped[:10]}")
    if unknowns:
        results.append(CheckResult(
            KIND, name, rank, Verdict.INCONCLUSIVE,
            f"{where}: {len(unknowns)} op(s) could not be checked: " + "; ".join(unknowns[:5]),
            details={"unchecked": unknowns}))
    if not results:
        results.append(CheckResult(
            KIND, name, rank, Verdict.EQUIVALENT,
            f"{where}: {len(snap.ops)} ops shape-check for all values of "
            f"{sorted(solver.symbols) or 'no symbols'} ({solver.queries} Z3 queries)",
            details={"symbols": sorted(solver.symbols), "queries": solver.queries}))
    return results


def inserted_ops(before, after) -> set:
    """Indices of ``after``'s ops that do not appear in ``before`` (by text)."""
    from collections import Counter

    from verify.ir.snapshot import rendered

    pool = Counter(rendered(before.ops))
    out = set()
    for o, key in zip(after.ops, rendered(after.ops)):
        if pool[key]:
            pool[key] -= 1
        else:
            out.add(o.idx)
    return out


def run(ctx) -> list:
    """The rule table over the program the pass built.  A finding the
    original program already has (same op text, same value names, same
    reason: the pass kept it, did not make it) is kept in the report but
    advisory, marked ``inherited``: a pass is not judged by its input's
    defects (a planner's stale declared shape, say)."""
    out = check_snapshot(ctx.after, ctx.rank, ctx.where(), ctx.symbols,
                         inserted_ops(ctx.before, ctx.after))
    bad = [c for c in out if c.verdict in (Verdict.NOT_EQUIVALENT, Verdict.CONTRACT_BROKEN)]
    if bad and ctx.before is not None and ctx.before is not ctx.after:
        had = {finding_key(c) for c in check_snapshot(ctx.before, ctx.rank, ctx.where(),
                                                        ctx.symbols, set())
               if c.verdict in (Verdict.NOT_EQUIVALENT, Verdict.CONTRACT_BROKEN)}
        for c in bad:
            if finding_key(c) in had:
                c.advisory = True
                c.details["inherited"] = True
                c.message += " (inherited: the original program has it too; not this pass's)"
    return out


def finding_key(check) -> tuple:
    """What identifies a shape finding across a rewrite: its check name, the
    op type and the reason (value names included, which a rewrite keeps),
    not the op index (a pass may insert ops before it)."""
    cex = check.counterexample or {}
    why = re.sub(r"^.*?: op \d+ \(", "(", check.message, count=1)
    return check.name, cex.get("op_type"), why
