"""``planner_tp2_recompute.py`` after a first column- then row-parallel block
that is not recomputed: the recomputed block reads the first block's
all-reduced output, so its clones in the backward read a value live across
the first block's all-reduce (a value the proof by segments generalizes at
a cut: ``tests/test_relation_segments.py``)."""
import importlib.util
import os

from paddle import nn

_spec = importlib.util.spec_from_file_location(
    "_recompute_base", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "planner_tp2_recompute.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)


class FirstThenRecomputed(nn.Layer):
    """A plain block, then the recomputed block and the head."""

    def __init__(self, mesh):
        super().__init__()
        self.first = _base.Block(mesh)
        self.rest = _base.RecomputedMLP(mesh)

    def forward(self, x):
        return self.rest(self.first(x))


def build_model(mesh):
    return FirstThenRecomputed(mesh)


loss, optimizer, configure = _base.loss, _base.optimizer, _base.configure
inputs, labels, BATCH = _base.inputs, _base.labels, _base.BATCH
