"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_cross_p_to_r.json``): a partial
activation on stage mesh [0] crossing to stage mesh [1] as Replicate (no
pipeline schedule): the cross-mesh p_to_r."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
