"""Pass-level mutant of ``allreduce_matmul_grad_overlapping``.

Injected bug (the pass's older behaviour): the dY computation the split
inserts (``reshape(X), reshape(dOut), matmul_v2(X^T, dOut), reshape -> Y@GRAD``)
is placed where the original allreduce was, i.e. *after* the ops of the
window between ``matmul_v2_grad`` and the allreduce.  A window op that reads
``Y@GRAD`` (the AMP master-grad ``cast`` of case ``col_cast_window``) then
reads it before anything writes it.

The real pass runs unchanged; afterwards its four dY ops are moved from
right after the new allreduce to just before the op that followed the
original allreduce (recorded before the pass).
"""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass

DY_OPS = 4  # reshape2, reshape2, matmul_v2, reshape2 (split_matmul_grad_to_matmul)


@register_pass("allreduce_matmul_grad_overlapping")
class DyAfterAllreduceOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        block = main_program.global_block()
        pairs = self._get_all_matmul_grad_and_allreduce_pairs(block)
        # (dX name, the op after the original allreduce) for each pair
        ends = [(block.ops[g].output("X@GRAD"),
                 block.ops[a + 1] if a + 1 < len(block.ops) else None)
                for g, a in pairs.items()]
        super()._apply_single_impl(main_program, startup_program, context)
        ctx = self.dist_context
        for dx, end in ends:
            ops = block.ops
            ar = next(k for k, o in enumerate(ops)
                      if o.type == "c_allreduce_sum" and o.input("X") == dx)
            stop = len(ops) if end is None else next(k for k, o in enumerate(ops) if o is end)
            if stop <= ar + 1 + DY_OPS:
                continue  # empty window: nothing to get wrong
            for k in range(DY_OPS):  # BUG: the dY ops go after the window ops
                src = block.ops[ar + 1]
                copy = block._insert_op_without_sync(stop, type="nop")
                copy.desc.copy_from(src.desc)
                ctx.set_op_dist_attr_for_program(copy, ctx.get_op_dist_attr_for_program(src))
                block._remove_op(ar + 1, sync=False)
        block._sync_with_cpp()
