"""Paddle's own definition of an op type: its input slots and its attrs with
their defaults, as plain data (:class:`OpDef`).

The read-set check (``verify/value/read_sets.py``) compares an op of a
snapshot with its row's declaration and with this definition: an attr may
go undeclared only while it holds its definition's default.  Paddle is
imported lazily, once, and every definition is cached in-process; the
check itself takes the definitions as data, so it runs on hand-written
snapshots.

Where they come from:
  * a legacy op type (``matmul_v2``): its registered ``OpProto`` (input
    slots; attrs, the ``extra`` ones included) with the defaults of
    ``core.get_op_attrs_default_value`` and ``core.get_op_extra_attrs``;
    an attr that has no default (``cast``'s ``out_dtype``) maps to
    :data:`NO_DEFAULT`: it must be declared;
  * a PIR op type (``pd_op.matmul``): Paddle 3.3.1 gives no op info by name
    to Python, so the definition is the op's Python signature as Paddle's
    own stub states it (``paddle/_typing/libs/libpaddle/pir/ops.pyi``,
    generated from the op YAML): ``Tensor`` parameters are input slots, the
    others attrs with the stated default.  Ops whose stub is only
    ``*args, **kwargs`` (most grads) have no definition here
    (``None``): a PIR snapshot still lists every input slot of the op
    (``get_input_names``) and every attr it carries (``op.attrs()``), so
    the check refuses any of those not declared.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

NO_DEFAULT = object()  # an attr the definition gives no default: always declared


@dataclass(frozen=True)
class OpDef:
    """Input slots and ``{attr: default}`` (:data:`NO_DEFAULT` when none)."""

    type: str
    inputs: tuple
    attrs: dict = field(default_factory=dict)
    source: str = ""


_CACHE: dict = {}


def definition(op_type: str) -> OpDef | None:
    """Paddle's definition of ``op_type``; None when Paddle states none."""
    if op_type not in _CACHE:
        try:
            _CACHE[op_type] = _pir(op_type) if "." in op_type else _legacy(op_type)
        except ImportError:  # no Paddle here: no defaults (undeclared attrs refused)
            _CACHE[op_type] = None
    return _CACHE[op_type]


def definitions(op_types) -> dict:
    """``{type: OpDef or None}`` for each of ``op_types``."""
    return {t: definition(t) for t in op_types}


def _legacy(op_type: str) -> OpDef | None:
    from paddle.base import core, framework

    try:
        proto = framework.OpProtoHolder.instance().get_op_proto(op_type)
    except Exception:
        return _legacy_grad(op_type) if op_type.endswith("_grad") else None
    defaults = dict(core.get_op_attrs_default_value(op_type.encode()))
    try:
        defaults.update(core.get_op_extra_attrs(op_type))
    except Exception:
        pass
    attrs = {a.name: defaults.get(a.name, NO_DEFAULT) for a in proto.attrs}
    for name, value in defaults.items():  # runtime extras the proto does not list
        attrs.setdefault(name, value)
    return OpDef(op_type, tuple(i.name for i in proto.inputs), attrs, "OpProto")


def _legacy_grad(op_type: str) -> OpDef | None:
    """A grad op (registered without an ``OpProto``): what its forward op's
    grad maker gives a forward op with every slot connected (slots and
    attrs), with the forward op's defaults."""
    from paddle.base import core

    fwd = definition(op_type[:-len("_grad")])
    if fwd is None:
        return None
    from paddle.base import framework

    proto = framework.OpProtoHolder.instance().get_op_proto(fwd.type)
    desc = core.OpDesc()
    desc.set_type(fwd.type)
    for slot in proto.inputs:
        desc.set_input(slot.name, [slot.name + "@v"])
    for slot in proto.outputs:
        desc.set_output(slot.name, [slot.name + "@v"])
    for name, value in fwd.attrs.items():
        if value is NO_DEFAULT:
            continue
        try:
            desc._set_attr(name, value)
        except Exception:
            pass
    try:
        grads, _ = core.get_grad_op_desc(desc, set(), [])
    except Exception:
        return None
    for g in grads:
        if g.type() == op_type:
            return OpDef(op_type, tuple(g.input_names()),
                         {a: fwd.attrs.get(a, NO_DEFAULT) for a in g.attr_names()},
                         "grad maker of " + fwd.type)
    return None


_STUB = None


def _stub() -> dict:
    """``{function name: argument list text}`` of Paddle's PIR ops stub."""
    global _STUB
    if _STUB is None:
        import importlib.util

        spec = importlib.util.find_spec("paddle")
        root = os.path.dirname(spec.origin) if spec and spec.origin else ""
        path = os.path.join(root, "_typing", "libs", "libpaddle", "pir", "ops.pyi")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            text = ""
        _STUB = {}
        for m in re.finditer(r"^def (\w+)\((.*?)\)(?: ->.*?)?:\s*$", text, re.M):
            _STUB.setdefault(m.group(1), m.group(2))
    return _STUB


def _pir(op_type: str) -> OpDef | None:
    dialect, _, name = op_type.partition(".")
    if dialect != "pd_op":
        return None
    args = _stub().get(name)
    if args is None or "*args" in args:
        return None
    try:
        fn = ast.parse(f"def f({args}): pass").body[0].args
    except SyntaxError:
        return None
    params = fn.args + fn.kwonlyargs
    defaults = [NO_DEFAULT] * (len(fn.args) - len(fn.defaults)) + list(fn.defaults) + \
        list(fn.kw_defaults)
    inputs, attrs = [], {}
    for p, d in zip(params, defaults):
        ann = ast.unparse(p.annotation) if p.annotation is not None else ""
        if p.arg in ("name", "out"):
            continue  # the Python API's naming / output arguments
        if "Tensor" in ann:
            inputs.append(p.arg)
            continue
        try:
            attrs[p.arg] = NO_DEFAULT if d is NO_DEFAULT or d is None else ast.literal_eval(d)
        except ValueError:
            attrs[p.arg] = NO_DEFAULT
    return OpDef(op_type, tuple(inputs), attrs, "ops.pyi")


_INSTANCES = None


def instance_definitions() -> dict:
    """``{PIR op type: OpDef}`` read off real op instances (their
    ``get_input_names()`` and ``attrs()``; attrs without defaults): the ops
    of a small PIR training program Paddle builds here (forward, backward
    and each optimizer), the op info Paddle gives no lookup by name for.
    Built once, in programs of its own under a fresh name scope; meant for
    the enumeration test (``tests/test_read_sets.py``), not for the checks,
    which must not build programs in a process that is taking snapshots."""
    global _INSTANCES
    if _INSTANCES is None:
        _INSTANCES = {}
        for build in (_forward_and_backward, *[_optimizer(n) for n in
                                               ("AdamW", "Adam", "SGD", "Momentum")]):
            for d in _build(build):
                _INSTANCES.setdefault(d.type, d)
    return _INSTANCES


def _op_info(op) -> OpDef:
    try:
        ins = tuple(op.get_input_names())
    except Exception:
        ins = ("operands",) * op.num_operands()
    return OpDef(op.name(), ins, {a: NO_DEFAULT for a in op.attrs()}, "PIR op instance")


def _build(fn) -> list:
    """The op infos of the program ``fn`` builds (read while it lives: an
    op outliving its program is freed memory)."""
    import paddle

    was_static = not paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        with paddle.pir_utils.IrGuard(), paddle.utils.unique_name.guard():
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                fn(paddle)
            return [_op_info(op) for op in main.global_block().ops]
    finally:
        if not was_static:
            paddle.disable_static()


def _forward_and_backward(paddle):
    """One program with the forward ops the rows cover, and their grads."""
    F = paddle.nn.functional
    x = paddle.static.data("x", [4, 8], "float32")
    x.stop_gradient = False
    w = paddle.static.create_parameter([8, 8], "float32")
    ids = paddle.static.data("ids", [4], "int64")
    emb = paddle.static.create_parameter([10, 8], "float32")
    h = paddle.matmul(x, w) + F.embedding(ids, emb)
    h = F.gelu(h) * F.relu(h) - F.silu(h)
    h = h / (paddle.rsqrt(h * h + 1.0) + paddle.pow(h, 2.0))
    h = F.softmax(F.layer_norm(h, [8]), -1)
    h = paddle.transpose(paddle.reshape(h, [8, 4]), [1, 0])
    a, b = paddle.split(h, 2, axis=1)
    h = paddle.slice(paddle.concat([a, b], axis=1), [0], [0], [2])
    h = paddle.tile(h, [2, 1]) + paddle.expand(paddle.unsqueeze(paddle.sum(h, 0), 0), [4, 8])
    h = paddle.tril(h) + paddle.where(h > 0, h, paddle.full_like(h, 1.0)) + paddle.sin(h) + \
        paddle.cos(h)
    h = paddle.scale(h, 2.0) + paddle.cast(paddle.not_equal(ids, ids), "float32").unsqueeze(1)
    h = paddle.assign(h) + paddle.square(h) + paddle.arange(0, 8, dtype="float32")
    loss = paddle.mean(F.cross_entropy(h, ids.unsqueeze(1)))
    paddle.autograd.ir_backward.grad(loss, [x, w, emb])
    # in-place forms (no grads through them)
    v = paddle.zeros([4, 8], "float32")
    v[0] = 1.0
    v[1] = x[0]
    v.add_(x)
    v.scale_(2.0)


def _optimizer(name):
    def fn(paddle):
        x = paddle.static.data("x", [4, 8], "float32")
        w = paddle.static.create_parameter([8, 8], "float32")
        getattr(paddle.optimizer, name)(0.1).minimize(paddle.mean(paddle.matmul(x, w)))
    return fn
