"""Adapter for Paddle's ``auto_parallel_sequence_parallel_optimization``.

What the pass exists for (its docstring): "Fuse the allreduce + split into
reducescatter" -- the tensor-parallel sum of a row-parallel linear's partial
products, split along the sequence dim so that each rank keeps its own
chunk (sequence parallelism), is one ``reduce_scatter`` over the same ring.
(Its other two duties, memory optimization and backward overlap, are empty
in 3.3.1.)  The planner applies it after partitioning whenever
``sp_optimization.enable`` is set, which is the 3.3.1 default.
"""
from __future__ import annotations

from verify.ir import collectives

from .base import PassAdapter, finding, holds


def _ring_size(case, ring_id):
    groups = case.rings.get(ring_id) if case is not None else None
    return len(groups[0]) if groups else None


def fused_pairs(snap, case=None, rank=None) -> list:
    """(sum op, split op, kept chunk var) triples the pass exists to fuse.

    Written from the documented pattern, not the pass's code: a sum over a
    ring (any spelling, ``verify/ir/collectives.py``) whose result is split
    along dim 0 into equal chunks, one per rank of the ring (when the case
    says how large the ring is), of which the program goes on with exactly
    one, and, when the rank is known, the chunk whose index is the rank's
    position in the ring -- what a reduce-scatter leaves on that rank.
    """
    writer = {}
    readers = {}
    for op in snap.ops:
        for n in op.reads():
            readers.setdefault(n, []).append(op)
    out = []
    for op in snap.ops:
        if op.type == "split" and int(op.attrs.get("axis", 0)) == 0 \
                and not op.inputs.get("AxisTensor") and not op.inputs.get("SectionsTensorList"):
            src = writer.get((op.inputs.get("X") or [None])[0])
            chunks = op.outputs.get("Out") or []
            sections = list(op.attrs.get("sections") or [])
            equal = not sections or len(set(sections)) == 1
            if src is not None and collectives.is_allreduce_sum(src) and equal and chunks:
                ring = src.attrs.get("ring_id")
                size = _ring_size(case, ring)
                used = [i for i, c in enumerate(chunks)
                        if any(r.idx > op.idx for r in readers.get(c, []))]
                own = None
                if case is not None and rank is not None and size:
                    group = next((g for g in case.rings[ring] if rank in g), None)
                    own = group.index(rank) if group else None
                if (size is None or size == len(chunks)) and len(used) == 1 \
                        and (own is None or used[0] == own):
                    out.append((src, op, chunks[used[0]]))
        for n in op.writes():
            writer[n] = op
    return out


class SequenceParallelOptimizationAdapter(PassAdapter):
    name = "auto_parallel_sequence_parallel_optimization"
    short = "sp_opt"

    def attrs(self, case, rp) -> dict:
        """As the planner hands it (``Parallelizer._apply_post_optimization``):
        the ``sp_optimization`` config, the dist context, the rank.  The pass
        reads ``dist_context.strategy.sp_optimization.enable``; a context
        built without a strategy gets the default one, where it is True."""
        ctx = rp.dist_context
        if ctx.strategy is None:
            from paddle.distributed.fleet import auto

            ctx._strategy = auto.Strategy()
        config = ctx.strategy.sp_optimization.to_dict()
        return {**config, "dist_context": ctx, "global_rank": rp.rank}

    def pattern_present(self, snap) -> bool:
        meta = snap.meta or {}
        return bool(fused_pairs(snap, _case_of(meta), meta.get("rank")))

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired"):
            return results
        pairs = fused_pairs(before, case, rank)
        n = len(results)
        left = fused_pairs(after, case, rank)
        for s, sp, _ in left:
            results.append(finding("sum and split fused", rank,
                                   f"{s.type} at op {s.idx} and split at op {sp.idx} are "
                                   "still there", op_index=sp.idx, op_type="split",
                                   var=sp.inputs["X"][0]))
        for s, sp, kept in pairs:
            rs = [o for o in after.ops if o.type in ("reduce_scatter", "c_reducescatter")
                  and kept in o.writes()]
            if not rs:
                results.append(finding(
                    "reduce_scatter writes the kept chunk", rank,
                    f"no reduce_scatter writes {kept} (the chunk of split op {sp.idx})",
                    op_index=sp.idx, op_type="split", var=kept))
                continue
            op = rs[0]
            size = _ring_size(case, s.attrs.get("ring_id"))
            src = collectives.input_var(s)
            problems = []
            if collectives.input_var(op) != src:
                problems.append(f"reads {collectives.input_var(op)}, not the sum's input {src}")
            if op.attrs.get("ring_id") != s.attrs.get("ring_id"):
                problems.append(f"ring {op.attrs.get('ring_id')}, not the sum's "
                                f"{s.attrs.get('ring_id')}")
            if size is not None and int(op.attrs.get("nranks", -1)) != size:
                problems.append(f"nranks {op.attrs.get('nranks')}, ring size {size}")
            if problems:
                results.append(finding(
                    "reduce_scatter replaces the sum", rank,
                    f"reduce_scatter at op {op.idx}: " + "; ".join(problems),
                    op_index=op.idx, op_type=op.type, var=kept))
        touched = {o.render() for s, sp, _ in pairs for o in (s, sp)}
        kept_ops = {o.render() for o in after.ops}
        for op in before.ops:
            if op.render() not in touched and op.render() not in kept_ops:
                results.append(finding(
                    "other ops kept", rank,
                    f"op {op.idx} ({op.type}) of the original is missing from the rewritten "
                    "program, though the pass only fuses sum + split pairs",
                    op_index=op.idx, op_type=op.type,
                    var=(op.writes() or op.reads() or [None])[0]))
        if len(results) == n:
            results.append(holds("fused", rank, f"{len(pairs)} sum + split pair(s) became "
                                 "reduce_scatter over the same ring"))
        return results

    def intended_changes(self, case, rank, before, after) -> dict:
        """The kept chunk is now written by the reduce_scatter."""
        return {kept: f"written by the reduce_scatter fused from op {s.idx} and split op "
                      f"{sp.idx}" for s, sp, kept in fused_pairs(before, case, rank)}


def _case_of(meta):
    """The case a snapshot was taken of (its meta names it), for the ring
    sizes; None when it is not a known case."""
    name = meta.get("case")
    if not name:
        return None
    import cases

    try:
        return cases.all_cases().get(name)
    except Exception:
        return None


ADAPTER = SequenceParallelOptimizationAdapter()
