"""LLaMA of paddleformers 1.2.0 at a tiny config (1 layer, hidden 16, 2
heads, vocab 32) and its tensor-parallel plans.

``own_plan``: the plan the model ships (``LlamaForCausalLM.auto_dist_config()``,
``paddleformers/transformers/llama/auto_dist_config.py``) as a user passes it
to ``dist.parallelize``.  Its keys name the sublayers ``llama.layers.*...``
while the model's base prefix is ``model`` (``model.layers.0...``), so on
1.2.0 only ``lm_head.weight`` matches: the decoder stays replicated.
``keyed_plan``: the same plan with its keys under the model's real prefix
(``model.``), the tensor parallelism the plan means; with
``sequence_parallel`` the SP markers of Paddle's parallelize API are added
(``SequenceParallelBegin`` after the embedding, ``SequenceParallelEnable``
on the norms, ``SequenceParallelEnd`` before the head).
"""
from __future__ import annotations

from zoo_common import VOCAB
from paddleformers_cpu import config


def make_model(layers: int = 1):
    from paddleformers.transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(config(
        LlamaConfig, vocab_size=VOCAB, hidden_size=16, intermediate_size=32,
        num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=64, tie_word_embeddings=False))


def own_plan(model, mesh):
    return model.auto_dist_config()["mp_config"]["parallelize_plan"]


def keyed_plan(model, mesh, sequence_parallel=False):
    import paddle.distributed as dist

    plan = {("model." + k[len("llama."):] if k.startswith("llama.") else k): v
            for k, v in own_plan(model, mesh).items()}
    if sequence_parallel:
        plan["model.embed_tokens"] = [dist.ColWiseParallel(gather_output=True),
                                      dist.SequenceParallelBegin()]
        plan["model.layers.*.input_layernorm"] = dist.SequenceParallelEnable()
        plan["model.layers.*.post_attention_layernorm"] = dist.SequenceParallelEnable()
        plan["model.norm"] = dist.SequenceParallelEnd()
    return plan


def pipelined(namespace: dict, schedule: str = "FThenB", layers: int = 2,
              vpp_degree: int = 1, acc_steps: int = 2) -> None:
    """Fill a model file's ``namespace`` with LLaMA (``layers`` decoder
    layers) as a two-stage pipeline on a ``pp`` x ``mp`` mesh
    (``MESH_DIMS``; ``zoo_common.model_file(pipeline=True)``) and a
    ``configure`` planning it under ``schedule`` over ``acc_steps``
    micro-batches (VPP: ``vpp_degree`` chunks a stage, cut at each decoder
    layer)."""
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from pipeline_strategy import configure_pipeline  # examples/, beside the zoo
    from zoo_common import model_file

    build_model, loss, optimizer, inputs, labels, batch, vocab = model_file(
        lambda: make_model(layers), None, pipeline=True)
    batch = batch * acc_steps  # acc_steps micro-batches of the zoo's batch

    def configure(strategy):
        configure_pipeline(strategy, schedule, acc_steps, batch // acc_steps, vpp_degree,
                           "LlamaDecoderLayer")

    configure.__doc__ = f"Two pipeline stages under {schedule}, {acc_steps} micro-batches."
    namespace.update(build_model=build_model, loss=loss, optimizer=optimizer, inputs=inputs,
                     labels=labels, BATCH=batch, VOCAB=vocab, MESH_DIMS=["pp", "mp"],
                     configure=configure)
