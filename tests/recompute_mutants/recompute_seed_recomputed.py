"""Mutant of the legacy ``auto_parallel_recompute`` (a test fixture of
tests/test_recompute_legacy.py, not catalogued: its case is INCONCLUSIVE).

Injected bug: the seed tensor the pass inserts for a segment's dropout is
not kept (it is left out of the reserved vars), so the seed op is
recomputed with the segment and the recomputed dropout reads the re-run
seed instead of the forward's (with a fixed seed the mask happens to be the
same; with seed 0, as the Engine's unseeded dropout has, it is drawn again).
"""
import inspect
import textwrap

from . import auto_parallel_recompute as _rc
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_rc.RecomputeState.modify_forward_desc_for_recompute))
_old = "self._reserved_vars.append(var_unique_name)"
assert _old in _src
_ns = dict(vars(_rc))
exec(compile(_src.replace(_old, "pass  # BUG: the seed is not kept"), _rc.__file__, "exec"), _ns)


class _State(_rc.RecomputeState):
    modify_forward_desc_for_recompute = _ns["modify_forward_desc_for_recompute"]


_ns2 = dict(vars(_rc))
_ns2["RecomputeState"] = _State
exec(compile(textwrap.dedent(inspect.getsource(_rc.RecomputePass._apply_single_impl)),
             _rc.__file__, "exec"), _ns2)


@register_pass("auto_parallel_recompute")
class SeedRecomputed(_rc.RecomputePass):
    _apply_single_impl = _ns2["_apply_single_impl"]
