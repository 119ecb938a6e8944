"""Gradient merge planned by Paddle's PIR planner: ``tiny_mlp_pir.py`` (a
column- then row-parallel MLP on TP2) with ``strategy.gradient_merge`` (k_steps
2, avg) set through ``configure`` (the planning process's strategy hook,
``verify/plan/pir_rank.py``), for the planner family
(``cases/planner_models.py``).  The engine's
``auto_parallel_gradient_merge_pass`` runs between the remove and dist2dense
stages and is recorded as a stage of its own (``verify/plan/stages.py``).
"""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_tiny_mlp_pir", os.path.join(os.path.dirname(__file__), "tiny_mlp_pir.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)

build_model, loss, optimizer = _base.build_model, _base.loss, _base.optimizer
inputs, labels = _base.inputs, _base.labels
BATCH = getattr(_base, "BATCH", 2)

K_STEPS = 2


def configure(strategy):
    """Gradient merge over ``K_STEPS`` micro-batches, the merged gradient averaged."""
    strategy.gradient_merge.enable = True
    strategy.gradient_merge.k_steps = K_STEPS
    strategy.gradient_merge.avg = True
