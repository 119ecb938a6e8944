"""Where a rank's final program first stops relating to the serial program,
and which planner stage made that happen.

Shared by the numeric relation (``planner_runs.py``: values from executor
runs) and the value proof of the relation (``verify/value/relation.py``:
terms): both walk a rank's final program in order (``final_ops``, recorded
by ``verify/plan/stages.final_ops``) and ask, for each result with a serial
counterpart, whether it still relates through its placement.

Each value is related to the serial value *at the same point* of the
computation.  An in-place op (``momentum_``, a gradient merge's ``add_`` or
``scale_``, a reshard's ``share_data_``) writes its operand's buffer: a read
after it reads the write, a read before it the buffer as it was.  With the
rank's final program as a plain snapshot (:func:`aligned`: its in-place
pairs, ``meta["inplace"]``, and its keyword block arguments named), every
read is resolved to the write it reads (:func:`program_reads`), and a value
that stands for a parameter or persistable input read before any write of
it is related to that input as it was at the step's start
(``<name>@start``, :data:`START`), never to the serial run's value after the
optimizer updated it.
"""
from __future__ import annotations

# a source of the step: its value at the step's start is its serial
# counterpart's at the step's start (``<name>@start``)
SOURCE_OPS = ("builtin.parameter", "pd_op.data")
START = "@start"
# what a ``differs`` callback answers when it cannot tell (no value to compare):
# the value is neither a divergence nor seen to relate (blamed before those that do)
UNKNOWN = "unknown"
# in-place ops that only name their operand's buffer anew (a reshard's
# share_data_): a read of either name reads the same, unchanged contents
ALIAS_ONLY = ("pd_op.share_data_",)


def serial_counterparts(final_ops) -> dict:
    """``{result name: serial value name}`` of a rank's final program: a
    carried-over op's results are its serial op's; a result of an op a
    later stage made (a reshard function's collective, slice, concat) stands
    for the serial value its chain of first operands starts from (a reshard
    changes placement, not value), related through its own placement.
    Results without a tensor placement (vectors) are left out.  (What the
    runs watch; :func:`counterparts_at` says at which point each compares.)"""
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

    def trace(name, depth=0):
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


def aligned(final_ops, snapshot) -> bool:
    """Whether ``snapshot`` (a plain ``ProgramSnapshot``) is the program
    ``final_ops`` records, op for op (type; every result the record names
    among the op's writes)."""
    if snapshot is None or len(snapshot.ops) != len(final_ops):
        return False
    return all(op.type == rec["type"] and
               {n for n in rec["results"] if n} <= set(op.writes())
               for op, rec in zip(snapshot.ops, final_ops))


def program_reads(final_ops, snapshot=None) -> tuple:
    """``{"reads", "first", "written_after", "written"}`` of a rank's final
    program: per op, the values its operands read at that point (an operand
    whose buffer an earlier in-place op wrote: that write, the last one), the
    value its first operand reads, and whether an in-place op after it writes
    one of its results' buffers (a fetch at the end of the program sees that
    write); ``written``: the buffers (first values) some in-place op writes.
    Without an :func:`aligned` snapshot: the recorded operands as they are,
    no in-place writes known (a keyword block argument unnamed)."""
    from verify.ir.inplace import aliases

    snap = snapshot if aligned(final_ops, snapshot) else None
    alias = aliases(snap) if snap is not None else {}
    root_of, latest, writes = {}, {}, {}  # value -> buffer; buffer -> last write, writers

    def root(n):
        return root_of.get(n, n)

    reads, first = [], []
    for i, rec in enumerate(final_ops):
        names = snap.ops[i].reads() if snap is not None else rec["operands"]
        reads.append([latest.get(root(n), n) if n else n for n in names])
        op0 = rec["operands"][0] if rec["operands"] else None
        first.append(latest.get(root(op0), op0) if op0 else op0)
        for res in rec["results"]:
            if res in alias:
                root_of[res] = root(alias[res])
                if rec["type"] in ALIAS_ONLY:
                    continue  # another name for the buffer, its contents unchanged
                latest[root_of[res]] = res
                writes.setdefault(root_of[res], []).append(i)
    written_after = [any(j > i for res in rec["results"] if res
                         for j in writes.get(root(res), ()))
                     for i, rec in enumerate(final_ops)]
    return {"reads": reads, "first": first, "written_after": written_after,
            "written": set(writes)}


def counterparts_at(final_ops, snapshot=None) -> dict:
    """``{result name: serial reference}`` as :func:`serial_counterparts`,
    each at the point the result is made: a carried-over op's results are
    its serial op's results (as made); a later stage's op stands for what
    its first operand reads at that point, resolved through the in-place
    writes before it (:func:`program_reads`): a parameter or persistable
    input that an in-place op writes (the optimizer's update), read before
    that write, is the input at the step's start, ``<serial name>@start``
    (:data:`START`), which the caller resolves or answers :data:`UNKNOWN`."""
    base = serial_counterparts(final_ops)
    prog = program_reads(final_ops, snapshot)
    first = prog["first"]
    sources = {res: ser for rec in final_ops if rec["type"] in SOURCE_OPS and rec.get("serial")
               for res, ser in zip(rec["results"], rec["serial"]) if res and ser}
    known = aligned(final_ops, snapshot)  # the in-place writes are known
    params = {res for rec in final_ops if rec["type"] == "builtin.parameter"
              for res in rec["results"] if res}
    made_by = {}
    for i, rec in enumerate(final_ops):
        for res in rec["results"]:
            if res:
                made_by[res] = i
    out = {}
    for i, rec in enumerate(final_ops):
        carried = bool(rec.get("serial")) or rec["origin"] in (None, "serial")
        for res in rec["results"]:
            if not res or res not in base:
                continue
            if carried:
                out[res] = base[res]
                continue
            name, depth = first[i], 0
            while name and name not in sources and depth < 32:
                j = made_by.get(name)
                prod = final_ops[j] if j is not None else None
                if prod is None or prod.get("serial") or prod["origin"] in (None, "serial"):
                    break
                name, depth = first[j], depth + 1
            if name in sources and name in params and not known:
                continue  # a parameter's copy, its in-place updates unknown: fetched
                # after them, the parameter is no longer what the copy read
            if name in sources:  # as it is before any write (none: as fetched)
                out[res] = sources[name] + (START if name in prog["written"] else "")
            elif name in out or name in base:
                out[res] = out.get(name, base.get(name))
    return out


# ops whose results are shape or axes operands (a reshape's target, a sum's
# axes), not model values: partition rewrites them to the rank's local sizes
# by design (the zoo LLaMA's head count 2 is 1 on a TP2 rank), so they do not
# relate through a placement; a wrong one shows in the value its reader makes
SHAPE_OPERANDS = ("pd_op.full_int_array",)


def first_divergent_op(final_ops, differs, snapshot=None, fetched_as_made=True):
    """The first op of a rank's final program (program order) whose result no
    longer relates to its serial value at the same point, with the stage
    blamed; None if none.

    ``differs(res, serial ref, placement)`` returns None (relates),
    :data:`UNKNOWN` (cannot tell: e.g. a ``<name>@start`` it has no value
    for) or ``(kind, info)``:
    ``kind`` "shape" (the piece has another shape than the serial value's
    slice) or "value"; ``info`` is merged into the answer (index, serial and
    rank values...).  ``snapshot``: the rank's final program as a plain
    snapshot (:func:`program_reads`); ``fetched_as_made``: the runs read each
    value right after the op that made it (a copy), else at the end of the
    program, where a result a later in-place op overwrote is not the value
    made (left unrelated).

    The stage blamed: the stage that made the op when a later stage did (it
    made a wrong piece); else the stage that made a value it reads (resolved
    through the in-place writes before it: a gradient merge's accumulator as
    the optimizer reads it), first one not seen to relate to its own serial
    value (one that relates may still be read where another value belongs);
    else ``partition`` (its inputs are the serial op's, its output is not:
    the local computation partition gave it)."""
    by_name = {}
    for i, op in enumerate(final_ops):
        for res in op["results"]:
            if res:
                by_name[res] = (i, op)
    counterpart = counterparts_at(final_ops, snapshot)
    prog = program_reads(final_ops, snapshot)
    reads, written_after = prog["reads"], prog["written_after"]
    related = set()
    for i, op in enumerate(final_ops):
        if op["type"] in SOURCE_OPS:
            continue  # inputs (equal by construction); fetched after the step's updates
        if op["type"] in SHAPE_OPERANDS:
            continue  # a shape/axes operand: partition gives it the rank's local sizes
        if written_after[i] and not fetched_as_made:
            continue  # fetched after a later in-place write: not the value made here
        for res, plc in zip(op["results"], op["placements"]):
            ser = counterpart.get(res)
            if not res or not ser:
                continue
            got = differs(res, ser, plc)
            if got is None:
                related.add(res)
                continue
            if got == UNKNOWN:
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
                        for o in reads[i]
                        if o in by_name and by_name[o][1]["origin"] not in ("serial", None)]
                # one seen to relate may still stand where another value belongs (a
                # recompute clone of the wrong forward op): a suspect after the others
                made.sort(key=lambda m: m["value"] in related)
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
