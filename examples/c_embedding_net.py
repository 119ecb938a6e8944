"""A vocab-parallel embedding in Paddle 3.x's PIR style: the table's rows
sharded over ``mp`` (``Shard(0)``), then a replicated linear and an MSE loss.
Planned as it is, it is the reference of the c_embedding cases
(``cases/planner_models.py``); ``examples/planner_c_embedding.py`` plans it
with ``strategy.mp_optimization.replace_with_c_embedding`` on.

``VOCAB`` is 4, the range the suite's numeric runs draw integer feeds from
(``verify/numeric/inputs.py``: ``[0, 4)``), so every row of every rank's
piece of the table is read (a wrong ``start_index`` on any rank changes the
values).
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

VOCAB, H, SEQ = 4, 4, 3
BATCH = 2


class VocabParallelNet(nn.Layer):
    """embedding (rows sharded over mp) -> linear."""

    def __init__(self, mesh, shard_vocab=True):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, H)
        self.out = nn.Linear(H, H)
        rep = [dist.Replicate()] * (len(mesh.dim_names) - 1)  # replicated over dp
        last = dist.Shard(0) if shard_vocab else dist.Replicate()
        self.emb.weight = dist.shard_tensor(self.emb.weight, mesh, rep + [last])

    def forward(self, ids):
        return self.out(self.emb(ids))


def build_model(mesh):
    return VocabParallelNet(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ], "int64", "ids")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
