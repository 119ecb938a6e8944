"""Seeded model specs for ``python -m verify generate``: plain JSON-able
data that ``examples/generated_model.py`` builds (see its docstring for the
fields).  Spec ``i`` of seed ``S`` depends only on ``(S, i)``: the same seed
gives the same specs, and one spec can be drawn again alone.

What is drawn: a mesh (1-D, 1-D on process ids not 0..n-1, DP x TP,
2 x 2, a two-stage pipeline's ``pp`` x ``mp`` or its stage meshes alone, stage
meshes of two dims: ``pp`` x ``dp`` x ``mp``), sizes (hidden, sequence and
FFN widths, uneven ones included: 5, 7 split over 2 ranks), 1-4 blocks
(linear, MLP, attention, norm, embedding first, an activation reshard to
Shard / Replicate / Partial placements, a linear on a sub-mesh), every
parameter's placements, the optimizer, ``shard_optimizer`` stages and the
strategy (gradient merge with ``k_steps``, pipeline schedules).
"""
from __future__ import annotations

import random
import re

# (mesh, dim names, weight): 2-rank meshes mostly; a 4-rank one now and then
MESHES = [
    ([0, 1], ["mp"], 4),
    ([2, 3], ["mp"], 1),
    ([[0], [1]], ["dp", "mp"], 3),
    ([[0, 1], [2, 3]], ["dp", "mp"], 1),
    ([[0], [1]], ["pp", "mp"], 2),
    ([[0, 1], [2, 3]], ["pp", "mp"], 1),
    ([[[0]], [[1]]], ["pp", "dp", "mp"], 1),  # stage meshes of two dims
]
WIDTHS = [4, 5, 6, 8]  # 5 is uneven over 2 ranks
FFNS = [4, 6, 7, 8]
KINDS = [("linear", 4), ("mlp", 3), ("attention", 2), ("norm", 2), ("reshard", 3),
         ("sub", 1)]


def _pick(rng, weighted):
    items, weights = zip(*weighted)
    return rng.choices(items, weights=weights)[0]


def param_placements(rng, mesh_dims, ndim):
    """One placement per mesh dim for a parameter of ``ndim`` dims: Replicate
    or a Shard of a dim no other mesh dim shards (a ``dp`` dim mostly
    Replicate: data parallelism)."""
    out, used = [], set()
    for name in mesh_dims:
        free = [d for d in range(ndim) if d not in used]
        if not free or rng.random() < (0.8 if name == "dp" else 0.4):
            out.append("R")
        else:
            d = rng.choice(free)
            used.add(d)
            out.append(f"S{d}")
    return out


def activation_placements(rng, mesh_dims, ndim=3):
    """An activation's placements: Replicate, Partial or a Shard per mesh dim."""
    out, used = [], set()
    for _ in mesh_dims:
        free = [d for d in range(ndim) if d not in used]
        c = _pick(rng, [("R", 3), ("P", 2)] + ([("S", 4)] if free else []))
        if c == "S":
            d = rng.choice(free)
            used.add(d)
            c = f"S{d}"
        out.append(c)
    return out


def _block(rng, kind, dims, hidden, first):
    if kind == "linear":
        b = {"kind": "linear", "out": rng.choice(WIDTHS), "relu": rng.random() < 0.5,
             "weight": param_placements(rng, dims, 2)}
        b["bias"] = param_placements(rng, dims, 1) if rng.random() < 0.7 else None
        return b
    if kind == "mlp":
        return {"kind": "mlp", "ffn": rng.choice(FFNS), "up": param_placements(rng, dims, 2),
                "up_bias": param_placements(rng, dims, 1),
                "down": param_placements(rng, dims, 2)}
    if kind == "attention":
        return {"kind": "attention", **{n: param_placements(rng, dims, 2) for n in "qkvo"}}
    if kind == "norm":
        return {"kind": "norm", "weight": param_placements(rng, dims, 1),
                "bias": param_placements(rng, dims, 1)}
    if kind == "embedding":
        return {"kind": "embedding", "vocab": rng.choice([4, 5, 8]), "out": hidden,
                "weight": param_placements(rng, dims, 2)}
    if kind == "reshard":
        return {"kind": "reshard", "placements": activation_placements(rng, dims)}
    return {"kind": "sub"}


def spec(seed: int, index: int) -> dict:
    """Spec ``index`` of ``seed`` (its own ``random.Random``)."""
    rng = random.Random(f"verify-generate:{seed}:{index}")
    mesh, dims, _ = _pick(rng, [((m, d, w), w) for m, d, w in MESHES])
    piped = dims[0] == "pp"
    stage_dims = dims[1:] if piped else dims  # a block's mesh: its stage's, 1-D
    hidden = rng.choice(WIDTHS)
    s = {"version": 1, "seed": seed, "index": index, "mesh": mesh, "mesh_dims": dims,
         "batch": rng.choice([4, 4, 4, 2]), "seq": rng.choice([2, 3, 4]), "hidden": hidden,
         "optimizer": rng.choice(["sgd", "sgd", "adamw"]), "shard_optimizer": 0,
         "gradient_merge": None, "pipeline": None}
    n = rng.randint(2 if piped else 1, 4)
    kinds = [k for k in KINDS if k[0] != "sub" or (len(dims) == 1 and not piped)]
    blocks = []
    if rng.random() < 0.15:
        blocks.append(_block(rng, "embedding", stage_dims, hidden, True))
    while len(blocks) < n:
        blocks.append(_block(rng, _pick(rng, kinds), stage_dims, hidden, not blocks))
    if all(b["kind"] == "reshard" for b in blocks):  # a model with a parameter to train
        blocks[0] = _block(rng, "linear", stage_dims, hidden, True)
    if piped:
        cut = rng.randint(1, len(blocks) - 1)
        for i in (0, cut):  # every stage holds a parameter (else it updates nothing)
            if blocks[i]["kind"] == "reshard":
                blocks[i] = _block(rng, "linear", stage_dims, hidden, i == 0)
        for i, b in enumerate(blocks):
            b["stage"] = int(i >= cut)
        blocks[cut]["cross"] = activation_placements(rng, stage_dims)
        if len(dims) == 2 and rng.random() < 0.7:  # else the stages without a schedule
            s["pipeline"] = {"schedule": rng.choice(["FThenB", "1F1B"]), "acc_steps": 2}
        s["batch"] = 4
    else:
        if "dp" in dims and rng.random() < 0.3:
            s["shard_optimizer"] = rng.choice([1, 2, 3])
        if rng.random() < 0.2:
            s["gradient_merge"] = {"k_steps": 2, "avg": rng.random() < 0.5}
    s["blocks"] = blocks
    return s


def describe(s: dict) -> str:
    """One line: the mesh, the sizes, the blocks, the strategy."""
    parts = [f"mesh {s['mesh']} {'x'.join(s['mesh_dims'])}",
             f"B{s['batch']} S{s['seq']} H{s['hidden']}",
             " ".join(b["kind"] + (f"@{b['stage']}" if "stage" in b else "")
                      for b in s["blocks"]), s["optimizer"]]
    if s.get("shard_optimizer"):
        parts.append(f"ShardingStage{s['shard_optimizer']}")
    if s.get("gradient_merge"):
        parts.append(f"gm k{s['gradient_merge']['k_steps']}"
                     f"{' avg' if s['gradient_merge']['avg'] else ' sum'}")
    if s.get("pipeline"):
        parts.append(f"pp {s['pipeline']['schedule']}")
    return ", ".join(parts)


_PLACEMENT = re.compile(r"^(R|P|S[0-9])$")
_A = {int: "an integer", bool: "a boolean", str: "a string", list: "a list"}
_BLOCK_KEYS = {"linear": {"out": int, "relu": bool}, "mlp": {"ffn": int},
               "attention": {}, "norm": {}, "embedding": {"vocab": int, "out": int},
               "reshard": {}, "sub": {}}


def problems(s) -> list:
    """What makes ``s`` no spec (a ``--replay`` file is user input): one
    line each; empty when ``examples/generated_model.py`` can build it."""
    out = []
    if not isinstance(s, dict):
        return ["the spec is not a JSON object"]
    for key, kind in (("mesh", list), ("mesh_dims", list), ("batch", int), ("seq", int),
                      ("hidden", int), ("blocks", list), ("optimizer", str)):
        if not isinstance(s.get(key), kind) or isinstance(s.get(key), bool):
            out.append(f"{key!r} is missing or not {_A[kind]}")
    if out:
        return out
    for key in ("batch", "seq", "hidden"):
        if not 1 <= s[key] <= 64:
            out.append(f"{key!r} {s[key]} is not in 1..64")
    if not s["blocks"]:
        out.append("no blocks")
    for i, b in enumerate(s["blocks"]):
        if not isinstance(b, dict) or b.get("kind") not in _BLOCK_KEYS:
            out.append(f"block {i} has no known kind ({sorted(_BLOCK_KEYS)})")
            continue
        for key, kind in _BLOCK_KEYS[b["kind"]].items():
            if not isinstance(b.get(key), kind) or (kind is int and not 1 <= b[key] <= 64):
                out.append(f"block {i} ({b['kind']}): {key!r} is not {_A[kind]}"
                           + (" in 1..64" if kind is int else ""))
        for key, val in b.items():
            if key in ("kind", "out", "relu", "ffn", "vocab", "stage"):
                continue
            if val is None and key == "bias":
                continue
            if not isinstance(val, list) or not all(
                    isinstance(c, str) and _PLACEMENT.match(c) for c in val):
                out.append(f"block {i} ({b['kind']}): {key!r} is not a list of placements "
                           "(R, P, S<dim>)")
    if s["optimizer"] not in ("sgd", "adamw"):
        out.append(f"optimizer {s['optimizer']!r} is not sgd or adamw")
    return out
