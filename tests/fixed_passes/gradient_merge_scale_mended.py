"""3.3.1's PIR gradient merge with its reported defect mended, as a pass
author would fix it.

With ``avg=True`` and an optimizer whose name holds neither ``sgd`` nor
``adam`` (Momentum), the installed pass takes ``_append_scale_op_before_comm``,
whose scale loop sits *inside* its reverse walk of the block: one round of
1/k ``scale_`` ops is appended at the block end (after the optimizer and the
zeroing) for every op it passes before it finds the last backward op.
Here that loop is moved out of the walk (dedented), so the scales are
inserted once, right after the last backward op, before the optimizer and
the zeroing.  Nothing else changes: the functions are taken from the
*installed* Paddle's source at load time.  Loaded with ``--pass-file``.
"""
import inspect
import textwrap

from . import auto_parallel_gradient_merge as _gm
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_gm._append_scale_op_before_comm))
_lines = _src.splitlines()
_start = next(i for i, ln in enumerate(_lines)
              if ln.startswith("        for _, new_grad in new_params_to_grads:"))
_end = next(i for i, ln in enumerate(_lines)
            if ln.startswith("    paddle.pir.set_insertion_point_to_block_end(block)"))
_mended = "\n".join(_lines[:_start] + [ln[4:] if ln.startswith("    ") else ln
                                        for ln in _lines[_start:_end]] + _lines[_end:]) + "\n"
assert _mended != _src, "the installed scale loop is no longer inside the walk"
_ns = dict(vars(_gm))
exec(compile(_mended, _gm.__file__, "exec"), _ns)
for _fn in (_gm._pir_append_scale_op, _gm._pir_parse_program):  # bind the mended one
    exec(compile(textwrap.dedent(inspect.getsource(_fn)), _gm.__file__, "exec"), _ns)
exec(compile(textwrap.dedent(inspect.getsource(_gm.GradientMergePass._apply_single_impl)),
             _gm.__file__, "exec"), _ns)


@register_pass("auto_parallel_gradient_merge_pass")
class ScaleMendedGradientMergePass(_gm.GradientMergePass):
    _apply_single_impl = _ns["_apply_single_impl"]
