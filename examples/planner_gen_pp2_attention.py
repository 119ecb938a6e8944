"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_pp2_attention.json``, spec 0 of
seed 2): a linear and a layer norm on stage 0, an attention block on stage
1, a two-stage FThenB pipeline; its planning reshards an operand list
(``reshard_combine_value`` of ``pir_pass.py``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
