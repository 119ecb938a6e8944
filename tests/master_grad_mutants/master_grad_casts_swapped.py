"""Mutant of the legacy ``auto_parallel_master_grad_pass`` (a fixture of
tests/test_master_grad_legacy.py; its cases are INCONCLUSIVE on CPU, so it
is not catalogued).

Injected bug: the first two casts the pass inserts read each other's
low-precision gradient, so each optimizer reads the float32 cast of
another parameter's gradient.
"""
from . import auto_parallel_master_grad as _mg
from .pass_base import register_pass


@register_pass("auto_parallel_master_grad_pass")
class CastsSwapped(_mg.MasterGradPass):
    def _add_master_grad(self, main_program, params_grads, dist_context):
        super()._add_master_grad(main_program, params_grads, dist_context)
        block = main_program.global_block()
        casts = [op for op in block.ops if op.type == "cast"
                 and "@master_grad_" in op.input("X")[0]][:2]
        a, b = casts[0].input("X")[0], casts[1].input("X")[0]
        casts[0].desc.set_input("X", [b])  # BUG
        casts[1].desc.set_input("X", [a])
        block._sync_with_cpp()
