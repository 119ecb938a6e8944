"""A two-stage pipeline planned by Paddle's PIR planner: a 4-block MLP whose
first two blocks live on stage 0 and last two on stage 1 of a ``pp`` x ``mp``
mesh (``MESH_DIMS``: the planning process names the mesh's dims with it), the
activation resharded onto stage 1's mesh (the planner turns that reshard into
``pd_op.send_v2`` / ``pd_op.recv_v2``), planned with ``strategy.pipeline``
(``SCHEDULE``, ``ACC_STEPS`` micro-batches; the engine then merges gradients
over them).  For the planner family (``cases/planner_models.py``).

    python -m verify plan examples/planner_pp2.py --ir pir --ranks 2 --mesh '[[0],[1]]' --out /tmp/pp2
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

H = 8
BATCH = 4  # the global batch: ACC_STEPS micro-batches of BATCH // ACC_STEPS rows
ACC_STEPS = 2
SCHEDULE = "FThenB"
MESH_DIMS = ["pp", "mp"]


class Block(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.fc = nn.Linear(H, H)
        self.fc.weight = dist.shard_tensor(self.fc.weight, mesh, [dist.Replicate()])
        self.fc.bias = dist.shard_tensor(self.fc.bias, mesh, [dist.Replicate()])

    def forward(self, x):
        return nn.functional.relu(self.fc(x))


class PipelineMLP(nn.Layer):
    """Blocks 0-1 on stage 0, blocks 2-3 on stage 1."""

    def __init__(self, mesh):
        super().__init__()
        self.stages = [mesh.get_mesh_with_dim("pp")[s] for s in range(2)]
        self.blocks = nn.LayerList([Block(self.stages[i // 2]) for i in range(4)])

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            if i == 2:  # to the next stage
                x = dist.reshard(x, self.stages[1], [dist.Replicate()])
            x = block(x)
        return x


def build_model(mesh):
    return PipelineMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


def configure(strategy):
    """Two pipeline stages, ``ACC_STEPS`` micro-batches, the ``SCHEDULE`` order."""
    strategy.pipeline.enable = True
    strategy.pipeline.pp_degree = 2
    strategy.pipeline.accumulate_steps = ACC_STEPS
    strategy.pipeline.micro_batch_size = BATCH // ACC_STEPS
    strategy.pipeline.schedule_mode = SCHEDULE


inputs = [InputSpec([-1, H], "float32", "x")]
labels = [InputSpec([-1, H], "float32", "y")]
