"""LLaMA (paddleformers 1.2.0, tiny), keyed plan, TP2, planned with gradient
merge (``strategy.gradient_merge``: k_steps 2, avg): the planner's
``auto_parallel_gradient_merge_pass`` accumulates each gradient over two
micro-batches and updates once (set through ``configure``, the
planning process's strategy hook: ``verify/plan/pir_rank.py``).

    python -m verify plan examples/zoo/llama_gm.py --ir pir --ranks 2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    llama.make_model, llama.keyed_plan)

K_STEPS = 2


def configure(strategy):
    """Gradient merge over ``K_STEPS`` micro-batches, the merged gradient averaged."""
    strategy.gradient_merge.enable = True
    strategy.gradient_merge.k_steps = K_STEPS
    strategy.gradient_merge.avg = True
