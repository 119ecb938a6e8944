"""Mutant of 3.3.1's PIR gradient merge: the 1/k scale is dropped (``if
avg:`` in ``_pir_parse_program`` becomes ``if False:``), so with avg=True
the optimizer reads the sum of the k gradients instead of their mean.
Taken from the installed source at load time; one thing changed."""
import inspect
import textwrap

from . import auto_parallel_gradient_merge as _gm
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_gm._pir_parse_program))
_mut = _src.replace("    if avg:\n", "    if False:  # mutant: the 1/k scale dropped\n")
assert _mut != _src, "the installed pass no longer tests avg"
_ns = dict(vars(_gm))
exec(compile(_mut, _gm.__file__, "exec"), _ns)
exec(compile(textwrap.dedent(inspect.getsource(_gm.GradientMergePass._apply_single_impl)),
             _gm.__file__, "exec"), _ns)


@register_pass("auto_parallel_gradient_merge_pass")
class ScaleDroppedGradientMergePass(_gm.GradientMergePass):
    _apply_single_impl = _ns["_apply_single_impl"]
