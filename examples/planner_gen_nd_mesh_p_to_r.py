"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_nd_mesh_p_to_r.json``): an
activation resharded to [Partial, Partial] on a 2 x 1 mesh, then read by a
replicated linear: the nd-mesh reshard function's partial-to-replicate step."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
