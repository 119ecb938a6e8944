"""Adapter for ``auto_parallel_supplement_explicit_dependencies`` (``deps``).

What the pass exists for (its docstring): after sharding partitions the
gradients, the collectives that sync gradient information on every rank
(the AMP found-inf flag, the global-norm of grad clip) run in a different
order on each rank and may hang the graph-based executor; the pass adds
explicit dependencies for them, fixes the optimizers' order (so the
parameter broadcasts overlap with them) and orders
``check_finite_and_unscale`` after the backward.  It adds dependency ops
only (a ``nop`` reading the prior var and "writing" the later one, or a
``depend``); no computation changes.

It runs only where a sharding pass ran before it in the same pass context
(``_sharding_pass_applied``), as in the Parallelizer, which applies it
after ``auto_parallel_sharding`` (and the grad-clip pass) with only the
dist context as attr.  So the adapter's *original* program of a case is
the case's program after the installed sharding pass (stage from the case,
``passes/auto_parallel_sharding.py``), and the rewritten one is that
program after the dependencies pass, applied in the same ``PassContext``.
"""
from __future__ import annotations

from ._planner_state import planner_state
from .auto_parallel_sharding import ADAPTER as SHARDING, OPTIMIZERS
from .base import PassAdapter, finding, holds

DEP_OPS = ("nop", "depend")


def _is_sync(op, kind_word):
    return op.type in ("all_reduce", "c_allreduce_max", "c_allreduce_sum") and \
        kind_word in str(op.attrs.get("op_namescope", ""))


def dependency_sites(snap) -> list:
    """``[(op index, why)]`` of the ops the pass exists to order, written
    from its docstring: on a sharded data-parallel program (parameters
    broadcast from their owners after the optimizer ops),
    every optimizer op after the first (the order is fixed), the AMP
    found-inf and global-norm sync collectives, ``check_finite_and_unscale``."""
    first_opt = min((op.idx for op in snap.ops if op.type in OPTIMIZERS), default=None)
    sharded = first_opt is not None and any(
        op.type in ("broadcast", "c_broadcast") and op.idx > first_opt
        and snap.vars.get((op.reads() or [""])[0]) is not None
        and snap.vars[op.reads()[0]].is_parameter for op in snap.ops)
    if not sharded:
        return []
    sites = []
    opt = [op for op in snap.ops if op.type in OPTIMIZERS]
    sites += [(op.idx, "optimizer order") for op in opt[1:]]
    sites += [(op.idx, "amp flag sync") for op in snap.ops if _is_sync(op, "amp_flag_sync")]
    sites += [(op.idx, "global norm sync") for op in snap.ops
              if _is_sync(op, "global_norm_sync")]
    sites += [(op.idx, "check_finite") for op in snap.ops
              if op.type == "check_finite_and_unscale"]
    return sorted(sites)


class SupplementDependenciesAdapter(PassAdapter):
    name = "auto_parallel_supplement_explicit_dependencies"
    short = "deps"

    def handles(self, case) -> bool:
        """The cases the sharding adapter meets (the pass acts only after
        sharding ran in its context), with the default sharding switches
        (where other switches make the sharding pass itself raise, there is
        nothing for this one to run after)."""
        return SHARDING.handles(case) and not (case.params or {}).get("sharding")

    def attrs(self, case, rp) -> dict:
        return {"dist_context": rp.dist_context}

    def preceding_passes(self) -> tuple:
        return (SHARDING.name,)

    def preceding(self, case, rp) -> list:
        """The registered sharding pass (stage from the case; a pass file may
        replace it too), as the Parallelizer applies it before this pass in
        the same context."""
        return [(SHARDING.name, SHARDING.attrs(case, rp))]

    def build_original(self, case, rank):
        with planner_state(case, rank):
            return super().build_original(case, rank)

    def apply_local(self, case, rank):
        with planner_state(case, rank):
            return super().apply_local(case, rank)

    def pattern_present(self, snap) -> bool:
        return bool(dependency_sites(snap))

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired"):
            return results
        n = len(results)
        # only dependency ops added: less them, the same ops computing the same
        # values (each read sees the same writer, each var's last writer is
        # the same); independent ops may come in another order
        kept = [op for op in after.ops if op.type not in DEP_OPS]
        added = [op for op in after.ops if op.type in DEP_OPS]
        bad = _computation_changed(before.ops, kept)
        if bad is not None:
            op, what = bad
            results.append(finding(
                "only dependencies added", rank,
                f"op {op.idx} ({op.render()[:160]}) {what} in the rewritten program, less "
                "its dependency ops: the pass must change no computation",
                op_index=op.idx, op_type=op.type, var=(op.writes() or op.reads() or [None])[0]))
        if before.startup_ops and [o.render() for o in before.startup_ops] != \
                [o.render() for o in after.startup_ops]:
            results.append(finding("startup untouched", rank,
                                   "the startup program changed", op_index=None,
                                   op_type=None, var=None))
        # every site is ordered: a dependency op right before it whose Out is
        # a var the site reads
        for idx, why in dependency_sites(before):
            site = before.ops[idx]
            pos = next((op.idx for op in after.ops if op.render() == site.render()), None)
            prev = after.ops[pos - 1] if pos else None
            if prev is None or prev.type not in DEP_OPS or \
                    not set(prev.writes()) & set(site.reads()):
                results.append(finding(
                    "dependency before each site", rank,
                    f"{why}: no dependency op orders {site.type} (op {idx}) after its "
                    "predecessor", op_index=idx, op_type=site.type,
                    var=(site.reads() or [None])[0]))
        if len(results) == n:
            results.append(holds("dependencies only", rank,
                                 f"{len(added)} dependency op(s) added, one before each of "
                                 f"{len(dependency_sites(before))} site(s); nothing else changed"))
        return results

    def intended_changes(self, case, rank, before, after) -> dict:
        """A dependency op names the later op's input as its Out without
        computing it: readers of that var see it as the last writer."""
        return {n: f"ordered by the dependency op {op.idx} ({op.type}), which computes nothing"
                for op in after.ops if op.type in DEP_OPS for n in op.writes()}


def _dataflow(ops):
    """``({op: writer of each read}, {var: last writer})`` with ops named by
    (render, occurrence): the values a sequence computes, whatever the
    order of its independent ops."""
    from collections import Counter

    seen, last, reads, named = Counter(), {}, {}, {}
    for op in ops:
        r = op.render()
        seen[r] += 1
        sig = (r, seen[r])
        named[sig] = op
        reads[sig] = tuple(last.get(n) for n in op.reads())
        for n in op.writes():
            last[n] = sig
    return reads, last, named


def _computation_changed(orig_ops, kept_ops):
    """``(op, what)`` for the first original op that is gone or reads
    another writer among ``kept_ops``, or an op that is new; None when
    both compute the same values."""
    r0, last0, named0 = _dataflow(orig_ops)
    r1, last1, named1 = _dataflow(kept_ops)
    for sig, op in named0.items():
        if sig not in r1:
            return op, "is missing"
        if r1[sig] != r0[sig]:
            return op, "reads another writer"
    for sig, op in named1.items():
        if sig not in r0:
            return op, "is new"
    for var, sig in last0.items():
        if last1.get(var) != sig:
            return named0[sig], f"is no longer the last writer of {var}"
    return None


ADAPTER = SupplementDependenciesAdapter()
