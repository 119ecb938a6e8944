"""Adapter for Paddle's legacy ``fuse_all_reduce`` (data-parallel comm optimisation).

What the pass exists for (its code and name, ``PassType.COMM_OPT``): runs
of in-place all-reduce sums of dense tensors over one ring, independent of
each other (no dependency between them in the op graph), are coalesced
under ``max_memory_size`` bytes per group: the tensors become views of one
``coalesce_tensor`` buffer (``FusedOutput``) and a single ``all_reduce``
(SUM) of that buffer replaces their syncs.  Where it applies in a training
program: the data-parallel gradient syncs.

Documented pattern (the matcher below, written from that purpose): two or
more parameter gradients an optimizer reads, each summed in place over the
same ring between its producer and its optimizer.

Contract (per rank), where the pattern is present:

* it fires, and every gradient an optimizer reads is summed over the same
  ring(s) as in the original, exactly once, after its producer and before
  its optimizer -- directly or through the fused buffer of a
  ``coalesce_tensor`` that holds it as a view (``grad_syncs`` of the dp_opt
  adapter);
* the factor each gradient carries (loss seed x in-place scales) is the
  original's (a scale moved before the fused sum keeps the value: the sum
  is linear);
* the gradients are coalesced: fewer sum collectives reach them than before.

Where it is absent, the pass changes nothing (``fired_check``).  Values are
judged by the value proof (the coalesce views are modelled) and the
simulated run.
"""
from __future__ import annotations

from verify.ir import collectives

from .auto_parallel_data_parallel_optimization import (grad_syncs, loss_seed, optimizer_reads,
                                                     synced_once)
from .base import PassAdapter, finding, holds

# dp_optimization's fuse_grad_size_in_MB default (auto_parallel/constants.py):
# the group size the planner would hand a gradient-fusing pass
MAX_MEMORY_SIZE = 32 * 1024 * 1024


def in_place_grad_sums(snap) -> dict:
    """``{ring: [grad]}``: parameter gradients an optimizer reads that are
    summed in place over ``ring`` (not through a buffer) before it reads them."""
    out = {}
    for op, g in optimizer_reads(snap):
        _, syncs, _ = grad_syncs(snap, g, op.idx)
        for ring, kind, idx in syncs:
            sync = snap.ops[idx]
            if kind == "sum" and collectives.input_var(sync) == g == \
                    collectives.output_var(sync):
                out.setdefault(ring, []).append(g)
    return out


def _factor(snap, scales):
    seed = loss_seed(snap)
    if seed is None:
        return None
    for s in scales:
        seed *= s
    return seed


def _sum_ops_reaching(snap) -> int:
    """Sum collectives that reach some optimizer's gradient (each counted once)."""
    ops = set()
    for op, g in optimizer_reads(snap):
        ops.update(idx for _, _, idx in grad_syncs(snap, g, op.idx)[1])
    return len(ops)


class FuseAllReduceAdapter(PassAdapter):
    name = "fuse_all_reduce"
    short = "fuse_ar"

    def handles(self, case) -> bool:
        """Legacy cases that state what this pass must do on them: the
        gradient syncs are made by a planner (the engine_dp family), which
        hand-spelled programs without optimizers lack."""
        return super().handles(case) and self.name in case.expect

    def attrs(self, case, rp) -> dict:
        return {"max_memory_size": MAX_MEMORY_SIZE}

    def pattern_present(self, snap) -> bool:
        """Two or more parameter gradients summed in place over one ring."""
        return any(len(set(gs)) >= 2 for gs in in_place_grad_sums(snap).values())

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired") or not self.pattern_present(before):
            return results
        n = len(results)
        orig, broken, kept = synced_once(before, after, rank)
        results += broken
        for op, g, scales_b, scales_a in kept:
            fb, fa = _factor(before, scales_b), _factor(after, scales_a)
            if fb is not None and fa is not None and fb != fa:
                results.append(finding(
                    "scale preserved", rank,
                    f"{g} carries factor {fa} where the original carries {fb}",
                    op_index=op.idx, op_type=op.type, var=g,
                    factor_before=str(fb), factor_after=str(fa)))
        if len(results) == n:
            results.append(holds("each gradient synced once", rank,
                                 f"{len(orig)} gradient(s) summed over the same rings as "
                                 "before, once each, with the same factor"))
        sums_b, sums_a = _sum_ops_reaching(before), _sum_ops_reaching(after)
        if sums_a >= sums_b:
            results.append(finding(
                "syncs coalesced", rank,
                f"{sums_a} sum collective(s) reach the optimizers' gradients after the pass, "
                f"{sums_b} before: nothing was coalesced", sums_before=sums_b,
                sums_after=sums_a))
        else:
            results.append(holds("syncs coalesced", rank,
                                 f"{sums_b} gradient sums became {sums_a}"))
        return results

    def intended_changes(self, case, rank, before, after) -> dict:
        """Synced gradients reach their optimizer through the fused buffer's sum."""
        return {g: "summed through the fused buffer" for gs in
                in_place_grad_sums(before).values() for g in gs}


ADAPTER = FuseAllReduceAdapter()
