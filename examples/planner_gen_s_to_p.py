"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_s_to_p.json``): a two-stage pipeline
(FThenB) whose stage-0 activation is resharded to Partial and crosses to stage
1 as Shard(0) for a layer norm; the gradient crossing back asks Shard(0) to
Partial on stage 0's mesh, a reshard 3.3.1's PIR has no function for."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
