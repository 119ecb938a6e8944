"""Pass-level mutant of ``allreduce_matmul_grad_overlapping``.

Injected bug: an off-by-one in the removal of the original allreduce
(``block._remove_op(allreduce_id + 6)`` instead of ``+ 5``): the original
``c_allreduce_sum`` stays (so dX is allreduced twice, both on the
model-parallel stream, because the pass mutates the dist attr it shares
with the new one) and the op that followed it is deleted instead (on the
column-parallel cases, the weight's ``sgd``).

The real pass runs unchanged; afterwards the original allreduce (recorded
before the pass) is put back in place of the op that followed it.
"""
from .allreduce_matmul_grad_overlapping import AllreduceMatmulGradOverlappingPass
from .pass_base import register_pass


@register_pass("allreduce_matmul_grad_overlapping")
class RemovesWrongOpOverlap(AllreduceMatmulGradOverlappingPass):
    def _apply_single_impl(self, main_program, startup_program, context):
        block = main_program.global_block()
        ops = block.ops
        pairs = self._get_all_matmul_grad_and_allreduce_pairs(block)
        saved = []  # (original allreduce as type/inputs/outputs/attrs, the op after it)
        for ar_id in pairs.values():
            if ar_id + 1 < len(ops):
                ar = ops[ar_id]
                saved.append((dict(type=ar.type,
                                   inputs={n: ar.input(n) for n in ar.input_names},
                                   outputs={n: ar.output(n) for n in ar.output_names},
                                   attrs=ar.all_attrs()),
                              ops[ar_id + 1]))
        super()._apply_single_impl(main_program, startup_program, context)
        ctx = self.dist_context
        for spec, after in saved:
            at = next(k for k, o in enumerate(block.ops) if o is after)
            kept = block._insert_op_without_sync(at, **spec)
            # the dist attr the pass moved to the mp stream is shared by both
            new_ar = next(o for o in block.ops[:at] if o.type == spec["type"]
                          and o.input("X") == spec["inputs"]["X"])
            ctx.set_op_dist_attr_for_program(kept, ctx.get_op_dist_attr_for_program(new_ar))
            block._remove_op(at + 1, sync=False)  # BUG: the op after the allreduce goes
        block._sync_with_cpp()
