"""LLaMA (paddleformers 1.2.0, tiny, 4 decoder layers) as a two-stage
pipeline planned by Paddle's PIR planner, schedule VPP over 2 micro-batches
(VPP: 4 decoder layers, 2 chunks a stage, layers round-robin over the stages); see ``zoo_llama.pipelined``.

    python -m verify plan examples/zoo/llama_pp_vpp.py --ir pir --ranks 2 --mesh '[[0],[1]]' --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402

llama.pipelined(globals(), schedule="VPP", layers=4, vpp_degree=2)
