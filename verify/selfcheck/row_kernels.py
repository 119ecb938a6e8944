"""Every uninterpreted kernel the value rows can apply, read from the rows'
source (``verify/value/semantics.py``), and whether the replay has its real
kernel (``verify/value/kernels.py``).

A refutation through a kernel with no reference cannot be replayed, so a
wrong rewrite whose difference passes through it is INCONCLUSIVE, never
REFUTED.  Rows are built by factories (``uf_elementwise("rsqrt", ...)``)
and by direct ``k.uf("inv", ...)`` calls; a kernel name is a string
constant, an f-string whose parts are a factory's kernel parameter and
run-time pieces (``f"{kernel}.{out_slot}.{j}"``: a family ``tril.*.*``),
or a variable a guarding ``if name in ("max", "min")`` names.  Factories
are found by what they do (a parameter that reaches ``k.uf``'s first
argument, directly or through another factory), not by a list, so a new
row or factory is enumerated without a change here; a name that resolves
to none of these forms is reported as unresolved (tests fail on it).

``python -m verify.selfcheck.row_kernels`` prints the table.
"""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field

SOURCES = ("verify.value.semantics",)


@dataclass
class Use:
    """One kernel name (``*`` a run-time piece) and where rows apply it."""

    kernel: str
    functions: set = field(default_factory=set)   # enclosing functions / dict keys
    rows: set = field(default_factory=set)        # ROWS keys that reach it
    lines: set = field(default_factory=set)


def _parents(tree):
    par = {}
    for node in ast.walk(tree):
        for ch in ast.iter_child_nodes(node):
            par[ch] = node
    return par


def _enclosing(node, par, kind=(ast.FunctionDef, ast.Lambda)):
    out = []
    while node in par:
        node = par[node]
        if isinstance(node, kind):
            out.append(node)
    return out


def _params(fn):
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args]


def _pattern(node, subst):
    """The kernel name an expression gives: a constant, an f-string with
    ``subst`` (param -> name) put in and other pieces as ``*``; None if
    it names no kernel statically."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in subst:
        return subst[node.id]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v.value, ast.Name) and v.value.id in subst:
                parts.append(subst[v.value.id])
            else:
                parts.append("*")
        return "".join(parts)
    return None


def _guard(name, node, par):
    """The constants a guarding ``if name in (...)`` / ``name == c`` allows."""
    while node in par:
        child, node = node, par[node]
        if isinstance(node, ast.If) and child in node.body:
            t = node.test
            if isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and \
                    t.left.id == name and len(t.ops) == 1:
                c = t.comparators[0]
                if isinstance(t.ops[0], ast.In) and isinstance(c, (ast.Tuple, ast.Set)):
                    vals = [e.value for e in c.elts if isinstance(e, ast.Constant)]
                    if len(vals) == len(c.elts):
                        return vals
                if isinstance(t.ops[0], ast.Eq) and isinstance(c, ast.Constant):
                    return [c.value]
    return None


def _site(node, par):
    """Where a call sits: the dict key of the entry it builds, else the
    innermost named function around it, else the module."""
    child = node
    while child in par:
        p = par[child]
        if isinstance(p, ast.Dict) and child in p.values:
            k = p.keys[p.values.index(child)]
            if isinstance(k, ast.Constant):
                return f"ROWS[{k.value!r}]"
        if isinstance(p, ast.FunctionDef):
            return p.name
        child = p
    return "<module>"


def scan(source: str):
    """``(uses, unresolved)``: kernel name -> Use; [(line, text)] of
    ``k.uf`` / factory calls whose kernel name is not static."""
    tree = ast.parse(source)
    par = _parents(tree)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    factories = {}  # function name -> index of its kernel-name parameter
    uses, unresolved = {}, []

    def note(name, node):
        u = uses.setdefault(name, Use(name))
        u.functions.add(_site(node, par))
        u.lines.add(node.lineno)

    def kernel_arg(call, fname):
        """The call's argument in the factory's kernel slot (or uf's first)."""
        if fname is None:
            return call.args[0] if call.args else None
        i = factories[fname]
        pname = _params(defs[fname])[i]
        if len(call.args) > i:
            return call.args[i]
        return next((kw.value for kw in call.keywords if kw.arg == pname), None)

    def resolve(arg, call):
        """Names the argument gives, or a factory it makes (param of an
        enclosing def), or None (unresolved)."""
        if arg is None:
            return None
        if isinstance(arg, ast.Name):  # a guarded variable: the names it may hold
            vals = _guard(arg.id, call, par)
            if vals:
                return ("names", [str(v) for v in vals])
        for fn in _enclosing(call, par, (ast.FunctionDef,)):
            ps = _params(fn)
            names = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
            hit = [p for p in ps if p in names]
            if hit:
                return ("factory", fn.name, ps.index(hit[0]), arg, hit[0])
        pat = _pattern(arg, {})
        return None if pat is None else ("names", [pat])

    # 1. factories: a parameter reaching k.uf's name, directly or through another
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    changed = True
    while changed:
        changed = False
        for c in calls:
            f = c.func
            fname = None
            if isinstance(f, ast.Attribute) and f.attr == "uf":
                pass
            elif isinstance(f, ast.Name) and f.id in factories:
                fname = f.id
            else:
                continue
            r = resolve(kernel_arg(c, fname), c)
            if r and r[0] == "factory" and r[1] not in factories:
                factories[r[1]] = r[2]
                changed = True
    # 2. how each factory dresses its kernel name (f"{kernel}.{out_slot}"),
    # then the names: constants at uf calls and at factory calls
    templates = {}  # factory -> [(the callee, name -> dressed name)]
    resolved = []
    for c in calls:
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr == "uf":
            fname = None
        elif isinstance(f, ast.Name) and f.id in factories:
            fname = f.id
        else:
            continue
        r = resolve(kernel_arg(c, fname), c)
        resolved.append((c, fname, r))
        if r is not None and r[0] == "factory":
            _, owner, _, arg, pname = r
            templates.setdefault(owner, []).append(
                (fname, lambda v, arg=arg, pname=pname: _pattern(arg, {pname: v}) or "*"))
    for c, fname, r in resolved:
        if r is None:
            unresolved.append((c.lineno, ast.unparse(c)[:100]))
        elif r[0] == "names":
            for n in r[1]:
                for full in _expand(fname, n, templates):
                    note(full, c)
    return uses, unresolved


def _expand(fname, name, templates, depth=0):
    """The kernel names a factory ``fname`` given ``name`` applies (through
    the factories it calls; ``depth`` bounds a factory calling itself)."""
    if fname is None:
        return [name]
    if depth > 8:
        return []
    out = []
    for inner, dress in templates.get(fname, []):
        out.extend(_expand(inner, dress(name), templates, depth + 1))
    return out


def _functions_of(fn, seen=None):
    """Names of the functions a row reaches through its closures (factories'
    inner rows, ``_via`` wrappers) and the module globals it calls."""
    seen = set() if seen is None else seen
    if not callable(fn) or id(fn) in seen:
        return set()
    seen.add(id(fn))
    out = {getattr(fn, "__name__", "")}
    code = getattr(fn, "__code__", None)
    g = getattr(fn, "__globals__", {})
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if inspect.isfunction(v):
            out |= _functions_of(v, seen)
    if code is not None:
        for n in code.co_names:
            v = g.get(n)
            if inspect.isfunction(v) and v.__module__ == fn.__module__:
                out |= _functions_of(v, seen)
    return out


def row_kernels():
    """``(uses, unresolved)`` over SOURCES, each Use with the ROWS keys that
    reach it (a dict entry's key, or a row whose closures/callees include
    the function it is in)."""
    import importlib

    from verify.value import semantics as S

    uses, unresolved = {}, []
    for mod in SOURCES:
        m = importlib.import_module(mod)
        u, un = scan(inspect.getsource(m))
        for k, v in u.items():
            uses.setdefault(k, Use(k)).functions |= v.functions
            uses[k].lines |= v.lines
        unresolved += [(mod, *x) for x in un]
    reach = {t: _functions_of(fn) for t, fn in S.ROWS.items()}
    for u in uses.values():
        for f in u.functions:
            if f.startswith("ROWS["):
                u.rows.add(f[6:-2])
            else:
                u.rows |= {t for t, fs in reach.items() if f in fs}
    return uses, unresolved


def missing(uses=None):
    """The kernels (name -> Use) with no reference in ``kernels.py`` and no
    reason there why none can exist (``UNREPLAYABLE``)."""
    from verify.value.kernels import UNREPLAYABLE, has_reference

    if uses is None:
        uses = row_kernels()[0]
    return {k: u for k, u in uses.items()
            if not has_reference(k.replace("*", "0")) and k not in UNREPLAYABLE}


def main():
    uses, unresolved = row_kernels()
    gaps = missing(uses)
    for k in sorted(uses):
        u = uses[k]
        mark = "MISSING" if k in gaps else "ok"
        print(f"{mark:8} {k:40} rows: {', '.join(sorted(u.rows)) or '(' + ', '.join(sorted(u.functions)) + ')'}")
    for mod, line, text in unresolved:
        print(f"UNRESOLVED {mod}:{line}: {text}")
    return 1 if gaps or unresolved else 0


if __name__ == "__main__":
    raise SystemExit(main())
