"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_r_to_p_rank0.json``): on a dp x mp
mesh [[0], [1]], a linear whose weight is Shard(1) over mp, its output
resharded to [Replicate, Partial]; the gradient's way back runs the nd-mesh
reshard function's replicate-to-partial step on each rank's mp sub-mesh
([0] and [1]), and 3.3.1's r_to_p keeps the value only on global rank 0."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
