"""Which applications (pass x case) a change affects: by what each ran
(the executed-source table, ``executed.py``), else by the import graph
(``ast``, no Paddle import).

By what ran.  ``verify/executed_files.json`` records, per application of the
baseline, the Paddle functions and module bodies its run executed in every
process (the run, the isolation workers, the planning and rank processes:
``trace.py``).  A changed file selects an application that ran one of the
units the change touches (a function whose body changed, or the module's
body: its top-level code, class bodies, signatures and decorators; moved
lines are no change); a file that no longer parses, or is deleted, selects
every application that ran any of it, and each of those is NEW whatever its
verdict (``trace_broken``).  The planner family is selected like any other
pass: by what its applications ran.

By the import graph, for what the table does not know: a new file (no
application can have run it), and applications without a record (another
Paddle version, a case recorded later).  A pass adapter's *roots* are the
Paddle modules its application runs: the module that registers the pass
(``@register_pass("name")``), the module of a helper the suite audits as a
pass (``verify.selfcheck.vocabulary.EXTRA_PASSES``), and any the adapter
class names in ``paddle_modules``.  It is affected when a changed module is
in the closure of its roots under the imports within ``paddle.distributed``
(module-level and function-level imports alike; a package's ``__init__``
counts only where it is imported itself).  The graph is the installed
sources with the changed files' new text in their place, so an import the
change adds or removes counts.  Roots come from the changed and the installed
registry alike, so a pass module the change deletes or leaves not compiling
still selects its passes.  An unrecorded application of a pass with recorded
ones is also selected by what those ran.  An unrecorded application of the
planner family (adapters with ``planner_family = True``, or named in
:data:`PLANNER_ADAPTERS`) is selected by the closure of Paddle's planning
code (:data:`PLANNER_PREFIXES`).
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

SCOPE = "paddle.distributed"
PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Paddle's auto-parallel planning: completion, partitioning, resharding,
# cost model and the Engine/parallelizer that drive them (static and PIR).
PLANNER_PREFIXES = (
    "paddle.distributed.auto_parallel.static.completion",
    "paddle.distributed.auto_parallel.static.partitioner",
    "paddle.distributed.auto_parallel.static.planner",
    "paddle.distributed.auto_parallel.static.parallelizer",
    "paddle.distributed.auto_parallel.static.engine",
    "paddle.distributed.auto_parallel.static.reshard",
    "paddle.distributed.auto_parallel.static.reshard_funcs",
    "paddle.distributed.auto_parallel.static.operators",
    "paddle.distributed.auto_parallel.static.dist_context",
    "paddle.distributed.auto_parallel.static.mix_to_dist_pass",
    "paddle.distributed.auto_parallel.static.pir_pass",
    "paddle.distributed.auto_parallel.static.cost",
    "paddle.distributed.auto_parallel.static.tuner",
    "paddle.distributed.auto_parallel.reshard",  # the dygraph/PIR reshard entry points
    "paddle.distributed.auto_parallel.api",
)
# Adapter names of the planner family (filled in by that family's modules;
# adapters may instead set ``planner_family = True`` on their class).
PLANNER_ADAPTERS: list = []


def installed_root() -> str:
    """The directory holding the installed ``paddle`` package (no import)."""
    spec = importlib.util.find_spec("paddle")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("paddle is not installed in this environment")
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def module_of(rel: str) -> str:
    parts = rel.replace(os.sep, "/")[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_scope(mod: str) -> bool:
    return mod == SCOPE or mod.startswith(SCOPE + ".")


def _resolve(node, package: str) -> str:
    if node.level:
        base = package.split(".")
        base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _reexports(tree, mod: str, known) -> dict:
    """``{name: defining module}`` a package's ``__init__`` re-exports."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            target = _resolve(node, mod)
            for a in node.names:
                sub = f"{target}.{a.name}"
                out[a.asname or a.name] = sub if known(sub) else target
    return out


def _imports(tree, mod: str, is_pkg: bool, known, reexports: dict) -> set:
    """Modules in scope that ``mod`` imports (``known(name)``: a module
    exists).  A name taken from a package's ``__init__`` goes to the module
    that defines it, by the ``__init__``'s own re-exports."""
    package = mod if is_pkg else mod.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, package)
            out.add(target)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if known(sub):
                    out.add(sub)
                elif a.name in reexports.get(target, {}):
                    out.add(reexports[target][a.name])
    return {m for m in out if _in_scope(m) and known(m) and m != mod}


def scope_files(root: str) -> dict:
    """``{module: path}`` of the installed modules in scope."""
    base = os.path.join(root, *SCOPE.split("."))
    out = {}
    for dirpath, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                out[module_of(os.path.relpath(path, root))] = path
    return out


def build_graph(root: str, reexports: dict) -> dict:
    """``{module: sorted imports in scope}`` of the installed sources."""
    files = scope_files(root)
    graph = {}
    for mod, path in sorted(files.items()):
        tree = _parse_file(path)
        graph[mod] = [] if tree is None else sorted(_imports(
            tree, mod, path.endswith("__init__.py"), files.__contains__, reexports))
    return graph


def _parse_file(path: str):
    with open(path, encoding="utf-8") as f:
        try:
            return ast.parse(f.read())
        except SyntaxError:
            return None


def build_reexports(root: str) -> dict:
    files = scope_files(root)
    out = {}
    for mod, path in files.items():
        if path.endswith("__init__.py"):
            tree = _parse_file(path)
            if tree is not None:
                out[mod] = _reexports(tree, mod, files.__contains__)
    return out


def _registered(text: str) -> list:
    """Pass names a source registers (``@register_pass("name")`` on a class)."""
    if "register_pass" not in text:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", getattr(
                        d.func, "attr", "")) == "register_pass" and d.args and \
                        isinstance(d.args[0], ast.Constant):
                    names.append(d.args[0].value)
    return names


def build_index(root: str) -> dict:
    """The installed sources' import graph and pass registry."""
    registry = {}
    for mod, path in scope_files(root).items():
        with open(path, encoding="utf-8") as f:
            for name in _registered(f.read()):
                registry.setdefault(name, []).append(mod)
    reexports = build_reexports(root)
    packages = sorted(m for m, p in scope_files(root).items() if p.endswith("__init__.py"))
    return {"graph": build_graph(root, reexports), "registry": registry,
            "reexports": reexports, "packages": packages}


def cached_index(root: str, cache_dir: str | None) -> dict:
    """:func:`build_index`, kept in ``cache_dir`` (keyed by the install's
    path, its number of modules and their newest mtime)."""
    import hashlib

    from verify.cache_files import MISS, read_entry, write_entry

    files = scope_files(root)
    stamp = max(os.path.getmtime(p) for p in files.values())
    key = hashlib.sha256(f"{root}|{stamp}|{len(files)}".encode()).hexdigest()
    path = os.path.join(cache_dir, f"import-index-{key}.json") if cache_dir else None
    # one entry of verify/cache_files.py: key and digest checked, a damaged,
    # edited or ill-shaped index is a miss, built anew and rewritten
    index = read_entry(path, key, json.loads, _valid_index) if path else MISS
    if index is not MISS:
        return index
    index = build_index(root)
    if path:
        write_entry(path, key, json.dumps(index).encode())
    return index


def _valid_index(index) -> bool:
    """The shape :func:`build_index` gives: the graph a dict of lists of
    names, the registry and re-exports dicts, the packages a list."""
    return isinstance(index, dict) and isinstance(index.get("graph"), dict) and \
        all(isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
            for k, v in index["graph"].items()) and \
        isinstance(index.get("registry"), dict) and isinstance(index.get("reexports"), dict) \
        and isinstance(index.get("packages"), list)


def patched_index(index: dict, root: str, texts: dict, deleted=()) -> dict:
    """``index`` with the changed modules' edges (and re-exports) re-read
    from their new text, deleted modules removed."""
    deleted = set(deleted)
    graph = {m: v for m, v in index["graph"].items() if m not in deleted}
    packages = set(index["packages"]) - deleted
    reexports = {m: v for m, v in index["reexports"].items() if m not in deleted}
    changed = {m: t for m, t in texts.items() if _in_scope(m)}
    trees = {}
    for mod, text in changed.items():
        graph.setdefault(mod, [])
        if os.path.exists(os.path.join(root, *mod.split("."), "__init__.py")):
            packages.add(mod)
        try:
            trees[mod] = ast.parse(text)
        except SyntaxError:
            trees[mod] = None
    known = graph.__contains__
    for mod, tree in trees.items():
        if mod in packages and tree is not None:
            reexports[mod] = _reexports(tree, mod, known)
    for mod, tree in trees.items():
        graph[mod] = [] if tree is None else sorted(
            _imports(tree, mod, mod in packages, known, reexports))
    return {"graph": graph, "packages": sorted(packages), "reexports": reexports,
            "registry": patched_registry(index["registry"], changed, deleted)}


def closure(graph: dict, roots, packages=()) -> set:
    """The modules ``roots`` reach; a package's ``__init__`` is reached but
    not expanded (its re-exports are resolved by name where imported, and
    following all of them would make every module depend on every other)."""
    packages = set(packages)
    seen, todo = set(), [r for r in roots if r in graph]
    first = set(todo)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in packages and m not in first:
            continue
        todo.extend(graph.get(m, ()))
    return seen


# --------------------------------------------------------------- adapters
@dataclass
class AdapterInfo:
    """What the suite's adapter modules declare, read with ``ast``."""

    name: str
    short: str
    module: str  # passes.<module>
    paddle_modules: tuple = ()
    planner_family: bool = False
    roots: list = field(default_factory=list)
    pass_source: bool = False  # registered by a module, or a helper audited as a pass


def _const(node, consts):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_const(e, consts) for e in node.elts)
    return None


def suite_adapters(passes_dir: str | None = None) -> dict:
    """``{pass name: AdapterInfo}`` of ``passes/*.py`` (each module's ``ADAPTER``)."""
    passes_dir = passes_dir or str(PROJECT_ROOT / "passes")
    out = {}
    for path in sorted(Path(passes_dir).glob("*.py")):
        tree = ast.parse(path.read_text())
        consts, classes, adapter_cls = {}, {}, None
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name):
                tgt = node.targets[0].id
                if tgt == "ADAPTER" and isinstance(node.value, ast.Call) and \
                        isinstance(node.value.func, ast.Name):
                    adapter_cls = node.value.func.id
                else:
                    consts[tgt] = _const(node.value, consts)
            elif isinstance(node, ast.ClassDef):
                attrs = {}
                for st in node.body:
                    if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                            isinstance(st.targets[0], ast.Name):
                        attrs[st.targets[0].id] = _const(st.value, consts)
                classes[node.name] = attrs
        attrs = classes.get(adapter_cls)
        if not attrs or not attrs.get("name"):
            continue
        info = AdapterInfo(attrs["name"], attrs.get("short") or attrs["name"],
                           f"passes.{path.stem}", tuple(attrs.get("paddle_modules") or ()),
                           bool(attrs.get("planner_family")))
        out[info.name] = info
    return out


def patched_registry(registry: dict, changed: dict, deleted=()) -> dict:
    """``registry`` with the changed modules' registrations re-read."""
    gone = set(changed) | set(deleted)
    out = {n: [m for m in mods if m not in gone] for n, mods in registry.items()}
    for mod, text in changed.items():
        if _in_scope(mod):
            for name in _registered(text):
                out.setdefault(name, []).append(mod)
    return out


def adapter_roots(adapters: dict, registry: dict, installed: dict | None = None) -> None:
    """Fill each AdapterInfo's ``roots``: ``registry``'s modules of its pass,
    and ``installed``'s (the installed registry: a module that registered the
    pass and no longer does because the change deleted it or broke its
    syntax still ran the pass; its applications must be run, not skipped)."""
    from verify.selfcheck.vocabulary import EXTRA_PASSES  # stdlib-only at import

    for info in adapters.values():
        roots = list(registry.get(info.name, [])) + list((installed or {}).get(info.name, []))
        if info.name in EXTRA_PASSES:
            roots.append(EXTRA_PASSES[info.name][0])
        info.pass_source = bool(roots)  # the vocabulary audit knows its source
        roots += list(info.paddle_modules)
        info.roots = sorted(set(roots))


def planner_modules(index: dict) -> set:
    """The modules Paddle's planning code (:data:`PLANNER_PREFIXES`) reaches
    in the import graph: the planner family's selection for an application
    the executed-source table does not record."""
    graph = index["graph"]
    roots = {m for m in graph if m.startswith(PLANNER_PREFIXES)}
    return closure(graph, sorted(roots), index["packages"])


@dataclass
class Affected:
    passes: dict  # pass name -> sorted changed modules that select some case of it
    unmapped: list  # adapters without any Paddle root module or record (never affected)
    planner: list  # changed modules selecting the planner family
    planner_adapters: list  # planner-family adapters selected
    changed_modules: list
    pass_sources: dict  # pass name -> [changed modules that are its roots]
    audited: list = field(default_factory=list)  # affected passes with a pass source
    cases: dict = field(default_factory=dict)  # pass -> {case: [changed modules]}
    # "pass::case" -> changed modules it ran that no longer import (recorded)
    trace_broken: dict = field(default_factory=dict)
    how: dict = field(default_factory=dict)  # "pass::case" -> "executed" | "import graph"


def module_file(mod: str, root: str, texts: dict) -> str:
    """The path under site-packages of a module (``paddle/a/b.py`` or
    ``paddle/a/__init__.py``), as the executed-source table names it."""
    base = mod.replace(".", "/")
    if os.path.isfile(os.path.join(root, base, "__init__.py")):
        return base + "/__init__.py"
    return base + ".py"


def _installed_text(root: str, rel: str):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _baseline():
    try:
        with open(PROJECT_ROOT / "verify" / "baseline.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"entries": {}}


def affected(changed: dict, deleted=(), root: str | None = None,
             cache_dir: str | None = None, adapters: dict | None = None,
             executed: dict | None = None, pairs: dict | None = None,
             unimportable=()) -> Affected:
    """``changed``: ``{module: new text}``; which applications it affects.

    ``executed``: ``{"pass::case": {file: units}}`` (default: the table of
    ``executed.py`` recorded on the baseline's Paddle); ``pairs``: ``{pass:
    [case]}`` (default: the baseline's); ``unimportable``: changed modules
    that compile and still fail to import (run.py asks a child process),
    broken as a module that does not compile is."""
    from . import executed as executed_mod
    from .trace import ALL, changed_units

    root = root or installed_root()
    index = patched_index(cached_index(root, cache_dir), root, changed, deleted)
    graph = index["graph"]
    adapters = adapters if adapters is not None else suite_adapters()
    if executed is None or pairs is None:
        base = _baseline()
        if executed is None:
            executed = executed_mod.load(paddle_version=base.get("paddle"))
        if pairs is None:
            pairs = {}
            for k in base["entries"]:
                p, c = k.split("::", 1)
                pairs.setdefault(p, []).append(c)
    touched = set(changed) | set(deleted)
    base_index = cached_index(root, cache_dir)
    installed = base_index["registry"]
    adapter_roots(adapters, index["registry"], installed)

    # what each changed file changes: units (functions, <module>), ALL when it
    # no longer parses or is gone; None for a file the install does not have
    files, units, new_files = {}, {}, set()
    for m in sorted(touched):
        rel = module_file(m, root, changed)
        old = _installed_text(root, rel)
        files[m] = rel
        if old is None and m not in deleted:
            new_files.add(m)  # no application can have run it: the graph decides
            continue
        units[m] = {ALL} if m in unimportable else \
            changed_units(old, None if m in deleted else changed.get(m))
    broken_mods = {m for m, u in units.items() if ALL in u}

    def ran(trace: dict) -> list:
        out = []
        for m, u in units.items():
            got = trace.get(files[m])
            if got and (ALL in u or u & got):
                out.append(m)
        return out

    planner_graph = planner_modules(index) | planner_modules(base_index)
    fam_names = {i.name for i in adapters.values() if i.planner_family} | set(PLANNER_ADAPTERS)
    cases_out, how, trace_broken, unmapped, sources = {}, {}, {}, [], {}
    pass_level = {}
    for name in sorted(set(adapters) | set(PLANNER_ADAPTERS)):
        info = adapters.get(name)
        roots = info.roots if info else []
        graph_hit = set()
        if roots:
            graph_hit = closure(graph, roots, index["packages"]) & touched | \
                (set(roots) & set(deleted))
        if name in fam_names:
            graph_hit |= {m for m in touched if m.startswith(PLANNER_PREFIXES)
                          or m in planner_graph}
        recorded = {c: executed[f"{name}::{c}"] for c in pairs.get(name, [])
                    if f"{name}::{c}" in executed}
        if not roots and not recorded and name not in fam_names:
            unmapped.append(name)
            continue
        union = {}
        for t in recorded.values():
            for rel, us in t.items():
                union.setdefault(rel, set()).update(us)
        from_union = set(ran(union)) if recorded else set()
        # a new file: only the import graph can say who will run it
        new_hit = graph_hit & new_files
        mine = {}
        for c in pairs.get(name, []):
            app = f"{name}::{c}"
            if c in recorded:
                hit = set(ran(recorded[c])) | new_hit
                why = "executed"
                if set(ran(recorded[c])) & broken_mods:
                    trace_broken[app] = sorted(set(ran(recorded[c])) & broken_mods)
            else:
                hit = graph_hit | from_union
                why = "import graph"
            if hit:
                mine[c] = sorted(hit)
                how[app] = why
        if not pairs.get(name) and graph_hit:
            pass_level[name] = sorted(graph_hit)  # no case in the baseline to select
        if mine or name in pass_level:
            cases_out[name] = mine
            if info is not None:
                sources[name] = sorted(set(info.roots) & set(changed))
    passes = {n: sorted({m for ms in cs.values() for m in ms} | set(pass_level.get(n, ())))
              for n, cs in cases_out.items()}
    fam = sorted(n for n in passes if n in fam_names)
    planner = sorted({m for n in fam for m in passes[n]} |
                     {m for m in touched if m.startswith(PLANNER_PREFIXES)})
    audited = sorted(n for n in passes if n in adapters and adapters[n].pass_source)
    return Affected(passes, sorted(unmapped), planner, fam, sorted(touched), sources,
                    audited, cases_out, trace_broken, how)
