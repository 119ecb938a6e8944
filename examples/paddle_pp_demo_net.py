"""Paddle's FThenB pipeline test model, in this suite's model-file form: the
``PPDemoNet`` of ``test/auto_parallel/pir/mlp_demo.py``
(``TestMLPPipelineParallel``, whose ``split_program`` plans it with
``strategy.pipeline`` FThenB and ``accumulate_steps`` 4): ReLU, a bias-free
linear on the first stage's mesh, ReLU, the activation resharded onto the
second stage's mesh, a bias-free linear, ReLU; ``nn.MSELoss``, SGD with
learning rate 0.1.  Smaller (8 -> 8 -> 4 instead of 16 -> 16 -> 8) and 2
micro-batches of 2 rows (the test: 4 of 1) so the plan stays small.

    python -m verify plan examples/paddle_pp_demo_net.py --ir pir --ranks 2 --mesh '[[0],[1]]' --out /tmp/ppdemo
"""
import os
import sys

import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_strategy import configure_pipeline  # noqa: E402

IMAGE_SIZE, CLASS_NUM = 8, 4
BATCH, ACC_STEPS = 4, 2
MESH_DIMS = ["pp", "mp"]


class PPDemoNet(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.mesh1, self.mesh2 = (mesh.get_mesh_with_dim("pp")[s] for s in range(2))
        self.linear_0 = nn.Linear(IMAGE_SIZE, IMAGE_SIZE, bias_attr=False)
        self.linear_1 = nn.Linear(IMAGE_SIZE, CLASS_NUM, bias_attr=False)
        self.linear_0.weight = dist.shard_tensor(self.linear_0.weight, self.mesh1,
                                                 [dist.Replicate()], stop_gradient=False)
        self.linear_1.weight = dist.shard_tensor(self.linear_1.weight, self.mesh2,
                                                 [dist.Replicate()], stop_gradient=False)

    def forward(self, x):
        out = nn.functional.relu(self.linear_0(nn.functional.relu(x)))
        out = dist.reshard(out, self.mesh2, [dist.Replicate()])
        return nn.functional.relu(self.linear_1(out))


def build_model(mesh):
    return PPDemoNet(mesh)


def configure(strategy):
    """A two-stage pipeline, FThenB, 2 micro-batches."""
    configure_pipeline(strategy, "FThenB", ACC_STEPS, BATCH // ACC_STEPS)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, IMAGE_SIZE], "float32", "image")]
labels = [InputSpec([-1, CLASS_NUM], "float32", "label")]
