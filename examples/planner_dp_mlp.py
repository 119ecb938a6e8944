"""A data-parallel MLP in Paddle 3.x's PIR style (every parameter replicated,
the batch split over ``dp``), for the planner family
(``cases/planner_models.py``) or ``python -m verify plan --ir pir --mesh 2x1``.

The planner turns each replicated parameter's gradient, Partial over ``dp``
(each replica saw half the batch), into a ``p_to_r`` all-reduce.
"""
import paddle
from paddle import nn
from paddle.static import InputSpec

H, FFN, SEQ = 8, 16, 4
BATCH = 4


class DpMLP(nn.Layer):
    """linear -> relu -> linear, nothing sharded: data parallelism only."""

    def __init__(self, mesh):
        super().__init__()
        self.up = nn.Linear(H, FFN)
        self.down = nn.Linear(FFN, H)

    def forward(self, x):
        return self.down(nn.functional.relu(self.up(x)))


def build_model(mesh):
    return DpMLP(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)


inputs = [InputSpec([-1, SEQ, H], "float32", "x")]
labels = [InputSpec([-1, SEQ, H], "float32", "y")]
