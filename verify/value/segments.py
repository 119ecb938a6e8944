"""Where the planner relation proof may cut the programs, and what it may
assume at a cut: the boundary of a compositional proof (``relation.py``:
``_prove_segmented``, run by ``prove_relation(..., by_segments=True)``).

A cut is a rank op index ``k`` (the same on every rank: the ranks' programs
must hold the same op types in the same order, else no cut) where a chain
of reshard ops holding a data-moving op (a collective or send/recv) ends
(the next op is not of origin ``reshard``: a rank's piece is whole or a
known slice again); the serial side runs up to the op index ``c`` just past
the definitions of the boundary's serial values (``relation.py``), so every
later serial op reads the fresh symbols (``cut_points``' own ``c``, past
every serial op the rank ops before ``k`` stem from, only orders the cuts).

The boundary of a cut: each rank value defined in the segment just ended
and read after the cut (live across it) whose ``final_ops`` record names a
serial counterpart and a placement, where that placement is Shard or
Replicate (no Partial: a partial piece is not a slice of the serial value),
the value is a float tensor of terms (not a constant, not an integer index),
and the serial counterpart is defined by a serial op.  Every other live value
is not generalized: it keeps its real term on both sides (sound: the
later segments then hold it exactly as the real run does; see
``relation._prove_segmented``).
"""
from __future__ import annotations

from verify.ir.collectives import exchanges

FLOATS = ("float16", "bfloat16", "float32", "float64")


def _defs_uses(ops):
    defined, last_use = {}, {}
    for i, op in enumerate(ops):
        for vs in op.inputs.values():
            for v in vs:
                if v:
                    last_use[v] = i
        for vs in op.outputs.values():
            for v in vs:
                if v:
                    defined.setdefault(v, i)
    return defined, last_use


def stated(final_ops) -> dict:
    """``{rank value: (serial value, placement, serial op index)}`` of the
    rank's ``final_ops`` records that name both, the placement not Partial.
    A reshard's result (a record of origin ``reshard`` naming no serial
    value) stands for its operand's serial value: a reshard moves data, not
    values (a statement like any other: the cut's obligation checks it);
    only the chain's last result, the one a serial op reads (inside the chain
    a value is a gathered layout or a split, not the value's piece)."""
    out, every = {}, {}
    consumed = {v for rec in final_ops if rec.get("origin") != "reshard"
                for v in rec.get("operands") or []}
    for rec in final_ops:
        ser, plcs = list(rec.get("serial") or []), rec.get("placements") or []
        res = rec.get("results") or []
        ops_in = rec.get("operands") or []
        derived = False
        if not ser and rec.get("origin") == "reshard" and len(res) == 1 and ops_in \
                and ops_in[0] in every:
            ser, derived = [every[ops_in[0]]], True
        for i, v in enumerate(res):
            if i < len(ser) and ser[i]:
                every[v] = ser[i]
                if derived and v not in consumed:
                    continue  # inside a reshard's chain (a gathered layout, a split)
                if i < len(plcs) and plcs[i] is not None and not plcs[i].get("partial"):
                    out[v] = (ser[i], plcs[i], rec.get("serial_op"))
    return out


def cut_points(serial_ops, rank_ops: dict, final_ops: dict) -> tuple[list, str | None]:
    """``([(rank index k, serial index c)], why_none)``: the cuts, ascending
    on both sides; no cut (and why) when the ranks' programs differ in op
    types or a rank's records do not follow its program."""
    ranks = sorted(rank_ops)
    types = {r: [op.type for op in rank_ops[r]] for r in ranks}
    if len({tuple(t) for t in types.values()}) != 1:
        return [], "the ranks' programs hold different op sequences"
    if any(len(final_ops.get(r) or []) != len(rank_ops[r]) for r in ranks):
        return [], "a rank's final_ops records do not follow its program"
    if any(rec.get("type") != op.type for r in ranks
           for rec, op in zip(final_ops[r], rank_ops[r])):
        return [], "a rank's final_ops records name other op types than its program"
    ops0 = rank_ops[ranks[0]]
    cuts, c, moved = [], 0, False
    for k in range(1, len(ops0)):
        for r in ranks:
            s = final_ops[r][k - 1].get("serial_op")
            if isinstance(s, int):
                c = max(c, s + 1)
        moved = moved or exchanges(ops0[k - 1].type)
        ends = final_ops[ranks[0]][k].get("origin") != "reshard"
        if moved and ends and c <= len(serial_ops):  # a reshard chain ends at k
            if not cuts or (cuts[-1][0] < k and cuts[-1][1] <= c):
                cuts.append((k, c))
            moved = False
    return cuts, None


def boundary(k_prev, k, c, serial_ops, rank_ops, final_ops, inputs) -> dict:
    """``{serial value: {rank: [(rank value, placement)]}}`` generalized at
    the cut ``(k, c)`` (see the module docstring); ``inputs``: the names
    of the relation tables' parameters and feeds (symbols already)."""
    sdef, _ = _defs_uses(serial_ops)
    out = {}
    for r, ops in rank_ops.items():
        defined, last_use = _defs_uses(ops)
        st = stated(final_ops[r])
        for v, i in defined.items():
            if not (k_prev <= i < k) or last_use.get(v, -1) < k or v in inputs:
                continue
            if v not in st:
                continue
            s, plc, _ = st[v]
            if s in inputs or sdef.get(s, len(serial_ops)) >= c:
                continue
            out.setdefault(s, {}).setdefault(r, []).append((v, plc))
    return out
