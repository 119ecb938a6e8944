"""LLaMA (paddleformers 1.2.0, tiny), keyed plan, for DP2 x TP2 with gradient
merge (``strategy.gradient_merge``: k_steps 2, avg), a batch of 4: the
engine feeds each micro-step ``BATCH / k_steps`` = 2 rows, one per ``dp``
rank (with the zoo's batch of 2 a micro-step's single row is split unevenly
and 3.3.1's reshard raises: ``planner_dp2_gm_uneven`` in
``cases/planner_models.py``).

    python -m verify plan examples/zoo/llama_dp_gm.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, _, VOCAB = model_file(
    llama.make_model, llama.keyed_plan)
BATCH = 4
K_STEPS = 2


def configure(strategy):
    """Gradient merge over ``K_STEPS`` micro-batches, the merged gradient averaged."""
    strategy.gradient_merge.enable = True
    strategy.gradient_merge.k_steps = K_STEPS
    strategy.gradient_merge.avg = True
