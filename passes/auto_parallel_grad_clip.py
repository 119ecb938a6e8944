"""Adapter for Paddle's ``auto_parallel_grad_clip`` (grad_clip).

What the pass exists for (its docstring): "1. Remove norm-compute op and
grad-scale op when the grad is not in current rank or is independent of the
calculation of norm.  2. Each rank computes its own norm value, then gets
global_norm by allreduce_sum only once."  After partitioning, a rank's
``ClipGradByGlobalNorm`` ops sum the squared norms of its *local* grads; the
pass makes every rank compute the norm of the whole (unsharded) gradient
set: each replicated grad counted on one rank only, each shard of a sharded
grad on one rank per shard, then one all-reduce of the partial sums.

The planner applies it to every training program, with no switch
(``Parallelizer._apply_post_optimization``: the ``sharding`` config, the dist
context, the ``params_grads`` and ``rank_id``); it does nothing unless the
dist context's serial optimizer has a grad clip.  It reads the planner's
process-group registry and world size (``passes/_planner_state.py``).

Contract ("global norm", per rank, judged on the rewritten programs of all
ranks): the value ``sqrt`` reads is summed over a ring holding every rank,
after the rank's last local contribution; and the squared norms summed into
it, over all ranks, cover every gradient piece exactly once -- a replicated
parameter's grad on exactly one rank, each distinct shard of a sharded one
(the case's ``sharded_params``, sharded along the tensor-parallel mesh
axis) on exactly one rank.  The value proof and the numeric runs compare
with the original; where the original's local norms are not the global one
(tensor parallelism) the values differ by design and the contract decides.
"""
from __future__ import annotations

from verify.ir import collectives

from ._planner_state import planner_state
from .base import PassAdapter, finding, holds

_FOLD = ("stack", "reduce_sum", "sum", "cast", "assign")


def _writer_before(snap, name, idx):
    w = None
    for op in snap.ops[:idx]:
        if name in op.writes():
            w = op
    return w


def norm_parts(snap, var, idx, memo=None) -> list:
    """Grads whose ``squared_l2_norm`` flows into ``var`` as read at op
    ``idx`` through stack / reduce_sum / sum / cast / in-place collectives,
    as a multiset (a list): a squared norm folded in twice is listed twice,
    as the sum counts it twice."""
    memo = {} if memo is None else memo
    key = (var, idx)
    if key in memo:
        return memo[key]
    op = _writer_before(snap, var, idx)
    out = []
    if op is None:
        pass
    elif op.type == "squared_l2_norm":
        out = [op.inputs["X"][0]]
    elif op.type in _FOLD or collectives.is_collective(op.type):
        for n in op.reads():  # each read is one term of the fold
            out += norm_parts(snap, n, op.idx, memo)
    memo[key] = out
    return out


def global_norms(snap) -> list:
    """``[(sqrt op, summed var, [sum collectives on it before sqrt])]`` of the
    global-norm clips in ``snap`` (a ``sqrt`` whose input folds squared norms)."""
    out = []
    for op in snap.ops:
        if op.type != "sqrt":
            continue
        v = op.inputs["X"][0]
        if not norm_parts(snap, v, op.idx) and not any(
                o.type == "fill_constant" and v in o.writes() for o in snap.ops[:op.idx]):
            continue
        syncs = [o for o in snap.ops[:op.idx] if collectives.is_allreduce_sum(o)
                 and collectives.output_var(o) == v]
        out.append((op, v, syncs))
    return out


def give_serial_optimizer(case, ctx) -> None:
    """What the planner records on the dist context and the pass reads: the
    user's optimizer (only its ``_grad_clip`` is read), with the case's clip
    norm (``params["clip_norm"]``) or no clip."""
    if getattr(ctx, "_serial_optimizer", None) is not None:
        return
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    norm = case.params.get("clip_norm")
    clip = paddle.nn.ClipGradByGlobalNorm(float(norm)) if norm else None
    ctx._serial_optimizer = paddle.optimizer.SGD(learning_rate=0.1, grad_clip=clip)


class GradClipAdapter(PassAdapter):
    name = "auto_parallel_grad_clip"
    short = "grad_clip"
    def __init__(self):
        self._after = {}  # (case, rank) -> rewritten snapshot, for the cross-rank contract

    def repro_planner(self, case) -> dict:
        """What a standalone reproducer must rebuild of the planning process:
        the job's size and the serial optimizer's clip (process groups of
        single-group rings travel in every reproducer)."""
        return {"world_size": case.world_size,
                "serial_grad_clip": case.params.get("clip_norm")}

    def handles(self, case) -> bool:
        """Legacy cases that state what this pass must do on them (the
        planner-made families built for it): the pass reads the planner's
        name scope (``/gradient_clip``) and dist attrs of every clip op and
        var, which hand-spelled programs do not carry."""
        return super().handles(case) and self.name in case.expect

    def attrs(self, case, rp) -> dict:
        from paddle.distributed.fleet import auto

        ctx = rp.dist_context
        give_serial_optimizer(case, ctx)
        config = auto.Strategy().sharding.to_dict()
        return {**config, "dist_context": ctx, "params_grads": list(rp.params_grads),
                "rank_id": rp.rank}

    def apply_local(self, case, rank):
        if rank == case.ranks[0]:  # a new application: the other ranks' rewrites are stale
            self._after = {k: v for k, v in self._after.items() if k[0] != case.name}
        with planner_state(case, rank):
            return super().apply_local(case, rank)

    def pattern_present(self, snap) -> bool:
        """A global-norm clip whose squared norms are summed on this rank
        only: a ``sqrt`` of folded ``squared_l2_norm``s with no sum across
        ranks before it."""
        return any(not syncs for _, _, syncs in global_norms(snap))

    def _rewritten(self, case, r):
        key = (case.name, r)
        if key not in self._after:
            from verify.ir.rank_snapshot import snapshot_of as _snapshot

            with planner_state(case, r):
                run = PassAdapter.apply_local(self, case, r)
            self._after[key] = None if run.error else _snapshot(run.rewritten, case, r,
                                                                "rewritten")
        return self._after[key]

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired"):
            return results
        snaps = {r: after if r == rank else self._rewritten(case, r) for r in case.ranks}
        return results + global_norm_checks(case, rank, snaps)

    def intended_changes(self, case, rank, before, after) -> dict:
        """The norm's partial sum and what reads it downstream change on purpose."""
        out = {}
        for sq, v, _ in global_norms(after):
            out[v] = "summed over all ranks by the pass"
            out[sq.outputs["Out"][0]] = "the global norm"
        for op in after.ops:  # the folds of the squared norms lose the other ranks' terms
            if op.type in _FOLD and op.role == 2:
                out.update({n: "the rank's share of the squared norms" for n in op.writes()})
        return out


def global_norm_checks(case, rank, snaps) -> list:
    """The "global norm" contract for ``rank`` given every rank's rewritten
    snapshot (``{rank: snapshot or None}``; None: that rank's pass raised)."""
    after = snaps[rank]
    norms = global_norms(after)
    if len(norms) != 1:
        return [finding("global norm", rank, f"{len(norms)} global-norm sqrt op(s) after the "
                        "pass, not one", op_type="sqrt", var=None)]
    sqrt_op, v, syncs = norms[0]
    world = set(case.ranks)
    whole = [s for s in syncs
             if set(next((g for g in case.rings.get(s.attrs.get("ring_id"), [])
                          if rank in g), [])) == world]
    if len(syncs) != 1 or not whole:
        return [finding(
            "global norm", rank,
            f"sqrt at op {sqrt_op.idx} reads {v} summed {len(syncs)} time(s) "
            f"(rings {[s.attrs.get('ring_id') for s in syncs]}); it must be summed once "
            f"over a ring of all ranks {sorted(world)}",
            op_index=sqrt_op.idx, op_type="sqrt", var=v)]
    counted = {}
    for r in case.ranks:
        snap = snaps.get(r)
        if snap is None:
            return [finding("global norm", rank, f"rank {r}'s pass raised; the norm's "
                            "coverage cannot be judged", var=v)]
        rn = global_norms(snap)
        if len(rn) != 1:
            continue
        sq, rv, rsyncs = rn[0]
        first = rsyncs[0].idx if rsyncs else sq.idx
        for g in norm_parts(snap, rv, first):
            p = g[:-len("@GRAD")] if g.endswith("@GRAD") else g
            piece = case.tp_index(r) if p in case.sharded_params else 0
            counted.setdefault((p, piece), []).append(r)
    params = [p.name for p, _ in before_params(case, rank)]
    pieces = {(p, (case.tp_index(r) if p in case.sharded_params else 0))
              for p in params for r in case.ranks}
    out = []
    for piece in sorted(pieces):
        who = counted.get(piece, [])
        if len(who) != 1:
            p, k = piece
            shard = f" (shard {k})" if p in case.sharded_params else ""
            out.append(finding(
                "global norm", rank,
                f"the global norm counts {p}@GRAD{shard} {len(who)} time(s) (on ranks {who}); "
                "it must count it once", var=f"{p}@GRAD", shard=k, counted_on=who,
                op_index=sqrt_op.idx, op_type="sqrt"))
    return out or [holds("global norm", rank,
                         f"sqrt at op {sqrt_op.idx} reads one sum over all ranks of "
                         f"{len(pieces)} gradient piece(s), each counted once")]


def before_params(case, rank):
    """The ``params_grads`` of ``rank``'s original build."""
    return case.build(rank).params_grads


ADAPTER = GradClipAdapter()
