"""PIR programs made runnable on a CPU build, for the numeric runs only.

``pd_op.c_identity`` (the forward of a model-parallel identity: its value is
its input; its backward is the all-reduce) has no CPU kernel in 3.3.1
(``UnavailableError: Do not support c_identity for cpu kernel now``,
``phi/kernels/cpu/c_identity_kernel.cc:29``).  The c_embedding pass's plans
carry one in the serial program and on every rank.  Each is replaced, in
place, by a ``pd_op.assign`` of the same input at the same position (the
op indices the runners cut at stay the same), its result keeping the
name.  As ``verify/ir/legacy_ir.translate_for_execution`` does for legacy
programs; never on a program a check looks at.
"""
from __future__ import annotations

IDENTITY = "pd_op.c_identity"


def translate_for_execution(main, names=None) -> int:
    """Rewrite ``main``'s ``pd_op.c_identity`` ops into ``pd_op.assign``
    (``names``: the snapshot names, moved to the new results); the count."""
    import paddle

    ops = [op for op in main.global_block().ops if op.name() == IDENTITY]
    if not ops:
        return 0
    with paddle.pir_utils.IrGuard(), paddle.static.program_guard(main):
        for op in ops:
            paddle.pir.set_insertion_point(op)
            new = paddle._C_ops.assign(op.operand_source(0))
            new.get_defining_op().op_role = op.op_role
            if names is not None and (op.id(), 0) in names.table:
                names.table[(new.get_defining_op().id(), 0)] = names.table.pop((op.id(), 0))
            op.result(0).replace_all_uses_with(new)
            op.erase()
    return len(ops)
