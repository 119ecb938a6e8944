"""LLaMA (paddleformers 1.2.0, tiny), keyed plan (``llama_tp.py``), with the
PIR Engine's AMP on: bfloat16, level O1 (``examples/amp_of.py``: planned as
on a GPU, ``paddle.amp.auto_cast``'s place test bypassed on CPU).

    python -m verify plan examples/zoo/llama_amp_bf16.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/
from amp_of import with_amp  # noqa: E402

with_amp("zoo/llama_tp.py", globals(), dtype="bfloat16", level="O1")
