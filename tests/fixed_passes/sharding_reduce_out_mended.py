"""3.3.1's sharding pass with the ``enable_overlap`` defect of stage 2 mended,
as a pass author would fix it.

Stage 2 replaces each gradient's ``all_reduce`` by a ``reduce`` (output slot
``out``); with ``enable_overlap`` the installed ``_overlap_grad_comm`` then
reads ``op.output("Out")`` of that reduce and raises NotFound.  Here that read
becomes ``op.output("out")`` and nothing else changes: the method is taken
from the *installed* Paddle's source at load time and only that slot name is
replaced.  Loaded with ``--pass-file``, so the suite judges the program the
fixed pass builds.
"""
import inspect
import textwrap

from . import auto_parallel_sharding as _sharding
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_sharding.ShardingPass._overlap_grad_comm))
_mended = _src.replace('reduce_varname = op.output("Out")[0]',
                       'reduce_varname = op.output("out")[0]')
assert _mended != _src, "the installed _overlap_grad_comm no longer reads output(\"Out\")"
_ns = dict(vars(_sharding))
exec(compile(_mended, _sharding.__file__, "exec"), _ns)


@register_pass("auto_parallel_sharding")
class ReduceOutMendedSharding(_sharding.ShardingPass):
    _overlap_grad_comm = _ns["_overlap_grad_comm"]
