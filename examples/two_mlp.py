"""Two tensor-parallel MLP blocks in plain Paddle, after the model of Paddle's
own ``auto_parallel_fused_linear_promotion`` pass test (written anew): each
block is a column-parallel linear with bias, gelu, and a row-parallel linear
with bias, so the promotion pass has two row-parallel biases to promote.

    python -m verify plan examples/two_mlp.py --ranks 2 --out /tmp/two_mlp
    python -m verify run --program-dir /tmp/two_mlp
    python -m verify plan examples/two_mlp.py --ranks 4 --mesh 2x2 --out /tmp/two_mlp_dp
      (DP 2 x TP 2: the batch is split over "dp"; the promotion pass fires on
       all four ranks and keeps every value)

(See ``examples/tiny_mlp.py`` for what a model file defines.)
"""
import paddle
from paddle import nn
from paddle.base.layer_helper import LayerHelper
from paddle.distributed.fleet import auto
from paddle.static import InputSpec

H, FFN, SEQ = 16, 32, 4
BATCH = 2
# On a DPxTP mesh, split the batch over "dp" (examples/two_mlp_dp_replicated.py
# turns this off to show what the promotion pass does then)
SPLIT_BATCH_OVER_DP = True


def gelu(x):
    # paddle.nn.functional.gelu rejects legacy static Variables in 3.3.1
    helper = LayerHelper("gelu")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="gelu", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"approximate": False})
    return out


class MLP(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)

    def forward(self, x):
        auto.shard_tensor(self.up.weight, self.mesh, [None, "mp"])
        auto.shard_tensor(self.up.bias, self.mesh, ["mp"])
        auto.shard_tensor(self.down.weight, self.mesh, ["mp", None])
        return self.down(gelu(self.up(x)))


class TwoMLP(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.norm = nn.LayerNorm(H)
        self.mlp1 = MLP(mesh)
        self.mlp2 = MLP(mesh)

    def forward(self, x):
        if SPLIT_BATCH_OVER_DP and "dp" in self.mesh.dim_names:  # --mesh DPxTP
            x = auto.shard_tensor(x, self.mesh, ["dp", None, None])
        return self.mlp2(self.mlp1(self.norm(x)))


def build_model(mesh):
    return TwoMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.AdamW(learning_rate=0.01, weight_decay=0.01,
                                  parameters=parameters)


inputs = [InputSpec([BATCH, SEQ, H], "float32", "x")]
labels = [InputSpec([BATCH, SEQ, H], "float32", "y")]
