"""A tiny tensor-parallel MLP in Paddle 3.x's PIR style, for
``python -m verify plan --ir pir`` (planned with ``dist.to_static``).

    python -m verify plan examples/tiny_mlp_pir.py --ir pir --ranks 2 --out /tmp/tiny_mlp_pir
    python -m verify run --program-dir /tmp/tiny_mlp_pir

What a PIR model file defines: ``build_model(mesh)`` (a ``paddle.nn.Layer``
whose parameters are placed with ``dist.shard_tensor`` on the
``dist.ProcessMesh`` it is given: dim names ``["mp"]``, or ``["dp", "mp"]``
for ``--mesh DPxTP``), ``loss``, ``optimizer(parameters)``, ``inputs`` and
``labels`` (``InputSpec`` lists; the first dim is the batch) and ``BATCH``.
Unlike the legacy example, functional APIs work as written (PIR is 3.x's
default IR).  The input ``x`` gets a layer norm first so that its branch
needs a gradient: the column-parallel linear's ``matmul_grad`` then has a
dX, which is what the VPP backward split rewrites.
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 2


class TinyMLP(nn.Layer):
    """layer_norm -> column-parallel linear -> relu -> row-parallel linear."""

    def __init__(self, mesh):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)
        tp = [dist.Replicate()] * (len(mesh.dim_names) - 1)  # replicated over dp, if any
        self.up.weight = dist.shard_tensor(self.up.weight, mesh, tp + [dist.Shard(1)])
        self.up.bias = dist.shard_tensor(self.up.bias, mesh, tp + [dist.Shard(0)])
        self.down.weight = dist.shard_tensor(self.down.weight, mesh, tp + [dist.Shard(0)])

    def forward(self, x):
        return self.down(nn.functional.relu(self.up(self.norm(x))))


def build_model(mesh):
    return TinyMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
