"""Adapter for Paddle's ``auto_parallel_data_parallel_optimization`` (dp_opt).

What the pass exists for (its docstring): "Apply optimizations specialized
for data parallelism: 1. prune grad scaling, 2. overlap comm and calc,
3. fuse allreduce".  On a program where every parameter gradient is summed
over its data-parallel ring (``all_reduce`` SUM) and then scaled by
``1/dp`` in place, it may

* move the ``1/dp`` into the loss-gradient seed (``fill_constant``) and
  delete the scales (legal because the backward is linear in the seed),
* put the syncs on a communication stream with dependencies,
* coalesce the gradients into one buffer (``coalesce_tensor``, the grads
  become views of it) and sum that buffer once.

The planner applies it when ``dp_optimization.enable`` is set (default off
in 3.3.1), with the ``dp_optimization`` config, the dist context, the rank
and ``use_sharding`` (``Parallelizer._apply_post_optimization``).

Contract (judged on snapshots, per rank):

* every gradient an optimizer reads is summed over the same ring(s) as in
  the original, exactly as often, after the op that produced it and before
  the optimizer reads it -- directly, or through the fused buffer of a
  ``coalesce_tensor`` that holds it as a view;
* the factor each gradient carries (loss seed x in-place scales) is the
  original's: the backward is linear in the seed, so moving ``1/dp`` from
  the scales into the seed keeps every synced gradient's value.

The pass reads the process-group registry and world size of the planning
process (``passes/_planner_state.py`` rebuilds them for the case's rank).
"""
from __future__ import annotations

from fractions import Fraction

from verify.ir import collectives

from ._planner_state import planner_state
from .base import PassAdapter, finding, holds

# ops that make a var a view or order it without computing it
_ALIAS_OPS = ("coalesce_tensor", "nop", "depend")


def optimizer_reads(snap) -> list:
    """``[(op, grad var)]`` of every optimizer op (one with Param and Grad)."""
    return [(op, op.inputs["Grad"][0]) for op in snap.ops
            if op.inputs.get("Param") and op.inputs.get("Grad")]


def _sum_kind(op):
    return collectives.is_collective(op.type) and \
        collectives.kind(op.type, op.attrs) in ("sum", "avg")


def grad_syncs(snap, grad, reader_idx) -> tuple:
    """``(producer op index, [(ring, kind, op index)], [scale factors])`` for
    ``grad`` as the op at ``reader_idx`` reads it.

    The producer is the last op before the reader that writes ``grad``
    without reading it (the grad op; in-place scales, sums and clips read
    it) and is not a view/ordering op.  A sync is a sum collective between
    producer and reader writing ``grad``, or writing the fused buffer of a
    ``coalesce_tensor`` (before the sync) that lists ``grad`` as a view.
    Scales are the in-place ``scale`` ops of ``grad`` (or of its buffer) in
    that window.
    """
    producer = None
    for op in snap.ops[:reader_idx]:
        if grad in op.writes() and grad not in op.reads() and op.type not in _ALIAS_OPS:
            producer = op.idx
    start = -1 if producer is None else producer
    buffers = set()
    syncs, scales = [], []
    for op in snap.ops[:reader_idx]:
        if op.type == "coalesce_tensor" and grad in (op.outputs.get("Output") or []):
            buffers = set(op.outputs.get("FusedOutput") or [])
            continue
        if op.idx <= start:
            continue
        names = {grad} | buffers
        if _sum_kind(op) and collectives.output_var(op) in names:
            syncs.append((op.attrs.get("ring_id"), collectives.kind(op.type, op.attrs), op.idx))
        elif op.type == "scale" and set(op.reads()) & names and set(op.writes()) & names:
            scales.append(Fraction(str(op.attrs.get("scale", 1.0))))
    return producer, syncs, scales


def loss_seed(snap):
    """The value of the ``fill_constant`` that seeds the backward (writes a
    ``@GRAD`` var no op has read yet), or None."""
    for op in snap.ops:
        if op.type == "fill_constant" and any(n.endswith("@GRAD") for n in op.writes()):
            return Fraction(str(op.attrs.get("value", 1.0)))
    return None


def synced_once(before, after, rank) -> tuple:
    """``(syncs before by gradient, findings, kept)``: a finding "each
    gradient synced once" for every gradient an optimizer reads summed over
    other rings (or another number of times) than before, and ``[(optimizer
    op, gradient, scales before, scales after)]`` for the gradients whose
    rings are kept."""
    orig = {g: grad_syncs(before, g, op.idx) for op, g in optimizer_reads(before)}
    broken, kept = [], []
    for op, g in optimizer_reads(after):
        if g not in orig:
            continue
        _, syncs_b, scales_b = orig[g]
        _, syncs_a, scales_a = grad_syncs(after, g, op.idx)
        rings_b = sorted((r, k) for r, k, _ in syncs_b)
        rings_a = sorted((r, k) for r, k, _ in syncs_a)
        if rings_a != rings_b:
            broken.append(finding(
                "each gradient synced once", rank,
                f"{op.type} at op {op.idx} reads {g} summed {len(syncs_a)} time(s) over "
                f"rings {[r for r, _ in rings_a]}; the original sums it {len(syncs_b)} "
                f"time(s) over rings {[r for r, _ in rings_b]}",
                op_index=op.idx, op_type=op.type, var=g,
                syncs_before=rings_b, syncs_after=rings_a))
        else:
            kept.append((op, g, scales_b, scales_a))
    return orig, broken, kept


class DataParallelOptimizationAdapter(PassAdapter):
    name = "auto_parallel_data_parallel_optimization"
    short = "dp_opt"
    # checked: a standalone script's legacy executor runs the rewrite and its
    # values match; its applications are proved, nothing to reproduce
    repro_blocker = ("no finding to reproduce: its applications are proved (the "
                     "coalesce_tensor views modelled), and a standalone script's run of "
                     "the rewrite matches the original (checked)")

    def handles(self, case) -> bool:
        """Legacy cases that state what this pass must do on them (the
        planner-made families built for it): the pass finds the data-parallel
        syncs by the planner's ``op_namescope`` mark (``/data_parallel``),
        which hand-spelled programs do not carry, so on them it would do
        nothing for want of a name (what the vocabulary audit is for), not for
        want of a pattern."""
        return super().handles(case) and self.name in case.expect

    def attrs(self, case, rp) -> dict:
        from paddle.distributed.fleet import auto

        config = auto.Strategy().dp_optimization.to_dict()
        return {**config, "dist_context": rp.dist_context, "global_rank": rp.rank,
                "use_sharding": False}

    def apply_local(self, case, rank):
        with planner_state(case, rank):
            return super().apply_local(case, rank)

    def pattern_present(self, snap) -> bool:
        """A data-parallel gradient sync: a parameter gradient an optimizer
        reads is summed over a ring after it is produced."""
        return any(grad_syncs(snap, g, op.idx)[1] for op, g in optimizer_reads(snap))

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired"):
            return results
        n = len(results)
        seed_b, seed_a = loss_seed(before), loss_seed(after)
        orig, broken, kept = synced_once(before, after, rank)
        results += broken
        for op, g, scales_b, scales_a in kept:
            if seed_b is None or seed_a is None:
                continue
            fb, fa = seed_b, seed_a
            for s in scales_b:
                fb *= s
            for s in scales_a:
                fa *= s
            if fb != fa:
                results.append(finding(
                    "scale preserved", rank,
                    f"{g} carries factor {fa} (seed {seed_a} x scales {[str(s) for s in scales_a]}) "
                    f"where the original carries {fb} (seed {seed_b} x scales "
                    f"{[str(s) for s in scales_b]})", op_index=op.idx, op_type=op.type,
                    var=g, factor_before=str(fb), factor_after=str(fa)))
        if len(results) == n:
            results.append(holds("each gradient synced once", rank,
                                 f"{len(orig)} gradient(s) summed over the same rings as "
                                 "before, once each, with the same factor"))
        return results

    def intended_changes(self, case, rank, before, after) -> dict:
        """Synced gradients reach their optimizer through the fused buffer's
        sum and the dependency ops now; the seed is rewritten."""
        out = {}
        for op, g in optimizer_reads(before):
            if grad_syncs(before, g, op.idx)[1]:
                out[g] = "summed through the fused buffer / ordered by the pass's dependency ops"
        for op in after.ops:
            if op.type == "fill_constant" and any(n.endswith("@GRAD") for n in op.writes()):
                out.update({n: "the loss seed carries 1/dp" for n in op.writes()})
                break
        return out


ADAPTER = DataParallelOptimizationAdapter()
