"""LLaMA (paddleformers 1.2.0, tiny), keyed plan, AdamW sharded over the
``dp`` dim by ``dist.shard_optimizer(opt, dist.ShardingStage2("dp", mesh))``;
plan it at DP2 x TP2.

    python -m verify plan examples/zoo/llama_stage2.py --ir pir --ranks 4 --mesh 2x2 --out DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    llama.make_model, llama.keyed_plan, sharding=2)
