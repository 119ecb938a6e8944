"""Pass-level mutant of ``auto_parallel_sharding``.

Injected bug: the broadcasts of the updated parameters from their owners
are never inserted.  Each rank still drops the optimizer ops of the
parameters it does not own, so those parameters stay at their old value on
every rank but the owner (the DP replicas silently diverge).
"""
from .auto_parallel_sharding import ShardingPass
from .pass_base import register_pass


@register_pass("auto_parallel_sharding")
class BroadcastDroppedSharding(ShardingPass):
    def _insert_optimizer_broadcasts(self, main_block, startup_block):
        return  # BUG: no broadcast from the owner
