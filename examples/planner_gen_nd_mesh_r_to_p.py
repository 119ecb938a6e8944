"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_nd_mesh_r_to_p.json``, spec 2 of
seed 2): a layer norm whose parameters are sharded over ``mp`` of a 2 x 1
mesh, its output resharded to [Partial, Replicate], a linear, SGD
under ``ShardingStage2``; the nd-mesh reshard function's
replicate-to-partial step runs (``RToPReshardFunction`` inside it)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
