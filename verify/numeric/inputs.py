"""Parameters and inputs from a recorded seed.

Values depend only on (seed, var name, shard, step), never on the program,
so the original and the rewritten program of a rank get identical values;
except where the rewritten startup program initialises a parameter
differently (``init_like``): then the rewritten run gets what that
initialisation would have drawn from the same random stream, so a pass
that widens a uniform range or moves a Gaussian's mean is seen.  Every
runner (legacy simulator and ranks, PIR executor and simulator, the
gradient-merge micro-steps) draws parameters through
:func:`initial_params`, after each side's own startup program ran (the
PIR runners run it seeded, :func:`run_startup`), so what a startup program
initialises that is not a parameter (optimizer states, accumulators) comes
from that program.
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
          "with_quant_attr",
          # PIR bookkeeping: where and in which chunk the value lives
          "chunk_id", "place", "persistable", "stop_gradient"}
_UNIFORM = {"uniform_random", "pd_op.uniform"}
_GAUSS = {"gaussian_random", "truncated_gaussian_random", "pd_op.gaussian"}
_CONST = {"fill_constant", "pd_op.full"}
# PIR startup ops that write a value into the scope under a name
_WRITE_BY_NAME = {"builtin.set_parameter", "builtin.shadow_output"}


def init_signature(op_type: str, attrs: dict) -> tuple:
    """What a startup op that writes a parameter draws from: its type and
    attrs, the seed (and bookkeeping) aside."""
    return (op_type, tuple(sorted((k, repr(v)) for k, v in attrs.items() if k not in _ASIDE)))


def startup_inits(startup) -> dict:
    """{var: Init(op type, attrs, op index)}: the op of a legacy startup
    Program that first initialises each var (a random draw or a constant;
    what runs after it, a broadcast say, moves values and is not an
    initialisation)."""
    out = {}
    for idx, op in enumerate(startup.global_block().ops):
        if op.type not in _UNIFORM | _GAUSS | _CONST:
            continue
        attrs = {}
        for a in op.attr_names:
            try:
                attrs[a] = op.attr(a)
            except Exception:  # block attrs and the like
                continue
        for n in op.output_arg_names:
            out.setdefault(n, Init(op.type, attrs, idx))
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
    if src is None or dst is None or \
            init_signature(src[0], src[1]) == init_signature(dst[0], dst[1]):
        return value
    (ts, a), (td, b) = src[:2], dst[:2]
    v = np.asarray(value, dtype=np.float64)
    if ts in _UNIFORM and td in _UNIFORM:
        # a PIR uniform reads min and max as operands (``min@value`` in a snapshot)
        lo1, hi1 = _f(a, "min", "min@value", default=-1.0), _f(a, "max", "max@value", default=1.0)
        lo2, hi2 = _f(b, "min", "min@value", default=-1.0), _f(b, "max", "max@value", default=1.0)
        out = (lo2 + hi2) / 2 + (v - (lo1 + hi1) / 2) * ((hi2 - lo2) / max(hi1 - lo1, 1e-30))
    elif ts in _GAUSS and td in _GAUSS:
        m1, s1 = _f(a, "mean", "mean@value"), _f(a, "std", "std@value", default=1.0)
        m2, s2 = _f(b, "mean", "mean@value"), _f(b, "std", "std@value", default=1.0)
        out = m2 + (v - m1) * (s2 / max(s1, 1e-30))
    elif ts in _CONST and td in _CONST:
        out = v - _f(a, "value", "value@value") + _f(b, "value", "value@value")
    else:
        out = _rng(seed, name + repr(init_signature(td, b)), 3).uniform(-1, 1, size=v.shape) + v
    return np.asarray(out).astype(np.asarray(value).dtype)


class Init(tuple):
    """``(op type, attrs, startup op index)`` of a var's initialisation
    (a tuple, so :func:`init_like` takes it as ``(type, attrs)``)."""

    def __new__(cls, op_type, attrs, op_index=None):
        return super().__new__(cls, (op_type, attrs, op_index))


def _origin(op, producer: dict, depth: int = 0) -> tuple:
    """``(type, attrs)`` of the value ``op`` computes: an initialisation's
    own; for any other op, its type and attrs with the signatures of what
    its inputs come from (``"inputs"``), so a draw scaled before it is
    stored is another kind of initialisation than the bare draw."""
    attrs = {k: v for k, v in op.attrs.items() if k not in ("blocks",)}
    if op.type not in _UNIFORM | _GAUSS | _CONST and depth < 16:
        attrs["inputs"] = tuple(init_signature(*_origin(producer[n], producer, depth + 1))
                                for n in op.reads() if n in producer)
    return op.type, attrs


def snapshot_inits(snap) -> dict:
    """``{var: Init}``: how the startup program of a snapshot first
    initialises each var.  PIR: the value a ``builtin.set_parameter`` /
    ``builtin.shadow_output`` stores, by the op that computes it (its
    operands' constants folded into ``<slot>@value`` attrs by the
    snapshot); legacy: a random draw or constant writing the var (as
    :func:`startup_inits` reads a live program)."""
    producer, out = {}, {}
    for op in snap.startup_ops:
        if op.type in _WRITE_BY_NAME:
            src = next((producer[n] for n in op.reads() if n in producer), None)
            for n in op.writes():
                if src is not None:
                    out.setdefault(n, Init(*_origin(src, producer), src.idx))
            continue
        for n in op.writes():
            producer[n] = op
            if op.type in _UNIFORM | _GAUSS | _CONST:
                out.setdefault(n, Init(op.type, dict(op.attrs), op.idx))
    return out


def initial_params(seed: int, params: dict, shard=None, src_inits=None,
                   dst_inits=None, pieces=None) -> dict:
    """``{name: ndarray}`` for ``params`` = ``{name: (shape, dtype)}``:
    :func:`param_value` (``shard(name)`` its TP shard, 0 by default), and,
    given the inits of the original (``src_inits``) and of this program
    (``dst_inits``), mapped by :func:`init_like` onto this program's
    initialisation where it differs; ``pieces``: ``{name: taker}`` for a
    parameter drawn at the shape its startup writes (the planner's global
    value): the rank's piece of it (``startup_pieces.take``)."""
    out = {}
    for name, (shape, dtype) in params.items():
        v = param_value(seed, name, shape, dtype, shard(name) if shard else 0)
        if src_inits is not None and dst_inits is not None:
            v = init_like(v, name, seed, src_inits.get(name), dst_inits.get(name))
        if pieces and name in pieces:
            v = np.ascontiguousarray(pieces[name](v))
        out[name] = v
    return out


def init_changes(src_inits: dict, dst_inits: dict, names, rank=None) -> list:
    """What the rewritten startup initialises differently, for each var of
    ``names`` both initialise: ``[{"var", "rank", "op_index" (rewritten
    startup), "op", "original", "rewritten"}]`` with only the attrs that
    differ (the seed and bookkeeping aside)."""
    out = []
    for n in names:
        a, b = src_inits.get(n), dst_inits.get(n)
        if a is None or b is None or init_signature(a[0], a[1]) == init_signature(b[0], b[1]):
            continue
        sa, sb = dict(init_signature(a[0], a[1])[1]), dict(init_signature(b[0], b[1])[1])
        keys = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
        out.append({"var": n, "rank": rank, "op_index": b[2] if len(b) > 2 else None,
                    "op": b[0] if a[0] == b[0] else f"{a[0]} -> {b[0]}",
                    "original": {k: sa.get(k) for k in keys},
                    "rewritten": {k: sb.get(k) for k in keys}})
    return out


def describe_init_changes(changes: list) -> str:
    """One clause per changed initialisation, naming var, rank and op."""
    parts = []
    for c in changes:
        what = ", ".join(f"{k} {c['original'][k]} -> {c['rewritten'][k]}"
                         for k in c["original"])
        where = f"startup op {c['op_index']} ({c['op']})" if c["op_index"] is not None \
            else c["op"]
        parts.append(f"rank {c['rank']}'s rewritten startup program initialises parameter "
                     f"{c['var']} differently: {where}{': ' + what if what else ''}")
    return "; ".join(parts)


def scope_values(scope, names) -> dict:
    """``{name: ndarray}`` of the variables of ``names`` that ``scope`` holds
    initialised (the others are left out)."""
    import numpy as np

    out = {}
    for n in names:
        var = scope.find_var(n)
        if var is not None and var.get_tensor()._is_initialized():
            out[n] = np.array(var.get_tensor())
    return out


def run_startup(exe, startup, seed: int):
    """Run ``startup`` with Paddle's generator seeded by ``seed``: the draws
    of its random ops (seed attr 0) are the same on every run."""
    import paddle

    paddle.seed(seed)
    exe.run(startup)
