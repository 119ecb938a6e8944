"""A column + row-parallel MLP whose output is resharded to the sequence dim
(sequence parallelism), in Paddle 3.x's PIR style: the program 3.3.1's
planner emits for the row-parallel linear's partial sum followed by a split
along the sequence, the place ``fuse_allreduce_split_to_reducescatter_pass``
exists for (the built-in case ``planned_row_sp_pir`` of
``cases/pir_collectives.py`` plans it).

    python -m verify plan examples/row_sp_pir.py --ir pir --ranks 2 --out /tmp/row_sp_pir
    python -m verify run --program-dir /tmp/row_sp_pir

No nonlinearity and a loss of ``mean(square(out + y))``: every op then has
exact value semantics, so the value proof decides.
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 2  # one sequence row per rank after the reshard
BATCH = 2


class RowSP(nn.Layer):
    """column-parallel linear -> row-parallel linear -> reshard to Shard(1)."""

    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)
        self.up.weight = dist.shard_tensor(self.up.weight, mesh, [dist.Shard(1)])
        self.up.bias = dist.shard_tensor(self.up.bias, mesh, [dist.Shard(0)])
        self.down.weight = dist.shard_tensor(self.down.weight, mesh, [dist.Shard(0)])

    def forward(self, x):
        return dist.reshard(self.down(self.up(x)), self.mesh, [dist.Shard(1)])


def build_model(mesh):
    return RowSP(mesh)


def loss(out, label):
    return paddle.mean(paddle.square(out + label))


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
