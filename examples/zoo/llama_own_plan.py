"""LLaMA (paddleformers 1.2.0, tiny) placed by its own ``auto_dist_config``
plan exactly as shipped (see ``llama.py``: only ``lm_head`` matches).

    python -m verify plan examples/zoo/llama_own_plan.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    llama.make_model, llama.own_plan)
