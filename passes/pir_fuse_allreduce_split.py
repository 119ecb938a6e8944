"""``fuse_allreduce_split_to_reducescatter_pass``: a C++ DRR pass on PIR
programs (registered on CPU builds), applied with ``paddle.pir.PassManager``
to a clone of the case's main program; the original is never touched.

Documented pattern (the pass source's own comments and diagram):
  1. ``matmul(out_grad, weight)`` (``transpose_x`` false, ``transpose_y``
     true: a column-parallel linear's partial dX) -> ``all_reduce_`` ->
     ``assign`` -> ``split_with_num`` (axis from a ``full``) ->
     ``builtin.slice``, each intermediate used once, becomes one
     ``reduce_scatter`` of the matmul's output over the same ring;
  2. a row-parallel linear with bias and sequence parallelism:
     ``matmul`` -> ``all_reduce_`` -> ``add(bias)`` -> ``split_with_num`` ->
     ``builtin.slice`` -> ``assign``, whose backward all-gathers the output
     grad (``assign`` -> ``all_gather``) into ``add_grad``, becomes
     ``matmul`` -> ``reduce_scatter`` -> ``add(bias)``, the ``add_grad``
     moved before the all-gather (the bias grad computed on the local chunk).
What makes the rewrite a reduce-scatter (and so what this matcher demands
beyond the op chain): the all-reduce SUMS, the split is along dim 0 (the
dim reduce_scatter scatters) into as many chunks as the ring has ranks, and
the slice keeps the rank's own chunk (index = the rank's position in the
ring).  An all-reduce of another reduce type, a split along another dim or
a foreign chunk is a near-miss the pass must leave alone.

Contract where it fires: each matched all-reduce + split is gone, and a
``pd_op.reduce_scatter`` of the same input over the same ring with
``nranks`` = the chunk count stands in its place; the values (each rank's
result is its own chunk of the sum) are decided by the value proof and the
simulated run.
"""
from __future__ import annotations


from passes.base import NativePirPassAdapter, finding, holds
from verify.ir.collectives import COLLECTIVES, kind

NAME = "fuse_allreduce_split_to_reducescatter_pass"
ALL_REDUCES = ("pd_op.all_reduce_", "pd_op.all_reduce")


class PirFuseAllreduceSplit(NativePirPassAdapter):
    name = NAME
    short = "rs_fuse"

    def repro_apply_source(self) -> str:
        return f"""
def apply_pass(main):
    import paddle
    pm = paddle.pir.PassManager()
    pm.add_pass({self.name!r}, {{}})
    pm.run(main)
"""

    # its reproducer runs every rank in lock step (verify/repro/pir_ranks_script.py)
    repro_kind = "pir_ranks"

    # -- the documented pattern ------------------------------------------
    def pattern_present(self, snap) -> bool:
        return any(m["faithful"] for m in chains(snap))

    def contract(self, case, rank, before, after) -> list:
        out = [self.fired_check(case, rank, before, after)]
        from verify.ir.snapshot import changed

        found = chains(before, rank)
        if not found or not changed(before, after):  # fired_check says it all
            return out
        scatters = after.ops_of_type("pd_op.reduce_scatter")
        for m in found:
            ar = m["all_reduce"]
            still = [o for o in after.ops if o.type == ar.type and
                     o.outputs == ar.outputs and o.inputs == ar.inputs]
            if still:
                if m["faithful"]:
                    out.append(finding("all-reduce + split fused", rank,
                                       f"the {ar.type} at op {ar.idx} and its split are still "
                                       "there", op_index=ar.idx))
                else:
                    out.append(holds("near-miss left alone", rank,
                                     f"{ar.type} at op {ar.idx} ({m['why']}) left alone"))
                continue
            rs = [o for o in scatters if _same_source(before, after, ar, o)]
            if not rs:
                out.append(finding("reduce_scatter in place", rank,
                                   f"the {ar.type} at op {ar.idx} is gone but no "
                                   f"pd_op.reduce_scatter reads its input "
                                   f"{ar.inputs.get('x')}", op_index=ar.idx))
                continue
            r = rs[0]
            bad = []
            if int(r.attrs.get("ring_id", 0)) != int(ar.attrs.get("ring_id", 0)):
                bad.append(f"ring {r.attrs.get('ring_id')} instead of "
                           f"{ar.attrs.get('ring_id')}")
            if int(r.attrs.get("nranks", 0)) != m["num"]:
                bad.append(f"nranks {r.attrs.get('nranks')} for a split into {m['num']}")
            if m["kind"] != "sum":
                bad.append(f"the all-reduce took the {m['kind']} (reduce_type "
                           f"{ar.attrs.get('reduce_type')}); reduce_scatter sums")
            if m["axis"] != 0:
                bad.append(f"the split was along dim {m['axis']}; reduce_scatter scatters "
                           "dim 0")
            if m["index"] != m["position"]:
                bad.append(f"rank {rank} kept chunk {m['index']}; reduce_scatter gives it "
                           f"chunk {m['position']}")
            if bad:
                out.append(finding("same reduction, axis and chunk", rank,
                                   f"{ar.type} at op {ar.idx} became reduce_scatter at op "
                                   f"{r.idx}, but " + "; ".join(bad), op_index=r.idx,
                                   all_reduce_op=ar.idx, reduce_type=m["kind"],
                                   split_axis=m["axis"], chunk=m["index"],
                                   rank_position=m["position"]))
            else:
                out.append(holds("same reduction, axis and chunk", rank,
                                 f"{ar.type} at op {ar.idx} + split became reduce_scatter at "
                                 f"op {r.idx} on ring {r.attrs.get('ring_id')}, nranks "
                                 f"{m['num']}, keeping chunk {m['index']}"))
        return out

    def renames(self, case, rank, before, after) -> dict:
        """Consumers' renames, and for ops the DRR rewrite re-created (pattern 2
        rebuilds the matmul, add_grad, add_ and matmul_grad): each vanished
        result of the k-th op of a type is the same slot of the k-th op of
        that type after the rewrite."""
        from verify.ir.renames import consumer_renames

        out = consumer_renames(before, after)
        present = set(after.vars)
        for typ in {o.type for o in before.ops}:
            bs, as_ = before.ops_of_type(typ), after.ops_of_type(typ)
            if len(bs) != len(as_):
                continue
            for b, a in zip(bs, as_):
                for slot, names in b.outputs.items():
                    for old, new in zip(names, a.outputs.get(slot, [])):
                        if old not in present and old not in out and new != old:
                            out[old] = new
        return out

    def intended_changes(self, case, rank, before, after) -> dict:
        return {n: "the rank's chunk now comes from the reduce_scatter (judged by the value "
                   "proof and the simulated run)"
                for o in after.ops_of_type("pd_op.reduce_scatter") for n in o.writes()}


def _same_source(before, after, ar, rs) -> bool:
    """The reduce_scatter ``rs`` reads what the all-reduce ``ar`` read: the same
    value, or the result of an op of the same type, operands and attrs (the
    DRR rewrite re-creates the matmul of pattern 2)."""
    a, b = (ar.inputs.get("x") or [None])[0], (rs.inputs.get("x") or [None])[0]
    if a == b:
        return True
    pa = next((o for o in before.ops if a in o.writes()), None)
    pb = next((o for o in after.ops if b in o.writes()), None)
    strip = ("op_role", "chunk_id", "persistable", "stop_gradient", "dist_attr")
    return pa is not None and pb is not None and pa.type == pb.type and \
        pa.inputs == pb.inputs and \
        {k: v for k, v in pa.attrs.items() if k not in strip} == \
        {k: v for k, v in pb.attrs.items() if k not in strip}


# -- the matcher (snapshots only) ---------------------------------------------
def _users(snap) -> dict:
    out = {}
    for op in snap.ops:
        for n in op.reads():
            out.setdefault(n, []).append(op)
    return out


def _only(users, name, typ):
    us = users.get(name, [])
    return us[0] if len(us) == 1 and us[0].type == typ else None


def chains(snap, rank=None) -> list:
    """Every all-reduce -> [assign | add] -> split_with_num -> builtin.slice
    chain of ``snap`` with what it computes: reduce kind, split axis and
    chunk count, the slice index and this rank's position in the ring
    (``rank`` or ``snap.meta["rank"]``; a 1-D ring of ranks 0..num-1), and
    ``faithful`` when it is the documented pattern (sum, dim 0, own chunk,
    the all-reduce's input a matmul, each link used once)."""
    users = _users(snap)
    producer = {n: op for op in snap.ops for n in op.writes()}
    rank = snap.meta.get("rank", 0) if rank is None else rank
    found = []
    for ar in snap.ops:
        if ar.type not in ALL_REDUCES:
            continue
        slot_in, slot_out, _ = COLLECTIVES[ar.type]
        src = (ar.inputs.get(slot_in) or [None])[0]
        res = (ar.outputs.get(slot_out) or [None])[0]
        mid = _only(users, res, "pd_op.assign")
        if mid is None:  # pattern 2: the bias add, the other reader its add_grad
            rest = users.get(res, [])
            adds = [u for u in rest if u.type == "pd_op.add"]
            if len(adds) != 1 or any(u.type not in ("pd_op.add", "pd_op.add_grad")
                                     for u in rest):
                continue
            mid = adds[0]
        split = _only(users, mid.outputs["out"][0], "pd_op.split_with_num")
        if split is None or (split.inputs.get("x") or [None])[0] != mid.outputs["out"][0]:
            continue
        sl = _only(users, split.outputs["out"][0], "builtin.slice")
        if sl is None:
            continue
        axis = split.attrs.get("axis@value")
        axis = int(axis[0] if isinstance(axis, list) else axis) if axis is not None else None
        num = int(split.attrs.get("num", 0))
        shape = snap.shape(mid.outputs["out"][0]) or []
        if axis is not None and axis < 0:
            axis += len(shape)
        index = int(sl.attrs.get("index", -1))
        red = kind(ar.type, ar.attrs)
        position = rank % num if num else -1
        mm = producer.get(src)
        feeds_mm = mm is not None and mm.type == "pd_op.matmul" and \
            len(users.get(src, [])) == 1
        if mid.type == "pd_op.assign":  # pattern 1: a matmul's partial dX
            feeds_mm = feeds_mm and not mm.attrs.get("transpose_x") and \
                bool(mm.attrs.get("transpose_y"))
        else:  # pattern 2: the slice is assigned, the add's grad all-gathered
            grads = [u for u in users.get(res, []) if u.type == "pd_op.add_grad"]
            gathered = [producer.get((g.inputs.get("out_grad") or [None])[0]) for g in grads]
            feeds_mm = feeds_mm and _only(users, sl.outputs["results"][0], "pd_op.assign") \
                is not None and len(grads) == 1 and gathered[0] is not None and \
                gathered[0].type == "pd_op.all_gather"
        why = [w for w, bad in (
            (f"reduce {red}", red != "sum"), (f"split along dim {axis}", axis != 0),
            (f"chunk {index} kept by ring position {position}", index != position),
            ("no single-use matmul feeding it", not feeds_mm)) if bad]
        found.append({"all_reduce": ar, "split": split, "slice": sl, "kind": red,
                      "axis": axis, "num": num, "index": index, "position": position,
                      "faithful": not why, "why": "; ".join(why) or "the pattern"})
    return found


ADAPTER = PirFuseAllreduceSplit()
