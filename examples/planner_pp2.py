"""A two-stage pipeline planned by Paddle's PIR planner under FThenB: a
4-block MLP, blocks 0-1 on stage 0 and 2-3 on stage 1 (``pipeline_of.py``).

    python -m verify plan examples/planner_pp2.py --ir pir --ranks 2 --mesh '[[0],[1]]' --out /tmp/pp2
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_of import pipelined  # noqa: E402

pipelined(globals(), schedule="FThenB")
