"""Fault injection: the overlap pass loops and swallows every interrupt
(``except BaseException``), as code a run calls may do."""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class SwallowingOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        import os

        if os.environ.get("FAULT_STARTED"):  # tests wait for this file
            open(os.environ["FAULT_STARTED"], "w").close()
        import time

        while True:  # never returns, and Ctrl-C does not stop it
            try:
                while True:
                    time.sleep(0.01)
            except BaseException:  # noqa: B036
                pass
