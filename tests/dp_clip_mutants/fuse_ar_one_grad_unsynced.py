"""fuse_all_reduce mutant: the pass with its collective filter mended (as in
tests/fixed_passes/fuse_all_reduce_filter_mended.py), then the first gradient
left out of the fused buffer, so it reaches its optimizer without the
data-parallel sum."""
import inspect
import textwrap

from . import fuse_all_reduce as _far
from .pass_base import register_pass

_src = textwrap.dedent(inspect.getsource(_far.filter_all_collective_op_indices))
_old = '        "all_reduce",\n'
_ns = dict(vars(_far))
exec(compile(_src.replace(_old, _old + '        "c_allreduce_sum",\n'), _far.__file__, "exec"),
     _ns)
for _fn in (_far.find_all_fuse_all_reduce_groups, _far.FuseAllReducePass._apply_single_impl):
    exec(compile(textwrap.dedent(inspect.getsource(_fn)), _far.__file__, "exec"), _ns)


@register_pass("fuse_all_reduce")
class OneGradUnsynced(_far.FuseAllReducePass):
    def _apply_single_impl(self, main_program, startup_program, context):
        _ns["_apply_single_impl"](self, main_program, startup_program, context)
        block = main_program.global_block()
        for op in block.ops:
            if op.type == "coalesce_tensor":
                grads = op.input("Input")
                op.desc.set_input("Input", grads[1:])
                op.desc.set_output("Output", grads[1:])
        block._sync_with_cpp()
