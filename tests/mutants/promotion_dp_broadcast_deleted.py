"""Pass-level mutant of ``auto_parallel_fused_linear_promotion``.

Injected bug: the startup rewrite is not told the data-parallel group, so on
the first tensor-parallel rank (which keeps the bias) it deletes *every*
startup ``broadcast`` of the bias, including the one over the DP ring that
keeps the DP replicas' biases in sync; only the one over the TP ring is the
pass's to delete.  The non-first ranks are unaffected (they drop every op
writing the bias anyway).

The real ``_transform_startup_program`` runs, called with ``dp_group=None``.
"""
from .auto_parallel_fused_linear_promotion import FusedLinearPromotionPass
from .pass_base import register_pass


@register_pass("auto_parallel_fused_linear_promotion")
class DpBroadcastDeletedPromotion(FusedLinearPromotionPass):
    def _transform_startup_program(self, startup_program, deleted_bias_names,
                                   dp_group, is_first_rank):
        super()._transform_startup_program(startup_program, deleted_bias_names,
                                           None,  # BUG: dp_group
                                           is_first_rank)
