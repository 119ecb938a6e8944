"""Placement coverage of the planner relation: every value of the serial
program the relation compares is held, on the ranks, by pieces whose
placements tile it exactly.

The relation (``verify/value/relation.py``, ``verify/numeric/planner_runs.py``)
compares each rank's values with the serial program's through their
placements; a serial value no rank holds, or a part of it no rank's piece
covers, is never compared, so a plan that drops it could pass the relation
vacuously.  This check closes that gap from the serial side, on the relation
tables alone (nothing runs):

* the values: every serial parameter (an input of the relation), every
  parameter the serial optimizer updates (its state after the step) and the
  gradient the update reads, the loss, every persistable state (learning
  rate, optimizer moments) and every feed;
* a value is *tiled* when (1) some rank holds it; (2) every rank holding it
  is in its placement's mesh; (3) every process of that mesh is a rank of
  the plan and holds it too (a Shard piece or a Partial addend at that mesh
  coordinate exists); (4) the distinct pieces (replicas of one piece count
  once) cover every element of the global value and no two of them overlap;
  (5) a rank's recorded local shape is the slice its placement names.

A value failing (1)-(5) is NOT_EQUIVALENT: the ranks together do not hold
the model's value (named with the ranks and the stage after which it was
gone).  A placement this module cannot slice (an uneven split: Paddle pads
it) is INCONCLUSIVE for that value, never tiled.
"""
from __future__ import annotations

import numpy as np

from verify.numeric.placements import PlacementError, coords, describe, holds, local_piece
from verify.verdicts import CheckResult, Verdict

NAME = "placement coverage"


def compared_values(serial_rel: dict, rank_rels: dict) -> list:
    """``[(label, key, global shape, {rank: (placement, local shape | None)})]``:
    every value of the serial program the relation compares or starts from
    (see the module docstring), with the ranks holding it; ``key`` is
    ``(kind, name)`` (kind: parameter, update, gradient, loss, state, feed)."""
    out = []
    sparams = serial_rel.get("parameters", {})
    for n, v in sorted(sparams.items()):
        held = {r: (rel["parameters"][n].get("placement"), rel["parameters"][n]["shape"])
                for r, rel in rank_rels.items() if n in rel.get("parameters", {})}
        out.append((f"parameter {n}", ("parameter", n), v["shape"], held))
    for n, v in sorted(serial_rel.get("params", {}).items()):
        shape = v.get("shape") or sparams.get(n, {}).get("shape", [])
        upd = {r: (rel["params"][n].get("placement"), None)
               for r, rel in rank_rels.items() if n in rel.get("params", {})}
        grads = {r: (rel["params"][n].get("grad_placement"), None)
                 for r, rel in rank_rels.items() if n in rel.get("params", {})}
        out.append((f"{n} (after the step)", ("update", n), shape, upd))
        out.append((f"{n}@GRAD", ("gradient", n), shape, grads))
    if serial_rel.get("loss"):
        held = {r: (rel.get("loss_placement"), None) for r, rel in rank_rels.items()
                if rel.get("loss")}
        out.append(("loss", ("loss", serial_rel["loss"]), [], held))
    for n, v in sorted(serial_rel.get("feeds", {}).items()):
        kind = "state" if v.get("persistable") else "feed"
        # a feed placed on a mesh without the rank: the rank holds no piece of
        # it (Paddle keeps the data op; the relation feeds the rank a poison,
        # so a read of it shows); a state so placed stays a problem (foreign)
        held = {r: (rel["feeds"][n].get("placement"), rel["feeds"][n]["shape"])
                for r, rel in rank_rels.items() if n in rel.get("feeds", {})
                and (kind == "state" or holds(rel["feeds"][n].get("placement"), r))}
        out.append((f"{kind} {n}", (kind, n), v["shape"], held))
    return out


def tiling_problems(shape, held: dict, ranks) -> tuple:
    """``(problems, undecided)`` for one value of global ``shape`` held as
    ``held`` (``{rank: (placement, local shape | None)}``) by the plan's
    ``ranks``: each problem ``{"why", "ranks"}`` breaks (1)-(5) of the module
    docstring; ``undecided``: why a placement could not be sliced, or None."""
    shape = [int(d) for d in shape]
    if not held:
        return [{"why": f"no rank of {sorted(ranks)} holds it", "ranks": sorted(ranks)}], None
    if any(d < 0 for d in shape):
        return [], f"its serial shape {shape} has a -1 dim"
    ranks = set(ranks)
    index = np.arange(int(np.prod(shape)) if shape else 1).reshape(shape)
    owner = np.full(index.size, -1, dtype=np.int64)  # the first rank covering each element
    seen, absent, problems = set(), set(), []
    for r, (plc, local) in sorted(held.items()):
        if plc is not None:
            ids = [int(i) for i in plc["process_ids"]]
            if r not in ids:
                problems.append({"why": f"rank {r} holds it placed {describe(plc)} on the "
                                        f"mesh {ids}, which does not hold rank {r}",
                                 "ranks": [r]})
                continue
            for q in ids:
                c = coords(plc, q)
                if q not in ranks:
                    problems.append({"why": f"rank {r}'s placement {describe(plc)} on the "
                                            f"mesh {ids} puts a piece at coordinate "
                                            f"{list(c)} on process {q}, no rank of the plan",
                                     "ranks": [r]})
                elif q not in held and q not in absent:
                    absent.add(q)
                    problems.append({"why": f"rank {q} (coordinate {list(c)} of rank {r}'s "
                                            f"mesh {ids}, placement {describe(plc)}) holds no "
                                            "piece of it", "ranks": [q]})
        try:
            piece = local_piece(index, plc, r)
        except PlacementError as exc:
            return problems, f"rank {r}'s placement {describe(plc)}: {exc}"
        if local is not None and [int(d) for d in local] != list(piece.shape):
            problems.append({"why": f"rank {r} holds a {list(local)} piece, its placement "
                                    f"{describe(plc)} names a {list(piece.shape)} slice",
                             "ranks": [r]})
        key = (int(piece.flat[0]) if piece.size else -1, piece.shape)
        if key in seen:  # a replica of a piece already counted
            continue
        seen.add(key)
        flat = piece.reshape(-1)
        twice = flat[owner[flat] >= 0]
        if twice.size:
            problems.append({"why": f"rank {r}'s piece ({describe(plc)}) overlaps rank "
                                    f"{int(owner[twice[0]])}'s without being a replica of it "
                                    f"(element {_at(twice[0], shape)})",
                             "ranks": [int(owner[twice[0]]), r]})
        fresh = flat[owner[flat] < 0]
        owner[fresh] = r
    missing = np.flatnonzero(owner < 0)
    if missing.size:
        problems.append({"why": f"{missing.size} of its {owner.size} elements are in no "
                                f"rank's piece (first: element {_at(missing[0], shape)})",
                         "ranks": sorted(held)})
    return problems, None


def _at(flat_index, shape) -> list:
    return [int(i) for i in np.unravel_index(int(flat_index), shape)] if shape else []


def coverage_checks(where: str, serial_rel: dict, rank_rels: dict, ranks,
                    stage_of=None) -> list:
    """One CheckResult (contract, ``placement coverage``), for the whole
    plan: EQUIVALENT when every compared value is tiled (the message counts
    them by kind); NOT_EQUIVALENT naming the first untiled value, the
    rank(s) and the stage ``stage_of(key, ranks)`` blames (every problem in
    ``details``); INCONCLUSIVE when only undecided placements remain."""
    values = compared_values(serial_rel, rank_rels)
    bad, undecided, kinds = [], [], {}
    for label, key, shape, held in values:
        kinds[key[0]] = kinds.get(key[0], 0) + 1
        problems, why = tiling_problems(shape, held, ranks)
        for p in problems:
            bad.append({"value": label, "kind": key[0], "name": key[1], **p})
        if why:
            undecided.append({"value": label, "why": why})
    counted = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in sorted(kinds.items()))
    details = {"values": len(values), "by_kind": kinds, "problems": bad[:20],
               "undecided": undecided[:20]}
    if bad:
        first = bad[0]
        stage = stage_of((first["kind"], first["name"]), first["ranks"]) if stage_of else None
        stage = stage or "unknown"
        more = f" ({len(bad) - 1} more problem(s))" if len(bad) > 1 else ""
        return [CheckResult(
            "contract", NAME, first["ranks"][0] if len(first["ranks"]) == 1 else None,
            Verdict.NOT_EQUIVALENT,
            f"{where}: {first['value']} is not tiled by the ranks' pieces: {first['why']} "
            f"(rank(s) {first['ranks']}; stage blamed: {stage}); the "
            f"relation cannot compare what no rank holds{more}",
            counterexample={"value": first["value"], "ranks": first["ranks"],
                            "rank": first["ranks"][0] if first["ranks"] else None,
                            "stage": stage, "why": first["why"]},
            details=details)]
    if undecided:
        return [CheckResult(
            "contract", NAME, None, Verdict.INCONCLUSIVE,
            f"{where}: {len(undecided)} of {len(values)} compared values have placements "
            f"this check cannot slice; first {undecided[0]['value']}: {undecided[0]['why']}",
            details=details)]
    if not values:
        return [CheckResult("contract", NAME, None, Verdict.INCONCLUSIVE,
                            f"{where}: the serial program records no value to compare",
                            details=details)]
    # said, not hidden: a serial program whose records name no loss (no backward
    # seed: verify/ir/loss_seed.py) has its loss compared nowhere
    no_loss = "" if serial_rel.get("loss") else \
        "; the serial program's records name no loss: the loss is compared nowhere"
    details["loss_recorded"] = bool(serial_rel.get("loss"))
    return [CheckResult(
        "contract", NAME, None, Verdict.EQUIVALENT,
        f"{where}: every value the relation compares or starts from is tiled exactly by "
        f"the pieces of the ranks holding it ({counted}; every mesh process a rank holding "
        f"its piece, no element missing, no two pieces overlapping){no_loss}",
        details=details)]
