"""The PIR Engine's AMP planned by Paddle's PIR planner: ``planner_amp_mlp.py``
(layer norm, linear, tanh, linear, MSE) with ``strategy.amp`` on, bfloat16,
level O1, set through ``configure`` (``examples/amp_of.py``, which also plans
as on a GPU: on a CPU place ``paddle.amp.auto_cast`` is a no-op).  The
serial program holds the casts: each matmul (white list) reads its input
and weight rounded to bfloat16, its result cast back for the bias add (a
float32 op: the bias is float32), and the backward mirrors it.  For the
planner family and ``passes/pir_amp.py`` (``cases/planner_models.py``),
whose reference is the same model planned without AMP.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from amp_of import with_amp  # noqa: E402

with_amp("planner_amp_mlp.py", globals(), dtype="bfloat16", level="O1")
