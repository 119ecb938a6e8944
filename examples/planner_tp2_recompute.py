"""Recompute planned by Paddle's PIR planner: a column- then row-parallel MLP
on TP2 whose block (layer norm, up, relu, down) is wrapped by
``paddle.distributed.fleet.utils.recompute`` (in the static graph that marks
its ops with ``fwd_recompute_id``) and ``strategy.recompute.enable`` set
through ``configure``: the engine's ``auto_parallel_recompute_pir`` pass
duplicates the block into the backward before partition, recorded as the
planner stage ``recompute`` (``verify/plan/stages.py``).
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.distributed.fleet.utils import recompute
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 2
DROPOUT = 0.0  # a dropout after the relu when > 0 (examples/planner_recompute_dropout.py)


class Block(nn.Layer):
    """layer_norm -> column-parallel linear -> relu -> row-parallel linear."""

    def __init__(self, mesh):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)
        self.up.weight = dist.shard_tensor(self.up.weight, mesh, [dist.Shard(1)])
        self.up.bias = dist.shard_tensor(self.up.bias, mesh, [dist.Shard(0)])
        self.down.weight = dist.shard_tensor(self.down.weight, mesh, [dist.Shard(0)])

    def forward(self, x):
        h = nn.functional.relu(self.up(self.norm(x)))
        if DROPOUT > 0:
            h = nn.functional.dropout(h, p=DROPOUT)
        return self.down(h)


class RecomputedMLP(nn.Layer):
    """The block recomputed in the backward, then a replicated head."""

    def __init__(self, mesh):
        super().__init__()
        self.block = Block(mesh)
        self.head = nn.Linear(H, H)

    def forward(self, x):
        return self.head(recompute(self.block, x))


def build_model(mesh):
    return RecomputedMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


def configure(strategy):
    """The engine's recompute pass on: 3.3.1's ``dist.Strategy`` keeps the
    recompute config as ``_recompute`` (no public property); ``to_static``
    copies it to the engine's ``strategy.recompute``."""
    strategy._recompute.enable = True


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
