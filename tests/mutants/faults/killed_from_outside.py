"""Fault injection from outside: the overlap pass, correct, but it first
names its worker's pid in a file and waits a moment, so that a test can kill
the worker with SIGKILL as the OOM killer or an operator would.  The file is
``verify_outside_kill_<parent pid>.pid`` in the temp dir; the test removes it
after it killed (a later application then runs undisturbed)."""
import os
import tempfile
import time

from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class KilledOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        parent = os.environ.get("VERIFY_ISOLATION_PARENT", str(os.getppid()))
        path = os.path.join(tempfile.gettempdir(), f"verify_outside_kill_{parent}.pid")
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        time.sleep(3)  # the test kills us here, or not
        return super()._apply_single_impl(main_program, startup_program, context)
