"""``eliminate_transpose_by_reshape`` (``strategy.fused_passes`` entry
``eliminate_transpose``): a Python function on PIR programs,
``paddle/distributed/auto_parallel/static/pir_pass.py``.  The Engine calls
it on the dense program (or each job's program) after dist2dense.

Documented pattern (the function's own comment): sequence parallelism
transposes hidden states ``[bs, seq, hidden]`` to ``[seq, bs, hidden]``;
"when bs=1, the transpose is equal to reshape", so a ``pd_op.transpose`` or
``pd_op.transpose_grad`` that swaps dims 0 and 1 only (perm ``[1, 0, 2, ...]``,
negative entries normalised) of an operand whose dim 0 or dim 1 is 1 is
replaced by ``pd_op.reshape`` of the same operand to the transpose's output
shape.  A swap of other dims, or of two dims both > 1, moves elements: it
must be left alone.

Contract (per rank): every matched transpose is gone and a ``pd_op.reshape``
of its operand, to its declared output shape and with its ``op_role``,
stands in its place (its readers read the reshape); nothing else changes.
The values (the reshape keeps the element order) are decided by the value
proof and the executor runs.

The adapter looks the function up on the module at call time, so a changed
``pir_pass.py`` (``--paddle-file``) is the one applied.
"""
from __future__ import annotations


from passes.base import PassRun, PirPassAdapter, finding, holds

MODULE = "paddle.distributed.auto_parallel.static.pir_pass"
NAME = "eliminate_transpose_by_reshape"
TRANSPOSES = ("pd_op.transpose", "pd_op.transpose_grad")


class PirEliminateTranspose(PirPassAdapter):
    name = NAME
    short = "elim_transpose"
    paddle_modules = ("paddle.distributed.auto_parallel.static.pir_pass",)

    def handles(self, case) -> bool:
        """PIR cases that state what this pass must do on them (the
        ``pir_transpose`` family): the Engine applies it only where
        ``fused_passes`` names it."""
        return super().handles(case) and self.name in case.expect

    def attrs(self, case, rp) -> dict:
        return {}

    def tested_passes(self) -> tuple:
        return ()  # a module function, not a registry pass: --paddle-file replaces it

    def apply_local(self, case, rank: int) -> PassRun:
        import importlib

        return self.rewrite_clone(
            case, rank, lambda main: getattr(importlib.import_module(MODULE), NAME)(main))

    def repro_apply_source(self) -> str:
        return f"""
def apply_pass(main):
    import importlib
    getattr(importlib.import_module({MODULE!r}), {NAME!r})(main)
"""

    def pattern_present(self, snap) -> bool:
        return bool(matched(snap))

    def contract(self, case, rank, before, after) -> list:
        out = [self.fired_check(case, rank, before, after)]
        found = matched(before)
        if not found:
            return out
        kept = {_key(o) for o in after.ops}
        reshapes = {}
        for o in after.ops_of_type("pd_op.reshape"):
            reshapes.setdefault((o.inputs.get("x") or [None])[0], []).append(o)
        n = len(out)
        for t in found:
            src = (t.inputs.get("x") or t.inputs.get("out_grad") or [None])[0]
            res = (t.outputs.get("out") or t.outputs.get("x_grad") or [None])[0]
            if _key(t) in kept:
                out.append(finding("transpose replaced", rank,
                                   f"the {t.type} at op {t.idx} (perm {t.attrs.get('perm')}, "
                                   f"operand {src} {before.shape(src)}) is still there",
                                   op_index=t.idx, op_type=t.type, var=src))
                continue
            want = before.shape(res)
            got = [o for o in reshapes.get(src, [])
                   if list(after.shape((o.outputs.get("out") or [None])[0]) or []) ==
                   list(want or [])]
            if not got:
                out.append(finding("transpose replaced", rank,
                                   f"the {t.type} at op {t.idx} is gone but no pd_op.reshape "
                                   f"of {src} to {want} stands in its place",
                                   op_index=t.idx, op_type=t.type, var=src,
                                   shapes=[after.shape((o.outputs.get('out') or [None])[0])
                                           for o in reshapes.get(src, [])]))
            elif got[0].role != t.role:
                out.append(finding("op_role kept", rank,
                                   f"the reshape of {src} has role {got[0].role}, the "
                                   f"{t.type} at op {t.idx} had {t.role}",
                                   op_index=t.idx, var=src, role=got[0].role))
        if len(out) == n:
            out.append(holds("transpose replaced", rank,
                             f"{len(found)} transpose(s) of a size-1 dim 0/1 became reshapes "
                             "to the same shapes"))
        return out

    def intended_changes(self, case, rank, before, after) -> dict:
        return {n: "a transpose's result the pass recomputes by a reshape (judged by the "
                   "value proof and the executor runs)"
                for t in matched(before) for n in t.writes()}


def _key(op):
    return (op.type, repr(sorted(op.inputs.items())), repr(sorted(op.outputs.items())))


def matched(snap) -> list:
    """The transposes the pass exists for: perm swaps dims 0 and 1 only, and
    the operand's declared dim 0 or dim 1 is 1."""
    out = []
    for t in snap.ops:
        if t.type not in TRANSPOSES:
            continue
        src = (t.inputs.get("x") or t.inputs.get("out_grad") or [None])[0]
        shape = snap.shape(src)
        perm = t.attrs.get("perm")
        if shape is None or perm is None or len(shape) < 2:
            continue
        rank = len(shape)
        perm = [p + rank if p < 0 else p for p in perm]
        if perm == [1, 0] + list(range(2, rank)) and 1 in (shape[0], shape[1]):
            out.append(t)
    return out


ADAPTER = PirEliminateTranspose()
