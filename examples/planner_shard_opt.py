"""Sharding through ``dist.shard_optimizer`` (ZeRO stage 1) on a DP mesh, in
Paddle 3.x's PIR style: ``planner_dp_mlp.py`` with AdamW whose states are
sharded over ``dp`` (``dist.ShardingStage1("dp", mesh)``), for the planner
family (``cases/planner_models.py``).  ``wrap_optimizer(opt, mesh)`` is the
optional model-file hook ``verify/plan/pir_rank.py`` calls after ``optimizer``.
"""
import importlib.util
import os

import paddle
import paddle.distributed as dist

_spec = importlib.util.spec_from_file_location(
    "_planner_dp_mlp", os.path.join(os.path.dirname(__file__), "planner_dp_mlp.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)

H, FFN, SEQ, BATCH = _base.H, _base.FFN, _base.SEQ, _base.BATCH
build_model, loss, inputs, labels = _base.build_model, _base.loss, _base.inputs, _base.labels


def optimizer(parameters):
    return paddle.optimizer.AdamW(learning_rate=0.01, parameters=parameters)


def wrap_optimizer(opt, mesh):
    return dist.shard_optimizer(opt, dist.ShardingStage1("dp", mesh))
