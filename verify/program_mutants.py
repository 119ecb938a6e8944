"""Program-level mutation operators, applied to a rewritten program.

Each operator picks a site from the snapshot of the rewritten program (so
the choice is deterministic and explainable), edits the live Paddle program
in place, and returns a one-line description, or ``None`` when the program
has no site for it.  ``equivalent_by_argument`` is set when the operator
itself can argue the mutant changes nothing (a survivor then is no gap).
"""
from __future__ import annotations

from dataclasses import dataclass

from verify.legacy_ir import paddle_module

COLLECTIVES = {"all_reduce", "c_allreduce_sum", "mp_allreduce_sum", "reduce_scatter",
               "all_gather", "broadcast", "c_identity"}


@dataclass
class Mutation:
    operator: str
    description: str
    equivalent_by_argument: str = ""


def _reorder(block, order):
    """Rebuild ``block``'s op list in ``order`` (indices into the old list)."""
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


def _deps(a, b) -> bool:
    wa, ra = set(a.writes()), set(a.reads())
    wb, rb = set(b.writes()), set(b.reads())
    return bool(wa & rb or wb & ra or wa & wb)


def drop_op(main, startup, snap, rank):
    cands = [o for o in snap.ops if o.role in (0, 1) and o.type not in ("fill_constant",)]
    if not cands:
        return None
    op = cands[(rank * 7 + 3) % len(cands)]
    main.global_block()._remove_op(op.idx)
    return Mutation("drop op", f"dropped op {op.idx} ({op.type})")


def swap_dependent(main, startup, snap, rank):
    pairs = [(a, b) for a, b in zip(snap.ops, snap.ops[1:]) if _deps(a, b)
             and a.type not in COLLECTIVES and b.type not in COLLECTIVES]
    if not pairs:
        return None
    a, b = pairs[(rank * 5 + 1) % len(pairs)]
    order = list(range(len(snap.ops)))
    order[a.idx], order[b.idx] = b.idx, a.idx
    _reorder(main.global_block(), order)
    return Mutation("swap dependent ops", f"swapped op {a.idx} ({a.type}) and op {b.idx} "
                                          f"({b.type}), which depend on each other")


def swap_across_collective(main, startup, snap, rank):
    for c in snap.ops:
        if c.type in COLLECTIVES and c.idx > 0 and c.type != "c_identity":
            prev = snap.ops[c.idx - 1]
            if prev.type in COLLECTIVES:
                continue
            order = list(range(len(snap.ops)))
            order[prev.idx], order[c.idx] = c.idx, prev.idx
            _reorder(main.global_block(), order)
            eq = "" if _deps(prev, c) else (
                f"op {prev.idx} ({prev.type}) and the {c.type} share no variable")
            return Mutation("swap across collective",
                            f"moved op {prev.idx} ({prev.type}) after {c.type} at op {c.idx}",
                            eq)
    return None


def rename_input(main, startup, snap, rank):
    for op in snap.ops:
        if op.role != 1 or op.type in COLLECTIVES:
            continue
        for slot, names in op.inputs.items():
            for n in names:
                v = snap.var(n)
                if v is None or v.is_parameter:
                    continue
                twins = [w for w in snap.vars.values() if w.name != n and w.shape == v.shape
                         and w.dtype == v.dtype and not w.is_parameter
                         and any(w.name in o.writes() for o in snap.ops[:op.idx])]
                if twins:
                    w = sorted(twins, key=lambda t: t.name)[rank % len(twins)]
                    main.global_block().ops[op.idx]._rename_input(n, w.name)
                    return Mutation("rename input", f"op {op.idx} ({op.type}) reads {w.name} "
                                                    f"instead of {n} (same shape)")
    return None


def reshape_target(main, startup, snap, rank):
    for op in snap.ops:
        if op.type == "reshape2":
            shape = list(op.attrs.get("shape", []))
            if len(shape) == 2 and shape[0] > 0 and shape[1] > 0 and shape[0] != shape[1]:
                new = [shape[1], shape[0]]
            elif len(shape) >= 2 and all(d > 0 for d in shape):
                new = [shape[0] * shape[1]] + shape[2:]
            else:
                continue
            main.global_block().ops[op.idx].desc._set_int32s_attr("shape", new)
            return Mutation("reshape target", f"reshape2 at op {op.idx}: target {shape} -> "
                                              f"{new} (same element count)")
    return None


def collective_attr(main, startup, snap, rank):
    for op in snap.ops:
        if op.type == "all_reduce":
            main.global_block().ops[op.idx].desc._set_int32_attr("reduce_type", 1)
            return Mutation("reduce_type", f"all_reduce at op {op.idx}: SUM -> MAX")
        if op.type == "c_allreduce_sum":
            main.global_block().ops[op.idx].desc._set_int32_attr("ring_id", 99)
            return Mutation("ring_id", f"c_allreduce_sum at op {op.idx}: ring 0 -> 99")
    return None


def delete_startup_init(main, startup, snap, rank):
    for op in snap.startup_ops:
        if any(snap.var(n) is not None and snap.var(n).is_parameter for n in op.writes()):
            startup.global_block()._remove_op(op.idx)
            return Mutation("delete startup init",
                            f"startup op {op.idx} ({op.type} of {op.writes()[0]}) deleted")
    return None


def remove_collective(main, startup, snap, rank):
    for op in snap.ops:
        if op.type in COLLECTIVES and op.type != "c_identity":
            main.global_block()._remove_op(op.idx)
            return Mutation("remove collective", f"removed {op.type} at op {op.idx}")
    return None


def duplicate_bias_add(main, startup, snap, rank):
    for op in snap.ops:
        if op.type == "elementwise_add" and op.role == 0:
            y = op.inputs["Y"][0]
            v = snap.var(y)
            if v is None or not v.is_parameter:
                continue
            out = op.outputs["Out"][0]
            block = main.global_block()
            block._insert_op_without_sync(op.idx + 1, type="elementwise_add",
                                          inputs={"X": [out], "Y": [y]},
                                          outputs={"Out": [out]},
                                          attrs={"axis": -1, "op_role": 0})
            block._sync_with_cpp()
            return Mutation("duplicate bias add", f"bias {y} added twice after op {op.idx}")
    return None


def cast_dtype(main, startup, snap, rank):
    from paddle.base import core

    for op in snap.ops:
        if op.type == "cast":
            d = main.global_block().ops[op.idx].desc
            old = d.attr("out_dtype")
            new = int(core.VarDesc.VarType.FP64) if old != int(core.VarDesc.VarType.FP64) \
                else int(core.VarDesc.VarType.FP32)
            d._set_int32_attr("out_dtype", new)
            return Mutation("cast dtype", f"cast at op {op.idx}: out_dtype {old} -> {new}")
    return None


def flip_trans(main, startup, snap, rank):
    for op in snap.ops:
        if op.type in ("matmul_v2", "matmul_v2_grad") and op.role == 1:
            x, y = snap.shape(op.inputs["X"][0]), snap.shape(op.inputs["Y"][0])
            if x and y and len(y) == 2 and y[0] == y[1]:
                slot = "trans_y"
            elif x and len(x) >= 2 and x[-1] == x[-2]:
                slot = "trans_x"
            else:
                slot = "trans_y"
            d = main.global_block().ops[op.idx].desc
            d._set_bool_attr(slot, not bool(op.attrs.get(slot)))
            return Mutation("flip trans", f"{op.type} at op {op.idx}: {slot} flipped")
    return None


OPERATORS = [drop_op, swap_dependent, swap_across_collective, rename_input, reshape_target,
             collective_attr, delete_startup_init, remove_collective, duplicate_bias_add,
             cast_dtype, flip_trans]
