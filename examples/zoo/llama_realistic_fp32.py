"""``llama_vocab_parallel.py`` (LLaMA, vocab-parallel embedding, recompute)
planned with ``strategy.mp_optimization.replace_with_c_embedding`` (fleet's
hybrid group over gloo: ``examples/c_embedding_of.py``), in float32: the
float32 reference of ``llama_realistic.py`` (``passes/pir_amp.py``).

    python -m verify plan examples/zoo/llama_realistic_fp32.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/
from c_embedding_of import with_c_embedding  # noqa: E402

with_c_embedding("zoo/llama_vocab_parallel.py", globals())
