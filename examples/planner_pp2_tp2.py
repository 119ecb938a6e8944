"""``planner_pp2.py`` on a 2 x 2 ``pp`` x ``mp`` mesh (``pipeline_of.py``):
each stage's two blocks column- then row-parallel over its ``mp`` dim, so a
rank's job lists hold the row-parallel all-reduces beside the stages'
sends and recvs; FThenB over 2 micro-batches.

    python -m verify plan examples/planner_pp2_tp2.py --ir pir --ranks 4 --mesh '[[0,1],[2,3]]' --out /tmp/pp2tp2
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_of import pipelined  # noqa: E402

pipelined(globals(), schedule="FThenB", tensor_parallel=True)
