"""Small wrong edits of installed passes, written as ``--pass-file``s
(tests of the pass under review being the pass judged on every path).

Each is the installed source with one token changed, so a path that applies
the installed pass instead of the file's judges a faithful rewrite; the
edit changes values without changing a shape (no crash to hide behind).
The source edited is asserted to hold the token (a Paddle that no longer
has it fails here, loudly, not by passing).
"""
from __future__ import annotations

import inspect
import textwrap


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the installed source no longer holds {old!r} once"
    return text.replace(old, new)


def vpp_dw_operands_swapped(path) -> str:
    """``pipeline_scheduler_VPP`` whose matmul_grad split computes dW as
    ``reshape(dOut^T X)`` (the fold's operands swapped) where Paddle's
    computes ``reshape(X^T dOut)``: the same element count, other values."""
    from paddle.distributed.passes import pass_utils
    from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_vpp import (
        PipelineVirtualPipelinePass as Vpp,
    )

    helper = _edit(inspect.getsource(pass_utils._pir_split_matmul_grad_to_matmul),
                   "paddle._C_ops.matmul(new_x, new_out_grad, True, False)",
                   "paddle._C_ops.matmul(new_out_grad, new_x, True, False)")
    method = textwrap.indent(textwrap.dedent(
        inspect.getsource(Vpp._pir_split_matmul_grad_ops_to_matmul)), "    ")
    text = ('"""A wrong edit of the VPP split (tests/wrong_pass_files.py)."""\n'
            "import paddle\n\n"
            "from .pass_base import register_pass\n"
            "from .pipeline_scheduler_pass.pipeline_vpp import PipelineVirtualPipelinePass\n\n\n"
            f"{helper}\n\n"
            '@register_pass("pipeline_scheduler_VPP")\n'
            "class DwOperandsSwapped(PipelineVirtualPipelinePass):\n"
            f"{method}")
    with open(path, "w") as f:
        f.write(text)
    return str(path)


def overlap_removes_the_writer_of_dy(path) -> str:
    """``allreduce_matmul_grad_overlapping`` removing the op before the
    original all-reduce (index ``+ 4``) instead of the all-reduce (``+ 5``):
    the dY reshape goes and the original all-reduce stays."""
    import paddle.distributed.passes.allreduce_matmul_grad_overlapping as mod

    text = _edit(inspect.getsource(mod), "block._remove_op(allreduce_id + 5, sync=False)",
                 "block._remove_op(allreduce_id + 4, sync=False)")
    with open(path, "w") as f:
        f.write(text)
    return str(path)
