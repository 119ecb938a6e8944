"""A pipeline stage that breaks the program: the explicit-dependencies pass,
then the op writing the global norm (``sqrt``) deleted, so its readers read
a var nothing writes."""
from .auto_parallel_supplement_explicit_dependencies import (
    AutoParalSupplementDepPass,
)
from .pass_base import register_pass


@register_pass("auto_parallel_supplement_explicit_dependencies")
class DeletesAWriter(AutoParalSupplementDepPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for idx in reversed(range(len(block.ops))):
            if block.ops[idx].type == "sqrt":
                block._remove_op(idx, sync=False)
        block._sync_with_cpp()
