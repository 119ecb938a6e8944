"""grad_clip mutant: every rank believes it is rank 0, so on a TP mesh each
rank counts the replicated gradients' norms (counted tp times)."""
from .auto_parallel_grad_clip import ClipGradByGlobalNormPass
from .pass_base import register_pass


@register_pass("auto_parallel_grad_clip")
class EveryRankFirst(ClipGradByGlobalNormPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        self.set_attr("rank_id", 0)
        super()._apply_single_impl(main_program, startup_program, context)
