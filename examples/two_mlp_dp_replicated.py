"""``examples/two_mlp.py`` on a DP x TP mesh with the batch NOT split over
``dp``: every DP replica trains on the whole batch, so the planner emits no
data-parallel gradient all_reduce (a plan the Engine makes when the input is
left replicated).

    python -m verify plan examples/two_mlp_dp_replicated.py --ranks 4 --mesh 2x2 --out /tmp/r
    python -m verify run --program-dir /tmp/r --pass promotion

Observed on 3.3.1: the promotion pass does nothing on any rank (NOT_APPLIED).
It chooses its source pattern from the mesh's shape alone
(``_is_enable_dp_mp``: a 2-D mesh with dp > 1 selects the "DP + MP" pattern,
whose backward is ``elementwise_add_grad, all_reduce, scale,
matmul_v2_grad``); this program's row-parallel linears have the "only MP"
backward (``elementwise_add_grad, matmul_v2_grad``), so no backward segment
matches and the pass logs "No forward and backward op segments, skip this
pass".
"""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_two_mlp", os.path.join(os.path.dirname(os.path.abspath(__file__)), "two_mlp.py"))
_two_mlp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_two_mlp)
_two_mlp.SPLIT_BATCH_OVER_DP = False

build_model = _two_mlp.build_model
loss = _two_mlp.loss
optimizer = _two_mlp.optimizer
inputs = _two_mlp.inputs
labels = _two_mlp.labels
BATCH = _two_mlp.BATCH
