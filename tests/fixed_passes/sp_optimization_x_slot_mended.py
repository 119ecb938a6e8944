"""3.3.1's sequence-parallel optimization pass with its one reported defect
mended, as a pass author would fix it.

The installed ``_fuse_allreduce_split`` reads ``allreduce_op.input("X")`` of
an ``all_reduce``, whose input slot is ``x``, and raises.  Here that read
becomes ``input("x")`` and nothing else changes: the method is taken from
the *installed* Paddle's source at load time and only that slot name is
replaced.  Loaded with ``--pass-file``, so the suite judges the program the
fixed pass builds.
"""
import inspect
import textwrap

from . import auto_parallel_sequence_parallel_optimization as _sp
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(
    _sp.SequenceParallelOptimizationPass._fuse_allreduce_split))
_mended = _src.replace('allreduce_op.input("X")', 'allreduce_op.input("x")')
assert _mended != _src, "the installed pass no longer reads input(\"X\")"
_ns = dict(vars(_sp))
exec(compile(_mended, _sp.__file__, "exec"), _ns)


@register_pass("auto_parallel_sequence_parallel_optimization")
class XSlotMendedSequenceParallelOptimization(_sp.SequenceParallelOptimizationPass):
    _fuse_allreduce_split = _ns["_fuse_allreduce_split"]
