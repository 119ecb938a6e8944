"""What every zoo model file shares: a causal LM of paddleformers at a tiny
config, placed by ``dist.parallelize`` with a tensor-parallel plan, its own
loss, AdamW (optionally through ``dist.shard_optimizer``), int64 token
inputs.  A model file calls :func:`model_file` and exports what it returns
(the names ``verify/pir_plan.py`` reads from a model file).
"""
from __future__ import annotations

import paddleformers_cpu

SEQ, BATCH, VOCAB = 8, 2, 32


def model_file(make_model, plan_of, sharding=None, pipeline=False):
    """``build_model, loss, optimizer, inputs, labels, BATCH, VOCAB`` of a
    model file.

    ``make_model()``: the paddleformers model (a tiny config);
    ``plan_of(model, mesh)``: the ``mp_config`` parallelize plan
    (``{sublayer name regex: dist.ColWiseParallel() ...}``), or None;
    ``sharding``: 1 or 2, ``dist.shard_optimizer`` with ``ShardingStage1/2``
    over the mesh's ``dp`` dim; ``pipeline``: the decoder layers split
    evenly over the mesh's ``pp`` dim (``pp_config``: ``model.layers``, and
    workaround 4 of ``paddleformers_cpu.py``).
    """
    import paddle
    import paddle.distributed as dist
    from paddle.static import InputSpec

    state = {}

    def build_model(mesh):
        paddleformers_cpu.apply()
        dist.auto_parallel.set_mesh(mesh)
        model = make_model()
        state["model"], state["mesh"] = model, mesh
        plan = plan_of(model, mesh) if plan_of else None
        config = {"mp_config": {"parallelize_plan": plan}} if plan else {}
        if pipeline:
            config["pp_config"] = {"split_spec": "model.layers"}
        if config:
            model, _ = dist.parallelize(model, None, mesh, config)
        if pipeline:
            paddleformers_cpu.reshard_kwargs(model.model.layers)
        return model

    def loss(logits, *rest):
        """The model's own criterion (paddleformers' CriterionLayer: token CE,
        mean over the tokens) of the logits (the model's first output; some
        families return more, e.g. Phi-3's cache) and the labels (last)."""
        out = state["model"].criterion(logits, rest[-1])
        return out[0] if isinstance(out, (tuple, list)) else out

    def optimizer(parameters):
        opt = paddle.optimizer.AdamW(learning_rate=1e-3, parameters=parameters)
        if sharding:
            stage = {1: dist.ShardingStage1, 2: dist.ShardingStage2}[sharding]
            opt = dist.shard_optimizer(opt, stage("dp", state["mesh"]))
        return opt

    inputs = [InputSpec([-1, SEQ], "int64", "input_ids")]
    labels = [InputSpec([-1, SEQ], "int64", "labels")]
    return build_model, loss, optimizer, inputs, labels, BATCH, VOCAB
