"""``planner_pp2.py`` under the VPP schedule (``pipeline_of.py``): two chunks
a stage, the blocks round-robin over the stages (block i on stage i % 2), so
each rank's program is split into forward/backward jobs per chunk."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_of import pipelined  # noqa: E402

pipelined(globals(), schedule="VPP", block_stages=(0, 1, 0, 1), vpp_degree=2)
