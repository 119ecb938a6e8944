"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_sub_partial.json``): a linear on the
sub-mesh [0] of the mesh [0, 1] (its input moved onto it, its output back,
both Replicate), then a column-parallel linear: its input gradient is Partial,
and its move back onto the sub-mesh is split by decompose_reshard_pass into a
same-status reshard between meshes of different shapes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
