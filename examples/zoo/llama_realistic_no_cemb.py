"""``llama_realistic.py`` without ``replace_with_c_embedding`` (the table
vocab-sharded, looked up by ``pd_op.embedding`` after an all-gather): the
reference of its c_embedding pass (``passes/auto_parallel_c_embedding_pass.py``).

    python -m verify plan examples/zoo/llama_realistic_no_cemb.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/
from amp_of import with_amp  # noqa: E402

with_amp("zoo/llama_vocab_parallel.py", globals(), dtype="bfloat16", level="O1",
         black=("silu",))
