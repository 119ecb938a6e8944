"""``llama_realistic.py`` without ``replace_with_c_embedding`` (the table
vocab-sharded, looked up by ``pd_op.embedding`` after an all-gather), fleet's
hybrid group built all the same (``c_embedding_of.hybrid_group``): the
reference of its c_embedding pass (``passes/auto_parallel_c_embedding_pass.py``).
The group is built because it changes the model paddleformers traces: with
it, ``parallel_matmul`` puts a ``pd_op.c_identity`` before the LM head
(docs/passes.md), so the two plans differ by the flag only.

    python -m verify plan examples/zoo/llama_realistic_no_cemb.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/
from amp_of import with_amp  # noqa: E402
from c_embedding_of import hybrid_group  # noqa: E402

with_amp("zoo/llama_vocab_parallel.py", globals(), dtype="bfloat16", level="O1",
         black=("silu",))
_amp_configure = globals()["configure"]  # with_amp's, just defined


def configure(strategy):
    """AMP and recompute as ``llama_realistic.py``, fleet's hybrid group, no flag."""
    _amp_configure(strategy)
    hybrid_group()
