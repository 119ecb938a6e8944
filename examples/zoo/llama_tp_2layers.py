"""LLaMA (paddleformers 1.2.0, tiny, 2 decoder layers) placed by its own plan
keyed under the model's prefix (``llama.keyed_plan``), TP2: the relation
proof by segments on a stack of decoder layers.

    python -m verify plan examples/zoo/llama_tp_2layers.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    lambda: llama.make_model(layers=2), llama.keyed_plan)
