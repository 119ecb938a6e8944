"""A PIR program as the same plain :class:`~verify.ir.snapshot.ProgramSnapshot`
every check reads (one snapshot form for both IRs).

A PIR program is SSA already: every value is written once, by the op that
defines it.  The snapshot gives each value one stable name and then looks
exactly like a legacy snapshot, so def-use, reaching definitions, the shape
table, the value proofs, diffs and reports need no second implementation.

The form
--------
* **Value names.**  The result of ``builtin.parameter`` is named by its
  ``parameter_name``, the result of ``pd_op.data`` by its ``name``; every
  other value is ``%<n>``, ``n`` counting the results of the main program's
  ops in program order (startup values: ``startup%<n>``).  A null result
  (a gradient nobody asked for) is left out of its slot.  Two builds of one
  program get equal snapshots.  A *rewritten* program is named from the
  original's table: ops are keyed by ``op.id()`` (a process-wide counter
  Paddle never reuses, so an op the pass erased can never lend its name to a
  new one); kept values keep their names and values the pass created get
  the next free ``%<n>`` in program order.  So a kept op renders the same
  before and after the rewrite, and a value the pass replaced shows up as a
  rename of its consumers (``verify.ir.renames``).  Never compare Values with
  ``==`` (PIR's operator patch builds a ``pd_op.equal``).
* **Op.** ``type`` = ``op.name()`` (``"pd_op.matmul_grad"``).  Slots: the
  operand / result names of the op's signature
  (``op.get_input_names()`` / ``get_output_names()``: ``x``, ``y``,
  ``out_grad`` -> ``x_grad``, ``y_grad``); an op without that interface
  (``builtin.*``) has one slot ``operands`` and one ``results``.
  ``builtin.set_parameter`` (startup) writes its ``parameter_name`` in the
  synthetic slot ``parameter`` so "the startup program writes ``w``" reads
  the same as in a legacy startup.
* **Attrs**: ``op.attrs()`` made plain (dtypes and places as strings),
  ``op_callstack`` dropped; ``chunk_id`` = ``op.chunk_id``; ``op_role`` as
  Paddle stores it (-1 when unset); ``dist_attr`` (process mesh shape and
  ids, operand/result placements as strings) when the op has one; an op
  with regions (``pd_op.if``, ``pd_op.while``) has ``blocks``: per nested
  block ``{"args": [block argument names], "ops": [{"type", "inputs",
  "outputs", "attrs"}]}``, recursively (values inside are named in the one
  table, right after their region op's results; block arguments
  ``%arg<depth>.<block>.<j>``), so a changed branch is a changed op; the
  value proof refuses such ops (it has no execution of regions).  The
  values its blocks read from outside are its inputs in the synthetic slot
  ``region@reads`` (def-before-use and reaching definitions see them).  A
  constant operand, one defined by ``pd_op.full_int_array`` (``value``) or ``pd_op.full`` (``value``), is also recorded in its
  consumer's attrs as ``<slot>@value`` (the reshape target of
  ``pd_op.reshape``, the axes of ``pd_op.mean``): rules see attrs, not other
  ops.
* ``Op.role`` = ``op.op_role`` when set, else 0 (forward); ``Op.stream`` =
  the ``execution_stream`` attr when set, else ``"default"``.
* **Var** per value: ``shape`` = ``value.shape`` (``-1`` dynamic),
  ``dtype`` = ``float32`` style; a vector-typed result (``builtin.combine``)
  has ``shape`` ``[]`` and dtype ``vector<...>`` (its type string);
  ``persistable``, ``is_parameter`` (``builtin.parameter``), ``is_data``
  (``pd_op.data`` that is not persistable; a persistable ``pd_op.data``,
  such as the learning rate, is a global the startup program writes with
  ``builtin.shadow_output``, whose synthetic slot ``output`` names it).
  Value dist attrs, when present, are in
  ``meta["dist_values"]`` (``{"dist_attr": text, "local_shape": [...]}``;
  ``Var.shape`` is the global shape).
* ``feeds``: the ``pd_op.data`` names; ``meta["ir"] = "pir"``.
* **In-place writes.**  ``meta["inplace"]`` (``meta["startup_inplace"]``):
  ``{result name: operand name}`` of every result an op writes into one of
  its operands' buffer, from Paddle's op info (``get_op_inplace_info``):
  ``%d = pd_op.scale_(%c)`` is ``{"%d": "%c"}``.  The ops keep the literal
  operands (what the program says; the gradient merge's race contract reads
  them); a later read of ``%c`` reads the written buffer, which
  ``verify.ir.inplace.resolved`` makes explicit for the value proof.
* A keyword block argument (``block.add_kwarg``: a persistable read by name
  from the scope, such as the gradient merge's ``w@GRAD@MERGE``) is named by
  its keyword, declared persistable, and listed in ``meta["block_kwargs"]``.
  PIR's serializer drops keyword arguments on 3.3.1 (their readers' operands
  come back null), so :func:`export_programs` records each keyword with its
  type and readers (op index, operand index) beside the bytes, and
  :func:`import_programs` adds it back (``add_kwarg``) and reconnects them:
  the imported program is the one exported, keyword arguments included.

The one Paddle-touching entry is :func:`from_pir_programs`; Paddle must be in
PIR mode while it runs (``paddle.pir_utils.IrGuard()``: this process runs
Paddle in legacy mode, see ``verify/ir/legacy_ir.py``; building and reading
PIR programs in process under ``IrGuard`` works on 3.3.1).
"""
from __future__ import annotations

from verify.ir.snapshot import Op, ProgramSnapshot, Var, _dtype_name, _plain

# op_dist_attr: the raw text of what ``dist_attr`` records structured
_NOISE_ATTRS = {"op_callstack", "op_dist_attr"}
CONSTANT_OPS = {"pd_op.full_int_array", "pd_op.full"}
# the synthetic input slot of an op with regions: the values defined outside
# that its blocks' ops read (a branch reading %c reads it at the if op)
REGION_READS = "region@reads"


class Names:
    """Stable value names: ``(op.id(), result index) -> name``."""

    def __init__(self, prefix: str = "%"):
        self.prefix = prefix
        self.table = {}
        self.counter = 0

    def key(self, value):
        op = value.get_defining_op()
        return None if op is None else (op.id(), value.index())

    def name(self, value):
        k = self.key(value)
        return None if k is None else self.table.get(k)

    def assign(self, program) -> "Names":
        """Name every result of ``program``'s global block not named yet,
        in program order (parameters and data by their own names); the
        results of the ops of an op's nested blocks (``pd_op.if`` branches,
        a ``pd_op.while`` body) right after that op's own."""
        self._assign_ops(program.global_block().ops)
        return self

    def _assign_ops(self, ops) -> None:
        for op in ops:
            attrs = None  # read only when a result needs a name (op.attrs() is costly)
            for i, v in enumerate(op.results()):
                k = (op.id(), i)
                if k in self.table or _is_null(v):
                    continue
                if op.name() in ("builtin.parameter", "pd_op.data") and attrs is None:
                    attrs = _safe_attrs(op)
                if op.name() == "builtin.parameter":
                    self.table[k] = str(attrs.get("parameter_name"))
                elif op.name() == "pd_op.data":
                    self.table[k] = str(attrs.get("name"))
                else:
                    self.table[k] = f"{self.prefix}{self.counter}"
                    self.counter += 1
            for block in _nested_blocks(op):
                self._assign_ops(block.ops)

    def carried(self, original_program, clone_program) -> "Names":
        """The table for ``clone_program`` (``original_program.clone()``,
        not rewritten yet): op i of the clone gets op i's names."""
        out = Names(self.prefix)
        out.counter = self.counter
        self._carry(out, original_program.global_block().ops,
                    clone_program.global_block().ops)
        return out

    def _carry(self, out, a, b) -> None:
        """Op i of ``b`` (and of each of its nested blocks) gets op i's names."""
        if len(a) != len(b):
            raise ValueError(f"clone has {len(b)} ops, the original {len(a)}")
        for oa, ob in zip(a, b):
            if oa.name() != ob.name():
                raise ValueError(f"clone op {ob.name()} stands where {oa.name()} was")
            for i in range(oa.num_results()):
                name = self.table.get((oa.id(), i))
                if name is not None:
                    out.table[(ob.id(), i)] = name
            for ba, bb in zip(_nested_blocks(oa), _nested_blocks(ob)):
                self._carry(out, ba.ops, bb.ops)


def _nested_blocks(op) -> list:
    """The blocks of ``op``'s regions (``op.blocks()`` is a lazy, always
    truthy sequence: listed), none when it has no region."""
    try:
        return list(op.blocks()) if op.num_regions() else []
    except Exception:
        return []


def _nested_ops(ops):
    """The ops inside the nested blocks of ``ops``, in the order
    :meth:`Names.assign` names them (each block's, depth first)."""
    for op in ops:
        for block in _nested_blocks(op):
            for inner in block.ops:
                yield inner
                yield from _nested_ops([inner])


def _is_null(value) -> bool:
    """A null operand or a null-typed result (an unrequested grad).  Never
    ask a null Value for its type: that can crash the process."""
    try:
        return not value.initialized()
    except Exception:
        return True


def _safe_attrs(op) -> dict:
    try:
        return dict(op.attrs())
    except Exception:
        return {}


def _plain_attr(v):
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain_attr(x) for x in v]
    s = str(v)
    return _dtype_name(s) if s.startswith("paddle.") else s


_NO_SIGNATURE = {"pd_op.select_input", "pd_op.select_output", "pd_op.has_elements",
                 "pd_op.tuple_push", "pd_op.tuple_pop"}


def _slot_names(op, which: str, n: int) -> list:
    # Asking an op without the signature interface (OpYamlInfoInterface)
    # dereferences null in 3.3.1 (SIGSEGV, no exception): builtin.*,
    # dist_op.*, and the pd_op control-flow ops (if/while/pylayer carry
    # regions; select_input/select_output/has_elements/tuple_* none).
    if not op.name().startswith("pd_op.") or op.name() in _NO_SIGNATURE or \
            op.num_regions():
        return None
    try:
        names = list(op.get_input_names() if which == "in" else op.get_output_names())
    except Exception:
        names = []
    if len(names) != n:
        return None
    return names


def dist_attr_record(op):
    """An op's dist attr as a snapshot records it (``{"mesh", "operands",
    "results"}``, placements as Paddle prints them), or None without one."""
    try:
        d = op.dist_attr
    except Exception:
        return None
    if d is None:
        return None
    out = {}
    try:
        mesh = d.process_mesh
        out["mesh"] = {"shape": list(mesh.shape), "process_ids": list(mesh.process_ids)}
    except Exception:
        pass
    for key, getter in (("operands", "operands"), ("results", "results")):
        try:
            out[key] = [str(x) for x in getattr(d, getter)()]
        except Exception:
            pass
    return out or str(d)


def _var(name, value, kind):
    if _is_null(value):
        return None
    try:
        dense = value.is_dense_tensor_type()
    except Exception:
        dense = False
    if dense:
        try:
            shape = [int(d) for d in value.shape]
        except Exception:
            shape = []
        dtype = _dtype_name(value.dtype)
    else:
        shape, dtype = [], str(value.type())
    try:
        persistable = bool(value.persistable)
    except Exception:
        persistable = False
    return Var(name=name, shape=shape, dtype=dtype, persistable=persistable or kind == "param",
               is_parameter=kind == "param", is_data=kind == "data" and not persistable)


def _constant(op, attrs):
    """The constant a ``pd_op.full_int_array`` / ``pd_op.full`` defines."""
    if op is None or op.name() not in CONSTANT_OPS:
        return None
    return _plain_attr(attrs.get("value"))


def _records(program, names: Names, vars_: dict, meta: dict, startup: bool) -> list:
    """The Ops of ``program``'s global block (nested blocks inside their op's
    ``blocks`` attr); records each in-place write in ``meta``."""
    ctx = {"names": names, "vars": vars_, "meta": meta, "startup": startup,
           "kwargs": _block_kwargs(program), "const_of": {}}
    return _block_records(program.global_block().ops, ctx, args=[], depth=0)


def _operand_name(src, ctx, args, i, idx):
    """An operand's name: its value's, a keyword block argument's, an
    enclosing block argument's (innermost first), else a placeholder."""
    nm = ctx["names"].name(src)
    if nm is None:
        nm = _kwarg_name(src, ctx["kwargs"], ctx["vars"], ctx["meta"])
    if nm is None:
        for value, arg_name in reversed(args):
            try:
                if src.is_same(value):
                    nm = arg_name
                    break
            except Exception:
                pass
    return nm if nm is not None else f"<unnamed operand {i} of op {idx}>"


def inplace_pairs(op) -> dict:
    """``{result index: operand index}`` of the results an op writes into
    one of its operands' buffer (Paddle's own op info: ``scale_`` {0: 0},
    ``sgd_`` {0: 0, 1: 3}); ``{}`` for an op without the op-info interface
    (asking those may crash 3.3.1, see :func:`_slot_names`)."""
    if not op.name().startswith("pd_op.") or op.name() in _NO_SIGNATURE or \
            op.num_regions():
        return {}
    try:
        from paddle.base.libpaddle.pir import get_op_inplace_info

        return {int(r): int(o) for r, o in dict(get_op_inplace_info(op)).items()}
    except Exception:
        return {}


def _nested_record(o: Op) -> dict:
    """A nested block's op as plain data (in its parent op's ``blocks``)."""
    try:  # sorted as canonical() sorts a top-level op's: an import's order renders the same
        attrs = dict(sorted(o.attrs.items()))
    except TypeError:
        attrs = o.attrs
    return {"type": o.type, "inputs": o.inputs, "outputs": o.outputs, "attrs": attrs}


def _block_records(block_ops, ctx, args: list, depth: int) -> list:
    names, vars_, meta, startup = ctx["names"], ctx["vars"], ctx["meta"], ctx["startup"]
    const_of = ctx["const_of"]
    top = depth == 0
    ops = []
    for idx, op in enumerate(block_ops):
        attrs_raw = _safe_attrs(op)
        opname = op.name()
        n_in, n_out = op.num_operands(), op.num_results()
        in_slots = _slot_names(op, "in", n_in) or (["operands"] * n_in)
        out_slots = _slot_names(op, "out", n_out) or (["results"] * n_out)
        inputs, outputs = {}, {}
        attrs = {k: _plain_attr(v) for k, v in attrs_raw.items() if k not in _NOISE_ATTRS}
        operand_names = {}
        for i, slot in enumerate(in_slots):
            inputs.setdefault(slot, [])
            src = op.operand_source(i)
            if _is_null(src):
                continue
            nm = _operand_name(src, ctx, args, i, idx)
            operand_names[i] = nm
            inputs[slot].append(nm)
            if nm in const_of:
                attrs[f"{slot}@value"] = const_of[nm]
        kind = "param" if opname == "builtin.parameter" else \
            "data" if opname == "pd_op.data" else ""
        named = []  # the positions of the results that have a name
        result_names = {}
        for i, slot in enumerate(out_slots):
            outputs.setdefault(slot, [])
            v = op.result(i)
            nm = names.name(v)
            if nm is None or _is_null(v):
                continue
            named.append(i)
            result_names[i] = nm
            outputs[slot].append(nm)
            c = _constant(op, attrs_raw)
            if c is not None:
                const_of[nm] = c
            if not top:  # a nested value: no Var (its op is not in ops)
                continue
            var = _var(nm, v, kind)
            if var is not None:
                vars_[nm] = var
            try:
                vd = v.dist_attr()
            except Exception:
                vd = None
            if vd is not None:
                rec = {"dist_attr": str(vd)}
                try:
                    rec["local_shape"] = [int(d) for d in v._local_shape]
                except Exception:
                    pass
                meta.setdefault("dist_values", {})[nm] = rec
        if top:  # the buffer each in-place result writes (verify/ir/inplace.py)
            for r, o in sorted(inplace_pairs(op).items()):
                if r in result_names and o in operand_names:
                    meta.setdefault("startup_inplace" if startup else "inplace", {})[
                        result_names[r]] = operand_names[o]
        if opname == "builtin.split" and len(named) != n_out:
            # unused pieces have no result: which piece each named one is
            attrs["results@index"] = named
        if opname == "builtin.set_parameter":
            outputs["parameter"] = [str(attrs_raw.get("parameter_name"))]
        if opname == "builtin.shadow_output":  # a persistable written by name
            outputs["output"] = [str(attrs_raw.get("output_name"))]
        try:
            attrs["chunk_id"] = int(op.chunk_id)
        except Exception:
            pass
        try:
            role_raw = int(op.op_role)
        except Exception:
            role_raw = -1
        attrs["op_role"] = role_raw
        dist = dist_attr_record(op)
        if dist is not None:
            attrs["dist_attr"] = dist
        blocks = _nested_blocks(op)
        if blocks:
            # each block's ops, recursively: a changed branch or loop body
            # is a changed op (identity, diffs, fingerprints see it)
            recs, captured = [], []
            for bi, b in enumerate(blocks):
                try:
                    bargs = list(b.args())
                except Exception:
                    bargs = []
                arg_names = [f"{names.prefix}arg{depth + 1}.{bi}.{j}"
                             for j in range(len(bargs))]
                inner = _block_records(b.ops, ctx, args + list(zip(bargs, arg_names)),
                                       depth + 1)
                recs.append({"args": arg_names, "ops": [_nested_record(o) for o in inner]})
                inside = set(arg_names) | {n for o in inner for n in o.writes()}
                captured += [n for o in inner for n in o.reads()
                             if n not in inside and n not in captured]
            attrs["blocks"] = recs
            if captured:  # what the blocks read from outside: def-use sees those reads
                inputs[REGION_READS] = captured
            if top:
                meta.setdefault("nested_blocks", []).append(
                    {"program": "startup" if startup else "main", "op_index": idx,
                     "op_type": opname, "ops": [len(b.ops) for b in blocks]})
        stream = attrs.get("execution_stream") or "default"
        ops.append(Op(idx=idx, type=opname, inputs=inputs, outputs=outputs, attrs=attrs,
                      role=role_raw if role_raw >= 0 else 0, stream=str(stream)))
    return ops


def _block_kwargs(program) -> list:
    """``[(keyword, Value)]`` of the global block's keyword arguments (a
    persistable the block reads by name from the scope, e.g. the gradient
    merge's ``w@GRAD@MERGE``)."""
    try:
        return list(program.global_block().kwargs().items())
    except Exception:
        return []


def _kwarg_name(src, kwargs, vars_, meta):
    """A keyword block argument is named by its keyword and declared as a
    persistable Var (written by the startup program's ``shadow_output`` of
    that name); listed in ``meta["block_kwargs"]``."""
    for key, kv in kwargs:
        try:
            same = src.is_same(kv)
        except Exception:
            same = False
        if not same:
            continue
        if key not in vars_:
            var = _var(key, kv, "")
            if var is not None:
                var.persistable = True
                vars_[key] = var
            meta.setdefault("block_kwargs", [])
            if key not in meta["block_kwargs"]:
                meta["block_kwargs"].append(key)
        return key
    return None


def value_names(main) -> Names:
    """The name table of an original (unrewritten) main program."""
    return Names("%").assign(main)


def from_pir_programs(main, startup=None, names: Names | None = None,
                      startup_names: Names | None = None,
                      meta: dict | None = None) -> ProgramSnapshot:
    """Snapshot a live PIR ``main`` (and ``startup``).

    ``names``: the table the original was named with (for a rewritten
    program: :meth:`Names.carried` taken before the pass ran); values it
    does not know are named afresh, after the ones it holds.
    """
    meta = dict(meta or {})
    meta["ir"] = "pir"
    meta["inplace"] = {}  # filled by _records: Paddle's info, not a name rule
    names = names if names is not None else Names("%")
    names.assign(main)
    vars_ = {}
    ops = _records(main, names, vars_, meta, startup=False)
    feeds = sorted(n for n, v in vars_.items() if v.is_data)
    sops = []
    if startup is not None:
        sn = startup_names if startup_names is not None else Names("startup%")
        sn.assign(startup)
        svars = {}
        meta["startup_inplace"] = {}
        sops = _records(startup, sn, svars, meta, startup=True)
        for n, v in svars.items():
            vars_.setdefault(n, v)
    return ProgramSnapshot(ops=ops, vars=vars_, startup_ops=sops, feeds=feeds, meta=meta)


def snapshot_rank(rp, meta: dict | None = None) -> ProgramSnapshot:
    """The snapshot of a case's PIR RankProgram (``cases.pir_matmul_grad``),
    named with its table; ``feeds`` are the case's fed names."""
    import paddle

    with paddle.pir_utils.IrGuard():
        s = from_pir_programs(rp.main, rp.startup, getattr(rp, "names", None), meta=meta)
    s.feeds = sorted(f.name for f in rp.feeds)
    return s


# -- PIR programs across processes (isolation workers) ---------------------------
def export_programs(main, startup, names: Names) -> dict:
    """``main`` and ``startup`` in PIR's serialization (``serialize_pir_program``)
    and ``main``'s value names by position, for :func:`import_programs`."""
    import os
    import tempfile

    from paddle.base import core

    names.assign(main)
    out = {"names": [[names.table.get((op.id(), i)) for i in range(op.num_results())]
                     for op in main.global_block().ops], "counter": names.counter,
           "nested_names": [[names.table.get((op.id(), i)) for i in range(op.num_results())]
                            for op in _nested_ops(main.global_block().ops)],
           "attrs": [_scalar_attrs(op) for op in main.global_block().ops],
           "kwargs": block_kwarg_uses(main)}
    with tempfile.TemporaryDirectory() as d:
        for which, prog in (("main", main), ("startup", startup)):
            path = os.path.join(d, which + ".json")
            core.serialize_pir_program(prog, path, True, False, True)
            with open(path, "rb") as f:
                out[which] = f.read()
    return out


def import_programs(data: dict):
    """``(main, startup, names)`` from :func:`export_programs`."""
    import os
    import tempfile

    import paddle
    from paddle.base import core

    progs = {}
    with tempfile.TemporaryDirectory() as d:
        for which in ("main", "startup"):
            path = os.path.join(d, which + ".json")
            with open(path, "wb") as f:
                f.write(data[which])
            prog = paddle.static.Program()
            core.deserialize_pir_program(path, prog, -1)
            progs[which] = prog
    names = Names("%")
    names.counter = data["counter"]
    ops = progs["main"].global_block().ops
    if len(ops) != len(data["names"]):
        raise ValueError(f"deserialized main has {len(ops)} ops, {len(data['names'])} sent")
    for op, per_op in zip(ops, data["names"]):
        for i, n in enumerate(per_op):
            if n is not None and i < op.num_results():
                names.table[(op.id(), i)] = n
    nested = list(_nested_ops(ops))
    if len(nested) != len(data.get("nested_names") or []):
        raise ValueError(f"deserialized main has {len(nested)} ops in nested blocks, "
                         f"{len(data.get('nested_names') or [])} sent")
    for op, per_op in zip(nested, data.get("nested_names") or []):
        for i, n in enumerate(per_op):
            if n is not None and i < op.num_results():
                names.table[(op.id(), i)] = n
    for op, attrs in zip(ops, data.get("attrs") or []):
        _restore_attrs(op, attrs)
    restore_block_kwargs(progs["main"], data.get("kwargs") or [])
    return progs["main"], progs["startup"], names


def block_kwarg_uses(main) -> list:
    """``[{"name", "shape", "dtype", "persistable", "uses": [[op index, operand
    index]]}]``: the global block's keyword arguments and who reads them (what
    3.3.1's serializer drops; :func:`restore_block_kwargs` puts it back)."""
    kwargs = _block_kwargs(main)
    if not kwargs:
        return []
    out = []
    ops = list(main.global_block().ops)
    for key, kv in kwargs:
        uses = []
        for i, op in enumerate(ops):
            for j in range(op.num_operands()):
                src = op.operand_source(j)
                if not _is_null(src) and src.is_same(kv):
                    uses.append([i, j])
        out.append({"name": key, "shape": [int(d) for d in kv.shape],
                    "dtype": str(kv.dtype).replace("paddle.", ""),
                    "persistable": bool(getattr(kv, "persistable", True)), "uses": uses})
    return out


def restore_block_kwargs(main, kwargs: list) -> None:
    """Add each recorded keyword argument to ``main``'s global block (a dense
    tensor of its shape and dtype, persistable, as the pass made it) and
    reconnect its readers' operands.  Raises ``ValueError`` when a recorded
    reader is not there (the bytes and the record disagree)."""
    if not kwargs:
        return
    ops = list(main.global_block().ops)
    for kw in kwargs:
        value = main.global_block().add_kwarg(kw["name"], _dense_type(kw["shape"],
                                                                      kw["dtype"]))
        value.persistable = bool(kw.get("persistable", True))
        for i, j in kw["uses"]:
            if i >= len(ops) or j >= ops[i].num_operands():
                raise ValueError(f"keyword argument {kw['name']}: op {i} operand {j} "
                                 f"recorded, the program has {len(ops)} ops")
            ops[i].operand(j).set_source(value)


def _dense_type(shape, dtype):
    """The PIR type of a dense tensor of ``shape`` and ``dtype`` (made by a
    ``pd_op.data`` in a scratch program; types are shared by the context)."""
    import paddle

    scratch = paddle.static.Program()
    with paddle.static.program_guard(scratch):
        return paddle.static.data("__kwarg_type", list(shape), dtype).type()


def _scalar_attrs(op) -> dict:
    """An op's str/bool/int/str-list attrs: the serialization drops some of them
    (the stream/event attrs a multi-stream schedule sets: ``execution_stream``,
    ``force_record_event``, ``event_to_record``, ``events_to_wait``), and a
    DRR pattern that binds them no longer matches without them."""
    out = {}
    for k, v in _safe_attrs(op).items():
        if k in _NOISE_ATTRS:
            continue
        if isinstance(v, (bool, int, str)) or (
                isinstance(v, list) and all(isinstance(x, str) for x in v) and
                k == "events_to_wait"):
            out[k] = v
    return out


def _restore_attrs(op, attrs: dict) -> None:
    """Set the attrs of ``attrs`` the deserialized ``op`` lacks."""
    have = _safe_attrs(op)
    for k, v in attrs.items():
        if k in have:
            continue
        if isinstance(v, bool):
            op.set_bool_attr(k, v)
        elif isinstance(v, int):
            op.set_int_attr(k, v)
        elif isinstance(v, str):
            op.set_str_attr(k, v)
        else:
            op.set_str_array_attr(k, list(v))


def canonical_serialization(data: bytes) -> bytes:
    """``serialize_pir_program``'s JSON in one canonical byte form, to key
    what runs a program: Paddle writes an op's named attributes (``A``,
    ``OA``: lists of ``{"AT": ..., "N": name}``) in its hash map's order,
    which differs between two imports of the same bytes.  Those lists are
    maps by name (sorted here when their names are unique); every other
    list keeps its order.  Not JSON (or not this schema): the bytes as
    they are."""
    import json

    try:
        tree = json.loads(data)
    except ValueError:
        return data

    def fix(x):
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        if isinstance(x, list):
            items = [fix(v) for v in x]
            if items and all(isinstance(v, dict) and set(v) == {"AT", "N"} for v in items):
                names = [v["N"] for v in items]
                if len(set(map(str, names))) == len(names):
                    items.sort(key=lambda v: str(v["N"]))
            return items
        return x
    return json.dumps(fix(tree), sort_keys=True, separators=(",", ":")).encode()
