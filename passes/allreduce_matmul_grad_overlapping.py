"""Adapter for Paddle's ``allreduce_matmul_grad_overlapping``.

What the pass exists for: for a column-parallel linear backward
(``matmul_v2_grad`` whose ``X@GRAD`` is then allreduced) it splits the grad
into ``matmul_v2(dOut, Y^T) -> allreduce(dX) -> reshape, reshape ->
matmul_v2(X^T, dOut) -> reshape`` and puts the allreduce on the
model-parallel stream, so communication overlaps the dY matmul.
"""
from __future__ import annotations

from verify.checks.shape_check import check_snapshot
from verify.ir.collectives import input_var as _ar_input
from verify.ir.collectives import is_allreduce_sum
from verify.ir.snapshot import Op, ProgramSnapshot

from .base import PassAdapter, finding, holds

MP_STREAM = "auto_parallel_mp"  # AutoParallelStreamType.MP_STREAM


def matched_pairs(snap) -> list:
    """(matmul_v2_grad op, allreduce op) pairs the pass exists to split.

    Written from the pass's documented pattern (the column-parallel linear
    backward: an untransposed ``matmul_v2_grad`` whose ``X@GRAD`` is then
    summed over the tensor-parallel ring), not from its code: the sum may be
    spelled ``c_allreduce_sum`` (older planners) or ``all_reduce`` with
    ``reduce_type`` SUM (3.3.1's planner), since both are that backward.
    """
    pairs = []
    for i, op in enumerate(snap.ops):
        if op.type != "matmul_v2_grad" or op.attrs.get("trans_x") or op.attrs.get("trans_y"):
            continue
        dx = (op.outputs.get("X@GRAD") or [None])[0]
        for later in snap.ops[i + 1:]:
            if is_allreduce_sum(later) and _ar_input(later) == dx:
                pairs.append((op, later))
                break
    return pairs


class OverlapAdapter(PassAdapter):
    name = "allreduce_matmul_grad_overlapping"
    short = "overlap"

    def attrs(self, case, rp) -> dict:
        return {"dist_context": rp.dist_context}

    def pattern_present(self, snap) -> bool:
        return bool(matched_pairs(snap))

    def intended_changes(self, case, rank, before, after) -> dict:
        """The split grads' outputs and their allreduces' outputs get new
        writers (the dX/dY matmuls, the moved allreduce)."""
        out = {}
        for g, ar in matched_pairs(before):
            for n in g.writes() + ar.writes():
                out[n] = f"written by the split of matmul_v2_grad at op {g.idx}"
        return out

    def contract(self, case, rank, before, after) -> list:
        results = [self.fired_check(case, rank, before, after)]
        if not results[0].details.get("fired"):
            return results
        left = matched_pairs(after)
        if left:
            g, ar = left[0]
            results.append(finding(
                "grad split", rank,
                f"matmul_v2_grad at op {g.idx} still feeds {ar.type} at op {ar.idx}",
                op_index=g.idx, op_type=g.type, var=g.outputs["X@GRAD"][0]))
        else:
            results.append(holds("grad split", rank,
                                 "no matmul_v2_grad feeding an allreduce remains"))
        n_before = sum(map(is_allreduce_sum, before.ops))
        n_after = sum(map(is_allreduce_sum, after.ops))
        if n_before != n_after:
            results.append(finding("collective count", rank,
                                   f"{n_before} allreduces before the pass, {n_after} after",
                                   before=n_before, after=n_after))
        # The pass exists so that dX's allreduce runs while dW is computed:
        # the allreduce reads dX from a matmul_v2 before it, and every op
        # writing that pair's dW comes after it.  Where exactly the ops sit
        # is the implementation's choice (an older overlap kept the
        # allreduce in place and moved the dW matmul after it).
        split_dw = {g.outputs["X@GRAD"][0]: g.outputs.get("Y@GRAD", [None])[0]
                    for g, _ in matched_pairs(before)}
        for op in after.ops:
            if not is_allreduce_sum(op) or _ar_input(op) not in split_dw:
                continue
            dx, dw = _ar_input(op), split_dw[_ar_input(op)]
            dx_writers = [o for o in after.ops[:op.idx] if dx in o.writes()]
            if not dx_writers or dx_writers[-1].type != "matmul_v2":
                last = dx_writers[-1] if dx_writers else None
                results.append(finding(
                    "allreduce reads the dX matmul", rank,
                    f"{op.type} at op {op.idx} reads {dx}, last written before it by "
                    f"{last.type + ' at op ' + str(last.idx) if last else 'nothing'}, not "
                    "by the matmul_v2 the split makes", op_index=op.idx, op_type=op.type,
                    var=dx, last_writer=last.render() if last else None))
            # the matmul is what is worth overlapping (its operand reshapes are views)
            early = [o for o in _inserted_slice(before, after, dw)
                     if o.idx < op.idx and o.type == "matmul_v2"]
            if early:
                results.append(finding(
                    "dW computed after the allreduce", rank,
                    f"{early[0].type} at op {early[0].idx} (computing {dw}) runs before "
                    f"{op.type} at op {op.idx} is issued: the dW matmul cannot overlap "
                    "the allreduce", op_index=early[0].idx, op_type=early[0].type,
                    var=early[0].writes()[0], computes=dw, matmul=early[0].render(),
                    runs_before={"op_index": op.idx, "op_type": op.type, "var": dx}))
            if op.stream != MP_STREAM:
                results.append(finding(
                    "allreduce on mp stream", rank,
                    f"{op.type} at op {op.idx} runs on stream {op.stream!r}, "
                    f"not {MP_STREAM!r}", op_index=op.idx, op_type=op.type,
                    var=_ar_input(op), stream=op.stream))
        # everything but the split grads and their moved allreduces stays
        touched = {o.render() for pair in matched_pairs(before) for o in pair}
        kept = {o.render() for o in after.ops}
        for op in before.ops:
            if op.render() not in touched and op.render() not in kept:
                results.append(finding(
                    "other ops kept", rank,
                    f"op {op.idx} ({op.type}) of the original is missing from the rewritten "
                    "program, though the pass only rewrites matmul_v2_grad + allreduce pairs",
                    op_index=op.idx, op_type=op.type,
                    var=(op.writes() or op.reads() or [None])[0]))
        if len(results) == 2:
            results.append(holds("allreduce placement", rank,
                                 "each split allreduce reads its dX matmul and is issued "
                                 f"before its dW matmul, on stream {MP_STREAM}"))
        return results


    def predict(self, case, rank, before) -> list:
        """Check, before applying, the shapes the pass will build.

        For each pair it will split, the planned ops are the ones the pass
        inserts, with reshape targets computed as the pass computes them
        from the *declared* static shapes (``[x0 * x1, *x[2:]]``, so a -1
        batch gives -S); the shape check then runs that plan from the shapes
        inferred for the original up to the grad op.
        """
        results = []
        pairs = matched_pairs(before)
        # infer the original's shapes once, keeping the state at each grad op
        states = {g.idx: None for g, _ in pairs}
        if pairs:
            check_snapshot(before, rank, "", case.symbols, capture=states)
        for g, _ in pairs:
            x, y, dout = g.inputs["X"][0], g.inputs["Y"][0], g.inputs["Out@GRAD"][0]
            dy = g.outputs["Y@GRAD"][0]
            xs, os_, ys = before.shape(x), before.shape(dout), before.shape(dy)
            if xs is None or os_ is None or ys is None or len(xs) < 2 or len(os_) < 2:
                continue
            plan = [
                Op(0, "matmul_v2", {"X": [dout], "Y": [y]}, {"Out": ["plan.dX"]},
                   {"trans_x": False, "trans_y": True}, 1),
                Op(0, "reshape2", {"X": [x]}, {"Out": ["plan.X2d"]},
                   {"shape": [xs[0] * xs[1], *xs[2:]]}, 1),
                Op(0, "reshape2", {"X": [dout]}, {"Out": ["plan.dOut2d"]},
                   {"shape": [os_[0] * os_[1], *os_[2:]]}, 1),
                Op(0, "matmul_v2", {"X": ["plan.X2d"], "Y": ["plan.dOut2d"]},
                   {"Out": ["plan.dY2d"]}, {"trans_x": True, "trans_y": False}, 1),
                Op(0, "reshape2", {"X": ["plan.dY2d"]}, {"Out": [dy]},
                   {"shape": list(ys)}, 1),
            ]
            # the plan's ops take the grad's place (indices g.idx, g.idx+1, ...)
            for k, op in enumerate(plan):
                op.idx = g.idx + k
            planned = ProgramSnapshot(plan, before.vars, feeds=before.feeds)
            inserted = {g.idx + k for k in (1, 2, 4)}
            for r in check_snapshot(planned, rank,
                                    f"{self.name} plan for op {g.idx} on {case.name} rank {rank}",
                                    case.symbols, inserted, name="prediction",
                                    start=states[g.idx]):
                if r.counterexample is not None:
                    r.counterexample["planned_for_op"] = g.idx
                    r.message += f" [planned from matmul_v2_grad at op {g.idx}]"
                results.append(r)
        return results


ADAPTER = OverlapAdapter()


def _inserted_slice(before, after, var) -> list:
    """The ops of ``after`` that ``var`` depends on and the pass inserted
    (absent from ``before``), back to the matmul_v2 that computes it: the
    split's dW computation, in program order."""
    if not var:
        return []
    original = {o.render() for o in before.ops}
    found, todo = {}, [(var, len(after.ops))]
    while todo:
        name, upto = todo.pop()
        writer = next((o for o in reversed(after.ops[:upto]) if name in o.writes()), None)
        if writer is None or writer.idx in found or writer.render() in original:
            continue
        found[writer.idx] = writer
        if writer.type != "matmul_v2":  # the dW matmul ends the slice (its operands
            todo += [(n, writer.idx) for n in writer.reads()]  # are other layers' work)
    return [found[i] for i in sorted(found)]
