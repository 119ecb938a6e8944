"""Pass-level mutant of ``auto_parallel_amp``.

Injected bug: the first cast the rewrite inserts for a white op's input
casts to bfloat16 although the pass was asked for float16 (its var keeps
the float16 name): that input is rounded with the other dtype's rounding.
"""
from paddle.base import core

from .auto_parallel_amp import AMPPass
from .pass_base import register_pass


@register_pass("auto_parallel_amp")
class WrongDtypeAmp(AMPPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for op in block.ops:
            if op.type == "cast" and op.attr("out_dtype") == core.VarDesc.VarType.FP16:
                op._set_attr("out_dtype", core.VarDesc.VarType.BF16)  # BUG
                block.var(op.output("Out")[0]).desc.set_dtype(core.VarDesc.VarType.BF16)
                break
        block._sync_with_cpp()
