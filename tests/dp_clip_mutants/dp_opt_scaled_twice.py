"""dp_opt mutant: the loss seed takes the 1/dp twice, so every synced
gradient is scaled by 1/dp twice.  A clip by global norm that is active
cancels such a common factor."""
from .auto_parallel_data_parallel_optimization import DataParallelOptimizationPass
from .pass_base import register_pass


@register_pass("auto_parallel_data_parallel_optimization")
class ScaledTwice(DataParallelOptimizationPass):
    def _scale_backward_initial_grad(self):
        super()._scale_backward_initial_grad()
        super()._scale_backward_initial_grad()
