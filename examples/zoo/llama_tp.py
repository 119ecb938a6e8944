"""LLaMA (paddleformers 1.2.0, tiny) placed by its own plan keyed under the
model's prefix (``llama.keyed_plan``); plan it at TP2 (``--ranks 2``) or
DP2 x TP2 (``--ranks 4 --mesh 2x2``, the batch split over dp).

    python -m verify plan examples/zoo/llama_tp.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    llama.make_model, llama.keyed_plan)
