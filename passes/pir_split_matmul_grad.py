"""The VPP backward split on PIR programs:
``pass_utils._pir_split_matmul_grad_to_matmul(block, matmul_grad_id)``.

The VPP schedule (``pipeline_scheduler_VPP``, ``split_backward``) splits
every ``pd_op.matmul_grad`` of the backward into the two matmuls it is made
of, so the weight-grad half can be scheduled apart (zero-bubble style)::

    dX = matmul(dOut, Y, transpose_y=True)
    dW = reshape(matmul(reshape(X, [B*S, K]), reshape(dOut, [B*S, N]),
                        transpose_x=True), W.shape)

The adapter runs the pass's own step, ``PipelineVirtualPipelinePass.
_pir_split_matmul_grad_ops_to_matmul(program)`` (its guard is
``not has_attr("trans_x") and not has_attr("trans_y")``, then the helper on
each matmul_grad in reverse order), on a clone of the case's main program
(``program.clone()``); the original is never touched.

Documented pattern: an untransposed ``pd_op.matmul_grad`` (the helper's own
assertion messages: "with trans_x == True is not supported"); a transposed
one may be left alone, and splitting it as if untransposed is a finding (the
value proof and the executor runs decide it).  Contract: no untransposed
``pd_op.matmul_grad`` remains; each split one is replaced by two
``pd_op.matmul`` (and the reshapes of the fold); the new ops carry the grad
op's ``op_role`` and ``chunk_id``.

In an isolation worker (``verify/engine/isolation.py``) the rewritten programs come
back through PIR's own serialization (``export_rewritten`` /
``import_rewritten``), with their value names by position.
"""
from __future__ import annotations


from passes.base import PassRun, PirPassAdapter, finding, holds

VPP = "pipeline_scheduler_VPP"


class PirSplitMatmulGrad(PirPassAdapter):
    name = "_pir_split_matmul_grad_to_matmul"
    short = "vpp_split"
    # the helper lives in pass_utils (verify.vocabulary.EXTRA_PASSES); the
    # VPP pass's method that calls it on every matmul_grad is run too
    paddle_modules = ("paddle.distributed.passes.pipeline_scheduler_pass.pipeline_vpp",)

    def attrs(self, case, rp) -> dict:
        return {}

    def tested_passes(self) -> tuple:
        """The split is a method of the VPP schedule pass, taken from the
        registry (``_vpp_class``): a pass file replaces it by registering
        ``pipeline_scheduler_VPP``."""
        return (VPP,)

    def apply_local(self, case, rank: int) -> PassRun:
        vpp = _vpp_class()
        return self.rewrite_clone(
            case, rank, lambda main: vpp._pir_split_matmul_grad_ops_to_matmul(None, main))

    def repro_apply_source(self) -> str:
        """``apply_pass(main)`` for a self-contained reproducer (verify/repro/pir_script.py)."""
        return f"""
def apply_pass(main):
    # the registered class, as the adapter takes it (_vpp_class): a pass
    # file embedded in the reproducer replaces it
    from paddle.distributed.passes.pass_base import PassBase
    from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_vpp import (
        PipelineVirtualPipelinePass)
    vpp = PassBase._REGISTERED_PASSES.get({VPP!r}, PipelineVirtualPipelinePass)
    vpp._pir_split_matmul_grad_ops_to_matmul(None, main)
"""

    def pattern_present(self, snap) -> bool:
        """An untransposed ``pd_op.matmul_grad``: the helper documents
        transposed ones as unsupported (they may be left alone)."""
        return bool(_splittable(snap))

    def contract(self, case, rank, before, after) -> list:
        out = [self.fired_check(case, rank, before, after)]
        grads = before.ops_of_type("pd_op.matmul_grad")
        if not grads:
            return out
        want = len(_splittable(before))
        left_all = after.ops_of_type("pd_op.matmul_grad")
        left = _splittable(after)
        if left:
            out.append(finding("matmul_grad split", rank,
                               f"{len(left)} untransposed pd_op.matmul_grad remain after the "
                               f"split (op {left[0].idx})", op_index=left[0].idx))
        else:
            out.append(holds("matmul_grad split", rank,
                             f"all {want} untransposed pd_op.matmul_grad split"
                             + (f"; {len(left_all)} transposed left alone" if left_all else "")))
        n_before = len(before.ops_of_type("pd_op.matmul"))
        n_after = len(after.ops_of_type("pd_op.matmul"))
        want = n_before + 2 * (len(grads) - len(left_all))
        if n_after != want:
            out.append(finding("two matmuls each", rank,
                               f"{n_after} pd_op.matmul after the split, expected {want} "
                               f"(two per split matmul_grad)", matmuls=n_after, expected=want))
        else:
            out.append(holds("two matmuls each", rank,
                             "each split matmul_grad became two pd_op.matmul"))
        roles = {(g.role, g.attrs.get("chunk_id")) for g in grads}
        new = _inserted(before, after)
        bad = [o for o in new if (o.role, o.attrs.get("chunk_id")) not in roles]
        if bad:
            out.append(finding("role and chunk kept", rank,
                               f"op {bad[0].idx} ({bad[0].type}) inserted with role "
                               f"{bad[0].role} chunk {bad[0].attrs.get('chunk_id')}, not the "
                               f"grad's", op_index=bad[0].idx))
        return out

    def predict(self, case, rank, before) -> list:
        """Check, before applying, the ops the helper will build for each
        grad, as it builds them: flags ignored (its guard looks for
        ``trans_x``), fold targets ``[x0 * x1, *x[2:]]`` from the declared
        static dims (a -1 batch gives a negative dim, a 2-D x a 1-D fold)."""
        from verify.checks.shape_check import check_snapshot
        from verify.ir.snapshot import Op, ProgramSnapshot

        results = []
        grads = before.ops_of_type("pd_op.matmul_grad")
        states = {g.idx: None for g in grads}
        if grads:
            check_snapshot(before, rank, "", case.symbols, capture=states)
        for g in grads:
            x, y, dout = g.inputs["x"][0], g.inputs["y"][0], g.inputs["out_grad"][0]
            dy = (g.outputs.get("y_grad") or ["plan.dY"])[0]
            xs, os_, ys = before.shape(x), before.shape(dout), before.shape(y)
            if xs is None or os_ is None or ys is None or len(xs) < 2 or len(os_) < 2:
                continue
            where = f"{self.name} plan for op {g.idx} on {case.name} rank {rank}"
            if g.attrs.get("transpose_x") or g.attrs.get("transpose_y"):
                from verify.verdicts import CheckResult, Verdict

                results.append(CheckResult(
                    "shape", "prediction", rank, Verdict.NOT_EQUIVALENT,
                    f"{where}: the grad has transpose_x={g.attrs.get('transpose_x')} "
                    f"transpose_y={g.attrs.get('transpose_y')}, but the guard tests "
                    "has_attr('trans_x'/'trans_y') (PIR spells transpose_*): it will be "
                    "split as if untransposed",
                    counterexample={"rank": rank, "op_index": g.idx,
                                    "attrs": {k: g.attrs.get(k)
                                              for k in ("transpose_x", "transpose_y")}},
                    details={"crashes_executor": False}))
            plan = [
                Op(0, "pd_op.matmul", {"x": [dout], "y": [y]}, {"out": ["plan.dX"]},
                   {"transpose_x": False, "transpose_y": True}, 1),
                Op(0, "pd_op.reshape", {"x": [x]}, {"out": ["plan.X2d"]},
                   {"shape@value": [xs[0] * xs[1], *xs[2:]]}, 1),
                Op(0, "pd_op.reshape", {"x": [dout]}, {"out": ["plan.dOut2d"]},
                   {"shape@value": [os_[0] * os_[1], *os_[2:]]}, 1),
                Op(0, "pd_op.matmul", {"x": ["plan.X2d"], "y": ["plan.dOut2d"]},
                   {"out": ["plan.dY2d"]}, {"transpose_x": True, "transpose_y": False}, 1),
                Op(0, "pd_op.reshape", {"x": ["plan.dY2d"]}, {"out": [dy]},
                   {"shape@value": list(before.shape(dy) or ys)}, 1),
            ]
            for k, op in enumerate(plan):
                op.idx = g.idx + k
            planned = ProgramSnapshot(plan, before.vars, feeds=before.feeds)
            for r in check_snapshot(planned, rank, where, case.symbols,
                                    {g.idx + k for k in (1, 2, 4)}, name="prediction",
                                    start=states[g.idx]):
                if r.counterexample is not None:
                    r.counterexample["planned_for_op"] = g.idx
                    r.message += f" [planned from pd_op.matmul_grad at op {g.idx}]"
                results.append(r)
        return results

    def renames(self, case, rank, before, after) -> dict:
        """Each split grad's dX lives on in the matmul reading (dOut, Y), its
        dW in the value its consumers (the optimizer) now read."""
        from verify.ir.renames import consumer_renames

        out = consumer_renames(before, after)
        present = {n for op in after.ops for n in op.reads() + op.writes()}
        for g in before.ops_of_type("pd_op.matmul_grad"):
            dx = (g.outputs.get("x_grad") or [None])[0]
            if not dx or dx in present or dx in out:
                continue
            # its dOut may itself be a grad the split renamed (dh of the next layer)
            dout = [out.get(n, n) for n in g.inputs.get("out_grad", [])]
            for m in after.ops_of_type("pd_op.matmul"):
                if m.inputs.get("x") == dout and m.inputs.get("y") == g.inputs.get("y"):
                    out[dx] = m.outputs["out"][0]
                    break
        return out

    def intended_changes(self, case, rank, before, after) -> dict:
        return {n: "a gradient the split recomputes with new ops (judged by the value "
                   "proof and the numeric runs)"
                for o in _inserted(before, after) for n in o.writes()}


def _splittable(snap) -> list:
    """The matmul_grad ops the split exists for: neither operand transposed."""
    return [op for op in snap.ops_of_type("pd_op.matmul_grad")
            if not op.attrs.get("transpose_x") and not op.attrs.get("transpose_y")]


def _vpp_class():
    """The registered ``pipeline_scheduler_VPP`` class (a pass file loaded
    with ``--pass-file`` replaces it), else the installed one."""
    from paddle.distributed.passes.pass_base import PassBase
    from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_vpp import (
        PipelineVirtualPipelinePass,
    )

    return PassBase._REGISTERED_PASSES.get(VPP, PipelineVirtualPipelinePass)


def _inserted(before, after) -> list:
    """Ops the pass created: not in ``before`` by their text, and not a kept
    op whose operands the pass redirected (same type and attrs as an op of
    ``before`` that is gone by its text, e.g. the optimizer reading the new
    dW: it keeps its own role)."""
    from collections import Counter

    from verify.checks.shape_check import inserted_ops

    def signature(o):
        return (o.type, repr(sorted((k, repr(v)) for k, v in o.attrs.items())))

    idx = inserted_ops(before, after)
    kept = Counter(o.render() for o in after.ops)
    gone = Counter()
    for o in before.ops:
        if kept[o.render()] > 0:
            kept[o.render()] -= 1
        else:
            gone[signature(o)] += 1
    out = []
    for o in after.ops:
        if o.idx not in idx:
            continue
        if gone[signature(o)] > 0:
            gone[signature(o)] -= 1
            continue
        out.append(o)
    return out


ADAPTER = PirSplitMatmulGrad()
