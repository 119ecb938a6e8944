"""Edits of a live program, described as data and carried out per IR.

The in-region mutation operators (``verify/selfcheck/program_mutants.py``) choose a
site on a snapshot, which has one form for both IRs; what they decide to do
there is an :class:`Edit`.  This module is the only place that turns an
Edit into calls on a live program: :func:`apply_legacy` on a ProgramDesc
program, :func:`apply_pir` on a PIR program.  So an operator is written
once and mutates either IR.

Kinds:

* ``insert_unary``: insert a unary op (``scale`` by ``params["factor"]``, or
  ``transpose`` by ``params["perm"]``) reading ``var`` right after op
  ``op_index``, and make the ops ``readers`` (indices before the insertion)
  read its result instead of ``var``.
* ``rename_input``: op ``op_index`` reads ``new`` instead of ``var`` (in
  ``slot``).
* ``set_int_attr``: op ``op_index`` gets ``params["attr"] = params["value"]``.
* ``move_after``: op ``op_index`` moves right after op ``params["reader"]``.
  Legacy only: in SSA (PIR) a value's definition must come before its uses,
  so the move would not even be a program; PIR's verifier rejects it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

FRESH_SUFFIX = {"scale": "@mutant.scaled", "transpose": "@mutant.swapped"}


@dataclass
class Edit:
    kind: str
    op_index: int
    var: str = ""
    new: str = ""
    slot: str = ""
    readers: list = field(default_factory=list)
    params: dict = field(default_factory=dict)


class EditNotPossible(Exception):
    """The edit cannot be made on this IR (e.g. ``move_after`` in SSA)."""


# -- legacy (ProgramDesc) ---------------------------------------------------
def _reorder(block, order):
    """Rebuild ``block``'s op list in ``order`` (indices into the old list)."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    scratch = paddle.static.Program().global_block()
    copies = []
    for i in order:
        d = scratch.desc.append_op()
        d.copy_from(block.ops[i].desc)
        copies.append(d)
    for i in reversed(range(len(block.ops))):
        block._remove_op(i, sync=False)
    for d in copies:
        nd = block.desc.append_op()
        nd.copy_from(d)
    block._sync_with_cpp()


def _fresh(block, name, like, shape=None):
    src = block.var(like)
    return block.create_var(name=name, shape=list(src.shape) if shape is None else shape,
                            dtype=src.dtype, persistable=False, stop_gradient=True)


def apply_legacy(edit: Edit, main, startup, tr=lambda n: n) -> None:
    """Carry out ``edit`` on a legacy ``main``; ``tr`` maps a var name of
    the program the site was chosen on to ``main``'s."""
    block = main.global_block()
    if edit.kind == "insert_unary":
        v = tr(edit.var)
        unary = edit.params["unary"]
        fresh = v + FRESH_SUFFIX[unary]
        role = block.ops[edit.op_index].desc.attr("op_role") \
            if block.ops[edit.op_index].desc.has_attr("op_role") else 0
        shape = list(block.var(v).shape)
        if not block.has_var(fresh):
            _fresh(block, fresh, v, shape)
        if unary == "scale":
            op_type, outputs = "scale", {"Out": [fresh]}
            attrs = {"scale": float(edit.params["factor"]), "bias": 0.0,
                     "bias_after_scale": True}
        else:
            op_type, attrs = "transpose2", {"axis": list(edit.params["perm"])}
            if not block.has_var(fresh + ".xshape"):
                _fresh(block, fresh + ".xshape", v, [0] + shape)
            outputs = {"Out": [fresh], "XShape": [fresh + ".xshape"]}
        block._insert_op(edit.op_index + 1, type=op_type, inputs={"X": [v]}, outputs=outputs,
                         attrs=dict(attrs, op_role=int(role)))
        for r in edit.readers:
            block.ops[r + 1]._rename_input(v, fresh)
    elif edit.kind == "rename_input":
        block.ops[edit.op_index]._rename_input(tr(edit.var), tr(edit.new))
    elif edit.kind == "set_int_attr":
        block.ops[edit.op_index].desc._set_int32_attr(edit.params["attr"],
                                                     int(edit.params["value"]))
    elif edit.kind == "move_after":
        order = [k for k in range(len(block.ops)) if k != edit.op_index]
        order.insert(order.index(edit.params["reader"]) + 1, edit.op_index)
        _reorder(block, order)
    else:
        raise ValueError(f"unknown edit kind {edit.kind!r}")


# -- PIR --------------------------------------------------------------------
def _key(value):
    """A Value's identity: (defining op id, result index).  Never compare
    Values with ``==`` (PIR's operator patch builds a ``pd_op.equal``)."""
    op = value.get_defining_op()
    return None if op is None else (op.id(), value.index())


def pir_values(main, snap_ops) -> dict:
    """``{snapshot name: live Value}``: ``main``'s ops aligned with the ops
    of a snapshot of the same program (same types, same order); each op's
    non-null results in order are its snapshot outputs in slot order."""
    live = main.global_block().ops
    if len(live) != len(snap_ops):
        raise EditNotPossible(f"the live program has {len(live)} ops, the snapshot "
                              f"{len(snap_ops)}")
    out = {}
    for op, rec in zip(live, snap_ops):
        if op.name() != rec.type:
            raise EditNotPossible(f"op {rec.idx}: live {op.name()} stands where the "
                                  f"snapshot has {rec.type}")
        names = [n for slot, ns in rec.outputs.items()
                 if slot not in ("parameter", "output") for n in ns]
        results = [op.result(i) for i in range(op.num_results())
                   if op.result(i).initialized()]
        for n, v in zip(names, results):
            out[n] = v
    try:  # keyword block arguments (named by their keyword, verify/ir/pir_snapshot.py)
        for key, kv in main.global_block().kwargs().items():
            out.setdefault(key, kv)
    except Exception:
        pass
    return out


def apply_pir(edit: Edit, main, startup, snap_ops) -> None:
    """Carry out ``edit`` on a PIR ``main`` whose ops align with
    ``snap_ops`` (the snapshot the site was chosen on)."""
    import paddle

    with paddle.pir_utils.IrGuard():
        values = pir_values(main, snap_ops)
        ops = list(main.global_block().ops)
        op = ops[edit.op_index]
        if edit.kind == "insert_unary":
            v = values[edit.var]
            readers = [ops[r] for r in edit.readers]
            with paddle.static.program_guard(main, startup):
                paddle.pir.set_insertion_point_after(op)
                if edit.params["unary"] == "scale":
                    new = paddle._C_ops.scale(v, float(edit.params["factor"]), 0.0, True)
                else:
                    new = paddle._C_ops.transpose(v, list(edit.params["perm"]))
                paddle.pir.reset_insertion_point_to_end()
            _redirect(readers, v, new)
        elif edit.kind == "rename_input":
            _redirect([op], values[edit.var], values[edit.new], slot=edit.slot)
        elif edit.kind == "set_int_attr":
            op.set_int_attr(edit.params["attr"], int(edit.params["value"]))
        elif edit.kind == "move_after":
            raise EditNotPossible("a PIR value must be defined before its uses (SSA): "
                                  "moving its definition past a reader is no program")
        else:
            raise ValueError(f"unknown edit kind {edit.kind!r}")


def _redirect(readers, old, new, slot=""):
    """Make every operand of ``readers`` (in ``slot`` when given) that is
    ``old`` read ``new``."""
    want = _key(old)
    for op in readers:
        try:
            slots = list(op.get_input_names())
        except Exception:
            slots = []
        for i in range(op.num_operands()):
            if slot and i < len(slots) and slots[i] != slot:
                continue
            src = op.operand_source(i)
            same = src.is_same(old) if want is None else _key(src) == want  # a kwarg: no op
            if src.initialized() and same:
                op.operand(i).set_source(new)
