"""LLaMA (paddleformers 1.2.0, tiny), keyed plan, for DP2 x TP2 with
recompute: paddleformers' own switch (``recompute_granularity="full"``,
``recompute_method="uniform"``, ``recompute_num_layers=1``) wraps each
decoder layer in ``fleet.utils.recompute`` (``LlamaModel.recompute_training``;
in the static graph that marks the layer's ops with ``fwd_recompute_id``),
and ``configure`` turns the engine's recompute on, so the planner's
``auto_parallel_recompute_pir`` clones the layer into the backward before
partition (the planner stage ``recompute``: ``verify/plan/stages.py``).

    python -m verify plan examples/zoo/llama_recompute.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402


def make_model():
    """The zoo's LLaMA with paddleformers' full, per-layer recompute (the
    fields are read by ``LlamaModel.forward`` from the config the model and
    its decoder share)."""
    model = llama.make_model()
    model.config.recompute_granularity = "full"
    model.config.recompute_method = "uniform"
    model.config.recompute_num_layers = 1
    return model


build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    make_model, llama.keyed_plan)


def configure(strategy):
    """The engine's recompute pass on: 3.3.1's ``dist.Strategy`` keeps the
    recompute config as ``_recompute`` (no public property); ``to_static``
    copies it to the engine's ``strategy.recompute``."""
    strategy._recompute.enable = True
