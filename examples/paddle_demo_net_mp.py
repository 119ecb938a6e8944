"""Paddle's own to_static tensor-parallel test model, in this suite's model-file
form: the ``DemoNet`` of Paddle's ``test/auto_parallel/pir/
test_to_static_pir_program.py`` as ``semi_auto_parallel_dist_to_static_mlp_pir.py``
(``test_mp_demo_net``) trains it: two bias-free linears, the first's weight
``Shard(1)`` (column-parallel), the second's ``Shard(0)`` (row-parallel),
ReLUs around them, ``nn.MSELoss`` and SGD with learning rate 0.1, on a
one-dimensional mesh of 2.  Smaller than the test's (16 -> 16 -> 8 there;
here 8 -> 8 -> 4) so that the relation proof stays small.

    python -m verify plan examples/paddle_demo_net_mp.py --ir pir --ranks 2 --out /tmp/demo_mp
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

IMAGE_SIZE, CLASS_NUM = 8, 4
BATCH = 4


class DemoNet(nn.Layer):
    """relu -> linear (column-parallel) -> relu -> linear (row-parallel) -> relu."""

    def __init__(self, mesh):
        super().__init__()
        self.linear_0 = nn.Linear(IMAGE_SIZE, IMAGE_SIZE, bias_attr=False)
        self.linear_1 = nn.Linear(IMAGE_SIZE, CLASS_NUM, bias_attr=False)
        lead = [dist.Replicate()] * (len(mesh.dim_names) - 1)  # replicated over dp, if any
        self.linear_0.weight = dist.shard_tensor(self.linear_0.weight, mesh,
                                                 lead + [dist.Shard(1)], stop_gradient=False)
        self.linear_1.weight = dist.shard_tensor(self.linear_1.weight, mesh,
                                                 lead + [dist.Shard(0)], stop_gradient=False)

    def forward(self, x):
        out = nn.functional.relu(x)
        out = nn.functional.relu(self.linear_0(out))
        return nn.functional.relu(self.linear_1(out))


def build_model(mesh):
    return DemoNet(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, IMAGE_SIZE], "float32", "image")]
labels = [InputSpec([-1, CLASS_NUM], "float32", "label")]
