"""Pass-level mutant of ``auto_parallel_fused_linear_promotion``.

Injected bug: no rank takes itself for the first tensor-parallel rank, so
the bias (its add, grad, optimizer op and startup init) is removed on every
rank, the first one included: the linear loses its bias altogether.

Only the first-rank test is wrong (``_is_tp_sp_first_rank`` answers False);
the real pass does everything else.
"""
from .auto_parallel_fused_linear_promotion import FusedLinearPromotionPass
from .pass_base import register_pass


@register_pass("auto_parallel_fused_linear_promotion")
class BiasRemovedEverywherePromotion(FusedLinearPromotionPass):
    def _is_tp_sp_first_rank(self, dist_context, rank):
        return False  # BUG: super()._is_tp_sp_first_rank(dist_context, rank)
