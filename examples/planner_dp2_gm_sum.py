"""Gradient merge with the merged gradient summed (``avg`` False) on a
data-parallel plan: ``planner_dp_mlp.py`` (DP2, every parameter replicated,
the batch split over ``dp``) with ``strategy.gradient_merge`` (k_steps 2,
avg False) set through ``configure`` (``verify/plan/pir_rank.py``).  The
optimizer then reads each accumulator as it is (no 1/k scale), and the DP
gradients' all-reduce runs inside the merged schedule: the case of
``cases/planner_models.py`` that exercises both."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_planner_dp_mlp", os.path.join(os.path.dirname(__file__), "planner_dp_mlp.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)

build_model, loss, optimizer = _base.build_model, _base.loss, _base.optimizer
inputs, labels = _base.inputs, _base.labels
BATCH = getattr(_base, "BATCH", 2)

K_STEPS = 2


def configure(strategy):
    """Gradient merge over ``K_STEPS`` micro-batches, the merged gradient summed."""
    strategy.gradient_merge.enable = True
    strategy.gradient_merge.k_steps = K_STEPS
    strategy.gradient_merge.avg = False
