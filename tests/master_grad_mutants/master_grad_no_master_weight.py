"""Mutant of the legacy ``auto_parallel_master_grad_pass`` (a fixture of
tests/test_master_grad_legacy.py).

Injected bug: the optimizer is rebuilt without ``multi_precision``, so the
low-precision parameters are updated directly, with no float32 master copy.
"""
from . import auto_parallel_master_grad as _mg
from .pass_base import register_pass


@register_pass("auto_parallel_master_grad_pass")
class NoMasterWeight(_mg.MasterGradPass):
    def _regenerate_optimizer(self, main_program, startup_program, params_grads,
                              dist_context):
        dist_context._serial_optimizer._multi_precision = False  # BUG
        super()._regenerate_optimizer(main_program, startup_program, params_grads,
                                      dist_context)
