"""Fused parameters: a parameter one program holds where another holds
several, its columns a permutation of theirs (``fuse_attention_ffn_qkv_pass``:
q|k|v per head group, gate|up).  The layout is read from values
(:func:`derive_blocks`: every fused column matched to the one column of one
part it equals), recorded in the planning process
(``examples/fused_ffn_qkv_of.py``), and applied to any values of the parts
(:func:`fuse_by_record`): the relation gives the fused program the fused
parameter its record makes of the serial parameters, and compares its
gradient and update with the same fusion of theirs
(``verify/numeric/planner_runs.py``)."""
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



FUSED = "@fused"  # suffix of a serial value made by fusing its parts' values


def fused_records(serial_rel: dict) -> dict:
    """``{fused parameter: record}`` a relation table carries (``"fused"``:
    the records of ``examples/fused_ffn_qkv_of.py``, put there by the
    adapter that relates such plans; none elsewhere)."""
    return {r["name"]: r for r in (serial_rel or {}).get("fused") or []}


def with_fused_values(serial_rel: dict, serial_out: list) -> tuple:
    """``(params table, outputs)``: ``serial_rel["params"]`` with an entry
    per fused parameter whose gradient and updated value are the fusion of
    its parts' (``<name>@GRAD@fused``, ``<name>@fused``; the float64 runs
    alike), and each step's outputs with those values added (new dicts).
    The fused gradient is the parts' gradients fused because the fused
    matmul's gradient is the columns of the parts' gradients; the updated
    value because the optimizers update elementwise (a per-tensor optimizer
    step would not: such a record is refused)."""
    from .float64_reference import SUFFIX

    recs = fused_records(serial_rel)
    params = dict(serial_rel["params"])
    if not recs:
        return params, serial_out
    out = [dict(step) for step in serial_out]
    for name, rec in recs.items():
        parts = [params[p] for p in rec["parts"]]
        opt = {p.get("optimizer") for p in parts}
        if not opt <= {"pd_op.sgd_", "pd_op.momentum_", "pd_op.adam_", "pd_op.adamw_"}:
            raise ValueError(f"{name}: its parts are updated by {sorted(opt)}, not an "
                             "elementwise optimizer: the fused update is not their fusion")
        grad, value = f"{name}@GRAD{FUSED}", f"{name}{FUSED}"
        params[name] = {**parts[0], "grad": grad, "param": value, "shape": rec["shape"]}
        for step in out:
            for kind, made in (("grad", grad), ("param", value)):
                for suffix in ("", SUFFIX):
                    vals = {p: step.get(params[p][kind] + suffix) for p in rec["parts"]}
                    if all(v is not None for v in vals.values()):
                        step[made + suffix] = fuse_by_record(rec, vals)
    return params, out
