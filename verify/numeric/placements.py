"""How a rank's local piece relates to the serial (global) tensor.

A placement record (``verify/plan/stages.placement_of``) holds the mesh
(``process_ids`` in row-major order, ``mesh_shape``), ``dims_mapping`` (per
tensor dim, the mesh axis it is split over, or -1) and ``partial`` (mesh
axis -> reduce type).  On the rank at mesh coordinate ``c``:

* a tensor dim ``d`` with ``dims_mapping[d] = a`` holds chunk ``c[a]`` of
  ``mesh_shape[a]`` equal chunks along ``d`` (``Shard(d)``: the global value
  is the concatenation of the pieces along ``d``, in mesh order);
* a mesh axis not named by ``dims_mapping`` nor ``partial`` replicates: the
  piece is equal on every rank along it (``Replicate``);
* a mesh axis in ``partial`` holds addends: the global value is the
  reduction (SUM, AVG, MAX, MIN) of the pieces along it (``Partial``).

:func:`local_piece` gives the piece a rank must hold (non-partial), used for
the inputs of the relation (each rank's initial parameters and feeds are
the slices of the serial ones); :func:`assembled_per_rank` gives, for every
rank, what its piece stands for after the partial reductions, to compare
with :func:`local_piece` of the serial value.  Uneven splits are refused
(``PlacementError``): Paddle's planner pads them, which this module does
not model.
"""
from __future__ import annotations

import numpy as np


class PlacementError(Exception):
    """A placement this module cannot relate (message names it)."""


def coords(placement: dict, rank: int):
    """The mesh coordinate of ``rank`` (None when it is not in the mesh)."""
    ids = list(placement["process_ids"])
    if rank not in ids:
        return None
    return tuple(int(i) for i in np.unravel_index(ids.index(rank), placement["mesh_shape"]))


def holds(placement: dict | None, rank: int) -> bool:
    """Whether ``rank`` holds a piece of a value placed so: a value placed on
    a mesh without the rank has no piece there (Paddle's dist tensor
    outside its mesh), whatever op the rank's program kept for it."""
    return placement is None or rank in [int(i) for i in placement["process_ids"]]


def feed_piece(global_value, placement: dict | None, rank: int, local_shape, dtype):
    """A feed's piece for ``rank``: :func:`local_piece`; a rank outside the
    feed's mesh holds none, and is fed a poison of its recorded local shape
    (NaN, or the dtype's least integer: an index no table holds) so any
    read of it shows in what the rank computes."""
    if holds(placement, rank):
        return local_piece(global_value, placement, rank)
    dt = np.dtype(dtype)
    fill = np.iinfo(dt).min if np.issubdtype(dt, np.integer) else (
        False if dt == np.bool_ else np.nan)
    return np.full([int(d) for d in local_shape], fill, dtype=dt)


def describe(placement: dict | None) -> str:
    """``[Shard(1), Partial(SUM)]``-style text, one entry per mesh axis."""
    if placement is None:
        return "dense"
    out = []
    for a in range(len(placement["mesh_shape"])):
        dims = [d for d, m in enumerate(placement["dims_mapping"]) if m == a]
        if str(a) in placement.get("partial", {}):
            out.append(f"Partial({placement['partial'][str(a)]})")
        elif dims:
            out.append(f"Shard({dims[0]})")
        else:
            out.append("Replicate()")
    return "[" + ", ".join(out) + "]"


def local_piece(global_value, placement: dict | None, rank: int):
    """The piece of ``global_value`` ``rank`` holds under ``placement``
    (partial axes ignored: the caller decides how addends are chosen)."""
    arr = np.asarray(global_value)
    if placement is None:
        return arr
    c = coords(placement, rank)
    if c is None:
        raise PlacementError(f"rank {rank} is not in mesh {placement['process_ids']}")
    dm = placement["dims_mapping"]
    if len(dm) != arr.ndim:
        raise PlacementError(f"dims_mapping {dm} for a {arr.ndim}-D value {list(arr.shape)}")
    index = []
    for d, a in enumerate(dm):
        if a < 0:
            index.append(slice(None))
            continue
        n = placement["mesh_shape"][a]
        if arr.shape[d] % n:
            raise PlacementError(f"dim {d} of size {arr.shape[d]} does not split evenly "
                                 f"over mesh axis {a} of {n}")
        size = arr.shape[d] // n
        index.append(slice(c[a] * size, (c[a] + 1) * size))
    return arr[tuple(index)]


def input_piece(global_value, placement: dict | None, rank: int):
    """An input's piece: :func:`local_piece`; along a SUM-partial axis the
    first rank holds the value and the others zero (the sum is the value)."""
    piece = local_piece(global_value, placement, rank)
    if placement is None or not placement.get("partial"):
        return piece
    c = coords(placement, rank)
    for axis, rtype in placement["partial"].items():
        if rtype != "SUM":
            raise PlacementError(f"an input partial over mesh axis {axis} by {rtype}")
        if c[int(axis)] != 0:
            return np.zeros_like(piece)
    return piece


_REDUCE = {"SUM": lambda xs: np.sum(xs, axis=0), "AVG": lambda xs: np.mean(xs, axis=0),
           "MAX": lambda xs: np.max(xs, axis=0), "MIN": lambda xs: np.min(xs, axis=0)}


def assembled_per_rank(pieces: dict, placement: dict | None) -> dict:
    """``{rank: array}``: each rank's piece after reducing it with the pieces
    of the ranks that differ from it only along partial axes (a non-partial
    placement returns the pieces as they are).  Ranks missing from
    ``pieces`` raise (a partial value needs every addend)."""
    if placement is None or not placement.get("partial"):
        return {r: np.asarray(v) for r, v in pieces.items()}
    axes = sorted(int(a) for a in placement["partial"])
    types = {placement["partial"][str(a)] for a in axes}
    if len(types) != 1 or next(iter(types)) not in _REDUCE:
        raise PlacementError(f"partial reduce types {sorted(types)}")
    reduce = _REDUCE[next(iter(types))]
    ids = list(placement["process_ids"])
    shape = placement["mesh_shape"]
    out = {}
    for r in pieces:
        c = coords(placement, r)
        group = []
        for other in ids:
            oc = coords(placement, other)
            if all(oc[a] == c[a] for a in range(len(shape)) if a not in axes):
                if other not in pieces:
                    raise PlacementError(f"rank {other}'s addend of a partial value is missing")
                group.append(np.asarray(pieces[other], dtype=np.float64))
        out[r] = reduce(np.stack(group)).astype(np.asarray(pieces[r]).dtype)
    return out


def restricted(placement: dict, axes) -> dict:
    """``placement`` sharded over the mesh ``axes`` only (a tensor dim split
    over any other axis is whole): the piece a rank holds before the split
    over the other axes."""
    keep = {int(a) for a in axes}
    return {**placement, "partial": {},
            "dims_mapping": [a if a in keep else -1 for a in placement["dims_mapping"]]}


def piece_from_coarser(value, local_shape, placement: dict | None, rank: int):
    """``rank``'s piece (``local_shape``) of a value given as the rank's piece
    under a coarser split (``placement`` over a subset of its mesh axes:
    the global value, or a piece not yet split over some axes); None when no
    subset of axes gives ``value``'s shape."""
    import itertools

    arr = np.asarray(value)
    if placement is None or list(arr.shape) == list(local_shape):
        return arr if list(arr.shape) == list(local_shape) else None
    gshape = global_shape(local_shape, placement)
    axes = sorted({a for a in placement["dims_mapping"] if a >= 0})
    for k in range(len(axes)):  # the global value first, then finer pieces
        for kept in itertools.combinations(axes, k):
            coarse = local_piece(np.empty(gshape, dtype=np.int8), restricted(placement, kept),
                                 rank)
            if list(coarse.shape) == list(arr.shape):
                rest = restricted(placement, set(axes) - set(kept))
                return local_piece(arr, rest, rank)
    return None


def global_shape(local_shape, placement: dict | None) -> list:
    """The global shape whose :func:`local_piece` has ``local_shape``."""
    shape = list(local_shape)
    if placement is None:
        return shape
    for d, a in enumerate(placement["dims_mapping"]):
        if a >= 0:
            shape[d] *= placement["mesh_shape"][a]
    return shape


def assemble_global(pieces: dict, placement: dict | None):
    """The global value whose pieces ``pieces`` (``{rank: array}``) are:
    pieces placed at their slices (replicas must agree: the first one is
    taken), partial addends reduced.  Used for optimizer states the ranks'
    startup programs initialise (the serial run starts from the same)."""
    ranks = sorted(pieces)
    if placement is None:
        return np.asarray(pieces[ranks[0]])
    reduced = assembled_per_rank(pieces, placement)
    first = np.asarray(reduced[ranks[0]])
    out = np.zeros(global_shape(first.shape, placement), dtype=first.dtype)
    for r in ranks:
        c = coords(placement, r)
        index = []
        for d, a in enumerate(placement["dims_mapping"]):
            size = first.shape[d]
            index.append(slice(None) if a < 0 else slice(c[a] * size, (c[a] + 1) * size))
        out[tuple(index)] = reduced[r]
    return out
