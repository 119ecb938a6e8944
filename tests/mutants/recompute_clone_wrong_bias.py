"""Pass-level mutant of the legacy ``auto_parallel_recompute``.

Injected bug: the recomputed bias add of the last segment (the first one the
pass inserts, before the backward of its last op) reads the first block's
bias (``linear_0.b_0``) instead of its own: the backward reads a recomputed
value that is not the forward's.
"""
from . import auto_parallel_recompute as _rc
from .pass_base import register_pass


@register_pass("auto_parallel_recompute")
class CloneWrongBias(_rc.RecomputePass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for op in block.ops:
            if op.type == "elementwise_add" and int(op.attr("op_role")) == 1:
                op._rename_input(op.input("Y")[0], "linear_0.b_0")  # BUG
                break
        block._sync_with_cpp()
