"""Mutant of the legacy ``auto_parallel_recompute`` (a fixture of
tests/test_recompute_legacy.py).

Injected bug: the seed op the pass inserts for a dropout with a fixed seed
seeds the next value (``seed + 1``): the forward's mask (and its copy's)
is another one than the original program drew.
"""
import inspect
import textwrap

from . import auto_parallel_recompute as _rc
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_rc.RecomputeState.modify_forward_desc_for_recompute))
_old = 'else int(cur_op.attr("seed"))'
assert _old in _src
_ns = dict(vars(_rc))
exec(compile(_src.replace(_old, 'else int(cur_op.attr("seed")) + 1  # BUG'), _rc.__file__,
             "exec"), _ns)


class _State(_rc.RecomputeState):
    modify_forward_desc_for_recompute = _ns["modify_forward_desc_for_recompute"]


_ns2 = dict(vars(_rc))
_ns2["RecomputeState"] = _State
exec(compile(textwrap.dedent(inspect.getsource(_rc.RecomputePass._apply_single_impl)),
             _rc.__file__, "exec"), _ns2)


@register_pass("auto_parallel_recompute")
class SeedOffByOne(_rc.RecomputePass):
    _apply_single_impl = _ns2["_apply_single_impl"]
