"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_p_to_s_transpose.json``): a row-
parallel linear's partial sums resharded to Shard(1) (the sequence dim):
p_to_s's transpose path (reduce_scatter works on dim 0)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
