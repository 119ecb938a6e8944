"""Parameters and inputs from a recorded seed.

Values depend only on (seed, var name, shard, step), never on the program,
so the original and the rewritten program of a rank get identical values;
except where the rewritten startup program initialises a parameter
differently (``init_like``): then the rewritten run gets what that
initialisation would have drawn from the same random stream, so a pass
that widens a uniform range or moves a Gaussian's mean is seen.
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


# attrs of a startup init op that say nothing about its distribution
_ASIDE = {"seed", "op_role", "op_role_var", "op_namescope", "op_callstack", "op_device",
          "with_quant_attr"}
_UNIFORM = {"uniform_random", "pd_op.uniform"}
_GAUSS = {"gaussian_random", "truncated_gaussian_random", "pd_op.gaussian"}
_CONST = {"fill_constant", "pd_op.full"}


def init_signature(op_type: str, attrs: dict) -> tuple:
    """What a startup op that writes a parameter draws from: its type and
    attrs, the seed (and bookkeeping) aside."""
    return (op_type, tuple(sorted((k, repr(v)) for k, v in attrs.items() if k not in _ASIDE)))


def startup_inits(startup) -> dict:
    """{var: (op type, attrs)}: the op of a legacy startup Program that first
    initialises each var (a random draw or a constant; what runs after it,
    a broadcast say, moves values and is not an initialisation)."""
    out = {}
    for op in startup.global_block().ops:
        if op.type not in _UNIFORM | _GAUSS | _CONST:
            continue
        attrs = {}
        for a in op.attr_names:
            try:
                attrs[a] = op.attr(a)
            except Exception:  # block attrs and the like
                continue
        for n in op.output_arg_names:
            out.setdefault(n, (op.type, attrs))
    return out


def _f(attrs, *keys, default=0.0):
    for k in keys:
        if k in attrs and attrs[k] is not None:
            v = attrs[k]
            return float(v[0] if isinstance(v, (list, tuple)) else v)
    return default


def init_like(value, name, seed, src, dst):
    """``value`` (drawn for an init ``src`` = (type, attrs)) as init ``dst``
    would have drawn it from the same stream: the identity where the two
    draw alike; a uniform's range, a Gaussian's mean and std, a constant
    mapped onto the other's; a different kind of init a fresh draw keyed
    by it (so it differs)."""
    if src is None or dst is None or init_signature(*src) == init_signature(*dst):
        return value
    (ts, a), (td, b) = src, dst
    v = np.asarray(value, dtype=np.float64)
    if ts in _UNIFORM and td in _UNIFORM:
        lo1, hi1 = _f(a, "min", default=-1.0), _f(a, "max", default=1.0)
        lo2, hi2 = _f(b, "min", default=-1.0), _f(b, "max", default=1.0)
        out = (lo2 + hi2) / 2 + (v - (lo1 + hi1) / 2) * ((hi2 - lo2) / max(hi1 - lo1, 1e-30))
    elif ts in _GAUSS and td in _GAUSS:
        m1, s1 = _f(a, "mean"), _f(a, "std", default=1.0)
        m2, s2 = _f(b, "mean"), _f(b, "std", default=1.0)
        out = m2 + (v - m1) * (s2 / max(s1, 1e-30))
    elif ts in _CONST and td in _CONST:
        out = v - _f(a, "value", "value@value") + _f(b, "value", "value@value")
    else:
        out = _rng(seed, name + repr(init_signature(*dst)), 3).uniform(-1, 1, size=v.shape) + v
    return np.asarray(out).astype(np.asarray(value).dtype)
