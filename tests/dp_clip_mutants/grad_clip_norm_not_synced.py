"""grad_clip mutant: the partial squared norms are never summed across ranks
(the inserted all_reduce is dropped), so each rank clips with its share."""
from .auto_parallel_grad_clip import ClipGradByGlobalNormPass
from .pass_base import register_pass


@register_pass("auto_parallel_grad_clip")
class NormNotSynced(ClipGradByGlobalNormPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for idx in reversed(range(len(block.ops))):
            op = block.ops[idx]
            if op.type == "all_reduce" and op.attr("ring_id") == 0:
                block._remove_op(idx, sync=False)
        block._sync_with_cpp()
