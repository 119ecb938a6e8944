"""Dist-attr records: a legacy program's dist attrs (from its
``DistributedContext``) as plain JSON, written beside the serialized descs in a
program dir because the 3.3.1 protos carry none (``verify/plan/program_format.py``)."""
from __future__ import annotations


def mesh_record(mesh) -> dict | None:
    if mesh is None:
        return None
    ids = list(mesh.process_ids)
    if not ids:
        return None
    return {"shape": list(mesh.shape), "process_ids": ids,
            "dim_names": list(mesh.dim_names)}


def tensor_attr_record(attr) -> dict | None:
    if attr is None:
        return None
    mesh = mesh_record(attr.process_mesh)
    if mesh is None:
        return None
    return {"mesh": mesh, "dims_mapping": list(attr.dims_mapping),
            "chunk_id": int(attr.chunk_id)}


def executed_stream(op, attr) -> str:
    """The stream the executor runs ``op`` on: its desc's dist attr (copied
    with the program, translated to the PIR op's ``execution_stream``), not
    the ``DistributedContext``'s attr, which in 3.3.1 is an object of its own:
    a stream set there after the op was registered never reaches the desc
    (Paddle PR 64662's "set to auto_parallel_mp, but it did not take effect")."""
    try:
        desc_attr = op.desc.dist_attr
    except Exception:  # a desc without a dist attr: the record's own
        desc_attr = None
    if desc_attr is not None:
        return desc_attr.execution_stream
    return attr.execution_stream


def op_attr_record(op, attr) -> dict:
    rec = {"type": op.type, "mesh": None}
    if attr is None:
        return rec
    rec["mesh"] = mesh_record(attr.process_mesh)
    rec["inputs"] = {n: list(attr.get_input_dims_mapping(n))
                     for n in op.desc.input_arg_names()
                     if attr.get_input_dist_attr(n) is not None}
    rec["outputs"] = {n: list(attr.get_output_dims_mapping(n))
                      for n in op.desc.output_arg_names()
                      if attr.get_output_dist_attr(n) is not None}
    rec["execution_stream"] = executed_stream(op, attr)
    rec["impl_type"] = attr.impl_type
    rec["impl_idx"] = int(attr.impl_idx)
    rec["chunk_id"] = int(attr.chunk_id)
    rec["is_recompute"] = bool(attr.is_recompute)
    return rec


def program_record(program, ctx) -> dict:
    block = program.global_block()
    ops = []
    for op in block.ops:
        attr = ctx.get_op_dist_attr_for_program(op)
        if attr is None or mesh_record(attr.process_mesh) is None:
            attr = op.dist_attr
        ops.append(op_attr_record(op, attr))
    tensors = {}
    for var in block.vars.values():
        rec = tensor_attr_record(ctx.get_tensor_dist_attr_for_program(var))
        if rec is None:
            rec = tensor_attr_record(var.dist_attr)
        tensors[var.name] = rec
    return {"ops": ops, "vars": tensors}
