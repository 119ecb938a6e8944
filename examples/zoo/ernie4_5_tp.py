"""ERNIE 4.5 dense (paddleformers 1.2.0, tiny: 1 layer, hidden 16, 2 heads,
head_dim 8, vocab 32; fused ``qkv_proj`` and ``up_gate_proj``, the GLM-style
rotary of ``ernie4_5/modeling.py``: cos/sin halves ``repeat_interleave``-d,
the rotated half built by ``stack((-x2, x1)).flatten``) with the
tensor-parallel plan of ``zoo_families.py``; plan it at TP2 (``--ranks 2``)
or DP2 x TP2 (``--ranks 4 --mesh 2x2``).

    python -m verify plan examples/zoo/ernie4_5_tp.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_families as families  # noqa: E402
from paddleformers_cpu import config  # noqa: E402
from zoo_common import model_file  # noqa: E402


def make_ernie4_5():
    from paddleformers.transformers import Ernie4_5Config, Ernie4_5ForCausalLM

    model = Ernie4_5ForCausalLM(config(Ernie4_5Config, **families.TINY, head_dim=8))
    # its forward returns a CausalLMOutputWithCrossAttentions (return_dict
    # defaults to True there); the zoo's loss reads the logits tensor
    model.register_forward_post_hook(lambda layer, args, out: out.logits)
    return model


build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    make_ernie4_5, families.tp_plan(['self_attn.qkv_proj', 'mlp.up_gate_proj'],
                                    ['self_attn.o_proj', 'mlp.down_proj']))
