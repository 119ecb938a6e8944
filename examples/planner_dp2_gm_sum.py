"""Gradient merge with the merged gradient summed (``avg`` False) on a
data-parallel plan: ``planner_dp_mlp.py`` (DP2, every parameter replicated,
the batch split over ``dp``) with ``strategy.gradient_merge`` (k_steps 2,
avg False) set through ``configure`` (``verify/plan/pir_rank.py``).  The
optimizer then reads each accumulator as it is (no 1/k scale), and the DP
gradients' all-reduce runs inside the merged schedule: the case of
``cases/planner_models.py`` that exercises both."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradient_merge_of import merged  # noqa: E402

merged("planner_dp_mlp.py", globals(), k_steps=2, avg=False)
