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

Documented pattern: a ``pd_op.matmul_grad`` (the VPP split exists for every
matmul backward; transposed operands are documented as unsupported, so the
pass must either split them correctly or leave them alone: never split them
as if untransposed).  Contract: no ``pd_op.matmul_grad`` remains; each one
is replaced by two ``pd_op.matmul`` (and the reshapes of the fold); the new
ops carry the grad op's ``op_role`` and ``chunk_id``.

PIR programs are applied in this process (no isolation worker yet: a PIR
program does not travel as a ProgramDesc).
"""
from __future__ import annotations

import traceback

from passes.base import PassAdapter, PassRun, finding, holds


class PirSplitMatmulGrad(PassAdapter):
    name = "_pir_split_matmul_grad_to_matmul"
    short = "vpp_split"
    ir = "pir"

    def attrs(self, case, rp) -> dict:
        return {}

    def apply(self, case, rank: int) -> PassRun:
        return self.apply_local(case, rank)

    def apply_local(self, case, rank: int) -> PassRun:
        import dataclasses

        import paddle
        from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_vpp import (
            PipelineVirtualPipelinePass,
        )

        original = case.build(rank)
        tb = etype = None
        with paddle.pir_utils.IrGuard():
            main = original.main.clone()
            startup = original.startup.clone()
            names = original.names.carried(original.main, main)
            try:
                PipelineVirtualPipelinePass._pir_split_matmul_grad_ops_to_matmul(None, main)
            except (Exception, SystemExit) as exc:  # the pass's bug: keep the program
                tb, etype = traceback.format_exc(), type(exc).__name__
        rewritten = dataclasses.replace(original, main=main, startup=startup, names=names)
        return PassRun(original, rewritten, tb, etype)

    def pattern_present(self, snap) -> bool:
        return any(op.type == "pd_op.matmul_grad" for op in snap.ops)

    def contract(self, case, rank, before, after) -> list:
        out = [self.fired_check(case, rank, before, after)]
        grads = before.ops_of_type("pd_op.matmul_grad")
        if not grads:
            return out
        left = after.ops_of_type("pd_op.matmul_grad")
        if left:
            out.append(finding("matmul_grad split", rank,
                               f"{len(left)} pd_op.matmul_grad remain after the split "
                               f"(op {left[0].idx})", op_index=left[0].idx))
        else:
            out.append(holds("matmul_grad split", rank,
                             f"all {len(grads)} pd_op.matmul_grad split"))
        n_before = len(before.ops_of_type("pd_op.matmul"))
        n_after = len(after.ops_of_type("pd_op.matmul"))
        want = n_before + 2 * (len(grads) - len(left))
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

    def renames(self, case, rank, before, after) -> dict:
        """Each split grad's dX lives on in the matmul reading (dOut, Y), its
        dW in the value its consumers (the optimizer) now read."""
        from verify.renames import consumer_renames

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


def _inserted(before, after) -> list:
    from verify.checks.shape_check import inserted_ops

    idx = inserted_ops(before, after)
    return [o for o in after.ops if o.idx in idx]


ADAPTER = PirSplitMatmulGrad()
