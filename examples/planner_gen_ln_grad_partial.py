"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_ln_grad_partial.json``): a
row-parallel linear (weight Shard(0) on [0, 1]: its output Partial) and a
replicated layer norm after it; the layer norm's gradient reads the Partial
value where its forward read it resharded to Replicate."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
