"""Mutant of 3.3.1's PIR gradient merge: the merge itself unchanged, then
the startup program's first uniform initialisation widened to [-50, 50]
(new constant operands for its min and max).  The merged program must then
start from other parameters than the original: the micro-step runs draw
them from each side's own startup initialisation (issue 19)."""
import paddle

from . import auto_parallel_gradient_merge as _gm
from .pass_base import register_pass


@register_pass("auto_parallel_gradient_merge_pass")
class InitWidenedGradientMergePass(_gm.GradientMergePass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        draw = next(op for op in startup_program.global_block().ops
                    if op.name() == "pd_op.uniform")
        with paddle.static.program_guard(main_program, startup_program):
            paddle.pir.set_insertion_point(draw)
            lo = paddle.full([1], -50.0, "float32")
            hi = paddle.full([1], 50.0, "float32")
            paddle.pir.reset_insertion_point_to_end()
        draw.operand(1).set_source(lo)  # (shape, min, max)
        draw.operand(2).set_source(hi)
