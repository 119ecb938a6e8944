"""dp_opt mutant: the first gradient is left out of the fused buffer, so it
reaches its optimizer without the data-parallel sum."""
from .auto_parallel_data_parallel_optimization import DataParallelOptimizationPass
from .pass_base import register_pass


@register_pass("auto_parallel_data_parallel_optimization")
class OneGradUnsynced(DataParallelOptimizationPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for op in block.ops:
            if op.type == "coalesce_tensor":
                grads = op.input("Input")
                op.desc.set_input("Input", grads[1:])
                op.desc.set_output("Output", grads[1:])
        block._sync_with_cpp()
