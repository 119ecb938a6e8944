"""Gradient merge averaged (``avg``) with Momentum, on one rank:
``planner_dp_mlp.py`` on the mesh [[0]] (nothing to reduce) with
``strategy.gradient_merge`` (k_steps 2, avg) set through ``configure``
(``verify/plan/pir_rank.py``) and ``paddle.optimizer.Momentum``.  The
merge's 1/k scale is an in-place ``scale_`` of each accumulator, a keyword
block argument the optimizer reads by its keyword (no collective between
them on one rank), so where that write runs decides what the optimizer
reads: 3.3.1's pass recognises only sgd/adam by name and puts it after the
optimizer.

    python -m verify plan examples/planner_gm_momentum.py --ir pir --mesh 1x1 --out /tmp/gm_m
"""
import os
import sys

import paddle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradient_merge_of import merged  # noqa: E402

merged("planner_dp_mlp.py", globals(), k_steps=2, avg=True)


def optimizer(parameters):
    return paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=parameters)
