"""3.3.1's ``fuse_all_reduce`` with its collective filter mended, as a pass
author would fix it.

The pass draws its candidate groups from ``filter_all_collective_op_indices``
(``c_broadcast``, ``broadcast``, ``all_gather``, ``all_reduce``) and then keeps
only ops of type ``c_allreduce_sum``, which that filter never lists: no op can
pass both, so the installed pass fuses nothing on any program.  Here the
filter also lists ``c_allreduce_sum`` and nothing else changes: the helper is
taken from the *installed* Paddle's source at load time, one line replaced,
and the pass's module functions see the mended helper.  Loaded with
``--pass-file``; it fuses syncs spelled ``c_allreduce_sum`` (the vocabulary of
the planners before 3.x, e.g. the case ``engine_dp2_sgd_c_allreduce``).
"""
import inspect
import textwrap

from . import fuse_all_reduce as _far
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_far.filter_all_collective_op_indices))
_old = '        "all_reduce",\n'
_mended = _src.replace(_old, _old + '        "c_allreduce_sum",\n')
assert _mended != _src, "the installed collective filter no longer lists all_reduce"
_ns = dict(vars(_far))
exec(compile(_mended, _far.__file__, "exec"), _ns)
for _fn in ("find_all_fuse_all_reduce_groups",):
    exec(compile(textwrap.dedent(inspect.getsource(getattr(_far, _fn))), _far.__file__,
                 "exec"), _ns)
exec(compile(textwrap.dedent(inspect.getsource(_far.FuseAllReducePass._apply_single_impl)),
             _far.__file__, "exec"), _ns)


@register_pass("fuse_all_reduce")
class FilterMendedFuseAllReduce(_far.FuseAllReducePass):
    _apply_single_impl = _ns["_apply_single_impl"]
