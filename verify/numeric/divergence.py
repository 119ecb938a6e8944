"""Where a rank's final program first stops relating to the serial program,
and which planner stage made that happen.

Shared by the numeric relation (``planner_runs.py``: values from executor
runs) and the value proof of the relation (``verify/value/relation.py``:
terms): both walk a rank's final program in order (``final_ops``, recorded
by ``verify/plan/stages.final_ops``) and ask, for each result with a serial
counterpart, whether it still relates through its placement.
"""
from __future__ import annotations


def serial_counterparts(final_ops) -> dict:
    """``{result name: serial value name}`` of a rank's final program: a
    carried-over op's results are its serial op's; a result of an op a
    later stage made (a reshard function's collective, slice, concat) stands
    for the serial value its chain of first operands starts from (a reshard
    changes placement, not value), related through its own placement.
    Results without a tensor placement (vectors) are left out."""
    out, by_name = {}, {}
    for op in final_ops:
        for res in op["results"]:
            if res:
                by_name[res] = op
    for op in final_ops:
        if op.get("serial"):
            plcs = op.get("placements") or [{}] * len(op["results"])
            for res, ser, plc in zip(op["results"], op["serial"], plcs):
                # a vector (builtin.combine, concat_grad's x_grad) cannot be fetched
                if res and ser and isinstance(plc, dict):
                    out[res] = ser

    # a parameter is fetched after the step's updates: a copy of it a later
    # stage made (share_data_, a ShardingStage3 all_gather) holds the value
    # before them, and does not relate to that
    params = {res for op in final_ops if op["type"] == "builtin.parameter"
              for res in op["results"] if res}

    def trace(name, depth=0):
        if name in params:
            return None
        if name in out or depth > 32:
            return out.get(name)
        prod = by_name.get(name)
        if prod is None or prod.get("serial") or not prod["operands"]:
            return None
        return trace(prod["operands"][0], depth + 1)

    for op in final_ops:
        if op.get("serial") or op["origin"] in (None, "serial"):
            continue
        for res, plc in zip(op["results"], op["placements"]):
            if res and isinstance(plc, dict) and op["operands"]:
                ser = trace(op["operands"][0])
                if ser:
                    out[res] = ser
    return out


# ops whose results are shape or axes operands (a reshape's target, a sum's
# axes), not model values: partition rewrites them to the rank's local sizes
# by design (the zoo LLaMA's head count 2 is 1 on a TP2 rank), so they do not
# relate through a placement; a wrong one shows in the value its reader makes
SHAPE_OPERANDS = ("pd_op.full_int_array",)


def first_divergent_op(final_ops, differs):
    """The first op of a rank's final program (program order) whose result no
    longer relates to its serial value, with the stage blamed; None if none.

    ``differs(res, serial name, placement)`` returns None (relates, or cannot
    tell) or ``(kind, info)``: ``kind`` "shape" (the piece has another shape
    than the serial value's slice) or "value"; ``info`` is merged into the
    answer (index, serial and rank values...).  The stage blamed: the stage
    that made the op when a later stage did (it made a wrong piece); else the
    stage that made one of its inputs; else ``partition`` (its inputs relate,
    its output does not: the local computation partition gave it)."""
    by_name = {}
    for i, op in enumerate(final_ops):
        for res in op["results"]:
            if res:
                by_name[res] = (i, op)
    counterpart = serial_counterparts(final_ops)
    for i, op in enumerate(final_ops):
        if op["type"] in ("builtin.parameter", "pd_op.data"):
            continue  # inputs (equal by construction); fetched after the step's updates
        if op["type"] in SHAPE_OPERANDS:
            continue  # a shape/axes operand: partition gives it the rank's local sizes
        for res, plc in zip(op["results"], op["placements"]):
            ser = counterpart.get(res)
            if not res or not ser:
                continue
            got = differs(res, ser, plc)
            if got is None:
                continue
            kind, info = got
            later = op["origin"] not in ("serial", None)
            if later and kind == "shape":
                continue  # an intermediate of a reshard (e.g. gathered along dim 0 first)
            if later:  # a later stage's op made a wrong piece
                blame = {"stage": op["origin"], "op_index": i, "op_type": op["type"],
                         "value": res}
            else:
                made = [{"stage": by_name[o][1]["origin"], "op_index": by_name[o][0],
                         "op_type": by_name[o][1]["type"], "value": o,
                         **_made_from(o, by_name, counterpart)}
                        for o in op["operands"]
                        if o in by_name and by_name[o][1]["origin"] not in ("serial", None)]
                blame = made[0] if made else {"stage": "partition", "op_index": i,
                                              "op_type": op["type"], "value": res}
            return {"op_index": i, "op_type": op["type"], "value": res, "serial_value": ser,
                    "placement": plc, **info, "stage": blame["stage"], "stage_op": blame}
    return None


def _made_from(name, by_name, counterpart) -> dict:
    """``{"from": op}``: the op a later stage's chain of ops making ``name``
    starts from, when that chain stands for no serial value (its first op
    reads nothing: a ``pd_op.full`` a reshard function wrote in place of the
    value, a ``recv_v2``); else ``{}``.  Without it the blame would name the
    chain's last op (a ``slice``) and hide where the wrong piece was made."""
    seen, root = 0, None
    while name in by_name and not counterpart.get(name) and seen < 64:
        i, op = by_name[name]
        if op["origin"] in ("serial", None):
            return {}
        root = {"op_index": i, "op_type": op["type"], "value": name}
        operands = [o for o in op["operands"] if o]
        if not operands:
            return {"from": root} if seen else {}
        name, seen = operands[0], seen + 1
    return {}


def blamed_op_text(stage_op: dict) -> str:
    """``pd_op.slice %20, from pd_op.full %18``: the blamed op, and the op its
    chain starts from (``_made_from``) when it names one."""
    src = stage_op.get("from")
    return f"{stage_op['op_type']} {stage_op['value']}" + (
        f", from {src['op_type']} {src['value']}" if src else "")
