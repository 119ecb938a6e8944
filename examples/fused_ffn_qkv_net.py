"""Attention projections and a SwiGLU FFN, for the planner family
(``cases/planner_models.py``): planned as it is, the reference of
``examples/planner_fused_ffn_qkv.py``, which plans it with
``FLAGS_enable_fused_ffn_qkv_pass`` on.

``fuse_attention_ffn_qkv_pass`` (``auto_parallel/static/pir_pass.py``, run by
``Engine._parallel_pir`` on the forward program when that environment flag is
set) finds q/k/v projections (matmul, add, full_int_array, reshape, three
times) and a gate/up pair (matmul, add, matmul, add, swiglu) in op order and
replaces each by one matmul of a new fused parameter (q|k|v per head group,
gate|up), then reshape + split (qkv) or swiglu of the one output (ffn).  The
fused parameters are made from the dygraph ones (``fuse_param_func``).  The
pass hard-codes two placements per fused parameter (Replicate, Shard), so the
mesh must be 2-D (dp x mp): it is planned on ``[[0], [1]]`` (DP2).
"""
import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec

H, HEADS, FFN, SEQ = 8, 2, 16, 2
BATCH = 2


class QkvSwiglu(nn.Layer):
    """q, k, v projections reshaped to heads, mixed elementwise (no softmax:
    the pattern is the projections), then gate/up linears into swiglu."""

    def __init__(self, mesh):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.gate, self.up = nn.Linear(H, FFN), nn.Linear(H, FFN)
        self.out = nn.Linear(FFN, H)
        rep = [dist.Replicate()] * len(mesh.dim_names)
        for lin in (self.q, self.k, self.v, self.gate, self.up, self.out):
            lin.weight = dist.shard_tensor(lin.weight, mesh, rep)
            lin.bias = dist.shard_tensor(lin.bias, mesh, rep)

    def forward(self, x):
        heads = [0, 0, HEADS, H // HEADS]
        q = self.q(x).reshape(heads)
        k = self.k(x).reshape(heads)
        v = self.v(x).reshape(heads)
        a = (q * k + v).reshape([0, 0, H])
        return self.out(nn.functional.swiglu(self.gate(a), self.up(a)))


def build_model(mesh):
    return QkvSwiglu(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
