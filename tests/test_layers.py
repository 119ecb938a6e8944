"""The layers of the suite, from the import graph: every import of a module of
``verify/``, ``passes/`` or ``cases/`` goes to its own layer or one below, and
there is no import cycle (lazy imports inside functions count too).

Bottom to top (docs/architecture.md): the IR snapshot and the verdict
vocabulary; the checks, the value proof and the numeric runs; planning and the
program-dir format; cases and pass adapters; the engine; reports; tools."""
from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (layer, module prefixes); the longest matching prefix decides
LAYERS = [
    (0, ["verify", "verify.ir", "verify.verdicts"]),
    (1, ["verify.checks", "verify.value", "verify.numeric"]),
    (2, ["verify.plan"]),
    (3, ["cases", "passes", "verify.case_api"]),
    (4, ["verify.engine"]),
    (5, ["verify.report"]),
    (6, ["verify.repro", "verify.selfcheck", "verify.premerge", "verify.generate", "verify.cli",
         "verify.__main__"]),
]


def layer_of(module: str) -> int:
    best, layer = -1, None
    for rank, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, layer = len(p), rank
    if layer is None:
        raise AssertionError(f"module {module} is in no layer: add it to LAYERS")
    return layer


def modules(root: Path = ROOT) -> dict:
    """``{dotted module name: path}`` of the suite, tests and conftests left out."""
    out = {}
    for top in ("verify", "passes", "cases"):
        for dirpath, _, files in os.walk(root / top):
            for f in files:
                if f.endswith(".py") and not f.startswith("test_") and f != "conftest.py":
                    path = Path(dirpath) / f
                    name = ".".join(path.relative_to(root).with_suffix("").parts)
                    out[name.removesuffix(".__init__")] = path
    return out


def imports(name: str, path: Path, mods: dict) -> set:
    """The suite's modules ``name`` imports, anywhere in the file."""
    out = set()
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            cands = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            cands = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for c in cands:
            while c and c not in mods:
                c = c.rpartition(".")[0]
            if c and c != name:
                out.add(c)
    return out


def graph(root: Path = ROOT) -> dict:
    mods = modules(root)
    return {m: imports(m, p, mods) for m, p in mods.items()}


def upward(g: dict) -> list:
    return sorted(f"{m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})"
                  for m, deps in g.items() for d in deps if layer_of(d) > layer_of(m))


def cycles(g: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer():
    for m in modules():
        layer_of(m)


def test_imports_go_only_downward():
    assert upward(graph()) == []


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_checker_sees_an_upward_import_and_a_cycle(tmp_path):
    """A tree with a check importing the engine, and two modules importing
    each other, is caught on both counts."""
    for rel, text in {"verify/__init__.py": "", "verify/checks/__init__.py": "",
                      "verify/checks/c.py": "from verify.engine import e\n",
                      "verify/engine/__init__.py": "",
                      "verify/engine/e.py": "def f():\n    from verify.engine import g\n",
                      "verify/engine/g.py": "from . import e\n",
                      "passes/__init__.py": "", "cases/__init__.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    g = graph(tmp_path)
    assert upward(g) == ["verify.checks.c (layer 1) imports verify.engine (layer 4)",
                         "verify.checks.c (layer 1) imports verify.engine.e (layer 4)"]
    assert cycles(g) == [["verify.engine.e", "verify.engine.g"]]
