"""Where a value the pass moved to a new name now lives.

A pass that rewires a pattern often writes a value under a new name (the
promotion pass writes the biased row-parallel output as ``<out>@promote_0``)
while the ops downstream keep reading it in the same slot.  So a vanished
var's new name is found through its consumers: an op of the rewritten
program with the same type, attrs and outputs as an op of the original, that
reads ``v'`` where the original read ``v``, and ``v`` no longer appears in
the rewritten program at all.  Numeric and value checks then compare ``v``
of the original with ``v'`` of the rewritten program instead of dropping it.
"""
from __future__ import annotations

from collections import Counter


def _signature(op) -> str:
    outs = sorted((k, tuple(v)) for k, v in op.outputs.items() if v)
    attrs = sorted((k, repr(v)) for k, v in op.attrs.items() if k not in ("op_role_var",))
    return f"{op.type}|{outs}|{attrs}"


def consumer_renames(before, after) -> dict:
    """``{original var: rewritten var}`` for vars that vanished from ``after``
    but whose consumers read another var in the same slot."""
    from verify.ir.snapshot import render_key

    key = render_key(before.ops)
    if key is not None and key == render_key(after.ops):
        # op for op the same reads and writes (the pass left the program
        # alone): each op pairs with itself below, so nothing is renamed
        return {}
    present = {n for op in after.ops for n in op.reads() + op.writes()} | set(after.vars)
    seen_b, seen_a = Counter(), Counter()
    by_sig = {}
    for op in before.ops:
        sig = _signature(op)
        by_sig[(sig, seen_b[sig])] = op
        seen_b[sig] += 1
    out = {}
    for op in after.ops:
        sig = _signature(op)
        orig = by_sig.get((sig, seen_a[sig]))
        seen_a[sig] += 1
        if orig is None:
            continue
        for slot, names in orig.inputs.items():
            new = op.inputs.get(slot, [])
            for old_name, new_name in zip(names, new):
                if old_name != new_name and old_name not in present and old_name not in out:
                    out[old_name] = new_name
    return out
