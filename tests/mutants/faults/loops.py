"""Fault injection: the overlap pass, but it loops forever (a hang)."""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class LoopingOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        import os

        if os.environ.get("FAULT_STARTED"):  # tests wait for this file
            open(os.environ["FAULT_STARTED"], "w").close()
        n = 0
        while True:  # never returns
            n += 1
