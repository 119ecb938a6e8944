"""A tiny two-stage FThenB pipeline with a tied embedding, planned with
``strategy.pipeline.auto_parallel_sync_shared_params`` (the reproduction of
that pass's not-checked reason, ``passes/_not_checked.py``): an embedding
(vocabulary 16, width 8) on stage 0, a linear on stage 1, and the head on
stage 1 multiplies by the embedding's weight (resharded onto stage 1's mesh).

    python -m verify plan examples/planner_pp2_tied.py --ir pir --ranks 2 --mesh '[[0],[1]]' --out /tmp/tied

Measured on 3.3.1 CPU: both planning processes die with SIGSEGV in the
pass's eager ``paddle.base.core.reshard`` of the tied weight, inside
``phi::distributed::GetDefaultPlace`` (docs/planner.md); with
``SYNC_SHARED = False`` below the same model plans on both ranks.
"""
import os
import sys

import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_strategy import configure_pipeline  # noqa: E402

H, VOCAB, SEQ = 8, 16, 4
MESH_DIMS = ["pp", "mp"]
BATCH = 4
SYNC_SHARED = True


class TiedPipeline(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.meshes = [mesh.get_mesh_with_dim("pp")[s] for s in range(2)]
        self.emb = nn.Embedding(VOCAB, H)
        self.emb.weight = dist.shard_tensor(self.emb.weight, self.meshes[0], [dist.Replicate()])
        self.fc = nn.Linear(H, H)
        self.fc.weight = dist.shard_tensor(self.fc.weight, self.meshes[1], [dist.Replicate()])
        self.fc.bias = dist.shard_tensor(self.fc.bias, self.meshes[1], [dist.Replicate()])

    def forward(self, x):
        h = dist.reshard(self.emb(x), self.meshes[1], [dist.Replicate()])
        tied = dist.reshard(self.emb.weight, self.meshes[1], [dist.Replicate()])
        return paddle.matmul(self.fc(h), tied, transpose_y=True)  # the tied head


class TokenLoss(nn.Layer):
    def forward(self, logits, y):
        return nn.functional.cross_entropy(logits.reshape([-1, VOCAB]), y.reshape([-1, 1]))


def configure(strategy):
    """A two-stage pipeline, FThenB, 2 micro-batches, the tied weight synced."""
    configure_pipeline(strategy, "FThenB", 2, BATCH // 2)
    strategy.pipeline.auto_parallel_sync_shared_params = SYNC_SHARED


build_model = TiedPipeline
loss = TokenLoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ], "int64", "x")]
labels = [InputSpec([-1, SEQ], "int64", "y")]
