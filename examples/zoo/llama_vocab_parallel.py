"""LLaMA (paddleformers 1.2.0, tiny), keyed plan with a vocab-parallel
embedding (``model.embed_tokens``: ``dist.RowWiseParallel()``, the table's
vocab rows sharded over mp, as Megatron's VocabParallelEmbedding; the LM
head replicated: :func:`vocab_parallel_plan` says why) and the
decoder recomputed (paddleformers' full, per-layer recompute and the
engine's ``auto_parallel_recompute_pir``, as ``llama_recompute.py``): the
base of the realistic DP2 x TP2 configuration (``llama_realistic.py``).

    python -m verify plan examples/zoo/llama_vocab_parallel.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402


def make_model():
    """The zoo's LLaMA with paddleformers' full, per-layer recompute."""
    model = llama.make_model()
    model.config.recompute_granularity = "full"
    model.config.recompute_method = "uniform"
    model.config.recompute_num_layers = 1
    return model


def vocab_parallel_plan(model, mesh):
    """The keyed plan with the embedding's table sharded on its vocab dim and
    the LM head left replicated: with the head's ``ColWiseParallel`` (its
    stored [vocab, hidden] weight sharded on hidden, the logits a Partial
    sum) and ``replace_with_c_embedding`` on, 3.3.1's ``append_backward``
    raises in the head's matmul grad (``The matmul grad infer spmd `trans y:
    dx-out_grad` verify error``: out_grad ``Partial(dims:1, SUM)`` where x's
    is replicated, ``phi/infermeta/spmd_rules/matmul.cc:314``) on every
    rank; the same plan with the flag off plans, and so does the flag on
    with the head replicated (measured on DP2 x TP2)."""
    import paddle.distributed as dist

    plan = llama.keyed_plan(model, mesh)
    plan["model.embed_tokens"] = dist.RowWiseParallel()
    plan.pop("lm_head.weight")
    return plan


build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    make_model, vocab_parallel_plan)


def configure(strategy):
    """The engine's recompute pass on (3.3.1 keeps it as ``_recompute``)."""
    strategy._recompute.enable = True
