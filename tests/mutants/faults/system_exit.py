"""Fault injection: the overlap pass, but it raises SystemExit(4) halfway."""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class SystemExitOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        block = main_program.global_block()
        block._remove_op(len(block.ops) - 1)  # half-rewritten already
        raise SystemExit(4)
