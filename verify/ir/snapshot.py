"""A plain, framework-neutral record of a legacy program.

Checks work on snapshots only, never on live Paddle objects, so they can be
tested by writing a snapshot by hand.  ``from_programs`` is the one function
here that touches Paddle.
"""
from __future__ import annotations

import difflib
import hashlib
import io
import json
import pickle
from dataclasses import asdict, dataclass, field

SCHEMA = "program-snapshot/1"
# Attrs that only describe where an op was created; dropped from snapshots.
_NOISE_ATTRS = {"op_callstack", "op_namescope", "with_quant_attr", "op_device"}
# ...but for a name scope that carries the legacy recompute mark: the legacy
# planner marks each recompute segment's ops ``/auto_parallel/rc_<i>``
# (``set_recompute_segments``), and that mark is what the recompute pass reads
RECOMPUTE_SCOPE = "/auto_parallel/rc"


@dataclass
class Op:
    """One op: type, slots to var names, plain attrs, role and stream."""

    idx: int
    type: str
    inputs: dict
    outputs: dict
    attrs: dict = field(default_factory=dict)
    role: int = 0
    stream: str = "default"

    def reads(self) -> list:
        return [n for names in self.inputs.values() for n in names]

    def writes(self) -> list:
        return [n for names in self.outputs.values() for n in names]

    def render(self) -> str:
        """One readable line, stable across runs (used by diffs)."""
        ins = ", ".join(f"{k}={','.join(v)}" for k, v in sorted(self.inputs.items()) if v)
        outs = ", ".join(f"{k}={','.join(v)}" for k, v in sorted(self.outputs.items()) if v)
        keep = {k: v for k, v in sorted(self.attrs.items())
                if k not in ("op_role", "op_role_var")}
        attrs = ", ".join(f"{k}={v}" for k, v in keep.items())
        stream = "" if self.stream == "default" else f" @{self.stream}"
        return f"{self.type}({ins}) -> {outs} [{attrs}]{stream}"


def nested_blocks(op) -> list:
    """``[ops of each nested block]`` of an op with regions, each a list of
    plain op records (``{"type", "inputs", "outputs", "attrs"}``): a PIR
    ``pd_op.if`` / ``pd_op.while`` (its ``blocks`` attr) or a legacy
    ``conditional_block`` / ``while`` (a block attr such as ``sub_block``,
    recorded as ``{"block": index, "ops": [...]}``).  ``[]`` for any other."""
    out = []
    pir = op.attrs.get("blocks")
    if isinstance(pir, list):
        out += [b.get("ops", []) for b in pir if isinstance(b, dict)]
    for v in op.attrs.values():
        for b in (v if isinstance(v, list) else [v]):
            if isinstance(b, dict) and set(b) == {"block", "ops"}:
                out.append(b["ops"])
    return out


class _PlainPickler(pickle.Pickler):
    """Pickles exact ``None``/bool/int/float/str/bytes/list/tuple/dict/set
    values only: anything else (a numpy scalar, a str or dict subclass, an
    object whose ``str`` shows its address) raises."""

    def reducer_override(self, obj):
        raise TypeError(f"not plain data: {type(obj).__name__}")


def render_key(ops) -> bytes | None:
    """A digest of everything :meth:`Op.render` reads of each op of ``ops``
    (type, slots, attrs, stream; not ``idx`` or ``role``), in order; None
    when some value is not plain data.  Equal digests mean equal values of
    identical built-in types (pickle tells ``1``, ``1.0`` and ``True``
    apart, and ``-0.0`` from ``0.0``), so equal lines: any changed byte is
    another key, never a stale line.  ~80x cheaper than rendering.

    The slots and attrs are digested in their dicts' order (sorting them
    here cost 3/4 of the time): the same content in another order is
    another key, and the callers fall back to the rendered lines, which
    sort (:func:`changed` still says unchanged).  Snapshots the engine takes
    (``verify/ir/rank_snapshot.py``) list attrs sorted (:func:`canonical`),
    so an imported program, which lists an op's attrs in another order,
    keys as the original."""
    buf = io.BytesIO()
    try:  # nested values as they are
        _PlainPickler(buf, protocol=5).dump(
            [(o.type, o.inputs, o.outputs, o.attrs, o.stream) for o in ops])
    except Exception:
        return None
    return hashlib.sha256(buf.getvalue()).digest()


def canonical(snapshot) -> None:
    """Every op's attrs in sorted order, as :meth:`Op.render` lists them (in
    place; the content is the same): equal programs then have equal
    :func:`render_key`, whatever order their importer listed attrs in.  The
    slots keep their order: it is the operands' order (checks read an
    in-place op's first operand as the buffer it writes)."""
    for o in list(snapshot.ops) + list(snapshot.startup_ops):
        d = o.attrs
        try:
            if isinstance(d, dict) and list(d) != sorted(d):
                o.attrs = dict(sorted(d.items()))
        except TypeError:  # keys that do not sort: left as they are
            pass


# render_key -> the lines; an application renders each rank's programs a
# dozen times (fired, contracts, the identity proof, inserted-op pools, diffs)
_LINES: dict = {}
_DIFFS: dict = {}  # (the four render keys, context) -> diff text
LINES_MAX = 256


_UNKEYED = object()


def rendered(ops, key=_UNKEYED) -> list:
    """``[op.render() for op in ops]``, remembered by content (:func:`render_key`);
    a fresh list each call.  ``key``: ``render_key(ops)`` when the caller
    has just taken it (not taken twice)."""
    if key is _UNKEYED:
        key = render_key(ops)
    if key is None:
        return [o.render() for o in ops]
    lines = _LINES.get(key)
    if lines is None:
        lines = tuple(o.render() for o in ops)
        if len(_LINES) >= LINES_MAX:
            _LINES.pop(next(iter(_LINES)))
        _LINES[key] = lines
    return list(lines)


@dataclass
class Var:
    name: str
    shape: list
    dtype: str
    persistable: bool = False
    is_parameter: bool = False
    is_data: bool = False


@dataclass
class ProgramSnapshot:
    """Main program ops and vars, plus what the startup program writes."""

    ops: list
    vars: dict
    startup_ops: list = field(default_factory=list)
    feeds: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    # -- queries ---------------------------------------------------------
    def var(self, name: str) -> Var | None:
        return self.vars.get(name)

    def shape(self, name: str):
        v = self.vars.get(name)
        return None if v is None else list(v.shape)

    def startup_writes(self) -> set:
        return {n for op in self.startup_ops for n in op.writes()}

    def ops_of_type(self, *types) -> list:
        return [op for op in self.ops if op.type in types]

    def op_types(self) -> list:
        return [op.type for op in self.ops]

    # -- serialisation ---------------------------------------------------
    def to_dict(self) -> dict:
        """Plain data, as ``dataclasses.asdict`` makes it (deep copies), made
        by one pickle round trip where every value is plain data (~10x
        faster: a zoo rank's two programs took 0.4-1 s)."""
        def op(o):
            return {"idx": o.idx, "type": o.type, "inputs": o.inputs, "outputs": o.outputs,
                    "attrs": o.attrs, "role": o.role, "stream": o.stream}

        def var(v):
            return {"name": v.name, "shape": v.shape, "dtype": v.dtype,
                    "persistable": v.persistable, "is_parameter": v.is_parameter,
                    "is_data": v.is_data}
        if type(self) is ProgramSnapshot and all(type(o) is Op for o in self.ops) and \
                all(type(o) is Op for o in self.startup_ops) and \
                all(type(v) is Var for v in self.vars.values()):
            buf = io.BytesIO()
            try:
                _PlainPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(
                    {"schema": SCHEMA, "ops": [op(o) for o in self.ops],
                     "vars": {k: var(v) for k, v in self.vars.items()},
                     "startup_ops": [op(o) for o in self.startup_ops],
                     "feeds": list(self.feeds), "meta": dict(self.meta)})
            except Exception:  # a value that is not plain data: asdict's way
                pass
            else:
                return pickle.loads(buf.getvalue())
        return {"schema": SCHEMA, "ops": [asdict(o) for o in self.ops],
                "vars": {k: asdict(v) for k, v in self.vars.items()},
                "startup_ops": [asdict(o) for o in self.startup_ops],
                "feeds": list(self.feeds), "meta": dict(self.meta)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "ProgramSnapshot":
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} snapshot: schema={d.get('schema')!r}")
        return cls(ops=[Op(**o) for o in d["ops"]],
                   vars={k: Var(**v) for k, v in d["vars"].items()},
                   startup_ops=[Op(**o) for o in d.get("startup_ops", [])],
                   feeds=list(d.get("feeds", [])), meta=dict(d.get("meta", {})))

    @classmethod
    def from_json(cls, text: str) -> "ProgramSnapshot":
        return cls.from_dict(json.loads(text))

    def with_ops(self, ops: list, startup_ops: list | None = None) -> "ProgramSnapshot":
        """A copy with other ops (re-indexed); used by tests and mutants."""
        fixed = [Op(i, o.type, dict(o.inputs), dict(o.outputs), dict(o.attrs), o.role, o.stream)
                 for i, o in enumerate(ops)]
        sops = self.startup_ops if startup_ops is None else startup_ops
        return ProgramSnapshot(fixed, dict(self.vars), list(sops), list(self.feeds), dict(self.meta))


def changed(before: ProgramSnapshot, after: ProgramSnapshot) -> bool:
    """Whether a pass changed anything: the one definition of "fired"."""
    def same(a, b):  # equal keys: equal lines, nothing rendered
        ka, kb = render_key(a), render_key(b)
        return (ka is not None and ka == kb) or rendered(a, ka) == rendered(b, kb)
    return not (same(before.ops, after.ops) and same(before.startup_ops, after.startup_ops))


def diff(before: ProgramSnapshot, after: ProgramSnapshot, context: int = 2) -> str:
    """A unified diff of the two programs' op lines (main, then startup)."""
    keys = (render_key(before.ops), render_key(after.ops), render_key(before.startup_ops),
            render_key(after.startup_ops), context)
    if None not in keys and keys in _DIFFS:  # the report and the summary both ask
        return _DIFFS[keys]
    out = []
    for a, b, ka, kb, names in (
            (before.ops, after.ops, keys[0], keys[1], ("original", "rewritten")),
            (before.startup_ops, after.startup_ops, keys[2], keys[3],
             ("original startup", "rewritten startup"))):
        if ka is not None and ka == kb:
            continue  # equal lines: an empty diff, without difflib
        out += list(difflib.unified_diff(rendered(a, ka), rendered(b, kb), *names, n=context,
                                         lineterm=""))
    text = "\n".join(out)
    if None not in keys:
        if len(_DIFFS) >= LINES_MAX:
            _DIFFS.pop(next(iter(_DIFFS)))
        _DIFFS[keys] = text
    return text


# -- from Paddle ----------------------------------------------------------
def _plain(value):
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _dtype_name(dtype) -> str:
    s = str(dtype)
    for prefix in ("paddle.", "VarType.", "DataType."):
        s = s.replace(prefix, "")
    return s.lower()


def _block_attr(op, name, depth):
    """A block attr (``sub_block`` of ``while`` / ``conditional_block``) as
    ``{"block": index, "ops": [plain op records]}``, its ops recursively (a
    changed branch is a changed op); a list of those for a blocks attr;
    None for any other attr."""
    from paddle.base import core

    try:
        kind = op.desc.attr_type(name)
    except Exception:
        return None
    if kind == core.AttrType.BLOCK:
        ids = [op.desc._block_attr_id(name)]
    elif kind == core.AttrType.BLOCKS:
        ids = list(op.desc._blocks_attr_ids(name))
    else:
        return None
    out = []
    for bid in ids:
        block = op.block.program.block(bid)
        recs = []
        for i, inner in enumerate(block.ops):
            r = _op_record(i, inner, depth + 1)
            recs.append({"type": r.type, "inputs": r.inputs, "outputs": r.outputs,
                         "attrs": dict(sorted(r.attrs.items()))})
        out.append({"block": int(bid), "ops": recs})
    return out[0] if kind == core.AttrType.BLOCK else out


_EXTRA: dict = {}  # op type -> {extra attr: default}


def _extra_attrs(op_type) -> dict:
    """Paddle's "extra" attrs of ``op_type`` and their defaults ({} if none)."""
    if op_type not in _EXTRA:
        from paddle.base import core

        try:
            _EXTRA[op_type] = dict(core.get_op_extra_attrs(op_type))
        except Exception:
            _EXTRA[op_type] = {}
    return _EXTRA[op_type]


def _op_record(idx, op, depth=0) -> Op:
    desc = op.desc
    attrs = {}
    for name in desc.attr_names():
        if name in _NOISE_ATTRS and not (
                name == "op_namescope" and RECOMPUTE_SCOPE in str(desc.attr(name))):
            continue
        try:
            block = _block_attr(op, name, depth) if depth < 16 else None
            attrs[name] = block if block is not None else _plain(desc.attr(name))
        except Exception:  # attrs that do not read: record their presence
            attrs[name] = "<unreadable>"
    for name, default in _extra_attrs(op.type).items():
        # an "extra" attr is not listed by the desc, yet some are kernel
        # arguments (dropout's seed and fix_seed): recorded where it is set
        # away from its default, so a changed seed is a changed op
        if name in attrs or name in _NOISE_ATTRS:
            continue
        try:
            if desc.has_attr(name) and _plain(desc.attr(name)) != _plain(default):
                attrs[name] = _plain(desc.attr(name))
        except Exception:
            attrs[name] = "<unreadable>"
    stream = "default"
    try:
        dist = op.dist_attr
        if dist is not None and dist.execution_stream:
            stream = dist.execution_stream
    except Exception:
        pass
    if "execution_stream" in attrs and attrs["execution_stream"]:
        stream = attrs["execution_stream"]
    role = int(attrs.get("op_role", 0) or 0)
    return Op(idx=idx, type=op.type,
              inputs={k: list(desc.input(k)) for k in desc.input_names()},
              outputs={k: list(desc.output(k)) for k in desc.output_names()},
              attrs=attrs, role=role, stream=stream)


def from_programs(main, startup=None, meta: dict | None = None) -> ProgramSnapshot:
    """Snapshot a live legacy ``main`` (and ``startup``) program."""
    from paddle.base.framework import Parameter

    block = main.global_block()
    ops = [_op_record(i, op) for i, op in enumerate(block.ops)]
    vars_ = {}
    feeds = []
    for name, v in block.vars.items():
        try:
            shape = list(v.shape)
        except Exception:
            shape = []
        try:  # a while's step scopes have no tensor desc
            dtype = _dtype_name(v.dtype)
        except Exception:
            dtype = str(v.type).lower()
        is_data = bool(getattr(v, "is_data", False)) or bool(
            getattr(v.desc, "need_check_feed", lambda: False)())
        vars_[name] = Var(name=name, shape=shape, dtype=dtype,
                          persistable=bool(v.persistable),
                          is_parameter=isinstance(v, Parameter),
                          is_data=is_data)
        if is_data:
            feeds.append(name)
    sops = []
    if startup is not None:
        sops = [_op_record(i, op) for i, op in enumerate(startup.global_block().ops)]
    return ProgramSnapshot(ops=ops, vars=vars_, startup_ops=sops, feeds=sorted(feeds),
                           meta=dict(meta or {}))
