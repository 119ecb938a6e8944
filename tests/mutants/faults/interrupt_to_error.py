"""Fault injection: the overlap pass loops until interrupted, then reports
the interrupt as an ordinary error (as Paddle's C++ does with a Python
exception raised in a callback): the suite sees a pass that raised."""
import time

from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class ErrorOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        import os

        if os.environ.get("FAULT_STARTED"):  # tests wait for this file
            open(os.environ["FAULT_STARTED"], "w").close()
        try:
            while True:
                time.sleep(0.01)
        except BaseException as exc:  # noqa: B036
            raise RuntimeError(f"(Fatal) the pass was stopped: {type(exc).__name__}") from None
