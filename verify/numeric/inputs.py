"""Parameters and inputs from a recorded seed.

Values depend only on (seed, var name, shard, step), never on the program,
so the original and the rewritten program of a rank get identical values.
Tensor-parallel shards differ by rank (``shard`` = the rank's position on
the TP axis); replicated parameters and data-parallel replicas share one
value; feeds differ across data-parallel replicas and steps.
"""
from __future__ import annotations

import zlib

import numpy as np


def _rng(seed: int, name: str, *more: int):
    return np.random.default_rng([seed, zlib.crc32(name.encode()), *more])


def _as(dtype: str, arr):
    dt = {"float16": np.float16, "bfloat16": np.float32, "float32": np.float32,
          "float64": np.float64, "int64": np.int64, "int32": np.int32}.get(dtype, np.float32)
    return arr.astype(dt)


def param_value(seed: int, name: str, shape, dtype: str, shard: int = 0):
    """A parameter's value: uniform in +-1/sqrt(fan_in)."""
    shape = [int(d) for d in shape]
    fan_in = shape[0] if shape else 1
    bound = 1.0 / np.sqrt(max(fan_in, 1))
    return _as(dtype, _rng(seed, name, shard, 1).uniform(-bound, bound, size=shape))


def feed_value(seed: int, name: str, shape, dtype: str, replica: int, step: int):
    shape = [int(d) for d in shape]
    if dtype.startswith("int"):
        return _as(dtype, _rng(seed, name, replica, step, 2).integers(0, 4, size=shape))
    return _as(dtype, _rng(seed, name, replica, step, 2).standard_normal(size=shape))
