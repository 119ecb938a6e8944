"""A tiny tensor-parallel MLP in plain Paddle, for ``python -m verify plan``.

    python -m verify plan examples/tiny_mlp.py --ranks 2 --out /tmp/tiny_mlp
    python -m verify run --program-dir /tmp/tiny_mlp

What a model file defines (all in the ordinary Paddle way):

``build_model(mesh)``  a ``paddle.nn.Layer``; shard parameters with
                       ``auto.shard_tensor(param, mesh, placements)`` on the
                       ``ProcessMesh`` it is given (dim names ``["mp"]``, or
                       ``["dp", "mp"]`` for ``--mesh DPxTP``);
``loss``               a loss layer or function ``loss(output, label)``;
``optimizer(params)``  the optimizer over the model's parameters;
``inputs``/``labels``  lists of ``paddle.static.InputSpec`` (a ``-1`` dim
                       is symbolic; numeric runs give it ``BATCH``);
``BATCH`` (optional)   the concrete size of ``-1`` dims (default 2);
``configure(strategy)`` (optional) edits the ``auto.Strategy``.
"""
import paddle
from paddle import nn
from paddle.distributed.fleet import auto
from paddle.static import InputSpec

H, FFN = 8, 16
BATCH = 2


class TinyMLP(nn.Layer):
    """layer_norm -> column-parallel linear -> relu -> row-parallel linear."""

    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.norm = nn.LayerNorm(H)
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)

    def forward(self, x):
        auto.shard_tensor(self.up.weight, self.mesh, [None, "mp"])
        auto.shard_tensor(self.up.bias, self.mesh, ["mp"])
        auto.shard_tensor(self.down.weight, self.mesh, ["mp", None])
        h = self.up(self.norm(x))
        # paddle.nn.functional.relu rejects legacy static Variables in 3.3.1
        out = h.block.create_var(name=h.name + ".relu", shape=h.shape, dtype=h.dtype)
        h.block.append_op(type="relu", inputs={"X": [h]}, outputs={"Out": [out]})
        return self.down(out)


def build_model(mesh):
    return TinyMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, 4, H], "float32", "x")]
labels = [InputSpec([-1, 4, H], "float32", "y")]
