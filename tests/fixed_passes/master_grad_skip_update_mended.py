"""3.3.1's master-grad pass with its SGD defect mended, as a pass author
would fix it.

The installed pass, while deleting the optimizer it rebuilds, reads
``op.input("SkipUpdate")`` of every op in its ``_supported_optimizer_type``
(sgd, momentum, adamax, ...), and only adam, adamw and lamb declare that
input: with SGD it raises NotFound.  Here that read asks the op first and
nothing else changes: ``_regenerate_optimizer`` is taken from the
*installed* Paddle's source at load time, and only that line is replaced.
Loaded with ``--pass-file``.
"""
import __future__
import inspect
import textwrap

from . import auto_parallel_master_grad as _mg
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_mg.MasterGradPass._regenerate_optimizer))
_read = 'skip_update_names = op.input("SkipUpdate")'
_mended = _src.replace(_read, _read + ' if "SkipUpdate" in op.input_names else []')
assert _mended != _src, "the installed _regenerate_optimizer no longer reads SkipUpdate"
_ns = dict(vars(_mg))
# its annotations name types the module imports only for type checkers
exec(compile(_mended, _mg.__file__, "exec", flags=__future__.annotations.compiler_flag,
             dont_inherit=True), _ns)


@register_pass("auto_parallel_master_grad_pass")
class SkipUpdateMendedMasterGrad(_mg.MasterGradPass):
    _regenerate_optimizer = _ns["_regenerate_optimizer"]
