"""``planner_pp2.py`` under the 1F1B schedule (``pipeline_of.py``): stage 0
runs forward 0, forward 1, backward 0, backward 1; stage 1 alternates."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_of import pipelined  # noqa: E402

pipelined(globals(), schedule="1F1B")
