"""Fault injection (not a fault): the overlap pass, correct, but with 400
threads alive while it rewrites, each with its stack and a malloc arena of
its own, as Paddle's executor holds in a lock-step run of a real model.
Its verdict must be the pass's: threads are address space, not memory."""
import threading

from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class ThreadedOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        release = threading.Event()
        started = threading.Barrier(401)

        def idle():
            bytearray(256 << 10)  # a malloc in this thread: glibc gives it an arena
            started.wait()
            release.wait()

        threads = [threading.Thread(target=idle, daemon=True) for _ in range(400)]
        for t in threads:
            t.start()
        started.wait()
        try:
            return super()._apply_single_impl(main_program, startup_program, context)
        finally:
            release.set()
            for t in threads:
                t.join()
