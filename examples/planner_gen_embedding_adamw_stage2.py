"""A built-in generated model (``verify/generate/``, built by
``generated_model.py`` from ``planner_gen_embedding_adamw_stage2.json``): a
replicated embedding table trained by AdamW wrapped in ShardingStage2 over dp
of a 2 x 1 mesh (dp x mp): the planning process dies with SIGSEGV in the
reshard stage."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_model import fill, spec_beside  # noqa: E402

fill(globals(), spec_beside(__file__))
