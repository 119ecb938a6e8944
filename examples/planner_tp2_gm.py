"""Gradient merge planned by Paddle's PIR planner: ``tiny_mlp_pir.py`` (a
column- then row-parallel MLP on TP2) with ``strategy.gradient_merge`` (k_steps
2, avg) set through ``configure`` (the planning process's strategy hook,
``verify/plan/pir_rank.py``), for the planner family
(``cases/planner_models.py``).  The engine's
``auto_parallel_gradient_merge_pass`` runs between the remove and dist2dense
stages and is recorded as a stage of its own (``verify/plan/stages.py``).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradient_merge_of import merged  # noqa: E402

merged("tiny_mlp_pir.py", globals(), k_steps=2, avg=True)
