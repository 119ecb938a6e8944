"""Pass-level mutant of ``auto_parallel_sharding``.

Injected bug: each parameter's broadcast after the optimizer names the wrong
root -- the next rank of the sharding group instead of the parameter's owner
(``(owner + 1) % degree``) -- so the owner's freshly updated parameter is
overwritten by a rank that did not update it, and every rank ends the step
with the stale value.

The real ``_insert_optimizer_broadcasts`` runs; only the ``root`` attr of the
broadcasts it appended is then shifted.
"""
from .auto_parallel_sharding import ShardingPass
from .pass_base import register_pass


@register_pass("auto_parallel_sharding")
class WrongRootSharding(ShardingPass):
    def _insert_optimizer_broadcasts(self, main_block, startup_block):
        n = len(main_block.ops)
        super()._insert_optimizer_broadcasts(main_block, startup_block)
        for op in main_block.ops[n:]:
            if op.type == "broadcast":
                size = self.sharding_infos[0].group.nranks
                op._set_attr("root", (op.attr("root") + 1) % size)  # BUG: not the owner
        main_block._sync_with_cpp()
