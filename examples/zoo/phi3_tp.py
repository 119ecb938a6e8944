"""Phi-3 (paddleformers 1.2.0, tiny) with the tensor-parallel plan of
``zoo_families.py``; plan it at TP2 (``--ranks 2``).

    python -m verify plan examples/zoo/phi3_tp.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_families as families  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    families.make_phi3, families.tp_plan(['self_attn.qkv_proj', 'mlp.gate_up_proj'], ['self_attn.o_proj', 'mlp.down_proj']))
