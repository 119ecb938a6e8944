"""Fault injection: the overlap pass, but it allocates memory without bound."""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class AllocatingOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))  # 64 MB, touched (zeroed)
