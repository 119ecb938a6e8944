"""Pass-level mutant of the legacy ``auto_parallel_recompute``.

Injected bug: the grad ops are never re-pointed to the recomputed values
(the rename of their inputs is skipped): the segments are still copied into
the backward, but nothing reads the copies, and the backward keeps reading
the forward's activations (no memory saved; values kept).
"""
import inspect
import textwrap

from . import auto_parallel_recompute as _rc
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_rc.RecomputePass._apply_single_impl))
_old = "_rename_arg_([grad_op.desc], varname, var_name_dict[varname])"
assert _old in _src
_ns = dict(vars(_rc))
exec(compile(_src.replace(_old, "pass  # BUG: the grad op keeps the forward's value"),
             _rc.__file__, "exec"), _ns)


@register_pass("auto_parallel_recompute")
class BackwardReadsForward(_rc.RecomputePass):
    _apply_single_impl = _ns["_apply_single_impl"]
