"""Pass-level mutant of ``auto_parallel_amp``.

Injected bug: the cast of the bias of the gray ``elementwise_add`` that
follows a white matmul is dropped: the add reads the float32 bias, which
the lists say it must read rounded to float16.
"""
from .auto_parallel_amp import AMPPass
from .pass_base import register_pass


@register_pass("auto_parallel_amp")
class CastDroppedAmp(AMPPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for i, op in enumerate(block.ops):
            if op.type == "elementwise_add" and op.input("Y")[0].endswith(".cast_fp16"):
                cast_out = op.input("Y")[0]
                src = next(o for o in block.ops if o.type == "cast"
                           and o.output("Out")[0] == cast_out).input("X")[0]
                for o in block.ops:  # BUG: every reader back on the float32 value
                    o._rename_input(cast_out, src)
                k = next(j for j, o in enumerate(block.ops) if o.type == "cast"
                         and o.output("Out")[0] == cast_out)
                block._remove_op(k)
                break
        block._sync_with_cpp()
