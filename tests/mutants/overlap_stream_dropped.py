"""Pass-level mutant: the real overlap pass, but the allreduce is left on the
calculation stream (the stream attribute dropped).  Loaded with --pass-file,
inside paddle.distributed.passes, so its relative imports resolve."""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class StreamDroppedOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        ctx = self.get_attr("dist_context")
        for op in main_program.global_block().ops:
            if op.type == "c_allreduce_sum":
                attr = ctx.get_op_dist_attr_for_program(op)
                attr.execution_stream = "default"
                ctx.set_op_dist_attr_for_program(op, attr)
