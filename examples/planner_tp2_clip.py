"""A TP2 MLP trained by AdamW with ``grad_clip=ClipGradByGlobalNorm(1.0)``,
planned by Paddle's PIR planner for the planner family
(``cases/planner_models.py``, case ``planner_tp2_clip``; its linears are
placed on a ``["dp", "mp"]`` mesh too, replicated over dp).

It follows the style of Paddle's own semi-auto-parallel LLaMA
accuracy-alignment test, ``test/auto_parallel/hybrid_strategy/
semi_auto_llama_acc_align.py`` (``TestLlamaAuto``): a model whose linears are
placed with ``dist.shard_tensor`` (column- then row-parallel over ``mp``),
an ``AdamW`` optimizer with ``grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0)``
and ``dist.to_static`` planning.  The code is this project's own, kept tiny:
a layer norm, a column-parallel linear, relu, a row-parallel linear.

The global-norm clip adds, in the optimize part of the PIR program, a
``squared_l2_norm`` per gradient, their sum (``stack`` + ``sum``, an
all-reduce over ``mp`` for the sharded ones), ``sqrt``, ``maximum`` with the
clip norm and a ``divide`` / ``multiply`` rescaling every gradient.
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 2
CLIP_NORM = 1.0


class ClippedMLP(nn.Layer):
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
    return ClippedMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.AdamW(learning_rate=0.01, parameters=parameters,
                                  weight_decay=0.01,
                                  grad_clip=paddle.nn.ClipGradByGlobalNorm(CLIP_NORM))


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
