"""The matcher-vocabulary audit: every op type, slot and attr name a pass's
matcher reads, checked against what the installed Paddle defines and what
its planner emits.

``python -m verify vocabulary [--pass P] [--pass-file F] [--write-baseline]``

A pass that matches on a name no op has (``c_allreduce_sum`` after 3.3.1
removed it, slot ``X`` of ``all_reduce`` whose slot is ``x``, attr
``trans_x`` of ``pd_op.matmul_grad`` whose attr is ``transpose_x``) silently
matches nothing, or raises on the first op it reads.  This finds those names
from the pass's *source*, without running it:

* the module is parsed with ``ast``; in each function, a receiver (``op``,
  ``pre_op``, ``matmul_grad_op``) is bound to the op types it is compared
  with (``op.type == "x"``, ``op.type in [...]`` or a module-level list of
  names, ``op.name() == "pd_op.x"``; inside ``a and b`` / ``a or b`` the
  comparisons of earlier operands guard the later ones), to the types of a
  receiver assigned from the same expression (``block.ops[i - 1]`` and
  ``block.ops[idx - 1]``), or, failing both, to the op type its name spells
  (``allreduce_op`` -> ``all_reduce``: a guess, so a finding that rests
  only on it is *advisory*: reported, never gating), or to the op type a
  rewrite builds (``op = block.append_op(type="x")``); a positive test in an ``if`` types
  only that branch, ``if pred(op):`` leaves ``op`` untyped there, and
  ``"c_" in op.type`` (a substring test) types nothing;
* the names it reads are ``.input("S")``, ``.output("S")``, ``.attr("a")``,
  ``.has_attr("a")`` (also through ``.desc``), ``.attrs()["a"]`` and
  ``.attrs().get("a")``, and the compared op types;
* helper functions the module imports from Paddle and calls
  (``is_data_parallel_reduce_op`` ...) are parsed too, one level deep, and
  their reads are reported where they are defined;
* legacy names are checked against ``OpProtoHolder`` (without the kernel-less
  types this suite itself registers, ``verify/ir/legacy_ir.py``), PIR ones
  against the op classes the installed Paddle's dialect headers declare
  (``paddle/include/.../pd_op.h``: each op's ``name()`` and the attributes
  of its ``Build``);
* legacy op types, and slots and attrs of those types, are also checked
  against the ops of the programs Paddle's Engine planned for the
  ``engine_planned`` cases (``unplanned``: the planner never emits them).

A read whose receiver is bound to several types is a finding only when none
of them defines the name; a read whose receiver is bound to none is one only
when no op at all defines it (an attr Paddle's Python sets on ops as a
marker, ``set_bool_attr("master_grad_cast", ...)``, counts as defined).  Findings are compared with
``verify/vocabulary_baseline.json`` (reviewed, with reasons): the command
exits 0 when they are the same, 1 when a finding is new (advisory ones,
typed only by a variable's name, are listed and never count) or one went away,
2 on bad input, as ``python -m verify run`` does.
"""
from __future__ import annotations

import argparse
import ast
import functools
import glob
import importlib.util
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field

BASELINE_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "vocabulary_baseline.json")
SCHEMA = "vocabulary-baseline/1"

# Passes the suite knows besides its adapters (passes/): the legacy
# auto-parallel pipeline of issue 14 and the PIR helper the PIR overlap uses.
# name -> (module under paddle, function or None for the whole module)
EXTRA_PASSES = {
    "auto_parallel_sequence_parallel_optimization":
        ("paddle.distributed.passes.auto_parallel_sequence_parallel_optimization", None),
    "auto_parallel_supplement_explicit_dependencies":
        ("paddle.distributed.passes.auto_parallel_supplement_explicit_dependencies", None),
    "auto_parallel_data_parallel_optimization":
        ("paddle.distributed.passes.auto_parallel_data_parallel_optimization", None),
    "auto_parallel_grad_clip": ("paddle.distributed.passes.auto_parallel_grad_clip", None),
    "auto_parallel_sharding": ("paddle.distributed.passes.auto_parallel_sharding", None),
    "fuse_all_reduce": ("paddle.distributed.passes.fuse_all_reduce", None),
    "_pir_split_matmul_grad_to_matmul":
        ("paddle.distributed.passes.pass_utils", "_pir_split_matmul_grad_to_matmul"),
    "auto_parallel_gradient_merge_pass":
        ("paddle.distributed.passes.auto_parallel_gradient_merge", None),
    "auto_parallel_c_embedding_pass":
        ("paddle.distributed.passes.auto_parallel_c_embedding", None),
}

_SLOT_CALLS = {"input": "input", "output": "output"}
_ATTR_CALLS = {"attr", "has_attr"}
_PIR_HINTS = {"operand_source", "operands_source", "result", "results", "attrs",
              "get_defining_op", "all_used_ops", "operand"}


@dataclass
class Read:
    """One name a matcher reads."""

    kind: str  # op_type | input | output | attr
    name: str
    ir: str  # legacy | pir
    types: tuple  # op types the receiver is bound to (() unknown)
    binding: str  # how: compared | same expression as X | named | none
    file: str
    line: int
    function: str

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} ({self.function})"


@dataclass
class Finding:
    pass_name: str
    kind: str  # op_type | input | output | attr
    name: str
    op_type: str  # the op type it is read on ("" for op_type findings / unbound)
    problem: str  # undefined | unplanned
    message: str
    where: list = field(default_factory=list)
    # every read behind it was typed only by its receiver's name
    # (``allreduce_op``): a guess, reported but never gating
    advisory: bool = False

    @property
    def key(self) -> str:
        return f"{self.pass_name}::{self.problem}::{self.kind}::{self.op_type}::{self.name}"

    def to_dict(self) -> dict:
        return {**asdict(self), "key": self.key}

    def check_result(self):
        """The finding as a suite verdict: the matcher cannot match where it
        must, so the pass is NOT_APPLIED; the missing name is the
        counterexample."""
        from verify.verdicts import CheckResult, Verdict

        return CheckResult("contract", "matcher vocabulary", None, Verdict.NOT_APPLIED,
                           f"{self.pass_name}: {self.message}",
                           counterexample={"missing": self.name, "kind": self.kind,
                                           "op_type": self.op_type or None,
                                           "problem": self.problem, "where": self.where})


# ---------------------------------------------------------------------------
# what the installed Paddle defines
# ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def legacy_ops() -> dict:
    """{op type: {"input": set, "output": set, "attr": set}} from OpProtoHolder,
    without the kernel-less types this suite registers itself."""
    from verify.ir.legacy_ir import LEGACY_ONLY_OPS, paddle_module

    paddle_module()
    from paddle.base import framework

    out = {}
    for t, proto in framework.OpProtoHolder.instance().op_proto_map.items():
        if t in LEGACY_ONLY_OPS:
            continue
        out[t] = {"input": {i.name for i in proto.inputs},
                  "output": {o.name for o in proto.outputs},
                  "attr": {a.name for a in proto.attrs}}
    # grad ops have no proto: their slots follow from the forward op's
    # (Paddle's default grad maker: forward inputs, outputs and output
    # grads in; input grads out); other proto-less ops: names unknown
    from paddle.base import core

    for t in core.get_all_op_names():
        if t in out or t in LEGACY_ONLY_OPS:
            continue
        fwd = out.get(t[:-len("_grad")]) if t.endswith("_grad") else None
        if fwd is None:
            out[t] = None
            continue
        out[t] = {"input": fwd["input"] | fwd["output"] | {o + "@GRAD" for o in fwd["output"]},
                  "output": {i + "@GRAD" for i in fwd["input"]},
                  "attr": set(fwd["attr"])}
    return out


# PIR attributes every op may carry (set by the framework, not the op's own)
PIR_COMMON_ATTRS = {"op_role", "chunk_id", "op_dist_attr", "op_callstack", "struct_name",
                    "is_persistable", "stop_gradient", "persistable", "op_namescope",
                    "execution_stream", "scheduling_priority", "force_record_event",
                    "event_to_record", "events_to_wait", "origin_id", "name", "kernel_key",
                    "kernel_name", "op_name", "is_inplace"}


@functools.lru_cache(maxsize=1)
def pir_ops() -> dict:
    """{PIR op name: set of attribute names or None (unknown)} from the
    installed dialect headers: an op's attributes are the non-``Value``
    parameters of its first ``Build``, kept where their number equals the
    declared ``attributes_num``."""
    from verify.ir.legacy_ir import paddle_module

    root = os.path.join(os.path.dirname(paddle_module().__file__), "include", "paddle",
                        "fluid", "pir", "dialect")
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "*.h"), recursive=True)):
        with open(path, errors="replace") as f:
            text = f.read()
        if "static const char *name()" not in text:
            continue
        chunks = text.split('static const char *name() { return "')[1:]
        for chunk in chunks:
            name = chunk[:chunk.index('"')]
            out.setdefault(name, None)
            head = chunk[:chunk.find("static const char *name()")]  # this class only
            num = re.search(r"attributes_num = (\d+);", head)
            b = head.find("static void Build(pir::Builder &builder, pir::OperationArgument "
                          "&argument")
            if num is None or b < 0:
                continue
            params = head[b:head.find(");", b)].split("&argument", 1)[1]
            if "pir::AttributeMap" in params:
                continue
            attrs = set()
            for p in _split_params(params):
                if not p or "pir::Value" in p:
                    continue
                attrs.add(re.sub(r"=.*$", "", p).strip().split()[-1].lstrip("&*"))
            if len(attrs) == int(num.group(1)):
                out[name] = attrs
    return out


def _split_params(params: str) -> list:
    """Top-level comma split of a C++ parameter list."""
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch in "<({":
            depth += 1
        elif ch in ">)}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


_SETTER = re.compile(r"""(?:_set_attr|set_[a-z0-9_]*attr)\(\s*['"]([A-Za-z0-9_@]+)['"]""")


@functools.lru_cache(maxsize=1)
def marker_attrs() -> frozenset:
    """Attr names Paddle's own Python sets on ops (``op._set_attr("x", ...)``,
    ``op.set_bool_attr("x", ...)``): markers such as ``master_grad_cast``
    that no op declares but a pass may probe on any op."""
    from verify.ir.legacy_ir import paddle_module

    root = os.path.dirname(paddle_module().__file__)
    out = set()
    for sub in ("distributed", "static", "optimizer", "base", "amp", "incubate"):
        for path in glob.glob(os.path.join(root, sub, "**", "*.py"), recursive=True):
            with open(path, errors="replace") as f:
                text = f.read()
            if "attr(" in text:
                out.update(_SETTER.findall(text))
    return frozenset(out)


def planned_vocabulary() -> dict:
    """{op type: {"input": set, "output": set, "attr": set}} of the ops in the
    main and startup programs Paddle's Engine planned for the Engine-planned
    cases (engine_planned, engine_sp; every rank)."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    import cases
    from cases import engine_planned

    out = {}
    for case in cases.all_cases().values():
        if case.builder is not engine_planned.build:
            continue
        folder = engine_planned.planned_dir(case.params)
        for r in case.ranks:
            for prog in ("main", "startup"):
                p = paddle.static.Program.parse_from_string(
                    (folder / f"rank{r}" / f"{prog}.pdmodel").read_bytes())
                for op in p.global_block().ops:
                    v = out.setdefault(op.type, {"input": set(), "output": set(),
                                                 "attr": set()})
                    v["input"].update(op.desc.input_names())
                    v["output"].update(op.desc.output_names())
                    v["attr"].update(op.desc.attr_names())
    return out


# ---------------------------------------------------------------------------
# what a pass reads (ast)
# ---------------------------------------------------------------------------
def _const_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


def _receiver(node) -> str | None:
    """The op a call reads from: ``op`` of ``op.x``, ``op.desc.x``,
    ``block.ops[i].x`` (as its source text)."""
    if isinstance(node, ast.Attribute) and node.attr == "desc":
        node = node.value
    if isinstance(node, (ast.Name, ast.Subscript, ast.Attribute)):
        return ast.unparse(node)
    return None


def _norm_expr(node) -> str:
    """An expression with its plain names other than the first replaced by
    ``_`` (``block.ops[i - 1]`` and ``block.ops[idx - 1]`` alike)."""
    class N(ast.NodeTransformer):
        def visit_Subscript(self, sub):
            sub.value = self.visit(sub.value)
            sub.slice = _Blank().visit(sub.slice)
            return sub

    class _Blank(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.copy_location(ast.Name("_", n.ctx), n)

    import copy

    return ast.unparse(N().visit(copy.deepcopy(node)))


_UNKNOWN = object()  # a guard saying: the receiver passed an opaque predicate


class _FunctionReads(ast.NodeVisitor):
    """Reads and type bindings of one function body (nested functions are
    folded in: they see the same receivers).  A ``for n in ...`` loop opens a
    new binding of ``n``: comparisons in one loop do not type another's."""

    def __init__(self, module, fname, path):
        self.module, self.fname, self.path = module, fname, path
        self.scopes = {}  # receiver -> stack of sets of op types
        self.all_types = {}  # receiver -> union of every binding
        self.guarded = []  # stack of {receiver: {types} or _UNKNOWN}
        self.reads = []  # (kind, name, receiver, line, guard, binding set)
        self.assigns = {}  # receiver -> normalized RHS (relative positions only)
        self.op_types = []  # (name, ir, line)
        self.pir = fname.startswith("_pir") or "_pir_" in fname
        self.calls = set()  # names of functions called
        self.body_only = set()  # ids of positive if-test comparisons

    def _types(self, recv) -> set:
        stack = self.scopes.setdefault(recv, [set()])
        return stack[-1]

    def visit_For(self, node):
        self.visit(node.iter)
        name = node.target.id if isinstance(node.target, ast.Name) else None
        if name is not None:
            self.scopes.setdefault(name, [set()]).append(set())
        else:
            self.visit(node.target)
        for child in node.body:
            self.visit(child)
        if name is not None:
            self.all_types.setdefault(name, set()).update(self.scopes[name].pop())
        for child in node.orelse:
            self.visit(child)

    def visit_If(self, node):
        frame = {}
        tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
        for t in tests:  # if op.type == "x" [or ...]: the body reads an x
            c = self._comparison(t)
            if c is not None and c[3]:
                frame.setdefault(c[0], set()).update(c[1])
                self.body_only.add(id(t))
        self.visit(node.test)
        typed = set()
        for n in ast.walk(node.test):
            c = self._comparison(n)
            if c is not None:
                typed.add(c[0])
        for n in ast.walk(node.test):  # if pred(op): op's type is the predicate's
            if isinstance(n, ast.Call) and not isinstance(n.func, ast.Attribute):
                for arg in n.args:
                    r = _receiver(arg)
                    if r is not None and r not in typed:
                        frame[r] = _UNKNOWN
        self.guarded.append(frame)
        for child in node.body:
            self.visit(child)
        self.guarded.pop()
        for child in node.orelse:
            self.visit(child)

    # -- type comparisons ----------------------------------------------------
    def _type_subject(self, node):
        """``op`` for ``op.type`` / ``op.type()`` / ``op.name()``; with the IR."""
        if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute):
            if node.func.attr == "name":
                return _receiver(node.func.value), "pir"
            if node.func.attr == "type":
                return _receiver(node.func.value), "legacy"
        if isinstance(node, ast.Attribute) and node.attr == "type":
            return _receiver(node.value), "legacy"
        return None, None

    def _strings(self, node):
        s = _const_str(node)
        if s is not None:
            return [s]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [x for e in node.elts for x in self._strings(e)]
        if isinstance(node, ast.Name):
            return list(self.module.constant(node.id))
        return []

    def _comparison(self, node):
        """(receiver, {types}, ir, positive) of ``op.type ==/in ...``; else None."""
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            return None
        left, right, op = node.left, node.comparators[0], node.ops[0]
        recv, ir = self._type_subject(left)
        other = right
        if recv is None:
            recv, ir = self._type_subject(right)
            other = left
        if recv is None:
            return None
        if other is left and isinstance(op, (ast.In, ast.NotIn)):
            return None  # "c_" in op.type: a substring test, not a type
        names = self._strings(other)
        if not names:
            return None
        if ir == "pir" and not any("." in n for n in names):
            return None  # .name() of something that is not an op
        positive = isinstance(op, (ast.Eq, ast.In, ast.Is))
        return recv, set(names), ir, positive

    def visit_Compare(self, node):
        c = self._comparison(node)
        if c is not None:
            recv, names, ir, _ = c
            if id(node) not in self.body_only:  # else it types only its if's body
                self._types(recv).update(names)
            self.all_types.setdefault(recv, set()).update(names)
            if ir == "pir":
                self.pir = True
            for n in sorted(names):
                self.op_types.append((n, ir, node.lineno))
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        frame = {}
        self.guarded.append(frame)
        for value in node.values:
            self.visit(value)
            c = self._comparison(value)
            if c is not None:
                recv, names, _, positive = c
                # and: a positive test guards what follows; or: a negative one
                if positive == isinstance(node.op, ast.And):
                    frame.setdefault(recv, set()).update(names)
        self.guarded.pop()

    # -- reads -----------------------------------------------------------------
    def _guard(self, recv):
        for frame in reversed(self.guarded):
            if recv in frame:
                return frame[recv]
        return None

    def _read(self, kind, name, recv, line):
        self.reads.append((kind, name, recv, line, self._guard(recv), self._types(recv)))

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Name):
            self.calls.add(f.id)
        if isinstance(f, ast.Attribute):
            if f.attr in _PIR_HINTS:
                self.pir = self.pir or f.attr in ("operand_source", "result", "results",
                                                  "operands_source")
            arg = _const_str(node.args[0]) if node.args else None
            recv = _receiver(f.value)
            if arg is not None and recv is not None:
                kind = _SLOT_CALLS.get(f.attr) or ("attr" if f.attr in _ATTR_CALLS else None)
                if kind is not None:
                    self._read(kind, arg, recv, node.lineno)
            # op.attrs().get("a")
            if f.attr == "get" and arg is not None and isinstance(f.value, ast.Call) \
                    and isinstance(f.value.func, ast.Attribute) and f.value.func.attr == "attrs":
                recv = _receiver(f.value.func.value)
                self.pir = True
                if recv is not None:
                    self._read("attr", arg, recv, node.lineno)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        # op.attrs()["a"]
        v = node.value
        key = _const_str(node.slice)
        if key is not None and isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr == "attrs":
            recv = _receiver(v.func.value)
            self.pir = True
            if recv is not None:
                self._read("attr", key, recv, node.lineno)
        self.generic_visit(node)

    def visit_Assign(self, node):
        built = _built_type(node.value)
        if built is not None and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            # op = block.append_op(type="x", ...): the code says its type
            recv = node.targets[0].id
            self._types(recv).add(built)
            self.all_types.setdefault(recv, set()).add(built)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                isinstance(node.value, ast.Subscript) and \
                any(isinstance(n, ast.BinOp) for n in ast.walk(node.value.slice)):
            self.assigns[node.targets[0].id] = _norm_expr(node.value)
        self.generic_visit(node)


_BUILD_CALLS = {"append_op", "_insert_op", "_insert_op_without_sync", "_prepend_op"}


def _built_type(node):
    """``"x"`` for ``block.append_op(type="x", ...)`` (and the insert/prepend
    variants): the op type a rewrite builds."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _BUILD_CALLS:
        for kw in node.keywords:
            if kw.arg == "type":
                return _const_str(kw.value)
    return None


@dataclass
class _Module:
    path: str
    tree: ast.Module
    constants: dict  # module-level NAME -> tuple of strings
    imports: dict  # local name -> (module, name)
    functions: dict  # name -> FunctionDef (module level and methods, by name)
    registered: list  # pass names of @register_pass

    def constant(self, name) -> tuple:
        """A module-level list of strings, here or imported from Paddle."""
        if name in self.constants:
            return self.constants[name]
        modname, real = self.imports.get(name, ("", ""))
        path = _module_path(modname) if modname.startswith("paddle") else None
        return _parse(path, modname.rsplit(".", 1)[0]).constants.get(real, ()) if path else ()


def _parse(path: str, package: str = "") -> _Module:
    with open(path) as f:
        return _parse_text(f.read(), path, package)


@functools.lru_cache(maxsize=64)
def _parse_text(text: str, path: str, package: str) -> _Module:
    tree = ast.parse(text, filename=path)
    constants, imports, functions, registered = {}, {}, {}, []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple, ast.Set)):
            vals = [_const_str(e) for e in node.value.elts]
            if vals and all(v is not None for v in vals):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        constants[t.id] = tuple(vals)
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([mod] if mod else []))
            for a in node.names:
                imports[a.asname or a.name] = (mod, a.name)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "register_pass" \
                        and d.args and _const_str(d.args[0]):
                    registered.append(_const_str(d.args[0]))
    return _Module(path, tree, constants, imports, functions, registered)


def _module_path(modname: str) -> str | None:
    try:
        spec = importlib.util.find_spec(modname)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec and spec.origin and spec.origin.endswith(".py") else None


def _top_functions(tree) -> list:
    """Functions not nested in another function (methods included)."""
    out = []

    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not inside:
                    out.append(child)
                walk(child, True)
            else:
                walk(child, inside)
    walk(tree, False)
    return out


def _function_reads(module: _Module, fn) -> _FunctionReads:
    v = _FunctionReads(module, fn.name, module.path)
    v.visit(fn)
    return v


def _op_names(ir: str) -> dict:
    return legacy_ops() if ir == "legacy" else pir_ops()


def _named_type(recv: str, ir: str):
    """The op types a receiver's name spells (``allreduce_op`` -> all_reduce)."""
    m = re.fullmatch(r"(\w+?)_op", recv)
    if not m:
        return ()
    want = m.group(1).replace("_", "")
    out = []
    for t in _op_names(ir):
        base = t.split(".", 1)[1] if ir == "pir" and "." in t else t
        # matmul_grad_op names a matmul_grad or a matmul_v2_grad
        if base.replace("_", "") == want or base.replace("_v2", "").replace("_", "") == want:
            out.append(t)
    return tuple(sorted(out))


def pass_reads(path: str, function: str | None = None, package: str = "") -> list:
    """Every :class:`Read` of the module at ``path`` (or of one function),
    with the helpers it imports from Paddle and calls, one level deep."""
    module = _parse(path, package)
    if function is not None:
        fns = [module.functions[function]]
    else:
        fns = _top_functions(module.tree)
    reads = []
    visitors = [_function_reads(module, fn) for fn in fns]
    # receivers assigned from the same expression share their types
    by_expr = {}
    for v in visitors:
        for recv, expr in v.assigns.items():
            by_expr.setdefault(expr, set()).update(v.all_types.get(recv, ()))
            by_expr[expr].update(*v.scopes.get(recv, [set()]))
    called = set()
    for v in visitors:
        reads += _reads_of(v, by_expr)
        called |= v.calls
    # imported Paddle helpers the pass calls: one level deep
    for name in sorted(called):
        if name not in module.imports or name in module.functions:
            continue
        modname, fname = module.imports[name]
        if not modname.startswith("paddle"):
            continue
        hpath = _module_path(modname)
        if hpath is None:
            continue
        hmod = _parse(hpath, modname.rsplit(".", 1)[0])
        fn = hmod.functions.get(fname)
        if fn is None:
            continue
        reads += _reads_of(_function_reads(hmod, fn), {})
    return reads


def _reads_of(v: _FunctionReads, by_expr: dict) -> list:
    ir = "pir" if v.pir else "legacy"
    out = [Read("op_type", n, i, (), "compared", v.path, line, v.fname)
           for n, i, line in v.op_types]
    for kind, name, recv, line, guard, bound in v.reads:
        expr = v.assigns.get(recv)
        if guard is _UNKNOWN:
            types, how = (), "an opaque predicate"
        elif guard:
            types, how = guard, "compared"
        elif bound:
            types, how = bound, "compared"
        elif expr is not None and by_expr.get(expr):
            types, how = by_expr[expr], f"same expression as {expr}"
        else:
            named = _named_type(recv, ir)
            types, how = (named, "named") if named else ((), "none")
        out.append(Read(kind, name, ir, tuple(sorted(types)), how, v.path, line, v.fname))
    return out


# ---------------------------------------------------------------------------
# the audit
# ---------------------------------------------------------------------------
def audit_reads(pass_name: str, reads: list, planned: dict | None) -> list:
    """Findings of ``reads`` (deduplicated by key, every place listed)."""
    found = {}

    def add(kind, name, op_type, problem, message, read):
        guess = read.binding == "named"  # typed from a variable's name, not the code
        f = Finding(pass_name, kind, name, op_type, problem, message, advisory=guess)
        f = found.setdefault(f.key, f)
        f.advisory = f.advisory and guess
        if read.where not in f.where:
            f.where.append(read.where)

    for r in reads:
        defined = _op_names(r.ir)
        ir_word = "PIR" if r.ir == "pir" else "legacy"
        if r.kind == "op_type":
            if r.name not in defined:
                add("op_type", r.name, "", "undefined",
                    f"no {ir_word} op type {r.name!r} is defined by the installed Paddle", r)
            elif r.ir == "legacy" and planned and r.name not in planned \
                    and _communicates(r.name):
                add("op_type", r.name, "", "unplanned",
                    f"collective {r.name!r} is in no program the Engine planned "
                    f"(it emits {', '.join(sorted(t for t in planned if _communicates(t)))})",
                    r)
            continue
        if r.ir == "pir" and r.kind != "attr":
            continue
        known = [t for t in r.types if t in defined]
        if r.types and not known:
            t = "|".join(r.types)
            add(r.kind, r.name, t, "undefined",
                f"{r.kind} {r.name!r} is read from {t}, which no {ir_word} op defines "
                f"(receiver bound by: {r.binding})", r)
            continue
        vocab = [defined[t] for t in known]
        if not known or any(v is None for v in vocab):
            # unbound (or a type whose names are unknown): any op will do,
            # and an attr Paddle's Python sets on ops as a marker is known
            if r.kind == "attr" and r.name in marker_attrs():
                continue
            if r.ir == "legacy" and not any(v is not None and r.name in v[r.kind]
                                            for v in defined.values()):
                add(r.kind, r.name, "", "undefined",
                    f"no legacy op has {r.kind} {r.name!r}", r)
            if r.ir == "pir" and r.name not in PIR_COMMON_ATTRS and \
                    not any(r.name in (a or ()) for a in defined.values()):
                add(r.kind, r.name, "", "undefined", f"no PIR op has attr {r.name!r}", r)
            continue
        if r.ir == "legacy":
            if not any(r.name in v[r.kind] for v in vocab):
                have = sorted(set().union(*(v[r.kind] for v in vocab)))
                add(r.kind, r.name, "|".join(known), "undefined",
                    f"{'|'.join(known)} has no {r.kind} {r.name!r} "
                    f"({r.kind}s: {', '.join(have)}; receiver bound by: {r.binding})", r)
            elif planned:
                seen = [t for t in known if t in planned]
                if seen and not any(r.name in planned[t][r.kind] for t in seen):
                    add(r.kind, r.name, "|".join(seen), "unplanned",
                        f"{r.kind} {r.name!r} of {'|'.join(seen)} is on no op the "
                        "Engine planned", r)
        elif r.name not in PIR_COMMON_ATTRS and not any(r.name in v for v in vocab):
            add("attr", r.name, "|".join(known), "undefined",
                f"{'|'.join(known)} has no attr {r.name!r} (attrs: "
                f"{', '.join(sorted(set().union(*vocab)))}; receiver bound by: "
                f"{r.binding})", r)
    return list(found.values())


def _communicates(op_type: str) -> bool:
    """A legacy op type that talks over a ring (its proto has ``ring_id``):
    the planner's spelling of communication, which a matcher must follow.
    Other op types (optimizers, casts, clips) come with the user's model,
    not the planner, so their absence from the planned programs says
    nothing about the pass."""
    v = legacy_ops().get(op_type)
    return v is not None and "ring_id" in v["attr"]


def known_passes() -> dict:
    """{pass name: (source path, function or None, package)} for every pass
    the suite knows: its adapters' and :data:`EXTRA_PASSES`."""
    import passes

    out = {}
    for name in passes.adapters():
        if name in EXTRA_PASSES:
            continue
        modname = f"paddle.distributed.passes.{name}"
        path = _module_path(modname)
        if path is None:  # not one Paddle pass (engine_pipeline): its stages are audited
            continue
        out[name] = (path, None, "paddle.distributed.passes")
    for name, (modname, fn) in EXTRA_PASSES.items():
        out[name] = (_module_path(modname), fn, modname.rsplit(".", 1)[0])
    return out


def audit(pass_name: str, path: str, function=None, package="paddle.distributed.passes",
          planned=None) -> list:
    return audit_reads(pass_name, pass_reads(path, function, package), planned)


def registered_names(path: str) -> list:
    """Pass names a source file registers (``@register_pass("...")``)."""
    return _parse(path).registered


def load_baseline(path: str | None = None) -> dict:
    path = path or BASELINE_PATH
    if not os.path.exists(path):
        return {"schema": SCHEMA, "findings": {}}
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a {SCHEMA} file")
    return data


def compare(findings: list, baseline: dict, pass_names) -> tuple:
    """(new findings, keys of baseline findings that went away) for the
    given passes.  New findings are only those on op types inferred from
    the code (compared, built, same expression); an advisory one (typed by
    a variable's name) never is: :func:`advisory_new` lists them."""
    expected = {k for k, v in baseline.get("findings", {}).items()
                if v["pass"] in pass_names}
    got = {f.key for f in findings}
    return [f for f in findings if f.key not in expected and not f.advisory], \
        sorted(expected - got)


def advisory_new(findings: list, baseline: dict) -> list:
    """Advisory findings not in the baseline: reported, not gating."""
    known = baseline.get("findings", {})
    return [f for f in findings if f.advisory and f.key not in known]


def render_table(findings: list) -> str:
    rows = [("pass", "problem", "kind", "op type", "name", "where")]
    for f in findings:
        rows.append((f.pass_name, f.problem, f.kind, f.op_type or "-", f.name,
                     f.where[0] + (f" +{len(f.where) - 1}" if len(f.where) > 1 else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _parser():
    p = argparse.ArgumentParser(prog="python -m verify vocabulary",
                                description="Audit the names each pass's matcher reads.")
    p.add_argument("--pass", dest="passes", action="append", default=[], metavar="NAME",
                   help="pass name (repeatable; default every pass the suite knows)")
    p.add_argument("--pass-file", metavar="PATH",
                   help="audit this pass source file (as it sits in Paddle's tree) "
                        "instead of the installed module of the pass it registers")
    p.add_argument("--no-planned", action="store_true",
                   help="skip the check against the Engine-planned programs")
    p.add_argument("--json", action="store_true", help="findings as JSON")
    p.add_argument("--write-baseline", action="store_true",
                   help=f"rewrite {os.path.basename(BASELINE_PATH)} with today's findings "
                        "(reasons of kept entries are kept)")
    return p


def main(argv=None, out=None) -> int:
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    start = time.perf_counter()
    table = known_passes()
    targets = {}
    if args.pass_file:
        path = os.path.abspath(args.pass_file)
        if not os.path.isfile(path):
            print(f"error: pass file {path} does not exist", file=sys.stderr)
            return 2
        try:
            names = registered_names(path)
        except SyntaxError as exc:
            print(f"error: pass file {path} does not parse: {exc}", file=sys.stderr)
            return 2
        if not names:
            print(f"error: pass file {path} registers no pass (no @register_pass)",
                  file=sys.stderr)
            return 2
        for n in names:
            targets[n] = (path, None, "paddle.distributed.passes")
    for n in args.passes:
        hit = [k for k in table if n in (k, k.removeprefix("auto_parallel_"))]
        if not hit:
            import passes

            try:
                hit = [passes.get(n).name]
            except KeyError:
                print(f"error: unknown pass {n!r}; known: {', '.join(table)}", file=sys.stderr)
                return 2
        if hit[0] not in targets:
            targets[hit[0]] = table[hit[0]]
    if not targets:
        targets = table
    planned = None
    if not args.no_planned:
        try:
            planned = planned_vocabulary()
        except Exception as exc:  # no planner here: say so, audit the rest
            print(f"note: Engine-planned programs unavailable ({exc}); "
                  "only definitions checked", file=out)
    findings = []
    for name, (path, fn, pkg) in targets.items():
        if path is None:
            print(f"error: the installed Paddle has no source for {name}", file=sys.stderr)
            return 2
        findings += audit(name, path, fn, pkg, planned)
    base = load_baseline()
    if args.write_baseline:
        keep = {k: v for k, v in base.get("findings", {}).items() if v["pass"] not in targets}
        for f in findings:
            old = base.get("findings", {}).get(f.key, {})
            keep[f.key] = {"pass": f.pass_name, "message": f.message,
                           "reason": old.get("reason", "")}
        with open(BASELINE_PATH, "w") as fh:
            json.dump({"schema": SCHEMA, "findings": keep}, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"wrote {BASELINE_PATH} ({len(keep)} findings)", file=out)
        return 0
    new, gone = compare(findings, base, set(targets))
    advisory = advisory_new(findings, base)
    if args.json:
        json.dump({"findings": [f.to_dict() for f in findings],
                   "new": [f.key for f in new], "gone": gone,
                   "advisory": [f.key for f in advisory]}, out, indent=1)
        out.write("\n")
    else:
        print(render_table(findings) if findings else "no findings", file=out)
        for f in findings:
            print(f"  {f.key}: {f.message}", file=out)
        for f in new:
            print(f"NEW FINDING: {f.key}: {f.message} at {', '.join(f.where)}", file=out)
        for f in advisory:
            print(f"advisory (typed by a variable's name, not gating): {f.key}: "
                  f"{f.message} at {', '.join(f.where)}", file=out)
        for k in gone:
            print(f"FIXED (update {os.path.basename(BASELINE_PATH)}): {k}", file=out)
        print(f"{len(targets)} passes, {len(findings)} findings "
              f"({len(findings) - len(new)} in the baseline, {len(new)} new, "
              f"{len(gone)} gone) in {time.perf_counter() - start:.1f}s", file=out)
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
