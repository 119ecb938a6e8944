"""A smooth MLP in float32 (layer norm, linear, tanh, linear, MSE loss), the reference of
the AMP case ``planner_amp_bf16`` (``examples/planner_amp_bf16.py`` is this
model with the PIR Engine's AMP on).  Smooth on purpose: with no kink (relu,
max) a rounding cannot move a value across, so a run outside the rounding
tolerance is a refutation (``verify/numeric/amp_runs.py``).  The layer norm
first makes the first matmul's input need a gradient: 3.3.1's oneDNN
bfloat16 ``matmul_grad`` kernel dies with SIGSEGV on CPU when its ``x_grad``
is not wanted (a matmul of a feed; docs/passes.md).
"""
import paddle
from paddle import nn
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 2


class SmoothMLP(nn.Layer):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)

    def forward(self, x):
        return self.down(paddle.tanh(self.up(self.norm(x))))


def build_model(mesh):
    return SmoothMLP()


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
