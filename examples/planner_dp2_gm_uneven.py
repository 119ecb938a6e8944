"""Gradient merge on a data-parallel plan whose micro-batch does not split
evenly over ``dp``: ``planner_dp2_gm_sum.py``'s model with ``BATCH = 2`` (the
engine feeds each micro-step ``BATCH / k_steps`` = 1 row, sharded over 2
ranks, so its reshards take Paddle's padding path).  For
``cases/planner_models.py``."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradient_merge_of import merged  # noqa: E402

merged("planner_dp_mlp.py", globals(), k_steps=2, avg=False, batch=2)
