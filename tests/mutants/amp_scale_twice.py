"""Pass-level mutant of ``auto_parallel_amp``.

Injected bug: after the real rewrite, the loss's gradient is multiplied by
the loss scale a second time (right after the scaled loss's
``elementwise_mul_grad``), while the gradients are unscaled once: every
parameter gradient is S = 2^15 times too large.
"""
from .auto_parallel_amp import AMPPass
from .pass_base import register_pass


@register_pass("auto_parallel_amp")
class ScaleTwiceAmp(AMPPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        super()._apply_single_impl(main_program, startup_program, context)
        block = main_program.global_block()
        for i, op in enumerate(block.ops):
            if op.type == "elementwise_mul_grad":
                g, s = op.output("X@GRAD")[0], op.input("Y")[0]
                block._insert_op(i + 1, type="elementwise_mul", inputs={"X": [g], "Y": [s]},
                                 outputs={"Out": [g]}, attrs={"axis": -1, "op_role": 1})
                break  # BUG: the scale applied twice
        block._sync_with_cpp()
