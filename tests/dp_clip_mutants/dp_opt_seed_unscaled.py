"""dp_opt mutant: the 1/dp scales are removed but the loss seed keeps its
value, so every synced gradient is dp times too large."""
from .auto_parallel_data_parallel_optimization import DataParallelOptimizationPass
from .pass_base import register_pass


@register_pass("auto_parallel_data_parallel_optimization")
class SeedUnscaled(DataParallelOptimizationPass):
    def _scale_backward_initial_grad(self):
        return  # the scales still go (_remove_grad_scaling), the seed stays 1.0
