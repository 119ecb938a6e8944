"""Two-stage pipelines of a 4-block MLP planned by Paddle's PIR planner, for
the planner family (``cases/planner_models.py``): :func:`pipelined` fills a
model file's namespace.  Each block is placed on the mesh of the stage
``block_stages`` names (a ``pp`` x ``mp`` mesh, ``MESH_DIMS``, which the
planning process names its mesh with); where the stage changes, the
activation is resharded onto the next block's stage mesh, which the planner
turns into ``pd_op.send_v2`` / ``pd_op.recv_v2`` (and their backward pair).
``configure`` sets ``strategy.pipeline`` (the schedule, ``acc_steps``
micro-batches, VPP's ``vpp_degree``); the engine then merges gradients over
the micro-batches and its ``pipeline_scheduler_<schedule>`` pass splits each
rank's program into the jobs its executor runs.
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec
from pipeline_strategy import configure_pipeline

H = 8


class Block(nn.Layer):
    """A linear layer, then a ReLU unless it is the model's head (a ReLU
    there would zero every gradient of the outputs it clips)."""

    def __init__(self, mesh, head=False, split=None):
        super().__init__()
        self.fc = nn.Linear(H, H)
        # split over the stage's mp dim: "column" (weight Shard(1), bias Shard(0)),
        # "row" (weight Shard(0), bias replicated: the partial sums all-reduced)
        w, b = {None: ([dist.Replicate()], [dist.Replicate()]),
                "column": ([dist.Shard(1)], [dist.Shard(0)]),
                "row": ([dist.Shard(0)], [dist.Replicate()])}[split]
        self.fc.weight = dist.shard_tensor(self.fc.weight, mesh, w)
        self.fc.bias = dist.shard_tensor(self.fc.bias, mesh, b)
        self.head = head

    def forward(self, x):
        y = self.fc(x)
        return y if self.head else nn.functional.relu(y)


class PipelineMLP(nn.Layer):
    def __init__(self, mesh, block_stages, tensor_parallel=False):
        super().__init__()
        self.meshes = [mesh.get_mesh_with_dim("pp")[s] for s in range(2)]
        self.block_stages = list(block_stages)
        last = len(self.block_stages) - 1
        # with tensor parallelism a stage's blocks alternate column- and row-parallel
        splits = [("column", "row")[i % 2] if tensor_parallel else None
                  for i in range(len(self.block_stages))]
        self.blocks = nn.LayerList([Block(self.meshes[s], head=i == last, split=splits[i])
                                    for i, s in enumerate(self.block_stages)])

    def forward(self, x):
        here = self.block_stages[0]
        for s, block in zip(self.block_stages, self.blocks):
            if s != here:  # to the next block's stage
                x = dist.reshard(x, self.meshes[s], [dist.Replicate()])
                here = s
            x = block(x)
        return x


def pipelined(namespace: dict, schedule: str = "FThenB", block_stages=(0, 0, 1, 1),
              acc_steps: int = 2, batch: int = 4, vpp_degree: int = 1,
              tensor_parallel: bool = False) -> None:
    """Fill ``namespace`` (a model file's ``globals()``) with the pipeline
    model, its ``MESH_DIMS`` and a ``configure`` planning it as ``schedule``;
    ``tensor_parallel``: each stage's blocks alternate column- and
    row-parallel over the stage's ``mp`` dim (a ``pp`` x ``mp`` mesh of 2 x 2)."""
    def configure(strategy):
        configure_pipeline(strategy, schedule, acc_steps, batch // acc_steps, vpp_degree,
                           "Block")

    configure.__doc__ = (f"A two-stage pipeline, schedule {schedule}, {acc_steps} "
                         f"micro-batches" + (f", {vpp_degree} chunks a stage"
                                             if vpp_degree > 1 else "") + ".")
    namespace.update(
        MESH_DIMS=["pp", "mp"], BATCH=batch, configure=configure,
        build_model=lambda mesh: PipelineMLP(mesh, block_stages, tensor_parallel),
        loss=nn.MSELoss(),
        optimizer=lambda parameters: paddle.optimizer.SGD(learning_rate=0.1,
                                                          parameters=parameters),
        inputs=[InputSpec([-1, H], "float32", "x")],
        labels=[InputSpec([-1, H], "float32", "y")])
