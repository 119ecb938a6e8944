"""A tensor-parallel MLP whose head reads its input through
``paddle.distributed.collective._c_identity`` in to_static mode only, as
paddleformers' ``parallel_matmul`` does under fleet (the LM head of
``zoo_llama_dp2_tp2_realistic``): the eager model is a plain MLP; 3.3.1's
static backward passes no gradient through the ``pd_op.c_identity``, so the
serial program Paddle builds updates the head alone and ``norm`` and ``up``
never train (``verify/checks/lost_gradients.py``).

    python -m verify plan examples/planner_lost_grad.py --ir pir --ranks 2 --out DIR
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.distributed.collective import _c_identity
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 2


class HeadThroughIdentity(nn.Layer):
    """layer_norm -> column-parallel linear -> relu -> [c_identity] -> head."""

    def __init__(self, mesh):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        self.up = nn.Linear(H, FFN)
        self.head = nn.Linear(FFN, H)
        tp = [dist.Replicate()] * (len(mesh.dim_names) - 1)
        self.up.weight = dist.shard_tensor(self.up.weight, mesh, tp + [dist.Shard(1)])
        self.up.bias = dist.shard_tensor(self.up.bias, mesh, tp + [dist.Shard(0)])
        self.head.weight = dist.shard_tensor(self.head.weight, mesh, tp + [dist.Shard(0)])

    def forward(self, x):
        h = nn.functional.relu(self.up(self.norm(x)))
        if not paddle.in_dynamic_mode():  # paddleformers: the to_static path only
            h = _c_identity(h)
        return self.head(h)


def build_model(mesh):
    return HeadThroughIdentity(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
