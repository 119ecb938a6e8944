"""``fused_gemm_epilogue_pass``: a C++ PIR pass (``strategy.fused_passes``;
``paddle/fluid/pir/transforms/gpu/fused_gemm_epilogue_pass.cc``), registered
on CPU builds, applied with ``paddle.pir.PassManager`` to a clone of the
case's main program; the original is never touched.

Documented pattern (the pass source's comments): ``%2 = matmul(%0, %1)``,
``%4 = add(%2, %3)`` becomes ``fused_gemm_epilogue(%0, %1, %3)``; its
backward ``add_grad`` + ``matmul_grad`` (of the add's ``x_grad``) becomes
``fused_gemm_epilogue_grad(x, w, none, out_grad)``.  The matmul's data rank
is >= 2, its weight rank 2, the bias rank 1; and "the datatype of matmul
should not be float32" (nor float64): the pass leaves those alone.

Contract, where the pattern is present: each matched ``matmul`` + ``add`` is
gone and a ``pd_op.fused_gemm_epilogue`` reads the same x, weight and bias,
with ``trans_x``/``trans_y`` the matmul's ``transpose_x``/``transpose_y`` and
activation ``none``, and no op reads the add's old result; each matched
``add_grad`` + ``matmul_grad`` is gone and a ``pd_op.fused_gemm_epilogue_grad``
reads the same x, weight and the add_grad's ``out_grad`` with the same
transposes and activation_grad ``none``.  Where absent, nothing changes.

Values are not decided on a CPU build: the fused ops have no CPU kernel
(``The kernel `fused_gemm_epilogue` is not registered``) and no value row,
so a firing application is INCONCLUSIVE beside its contract.
"""
from __future__ import annotations


from passes.base import NativePirPassAdapter, finding, holds

NAME = "fused_gemm_epilogue_pass"
_SKIPPED_DTYPES = ("float32", "float64")


class PirFusedGemmEpilogue(NativePirPassAdapter):
    name = NAME
    short = "gemm_epilogue"

    def handles(self, case) -> bool:
        """PIR cases that state what this pass must do on them (the
        ``pir_gemm_epilogue`` family)."""
        return super().handles(case) and self.name in case.expect

    def pattern_present(self, snap) -> bool:
        return bool(linears(snap))

    def contract(self, case, rank, before, after) -> list:
        out = [self.fired_check(case, rank, before, after)]
        found = linears(before)
        if not found:
            return out
        n = len(out)
        read = {name for o in after.ops for name in o.reads()}
        fused = after.ops_of_type("pd_op.fused_gemm_epilogue")
        fused_grads = after.ops_of_type("pd_op.fused_gemm_epilogue_grad")
        for mm, add, grads in found:
            x, w, b = mm.inputs["x"][0], mm.inputs["y"][0], add.inputs["y"][0]
            trans = (bool(mm.attrs.get("transpose_x")), bool(mm.attrs.get("transpose_y")))
            hits = [f for f in fused if f.inputs.get("x") == [x] and f.inputs.get("y") == [w]
                    and f.inputs.get("bias") == [b]]
            if not hits:
                out.append(finding("linear fused", rank,
                                   f"no pd_op.fused_gemm_epilogue reads ({x}, {w}, {b}) for the "
                                   f"matmul at op {mm.idx} and add at op {add.idx}",
                                   op_index=mm.idx, op_type=mm.type, var=x))
                continue
            f = hits[0]
            bad = _attr_mismatch(f, trans, "activation")
            if add.outputs["out"][0] in read:
                bad.append(f"the add's result {add.outputs['out'][0]} is still read")
            if bad:
                out.append(finding("linear fused", rank,
                                   f"the fused op at op {f.idx} for the matmul at op {mm.idx}: "
                                   + "; ".join(bad), op_index=f.idx, op_type=f.type, var=x,
                                   problems=bad))
            if grads is None:
                continue
            ag, mg = grads
            dout = ag.inputs["out_grad"][0]
            ghits = [g for g in fused_grads if g.inputs.get("x") == [x] and
                     g.inputs.get("y") == [w] and g.inputs.get("out_grad") == [dout]]
            if not ghits:
                out.append(finding("linear grad fused", rank,
                                   f"no pd_op.fused_gemm_epilogue_grad reads ({x}, {w}, {dout}) "
                                   f"for add_grad at op {ag.idx} and matmul_grad at op {mg.idx}",
                                   op_index=mg.idx, op_type=mg.type, var=dout))
                continue
            bad = _attr_mismatch(ghits[0], trans, "activation_grad")
            if bad:
                out.append(finding("linear grad fused", rank,
                                   f"the fused grad op at op {ghits[0].idx}: " + "; ".join(bad),
                                   op_index=ghits[0].idx, op_type=ghits[0].type, var=dout,
                                   problems=bad))
        if len(out) == n:
            out.append(holds("linear fused", rank,
                             f"{len(found)} matmul + bias add pair(s) fused (and their grads "
                             "where present), same operands and transposes"))
        return out

    def intended_changes(self, case, rank, before, after) -> dict:
        out = {}
        for mm, add, grads in linears(before):
            out.update({n: "recomputed by the fused op" for n in add.writes() + mm.writes()})
            if grads:
                for g in grads:
                    out.update({n: "recomputed by the fused grad op" for n in g.writes()})
        return out


def _attr_mismatch(op, trans, act_attr) -> list:
    bad = []
    got = (bool(op.attrs.get("trans_x")), bool(op.attrs.get("trans_y")))
    if got != trans:
        bad.append(f"trans_x/trans_y {got}, the matmul's transpose_x/transpose_y {trans}")
    if op.attrs.get(act_attr, "none") != "none":
        bad.append(f"{act_attr} {op.attrs.get(act_attr)!r}, not 'none'")
    return bad


def linears(snap) -> list:
    """``[(matmul, add, (add_grad, matmul_grad) or None)]``: the documented
    pattern (a matmul whose result a 1-D bias is added to; x rank >= 2, w rank
    2, x neither float32 nor float64), with its backward pair where the
    program has one."""
    out = []
    for mm in snap.ops_of_type("pd_op.matmul"):
        x, w, res = mm.inputs["x"][0], mm.inputs["y"][0], mm.outputs["out"][0]
        xv = snap.var(x)
        xs, ws = snap.shape(x), snap.shape(w)
        if xv is None or xv.dtype in _SKIPPED_DTYPES or xs is None or ws is None or \
                len(xs) < 2 or len(ws) != 2:
            continue
        adds = [o for o in snap.ops_of_type("pd_op.add") if o.inputs.get("x") == [res]
                and len(snap.shape(o.inputs["y"][0]) or []) == 1]
        if len(adds) != 1:
            continue
        add = adds[0]
        grads = None
        for ag in snap.ops_of_type("pd_op.add_grad"):
            if ag.inputs.get("x") != [res]:
                continue
            dx = ag.outputs["x_grad"][0]
            mg = [o for o in snap.ops_of_type("pd_op.matmul_grad")
                  if o.inputs.get("out_grad") == [dx] and o.inputs.get("x") == [x]]
            if mg:
                grads = (ag, mg[0])
        out.append((mm, add, grads))
    return out


ADAPTER = PirFusedGemmEpilogue()
