"""Gradient merge on a data-parallel plan whose micro-batch does not split
evenly over ``dp``: ``planner_dp2_gm_sum.py`` with ``BATCH = 2`` (the engine
feeds each micro-step ``BATCH / k_steps`` = 1 row, sharded over 2 ranks, so
its reshards take Paddle's padding path).  For ``cases/planner_models.py``."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_planner_dp2_gm_sum", os.path.join(os.path.dirname(__file__), "planner_dp2_gm_sum.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)

build_model, loss, optimizer = _base.build_model, _base.loss, _base.optimizer
inputs, labels, configure = _base.inputs, _base.labels, _base.configure
BATCH = 2
