"""Each rank's program as the backend would run it: collectives on a ring
that holds the rank, roots and peers that are indices in that ring's group,
a collective's input and output of one dtype, and a startup program that
initialises every persistable the main program reads (at the shape the main
reads it), unless it is fed.

What Paddle 3.3.1 does with ``root`` and ``peer`` (read in the installed
wheel, ``.venv/lib/python3.11/site-packages/paddle``, and the kernels'
sources in Paddle's repository):

* ``root`` of ``broadcast`` / ``c_broadcast`` (legacy) and ``pd_op.broadcast``
  (PIR) is the root's rank **in the ring's communicator**, an index into the
  group, not a global rank: the static-mode wrapper writes ``'root':
  src_rank_in_group`` (``distributed/communication/stream/broadcast.py``,
  ``_broadcast_in_static_mode``; dygraph converts a global ``src`` with
  ``_get_or_throw_group_rank``, ``distributed/communication/group.py``); the
  planner's ``sub_to_global_mesh_func.py`` says "the root arg in broadcast is
  the local index of the rank in the communication group" and passes
  ``comm_group_ids[i].index(root)``.  The kernel hands ``root`` unchanged to
  the ring's comm context (``paddle/phi/kernels/cpu/broadcast_kernel.cc``
  ``comm_context->Broadcast(out, x, root)`` over gloo,
  ``paddle/phi/kernels/gpu/broadcast_kernel.cu`` ``->Broadcast(out, x, root,
  stream)``, i.e. ``ncclBroadcast(..., root, comm)`` whose ``root`` is a rank
  of ``comm``), declared in ``include/paddle/phi/core/distributed/
  nccl_comm_context.h`` / ``gloo_comm_context.h``; a root outside
  ``[0, group size)`` is rejected (``CommStaticCheck::CheckRank(rank,
  world_size)``, ``include/paddle/phi/core/distributed/check/static_check.h``,
  and NCCL's own argument check).  ``reduce``'s ``root_id`` likewise
  (``distributed/communication/stream/reduce.py``: ``'root_id':
  dst_rank_in_group``).
* ``peer`` of ``send_v2`` / ``recv_v2`` is the other rank's index in the
  ring's group: ``distributed/communication/stream/send.py`` / ``recv.py``
  write ``'peer': dst_rank_in_group`` / ``src_rank_in_group``, and the
  planner's ``reshard_funcs/same_status_reshard_func.py`` passes
  ``comm_group.ranks.index(dst)`` / ``.index(src)`` to ``_C_ops.send_v2`` /
  ``recv_v2``.  A peer that is the rank itself waits for itself.
* The comm contexts check that a collective's output has its input's dtype
  (``CommStaticCheck::CheckDataType(out_tensor, in_tensor)``).

A violation is ``NOT_EQUIVALENT``: the backend refuses to run the rewritten
program (or waits for ever, or reads an uninitialised tensor: "Cannot find X
in scope"), so it does not compute what the original computed; nothing is
"kept".  One the original program has too (same op text, same reason) is
reported advisory, marked inherited, as the shape check does: a pass is not
judged by its input's defects.  Ring checks need the case's rings
(``CheckContext.rings``); without them only dtypes and the startup are
checked.
"""
from __future__ import annotations

from verify.ir.collectives import COLLECTIVES, POINT_TO_POINT, exchanges, kind, root_of

from ..verdicts import CheckResult, Verdict

KIND = "dataflow"

# legacy startup ops that write their output at the shape of their ``shape`` attr
_SHAPED_INITS = {"uniform_random", "gaussian_random", "truncated_gaussian_random",
                 "fill_constant", "assign_value"}
# PIR startup ops that store a value under a name, and their name slot
_PIR_STORES = {"builtin.set_parameter": "parameter", "builtin.shadow_output": "output"}


def _is_pir(snap) -> bool:
    return (snap.meta or {}).get("ir") == "pir" or any(
        o.type.startswith(("pd_op.", "builtin.")) for o in list(snap.ops[:8]))


def _truthy(v) -> bool:
    if isinstance(v, (list, tuple)):
        return any(bool(x) for x in v)
    return bool(v)


def _finding(name, program, op, var, message):
    """(key, name, program, op, var, message); the key omits the op's index
    (a pass shifts indices) so an original's finding is recognised."""
    return ((name, program, op.type if op is not None else None,
             op.render() if op is not None else None, var), name, program, op, var, message)


def _group_of(rings, ring, rank):
    """The group of ``ring`` holding ``rank``; None (ring unknown) or [] (not a member)."""
    if ring not in rings and str(ring) not in rings:
        return None
    groups = rings.get(ring, rings.get(str(ring))) or []
    return next((list(g) for g in groups if rank in g), [])


def _collectives(snap, rank, rings, program, ops) -> list:
    out = []
    for op in ops:
        t = op.type
        if t not in COLLECTIVES and t not in POINT_TO_POINT:
            continue
        if t in COLLECTIVES:
            slot_in, slot_out, _ = COLLECTIVES[t]
            x = (op.inputs.get(slot_in) or [None])[0]
            y = (op.outputs.get(slot_out) or [None])[0]
            vx, vy = snap.vars.get(x), snap.vars.get(y)
            if vx is not None and vy is not None and vx.dtype and vy.dtype and \
                    str(vx.dtype) != str(vy.dtype):
                out.append(_finding(
                    "collective dtype", program, op, y,
                    f"{t} reads {x} as {vx.dtype} and writes {y} as {vy.dtype}: the comm "
                    "context requires one dtype (CommStaticCheck::CheckDataType)"))
        if rings is None or not exchanges(t):
            continue
        ring = int(op.attrs.get("ring_id", 0))
        group = _group_of(rings, ring, rank)
        var = (op.reads() or op.writes() or [None])[0]
        if group is None:
            out.append(_finding("collective ring", program, op, var,
                                f"{t} on ring {ring}, which no group of the case declares "
                                f"(rings {sorted(rings)})"))
            continue
        if not group:
            out.append(_finding("collective ring", program, op, var,
                                f"{t} on ring {ring}, whose groups "
                                f"{rings.get(ring, rings.get(str(ring)))} do not hold rank {rank}"))
            continue
        if t in POINT_TO_POINT:
            peer = int(op.attrs.get("peer", 0))
            if not 0 <= peer < len(group):
                out.append(_finding("collective peer", program, op, var,
                                    f"{t} names peer {peer} on ring {ring}, whose group is "
                                    f"{group}: the peer is an index in the group, and "
                                    f"{peer} is not one"))
            elif group[peer] == rank:
                out.append(_finding("collective peer", program, op, var,
                                    f"{t} names peer {peer} on ring {ring} (group {group}): "
                                    f"rank {rank} itself, which waits for ever"))
            continue
        k = kind(t, op.attrs)
        if k == "broadcast" or k.startswith("reduce_") and k != "reduce_scatter":
            root = root_of(op.attrs)
            if not 0 <= root < len(group):
                glob = (f" (it is the global rank of group index {group.index(root)}: "
                        "the backend reads an index, not a global rank)") if root in group else ""
                out.append(_finding("collective root", program, op, var,
                                    f"{t} has root {root} on ring {ring}, whose group is "
                                    f"{group}: the root is an index in the group, and {root} "
                                    f"is not one{glob}"))
    return out


def _first_reads(ops, defined) -> list:
    """[(op, var)]: each var first read before any write in ``ops``."""
    seen, out = set(defined), []
    for op in ops:
        for n in op.reads():
            if n and n not in seen:
                out.append((op, n))
                seen.add(n)
        seen.update(op.writes())
    return out


def _startup_legacy(snap) -> list:
    out = []
    fed = set(snap.feeds)
    written = snap.startup_writes()
    for op, n in _first_reads(snap.ops, fed | written):
        v = snap.vars.get(n)
        if v is not None and v.persistable and not v.is_data:
            out.append(_finding("startup init", "main", op, n,
                                f"{op.type} reads persistable {n}, which the startup program "
                                "never initialises and nothing feeds"))
    for op in snap.startup_ops:
        shape = op.attrs.get("shape")
        if op.type not in _SHAPED_INITS or not isinstance(shape, (list, tuple)) or \
                not all(isinstance(d, int) for d in shape):
            continue
        for n in op.writes():
            v = snap.vars.get(n)
            if v is None or not v.persistable or any(int(d) < 0 for d in v.shape):
                continue
            if [int(d) for d in shape] != [int(d) for d in v.shape]:
                out.append(_finding("startup init", "startup", op, n,
                                    f"{op.type} initialises {n} at {list(shape)}; the main "
                                    f"program reads it at {list(v.shape)}"))
    return out


def _startup_pir(snap, rank) -> list:
    out = []
    fed = set(snap.feeds)
    stored = {n for o in snap.startup_ops if o.type in _PIR_STORES
              for n in o.outputs.get(_PIR_STORES[o.type], [])}
    for op in snap.ops:
        if op.type == "builtin.parameter":
            names = [op.attrs.get("parameter_name")] if op.attrs.get("parameter_name") \
                else op.writes()
        elif op.type == "pd_op.data" and _truthy(op.attrs.get("persistable")):
            names = [op.attrs.get("name")] if op.attrs.get("name") else op.writes()
        else:
            continue
        for n in names:
            if n and n not in stored and n not in fed:
                out.append(_finding("startup init", "main", op, n,
                                    f"{op.type} reads persistable {n}, which the startup "
                                    "program never stores and nothing feeds"))
    import numpy as np

    from verify.numeric.startup_pieces import Unresolved, mismatched, spec, take

    for n, e in mismatched(spec(snap)).items():
        try:
            take(e, rank, n, np.empty(e["written"], dtype=np.int8))
        except Unresolved as exc:
            out.append(_finding("startup init", "startup", None, n, str(exc)))
        except Exception as exc:  # a shape take cannot cut
            out.append(_finding("startup init", "startup", None, n,
                                f"the startup program writes {n} at {e['written']}, the main "
                                f"program reads it at {e['main']}: {exc}"))
    return out


def findings(snap, rank, rings) -> list:
    """Every violation of ``snap`` (one rank's programs):
    ``[(key, name, program, op, var, message)]``."""
    got = _collectives(snap, rank, rings, "main", snap.ops)
    got += _collectives(snap, rank, rings, "startup", snap.startup_ops)
    got += _startup_pir(snap, rank) if _is_pir(snap) else _startup_legacy(snap)
    return got


def run(ctx) -> list:
    rings = getattr(ctx, "rings", None)
    got = findings(ctx.after, ctx.rank, rings)
    if not got:
        return [CheckResult(
            KIND, "backend validity", ctx.rank, Verdict.EQUIVALENT,
            f"every collective's ring, root, peer and dtype as the backend reads them"
            f"{'' if rings is not None else ' (rings unknown: dtypes only)'}, and every "
            "persistable the main program reads initialised by the startup")]
    had = set()
    if ctx.before is not None and ctx.before is not ctx.after:
        had = {f[0] for f in findings(ctx.before, ctx.rank, rings)}
    out = []
    for key, name, program, op, var, message in got:
        where = f"{program} op {op.idx} ({op.type})" if op is not None else f"{program}"
        c = CheckResult(
            KIND, name, ctx.rank, Verdict.NOT_EQUIVALENT,
            f"{ctx.where()}: {where}: {message}: the backend does not run this program",
            counterexample={"rank": ctx.rank, "program": program,
                            "op_index": op.idx if op is not None else None,
                            "op_type": op.type if op is not None else None, "var": var},
            details={"crashes_executor": True})
        if key in had:
            c.advisory = True
            c.details["inherited"] = True
            c.message += " (inherited: the original program has it too; not this pass's)"
        out.append(c)
    return out
