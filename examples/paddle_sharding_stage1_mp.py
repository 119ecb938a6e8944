"""Paddle's sharding stage 1 with tensor parallelism, in this suite's
model-file form: ``test/auto_parallel/hybrid_strategy/
semi_auto_parallel_sharding_stage_1.py`` (``test_sharding_stage_1_with_mp_to_static``)
plans a ``DemoNet`` whose weights are sharded on a 2 x 2 mesh, the batch
split over the mesh's first dim, SGD (learning rate 0.1) wrapped by
``dist.shard_optimizer(opt, dist.ShardingStage1(mesh))``, ``nn.MSELoss``.
Here the ``DemoNet`` of ``paddle_demo_net_mp.py`` on a ``dp`` x ``mp`` mesh
(weights split over ``mp``, replicated over ``dp``; the batch over ``dp``)
and the optimizer states sharded over ``dp``.

    python -m verify plan examples/paddle_sharding_stage1_mp.py --ir pir --ranks 4 --mesh 2x2 --out /tmp/s1mp
"""
import importlib.util
import os

import paddle.distributed as dist

_spec = importlib.util.spec_from_file_location(
    "_paddle_demo_net_mp", os.path.join(os.path.dirname(__file__), "paddle_demo_net_mp.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)

BATCH = _base.BATCH
build_model, loss, optimizer = _base.build_model, _base.loss, _base.optimizer
inputs, labels = _base.inputs, _base.labels


def wrap_optimizer(opt, mesh):
    return dist.shard_optimizer(opt, dist.ShardingStage1("dp", mesh))
