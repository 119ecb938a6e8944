"""Pass-level mutant of ``allreduce_matmul_grad_overlapping``.

Injected bug: the new allreduce of dX is inserted at the wrong index,
*after the dY matmul* (between ``matmul_v2(X^T, dOut)`` and its output
reshape) instead of directly after the dX matmul ``matmul_v2(dOut, Y^T)``.
Values are unchanged, but the allreduce no longer overlaps the dY matmul and
the pass breaks its own contract (Paddle's NOTE: "new all_reduce_sum must be
inserted to the next of the first matmul_v2, otherwise another pass
fused_linear_param_grad_add will not work").

The real pass runs unchanged; afterwards each split allreduce (the one on the
model-parallel stream, followed by reshape, reshape, matmul_v2, reshape) is
moved 3 ops down.  Loaded with --pass-file inside paddle.distributed.passes.
"""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass
from .pass_utils import AutoParallelStreamType


@register_pass("allreduce_matmul_grad_overlapping")
class WrongInsertIndexOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        ctx = self.dist_context
        block = main_program.global_block()
        for i in reversed(range(len(block.ops))):
            op = block.ops[i]
            attr = ctx.get_op_dist_attr_for_program(op)
            if op.type != "c_allreduce_sum" or attr is None or \
                    attr.execution_stream != AutoParallelStreamType.MP_STREAM.value:
                continue
            # ops i+1..i+4: reshape(X), reshape(dOut), matmul_v2(X^T, dOut), reshape(dY)
            moved = block._insert_op_without_sync(i + 4, type="nop")  # BUG: i + 1
            moved.desc.copy_from(op.desc)
            ctx.set_op_dist_attr_for_program(moved, attr)
            block._remove_op(i, sync=False)
        block._sync_with_cpp()
