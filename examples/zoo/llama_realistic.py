"""The realistic LLaMA configuration (paddleformers 1.2.0, tiny), DP2 x TP2:
the decoder recomputed, the embedding vocab-parallel and looked up by
``pd_op.c_embedding`` (``replace_with_c_embedding``), the Engine's AMP on:
bfloat16 O1 with ``silu`` on the user's ``custom_black_list`` (3.3.1's CPU
build has no bfloat16 ``silu`` kernel; the list is ``dist.Strategy``'s own
knob, ``strategy.amp.custom_black_list``).

    python -m verify plan examples/zoo/llama_realistic.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/
from amp_of import with_amp  # noqa: E402

BLACK = ("silu",)
with_amp("zoo/llama_realistic_fp32.py", globals(), dtype="bfloat16", level="O1", black=BLACK)
