"""Adapter for Paddle's ``auto_parallel_sharding`` (short ``sharding``).

What the pass exists for (ZeRO stages 1 and 2 of the legacy auto-parallel
Engine, ``strategy.sharding``): in a data-parallel program, the parameters'
optimizer updates and optimizer states are partitioned across the ranks of
the data-parallel group.  Each parameter gets one *owner* rank, which alone
keeps its optimizer op and states and updates it; every other rank receives
the updated parameter by a ``broadcast`` from the owner over the DP ring.
Gradients: stage 1 keeps the all-reduce (or reduces to the owner); stage 2
reduces each gradient to its owner only (``reduce`` with ``root_id`` = the
owner).

The registry holds one adapter per pass name, so the stage is chosen per
case: ``case.params["stage"]`` (1 or 2; default 1); ``case.params
["sharding"]`` sets the strategy's other sharding switches (``enable_overlap``,
``param_bucket_size_numel``, ...).  Attrs as the
Parallelizer hands them (``Parallelizer._apply_post_optimization``): the
``sharding`` config of the strategy with ``enable``/``stage``/``degree``
set, the dist context, the ``params_grads`` list (a copy: the pass
reorders it), the rank, ``gradient_sync_after_accumulate`` from the
``dp_optimization`` config.  The pass looks up the DP process group in the
auto-parallel group registry, so it runs under the planner's process state
(``passes/_planner_state.py``).
"""
from __future__ import annotations

from verify.ir import collectives

from ._planner_state import planner_state
from .base import PassAdapter, finding, holds

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adamax", "lamb",
              "merged_momentum", "lars_momentum", "decayed_adagrad")


def stage_of(case) -> int:
    return int((case.params or {}).get("stage", 1)) if case is not None else 1


def dp_ring(case, rank):
    """(ring id, group) of the ring the case's data-parallel gradients are
    summed over: the ring of the group that holds every rank of the case's
    DP dimension for ``rank``."""
    if case is None:
        return None, None
    members = sorted(r for r in case.ranks if case.tp_index(r) == case.tp_index(rank))
    for ring, groups in sorted(case.rings.items()):
        for g in groups:
            if int(ring) != 0 and sorted(g) == members and rank in g:
                return int(ring), list(g)
    return None, None


def optimizer_updates(snap) -> dict:
    """{parameter: op} of the optimizer ops that update a parameter."""
    out = {}
    for op in snap.ops:
        if op.type in OPTIMIZERS and op.inputs.get("Param"):
            out[op.inputs["Param"][0]] = op
    return out


def grad_sums(snap) -> dict:
    """{grad var: collective op} of the gradients summed over a ring
    (all-reduce or reduce, any spelling)."""
    out = {}
    for op in snap.ops:
        if op.type in collectives.COLLECTIVES and \
                collectives.kind(op.type, op.attrs) in ("sum", "reduce_sum", "avg", "reduce_avg"):
            v = collectives.input_var(op)
            if v and v.endswith("@GRAD"):
                out[v] = op
    return out


class ShardingAdapter(PassAdapter):
    name = "auto_parallel_sharding"
    short = "sharding"

    def handles(self, case) -> bool:
        """Legacy cases planned for sharding: those whose params name the
        stage (the strategy's ``sharding.enable`` + ``stage``).  The planner
        applies the pass only when the user enables it, with a stage; the
        other data-parallel cases (engine_dp, row_dp_mp_*, ...) are planned
        without it and are not met (they hold no Expect for it)."""
        return super().handles(case) and "stage" in (getattr(case, "params", None) or {})

    def attrs(self, case, rp) -> dict:
        from paddle.distributed.fleet import auto

        strategy = auto.Strategy()
        config = strategy.sharding.to_dict()
        _, group = dp_ring(case, rp.rank)
        config.update(enable=True, stage=stage_of(case),
                      degree=len(group) if group else len(case.ranks))
        # the user's other sharding switches (enable_overlap, bucket sizes, ...)
        config.update((case.params or {}).get("sharding") or {})
        return {**config, "dist_context": rp.dist_context,
                "params_grads": list(rp.params_grads), "global_rank": rp.rank,
                "gradient_sync_after_accumulate":
                    strategy.dp_optimization.gradient_sync_after_accumulate}

    def apply_local(self, case, rank):
        with planner_state(case, rank):
            return super().apply_local(case, rank)

    def pattern_present(self, snap) -> bool:
        """A data-parallel program with an optimizer: parameters updated by
        optimizer ops, each from a gradient summed over a ring (the DP
        gradient synchronization), over a ring of more than one rank."""
        updates = optimizer_updates(snap)
        sums = grad_sums(snap)
        return len(updates) >= 2 and any(
            (op.inputs.get("Grad") or [None])[0] in sums for op in updates.values())

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired") or not results[0].details.get("pattern_present"):
            return results
        n = len(results)
        ring, group = dp_ring(case, rank)
        if group is None:
            results.append(finding("DP ring known", rank,
                                   f"case {case.name} declares no ring holding rank {rank}'s "
                                   "DP group", op_index=None, op_type=None, var=None))
            return results
        me = group.index(rank)
        stage = stage_of(case)
        upd_before = optimizer_updates(before)
        upd_after = optimizer_updates(after)
        bcasts = [op for op in after.ops if op.type in ("broadcast", "c_broadcast")]
        owner = {}  # parameter -> DP index of the rank that updates and broadcasts it
        for p, op in upd_before.items():
            bc = [b for b in bcasts if collectives.input_var(b) == p]
            if not bc:
                results.append(finding(
                    "updated parameter broadcast from its owner", rank,
                    f"no broadcast of {p} after the optimizer: the ranks that do not "
                    "update it never receive its new value",
                    op_index=op.idx, op_type=op.type, var=p))
                continue
            b = bc[-1]
            root = int(b.attrs.get("root", -1))
            if int(b.attrs.get("ring_id", -1)) != ring:
                results.append(finding(
                    "updated parameter broadcast from its owner", rank,
                    f"broadcast of {p} (op {b.idx}) on ring {b.attrs.get('ring_id')}, not the "
                    f"DP ring {ring}", op_index=b.idx, op_type=b.type, var=p))
                continue
            local = p in upd_after
            owner[p] = root
            upd_idx = upd_after[p].idx if local else None
            if local and root != me:
                results.append(finding(
                    "updated parameter broadcast from its owner", rank,
                    f"rank {rank} (DP index {me}) updates {p} but its broadcast (op {b.idx}) "
                    f"has root {root}: the update is overwritten by rank "
                    f"{group[root] if 0 <= root < len(group) else root}'s stale copy",
                    op_index=b.idx, op_type=b.type, var=p, root=root, owner=me))
            elif not local and root == me:
                results.append(finding(
                    "updated parameter broadcast from its owner", rank,
                    f"rank {rank} no longer updates {p} yet broadcasts it as root "
                    f"(op {b.idx}): nobody sends the update", op_index=b.idx,
                    op_type=b.type, var=p, root=root))
            elif local and upd_idx is not None and b.idx < upd_idx:
                results.append(finding(
                    "updated parameter broadcast from its owner", rank,
                    f"broadcast of {p} (op {b.idx}) comes before its update (op {upd_idx})",
                    op_index=b.idx, op_type=b.type, var=p))
        # stage 2: the owner's gradient is reduced to it; no all-reduce left
        if stage >= 2:
            sums = grad_sums(after)
            for p, op in upd_before.items():
                g = (op.inputs.get("Grad") or [None])[0]
                c = sums.get(g)
                if c is None:
                    results.append(finding(
                        "gradient reduced to its owner", rank,
                        f"no collective sums {g} in the rewritten program",
                        op_index=op.idx, op_type=op.type, var=g))
                elif c.type != "reduce":
                    results.append(finding(
                        "gradient reduced to its owner", rank,
                        f"stage {stage}: {g} is still summed by {c.type} (op {c.idx}), not "
                        "reduced to its owner", op_index=c.idx, op_type=c.type, var=g))
                else:  # a SUM onto the owner (the broadcast root), over the DP ring
                    root = int(c.attrs.get("root_id", c.attrs.get("root", -1)))
                    kind = int(c.attrs.get("reduce_type", 0))
                    if int(c.attrs.get("ring_id", -1)) != ring:
                        results.append(finding(
                            "gradient reduced to its owner", rank,
                            f"the reduce of {g} (op {c.idx}) is on ring "
                            f"{c.attrs.get('ring_id')}, not the DP ring {ring}",
                            op_index=c.idx, op_type=c.type, var=g))
                    elif p in owner and root != owner[p]:
                        results.append(finding(
                            "gradient reduced to its owner", rank,
                            f"the reduce of {g} (op {c.idx}) has root {root}, but {p}'s "
                            f"owner (the rank that updates and broadcasts it) is DP index "
                            f"{owner[p]}: the owner updates with its unreduced gradient",
                            op_index=c.idx, op_type=c.type, var=g, root=root,
                            owner=owner[p]))
                    elif kind != 0:
                        results.append(finding(
                            "gradient reduced to its owner", rank,
                            f"the reduce of {g} (op {c.idx}) has reduce_type {kind}, not "
                            "SUM (0)", op_index=c.idx, op_type=c.type, var=g,
                            reduce_type=kind))
        # the owners: exactly one rank updates each parameter (per rank: the
        # broadcast root names the owner, and this rank updates iff it is it)
        if len(results) == n:
            mine = sorted(p for p in upd_before if p in upd_after)
            results.append(holds(
                "optimizer partitioned", rank,
                f"rank {rank} (DP index {me}) updates {len(mine)} of {len(upd_before)} "
                f"parameters ({', '.join(mine) or 'none'}); every parameter is broadcast "
                f"from its owner on ring {ring}"
                + ("; gradients reduced to their owners" if stage >= 2 else "")))
        return results

    def intended_changes(self, case, rank, before, after) -> dict:
        """Stage 2 replaces each gradient's all-reduce by a reduce to its
        owner: the gradient's later readers see the reduce."""
        if stage_of(case) < 2:
            return {}
        sums = grad_sums(after)
        return {g: f"stage 2: written by the reduce to its owner (op {op.idx}, root_id "
                   f"{op.attrs.get('root_id')}) that replaced the all-reduce"
                for g, op in sums.items() if op.type == "reduce"}

    def unobserved(self, case, rank, before, after) -> dict:
        """Stage 2: a gradient reduced to another rank keeps this rank's local
        value, and its optimizer op is gone here (the owner updates the
        parameter and broadcasts it, which is compared)."""
        if stage_of(case) < 2:
            return {}
        upd = optimizer_updates(after)
        out = {}
        for p, op in optimizer_updates(before).items():
            g = (op.inputs.get("Grad") or [None])[0]
            if g and p not in upd:
                out[g] = (f"stage 2: {g} is reduced to {p}'s owner; rank {rank} no longer "
                          f"updates {p} and keeps its local gradient")
        return out


ADAPTER = ShardingAdapter()
