"""Planning paddleformers models on a CPU build of Paddle 3.3.1: every
workaround the zoo needs, in this one place (the model files in this
folder import it; nothing in the installed packages is edited).

1. ``fuse_rms_norm=False`` in every config (``CONFIG_OVERRIDES``): the fused
   rms-norm kernel has no CPU float32 path on 3.3.1 (it rejects float32), so
   the model's RMSNorm must take paddleformers' unfused path (pow, mean,
   rsqrt, multiply).
2. ``PretrainedConfig.get`` runs in dygraph even inside ``dist.to_static``
   (``apply()``: ``paddle.jit.not_to_static`` on the class attribute, in the
   planning process only): dy2static otherwise converts ``get``, whose
   ``self.__getattribute__(key)`` it rewrites into a call that re-enters
   the config's ``__getattribute__`` until the recursion limit.
3. ``use_single_model_implementation=True``: the layers are the plain
   single-card ones (no fleet ``ColumnParallelLinear``), the form
   ``dist.parallelize`` places (LLaMA's ``auto_dist_config`` asserts it).

4. A pipeline's decoder layers read tensors made on the first stage as
   keyword arguments: the causal mask and the rotary ``(cos, sin)`` tuple
   (``position_embeddings``).  Paddle's ``pp_config`` reshards only a
   split layer's output onto the next stage (its ``global_spec`` pre-hook,
   bare tensors only, fails in ``mix2dist`` on this model), so
   ``to_static`` raises in the second stage's attention (operands on two
   meshes).  :func:`reshard_kwargs` adds a pre-hook on each layer
   resharding every such tensor, bare or in a tuple, onto the layer's own
   mesh, replicated.

``PINNED`` is the version these were found on (pyproject's ``models`` extra).
"""
from __future__ import annotations

PINNED = "1.2.0"
CONFIG_OVERRIDES = {"fuse_rms_norm": False, "use_single_model_implementation": True}


def apply() -> None:
    """Apply workaround 2 (idempotent); call before building a model."""
    import paddle
    from paddleformers.transformers.configuration_utils import PretrainedConfig

    if not getattr(PretrainedConfig.get, "_zoo_not_to_static", False):
        wrapped = paddle.jit.not_to_static(PretrainedConfig.get)
        wrapped._zoo_not_to_static = True
        PretrainedConfig.get = wrapped


def config(config_cls, **fields):
    """``config_cls(**fields)`` with the CPU overrides (they win)."""
    return config_cls(**{**fields, **CONFIG_OVERRIDES})


def reshard_kwargs(layers) -> None:
    """Workaround 4: a forward pre-hook on each of ``layers`` resharding each
    dist tensor among its keyword arguments (bare or in a tuple) that is not
    on the layer's own mesh (its first parameter's) onto it, replicated."""
    import paddle.distributed as dist

    def onto(t, mesh):
        if not getattr(t, "is_dist", lambda: False)() or t.process_mesh == mesh:
            return t
        return dist.reshard(t, mesh, [dist.Replicate()] * len(mesh.shape))

    def hook(layer, args, kwargs):
        mesh = next(iter(layer.parameters())).process_mesh
        return args, {key: tuple(onto(t, mesh) for t in value) if isinstance(value, tuple)
                      else onto(value, mesh) for key, value in kwargs.items()}

    for layer in layers:
        layer.register_forward_pre_hook(hook, with_kwargs=True)
