"""What a read after an in-place write reads, made explicit.

A PIR op such as ``%d = pd_op.scale_(%c, 2)`` writes ``%c``'s buffer: ``%d``
is the same memory, and a later op whose operand is ``%c`` reads the scaled
tensor, not the value ``%c`` was defined with.  The snapshot keeps the
literal operands (``verify/ir/pir_snapshot.py`` records the aliasing in
``meta["inplace"]``, ``{result: operand}``, from Paddle's own op info);
:func:`resolved` is the same program with every later read of a written
buffer renamed to the write that last wrote it (an SSA rename), which is
what one SSA execution (the value proof) must run.

A legacy program needs none: an in-place op writes the very name it reads
(``sgd``'s ``ParamOut`` = ``Param``, ``scale`` with ``Out`` = ``X``), and an
execution that binds names in program order already reads the write.
"""
from __future__ import annotations

from verify.ir.snapshot import Op, ProgramSnapshot


def pairs_by_name(op) -> list:
    """``[(input slot, output slot)]`` of a ``pd_op.*_`` op by slot names, for
    a PIR snapshot made without Paddle's op info (by hand): ``x`` -> ``x_out``
    style pairs, ``output`` -> ``out`` (``assign_out_``), else ``x`` ->
    ``out``."""
    if not (op.type.startswith("pd_op.") and op.type.endswith("_")):
        return []
    if op.type == "pd_op.assign_out_":
        return [("output", "out")]
    pairs = [(s[:-4], s) for s in op.outputs if s.endswith("_out") and s[:-4] in op.inputs]
    if not pairs and "out" in op.outputs and "x" in op.inputs:
        pairs = [("x", "out")]
    return pairs


def aliases(snap: ProgramSnapshot, startup: bool = False) -> dict:
    """``{result name: operand name}``: the buffer each in-place result writes
    (``{}`` for a legacy snapshot)."""
    meta = snap.meta or {}
    key = "startup_inplace" if startup else "inplace"
    if key in meta:
        return dict(meta[key] or {})
    if meta.get("ir") != "pir":
        return {}
    out = {}
    for op in (snap.startup_ops if startup else snap.ops):
        for src, dst in pairs_by_name(op):
            ins, outs = op.inputs.get(src) or [], op.outputs.get(dst) or []
            if ins and outs:
                out[outs[0]] = ins[0]
    return out


def _resolve(ops: list, alias: dict) -> tuple:
    """``(ops, renamed reads)``: each read of a buffer an in-place op wrote
    earlier reads that write (the last one)."""
    if not alias:
        return ops, 0
    root_of, latest = {}, {}  # value -> its buffer's first value; buffer -> last write
    out, renamed = [], 0
    for op in ops:
        def read(n):
            return latest.get(root_of.get(n, n), n)
        inputs = {s: [read(n) for n in names] for s, names in op.inputs.items()}
        if inputs != op.inputs:
            renamed += sum(a != b for s in inputs for a, b in zip(inputs[s], op.inputs[s]))
            op = Op(op.idx, op.type, inputs, op.outputs, op.attrs, op.role, op.stream)
        for n in op.writes():
            if n in alias:
                root = root_of.get(alias[n], alias[n])
                root_of[n] = root
                latest[root] = n
        out.append(op)
    return out, renamed


def resolved(snap: ProgramSnapshot) -> ProgramSnapshot:
    """``snap`` with every read after an in-place write renamed to the write
    (the very object when nothing is renamed)."""
    ops, n_main = _resolve(snap.ops, aliases(snap))
    sops, n_start = _resolve(snap.startup_ops, aliases(snap, startup=True))
    if not (n_main or n_start):
        return snap
    meta = dict(snap.meta)
    meta["inplace_reads_renamed"] = n_main + n_start
    return ProgramSnapshot(ops, snap.vars, sops, list(snap.feeds), meta)


def grads_read(snap: ProgramSnapshot) -> dict:
    """``{literal grad operand: the value read}`` of ``snap``'s optimizer ops
    (ops with a ``param`` and a ``grad`` operand, as
    ``optimizer_operands.param_grad_operands`` finds them live): what each
    reads in one SSA execution, the last in-place write of its operand's
    buffer before it (:func:`resolved`'s rename), else the operand itself.
    An operand two optimizers read as different writes is left out.

    A record that names the gradient by the optimizer's literal operand (the
    planner records a gradient merge's accumulator, a keyword block
    argument, by its keyword) means the buffer as the optimizer reads it:
    after a ``scale_`` the optimize job runs on it first, the scaled tensor."""
    got: dict = {}
    for raw, res in zip(snap.ops, resolved(snap).ops):
        if not (raw.inputs.get("param") and raw.inputs.get("grad")):
            continue
        for n, r in zip(raw.inputs["grad"], res.inputs["grad"]):
            got.setdefault(n, set()).add(r)
    return {n: rs.pop() for n, rs in got.items() if len(rs) == 1}
