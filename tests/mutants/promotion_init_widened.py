"""Pass-level mutant of ``auto_parallel_fused_linear_promotion``.

Injected bug: after the real promotion, the startup program's first
``uniform_random`` initialisation is widened to [-50, 50].  The main
program is the faithful one; only the parameters it starts from differ,
so a numeric run that gives both sides the same parameters, whatever their
startup programs say, misses it.
"""
from .auto_parallel_fused_linear_promotion import FusedLinearPromotionPass
from .pass_base import register_pass


@register_pass("auto_parallel_fused_linear_promotion")
class InitWidenedPromotion(FusedLinearPromotionPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        for op in startup_program.global_block().ops:
            if op.type == "uniform_random":
                op._set_attr("min", -50.0)  # BUG: the range widened
                op._set_attr("max", 50.0)
                break
