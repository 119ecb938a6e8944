"""Fault injection: the overlap pass, but it segfaults (reads address 0)."""
import ctypes

from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class SegfaultingOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        ctypes.string_at(0)
