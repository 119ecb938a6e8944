"""Pass-level mutant of ``auto_parallel_fused_linear_promotion``.

Injected bug: every tensor-parallel rank takes itself for the first one, so
every rank keeps the bias and adds it *before* the all_reduce: the sum over
the TP ring then carries the bias tp times (double bias on TP 2), and the
non-first ranks keep the bias, its grad, its optimizer op and its init.

Only the first-rank test is wrong (``_is_tp_sp_first_rank`` answers True);
the real pass does everything else.
"""
from .auto_parallel_fused_linear_promotion import FusedLinearPromotionPass
from .pass_base import register_pass


@register_pass("auto_parallel_fused_linear_promotion")
class BiasEveryRankPromotion(FusedLinearPromotionPass):
    def _is_tp_sp_first_rank(self, dist_context, rank):
        return True  # BUG: super()._is_tp_sp_first_rank(dist_context, rank)
