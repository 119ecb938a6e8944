"""A model with no op on PIR AMP's bfloat16 white list, in float32: layer
norm, tanh, an elementwise scale and shift by parameters, a mean over the
last dim subtracted (a reduction), MSE loss -- no matmul, linear or conv.
The reference of the AMP case ``planner_amp_bf16_no_white``
(``examples/planner_amp_bf16_no_white.py`` is this model with the PIR
Engine's AMP on): with nothing on the white list, O1 puts no cast anywhere
(layer norm and the means are on the black list, the rest reads float32
only), so the AMP plan must be this plan (``passes/pir_amp.py``: left
alone).
"""
import paddle
from paddle import nn
from paddle.static import InputSpec

H, SEQ = 8, 4
BATCH = 2


class NoWhiteOp(nn.Layer):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        self.scale = self.create_parameter(
            [H], default_initializer=nn.initializer.Uniform(0.5, 1.5))
        self.shift = self.create_parameter([H], is_bias=True)

    def forward(self, x):
        h = paddle.tanh(self.norm(x)) * self.scale + self.shift
        return h - paddle.mean(h, axis=-1, keepdim=True)


def build_model(mesh):
    return NoWhiteOp()


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
