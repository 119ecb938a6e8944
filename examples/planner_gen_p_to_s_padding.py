"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_p_to_s_padding.json``): a row-
parallel linear's partial sums resharded to Shard(1) of a sequence of 3 over 2
ranks (p_to_s's padding path), then back to Replicate for the linear after it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
