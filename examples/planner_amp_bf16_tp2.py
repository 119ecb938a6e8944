"""The PIR Engine's AMP (bfloat16, O1) on ``tiny_mlp_pir.py`` planned for TP2
(a column- then row-parallel MLP: the row-parallel matmul's partial sums
all-reduced), through ``examples/amp_of.py`` (planned as on a GPU).  For the
planner family and ``passes/pir_amp.py``, whose reference is
``tiny_mlp_pir.py`` planned for TP2 without AMP (the case ``planner_tp2``'s
plan).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from amp_of import with_amp  # noqa: E402

with_amp("tiny_mlp_pir.py", globals(), dtype="bfloat16", level="O1")
