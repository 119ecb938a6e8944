"""An MLP with a branch on a sub-mesh, in Paddle 3.x's PIR style, for the
planner family (``cases/planner_models.py``): the trunk's parameters live
on the whole mesh, the head's on a sub-mesh holding only the mesh's first
process.  The planner moves the trunk's output onto the sub-mesh
(global_to_sub: a share, no communication), runs the head on that process
only, and broadcasts its output back to the whole mesh (sub_to_global);
every other rank's partition drops the head's ops
(``RemovePasses.remove_other_rank_op_pass``).
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 2


class SubMeshMLP(nn.Layer):
    """linear (whole mesh) -> relu -> linear (sub-mesh) -> back to the whole mesh."""

    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.sub = dist.ProcessMesh([mesh.process_ids[0]], dim_names=mesh.dim_names[-1:])
        self.up = nn.Linear(H, FFN)
        self.head = nn.Linear(FFN, H)
        rep = [dist.Replicate()] * len(mesh.dim_names)
        self.up.weight = dist.shard_tensor(self.up.weight, mesh, rep)
        self.up.bias = dist.shard_tensor(self.up.bias, mesh, rep)
        self.head.weight = dist.shard_tensor(self.head.weight, self.sub, [dist.Replicate()])
        self.head.bias = dist.shard_tensor(self.head.bias, self.sub, [dist.Replicate()])

    def forward(self, x):
        h = nn.functional.relu(self.up(x))
        h = dist.reshard(h, self.sub, [dist.Replicate()])
        y = self.head(h)
        return dist.reshard(y, self.mesh, [dist.Replicate()] * len(self.mesh.dim_names))


def build_model(mesh):
    return SubMeshMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
