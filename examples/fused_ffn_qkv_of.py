"""How ``fuse_attention_ffn_qkv_pass`` made each fused parameter from the
unfused ones, read from what it did (``FLAGS_enable_fused_ffn_qkv_pass``;
Paddle 3.3.1 ``auto_parallel/static/pir_pass.py``).

The pass replaces the q/k/v projections (and a gate/up pair) of the Engine's
forward program by one matmul of a new parameter, and fills that parameter,
outside the programs, from the dygraph parameters it replaces
(``fuse_param_func``).  The programs alone therefore do not say which
columns of the fused parameter hold which unfused parameter's columns.
:func:`install_recorder` wraps the pass where the Engine calls it and
records, for every fused parameter, its parts (in the order the pass's
fusion map lists them) and the layout it actually wrote: read from the
values (every column of the fused parameter matched to the one column of one
part it equals), never from the pass's code.  :func:`fuse_by_record` then
makes a fused value from any unfused values by that layout, so a run can
give the fused program exactly what the pass's rule gives the flag-off
program's parameters.

The match needs columns that are pairwise distinct across the parts (random
initialisation makes them so); a column matching no part, or more than one,
is reported, not guessed.
"""
from __future__ import annotations

import numpy as np


class FusionLayoutError(ValueError):
    """The fused value is not a column permutation of its parts."""

    def __init__(self, message: str, counterexample: dict):
        super().__init__(message)
        self.counterexample = counterexample


def derive_blocks(name: str, parts: dict, fused: np.ndarray) -> list:
    """``[[part name, part start, part stop, fused start], ...]`` along the
    last axis: the runs of ``fused``'s columns, each equal to a run of one
    part's columns.  ``parts``: ``{name: array}`` in the fusion's order.
    Raises :class:`FusionLayoutError` (naming the fused parameter and
    column) when a column matches no part, more than one, or a part's column
    is used twice or never."""
    fused = np.asarray(fused)
    lead = fused.shape[:-1]
    for p, a in parts.items():
        if np.asarray(a).shape[:-1] != lead:
            raise FusionLayoutError(
                f"{name}: part {p} has shape {list(np.shape(a))}, the fused parameter "
                f"{list(fused.shape)} (only the last axis may differ)",
                {"fused": name, "part": p, "shape": list(np.shape(a))})
    cols = {}  # column bytes -> [(part, column)]
    for p, a in parts.items():
        a = np.ascontiguousarray(np.asarray(a, dtype=fused.dtype))
        for c in range(a.shape[-1]):
            cols.setdefault(a[..., c].tobytes(), []).append((p, c))
    used, runs = set(), []
    for j in range(fused.shape[-1]):
        found = cols.get(np.ascontiguousarray(fused[..., j]).tobytes(), [])
        if len(found) != 1:
            raise FusionLayoutError(
                f"{name}: fused column {j} equals {len(found)} part columns "
                f"({found[:4]}), not exactly one",
                {"fused": name, "column": j, "matches": [list(f) for f in found[:4]]})
        p, c = found[0]
        if (p, c) in used:
            raise FusionLayoutError(f"{name}: column {c} of {p} is used twice (again at "
                                    f"fused column {j})",
                                    {"fused": name, "column": j, "part": p, "part_column": c})
        used.add((p, c))
        if runs and runs[-1][0] == p and runs[-1][2] == c and \
                runs[-1][3] + (runs[-1][2] - runs[-1][1]) == j:
            runs[-1][2] += 1
        else:
            runs.append([p, c, c + 1, j])
    for p, a in parts.items():
        missing = [c for c in range(np.shape(a)[-1]) if (p, c) not in used]
        if missing:
            raise FusionLayoutError(f"{name}: column {missing[0]} of {p} is in no fused "
                                    "column", {"fused": name, "part": p,
                                               "part_column": missing[0]})
    return runs


def fuse_by_record(record: dict, values: dict) -> np.ndarray:
    """The fused value the recorded layout makes of ``values`` (``{part
    name: array}``, e.g. the flag-off program's parameters)."""
    pieces = [np.asarray(values[p])[..., a:b] for p, a, b, _ in record["blocks"]]
    return np.concatenate(pieces, axis=-1)


def install_recorder(sink: list) -> None:
    """Wrap the fusion where the Engine calls it
    (``engine.fuse_attention_ffn_qkv_pass``; call after any replacement of
    it) so that each call appends to ``sink`` one record per fused
    parameter: ``{"kind", "name", "parts", "part_shapes", "shape",
    "blocks"}`` (blocks: :func:`derive_blocks`)."""
    from paddle.distributed.auto_parallel.static import engine

    fuse = engine.fuse_attention_ffn_qkv_pass

    def recorded(startup, main, concrete_program, *args, **kwargs):
        dy, pir = concrete_program.parameters
        before = {q.name: np.array(d._local_value().numpy()) for d, q in zip(dy, pir)}
        fusion_map = fuse(startup, main, concrete_program, *args, **kwargs)
        after = {q.name: d for d, q in zip(*concrete_program.parameters)}
        for kind in sorted(fusion_map):
            for fusion in fusion_map[kind]:
                for fused_name, metas in fusion.items():
                    parts = {m.name: before[m.name] for m in metas}
                    fused = np.array(after[fused_name]._local_value().numpy())
                    sink.append({
                        "kind": kind, "name": fused_name, "parts": list(parts),
                        "part_shapes": {p: list(a.shape) for p, a in parts.items()},
                        "shape": list(fused.shape),
                        "blocks": derive_blocks(fused_name, parts, fused)})
        return fusion_map

    engine.fuse_attention_ffn_qkv_pass = recorded
