"""LLaMA (paddleformers 1.2.0, tiny, 2 decoder layers) as a two-stage
pipeline planned by Paddle's PIR planner, schedule 1F1B over 2 micro-batches
(1F1B: the last stage alternates forward and backward); see ``zoo_llama.pipelined``.

    python -m verify plan examples/zoo/llama_pp_1f1b.py --ir pir --ranks 2 --mesh '[[0],[1]]' --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402

llama.pipelined(globals(), schedule="1F1B", layers=2, vpp_degree=1)
