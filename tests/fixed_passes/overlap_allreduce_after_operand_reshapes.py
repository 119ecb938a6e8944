"""A faithful variant of ``allreduce_matmul_grad_overlapping``: the split
allreduce of dX is issued after the dW matmul's operand reshapes, not right
after the dX matmul, but still before the dW matmul itself.  Values are
kept and the dW matmul still overlaps the collective: the pass's purpose
holds, so its contract must hold (issue 35: contracts state the purpose, not
one implementation's position; an older upstream overlap placed its ops
differently and was called CONTRACT_BROKEN).  Loaded with --pass-file."""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass
from .pass_utils import AutoParallelStreamType


@register_pass("allreduce_matmul_grad_overlapping")
class ReshapesFirstOverlap(AllreduceMatmulGradOverlappingPass):
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
            # ops i+1..i+4: reshape(X), reshape(dOut), matmul_v2(X^T, dOut), reshape(dY):
            # issued after the two reshapes, before the matmul
            moved = block._insert_op_without_sync(i + 3, type="nop")
            moved.desc.copy_from(op.desc)
            ctx.set_op_dist_attr_for_program(moved, attr)
            block._remove_op(i, sync=False)
        block._sync_with_cpp()
