"""GPT-OSS (MoE, 4 experts, top 2) (paddleformers 1.2.0, tiny) with the tensor-parallel plan of
``zoo_families.py``; plan it at TP2 (``--ranks 2``).

    python -m verify plan examples/zoo/gpt_oss_tp.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_families as families  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    families.make_gpt_oss, families.tp_plan(['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'], ['self_attn.o_proj']))
