"""Adapter for Paddle's ``auto_parallel_fused_linear_promotion``.

What the pass exists for: for a row-parallel linear with bias
(``matmul_v2 -> all_reduce/reduce_scatter -> [cast] -> elementwise_add``) it
adds the bias *before* the collective on the first tensor-parallel rank only,
and on the other ranks deletes the bias, its gradient, its optimizer and clip
ops and its startup initialisation, so that a later pass can fuse
matmul + bias into one GEMM epilogue.
"""
from __future__ import annotations

from verify.ir import collectives

from .base import PassAdapter, finding, holds


def _row_collective(op) -> bool:
    """The collective that ends a row-parallel linear: a sum over the ring,
    or its sequence-parallel form, a reduce-scatter."""
    return collectives.is_collective(op.type) and \
        collectives.kind(op.type, op.attrs) in ("sum", "reduce_scatter")


def _first(op, *slots):
    for s in slots:
        if op.inputs.get(s):
            return op.inputs[s][0]
    return None


def biases(snap) -> dict:
    """Bias parameters of row-parallel linears: ``{bias: add op index}``.

    A bias is the parameter (or the cast of one, as in AMP O1) added by an
    ``elementwise_add`` to the output of a collective (or of a cast of it).
    """
    writer = {}  # var -> its latest writer so far (collectives run in place)
    found = {}
    for op in snap.ops:
        if op.type != "elementwise_add" or op.role != 0:
            for n in op.writes():
                writer[n] = op
            continue
        x, y = _first(op, "X"), _first(op, "Y")
        src = writer.get(x)
        if src is not None and src.type == "cast":
            src = writer.get(_first(src, "X"))
        if src is None or not _row_collective(src):
            continue
        yw = writer.get(y)
        if yw is not None and yw.type == "cast":
            y = _first(yw, "X")
        v = snap.var(y)
        if v is not None and v.is_parameter:
            found[y] = op.idx
        for n in op.writes():
            writer[n] = op
    return found


def _pattern_ops(snap) -> set:
    """Indices of the ops of each promoted linear: its collective, the casts
    around it, the bias add, and the grads of that add and of the matmul."""
    adds = set(biases(snap).values())
    writer, region = {}, set()
    for op in snap.ops:
        if op.idx in adds:
            region.add(op.idx)
            src = writer.get(_first(op, "X"))
            while src is not None and src.type == "cast":
                region.add(src.idx)
                src = writer.get(_first(src, "X"))
            if src is not None:
                region.add(src.idx)
        for n in op.writes():
            writer[n] = op
    grads = {n + "@GRAD" for i in region for n in snap.ops[i].writes()}
    for op in snap.ops:  # backward ops reading the grads of the region's outputs
        if op.type in ("elementwise_add_grad", "matmul_v2_grad", "cast", "all_gather") and \
                grads & set(op.reads()):
            region.add(op.idx)
            grads |= set(op.writes())
    return region


class PromotionAdapter(PassAdapter):
    name = "auto_parallel_fused_linear_promotion"
    short = "promotion"

    def attrs(self, case, rp) -> dict:
        return {"dist_context": rp.dist_context, "global_rank": rp.rank,
                "enable_sp": case.enable_sp, "amp_level": case.amp_level,
                "params_grads": rp.params_grads}

    def pattern_present(self, snap) -> bool:
        """Documented pattern: a row-parallel linear with bias, i.e. a
        parameter (or its AMP cast) added to the output of a ring sum or
        reduce-scatter (or of a cast of it)."""
        return bool(biases(snap))

    def intended_changes(self, case, rank, before, after) -> dict:
        """The bias (and everything derived from it), and the vars of the
        linear's ops, whose writers the promotion reorders."""
        out = {b: "bias promoted before the collective" for b in biases(before)}
        region = _pattern_ops(before)
        for op in before.ops:
            if op.idx in region:
                for n in op.writes():
                    out.setdefault(n, f"written by the promoted linear's op {op.idx}")
        return out

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired"):
            return results
        first = case.tp_index(rank) == 0
        bias_names = biases(before)
        n = len(results)
        if first:
            results += self._first_rank(rank, bias_names, after)
        else:
            results += self._other_rank(rank, bias_names, after)
        results += self._startup_kept(rank, bias_names, before, after, first)
        if first:
            results += self._dp_broadcast_kept(case, rank, bias_names, before, after)
        coll_b = [o.type for o in before.ops if _row_collective(o) and o.role == 0]
        coll_a = [o.type for o in after.ops if _row_collective(o) and o.role == 0]
        if coll_b != coll_a:
            results.append(finding("forward collectives kept", rank,
                                   f"forward collectives changed from {coll_b} to {coll_a}",
                                   before=coll_b, after=coll_a))
        if len(results) == n:
            results.append(holds("promotion", rank,
                                 "bias promoted on the first TP rank" if first else
                                 "bias, grad, optimizer and init removed on this rank"))
        return results

    def _first_rank(self, rank, bias_names, after) -> list:
        out = []
        producers = {}  # op index -> {var it reads: that var's latest writer}
        current = {}
        for op in after.ops:
            producers[op.idx] = {r: current.get(r) for r in op.reads()}
            for name in op.writes():
                current[name] = op
        for bias in bias_names:
            adds = [o for o in after.ops if o.type == "elementwise_add" and o.role == 0
                    and (bias in o.reads() or any(
                        producers[o.idx].get(r) is not None
                        and producers[o.idx][r].type == "cast"
                        and bias in producers[o.idx][r].reads() for r in o.reads()))]
            if not adds:
                out.append(finding("bias kept on first rank", rank,
                                   f"no forward elementwise_add reads bias {bias} on the "
                                   "first TP rank", var=bias))
                continue
            for add in adds:
                src = producers[add.idx].get(_first(add, "X"))
                if src is not None and _row_collective(src):
                    out.append(finding(
                        "bias before collective", rank,
                        f"elementwise_add at op {add.idx} still adds bias {bias} after "
                        f"{src.type} at op {src.idx}", op_index=add.idx,
                        op_type=add.type, var=bias))
        return out

    def _other_rank(self, rank, bias_names, after) -> list:
        out = []
        names = {n: b for b in bias_names for n in (b, b + "@GRAD")}
        reported = set()
        for op in after.ops:  # one scan; the first use of each bias is reported
            for n in op.reads() + op.writes():
                if n in names and names[n] not in reported:
                    reported.add(names[n])
                    out.append(finding(
                        "bias removed on other ranks", rank,
                        f"op {op.idx} ({op.type}) still uses {n} on a non-first "
                        "TP rank", op_index=op.idx, op_type=op.type, var=n))
        for bias in bias_names:
            for op in after.startup_ops:
                if bias in op.writes():
                    out.append(finding(
                        "bias init removed", rank,
                        f"startup op {op.idx} ({op.type}) still initialises {bias}",
                        op_index=op.idx, op_type=op.type, var=bias, program="startup"))
        return out

    def _dp_broadcast_kept(self, case, rank, bias_names, before, after) -> list:
        """On the first TP rank the bias stays, so its broadcast over a
        data-parallel ring (replicas in sync) must stay too; only the
        broadcast over its TP ring goes."""
        tp_rings = {rid for rid, groups in case.rings.items()
                    if any(len(g) > 1 and len({case.dp_index(r) for r in g}) == 1
                           for g in groups)}
        kept = {o.render() for o in after.startup_ops}
        out = []
        for op in before.startup_ops:
            if op.type not in ("broadcast", "c_broadcast"):
                continue
            src = _first(op, "x", "X")
            ring = op.attrs.get("ring_id")
            if src in bias_names and ring not in tp_rings and op.render() not in kept:
                out.append(finding(
                    "DP broadcast of bias kept", rank,
                    f"startup broadcast of {src} over data-parallel ring {ring} (op "
                    f"{op.idx}) was deleted on the first TP rank, which keeps the bias",
                    op_index=op.idx, op_type=op.type, var=src, ring_id=ring,
                    program="startup"))
        return out

    def _startup_kept(self, rank, bias_names, before, after, first) -> list:
        """Startup ops that write anything other than a removed bias (or its
        optimizer state) must survive: a DP broadcast of a weight is not the
        pass's to delete."""
        def related(name):
            return any(name == b or name.startswith(b + "_") or name.startswith(b + "@")
                       for b in bias_names)

        def kept(op):
            return [n for n in op.writes() if not related(n)]

        before_ops = [o.render() for o in before.startup_ops if kept(o)]
        after_ops = {o.render() for o in after.startup_ops}
        out = []
        for op, line in zip([o for o in before.startup_ops if kept(o)], before_ops):
            if line not in after_ops:
                out.append(finding(
                    "unrelated startup ops kept", rank,
                    f"startup op {op.idx} ({op.type} of {', '.join(kept(op))}) was "
                    "deleted though it does not belong to a removed bias",
                    op_index=op.idx, op_type=op.type, var=kept(op)[0], program="startup"))
        return out


ADAPTER = PromotionAdapter()
