"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_s_to_s_dim0.json``): an
activation resharded from Shard(1) to Shard(0): s_to_s (an all_to_all) whose
result is split along dim 0 (its gradient: Shard(0) to Shard(1))."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
