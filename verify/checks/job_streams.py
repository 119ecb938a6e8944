"""Stream races across a pipeline rank's job list: can an op of one job
touch a buffer while an op of another job, on another stream, still does?

Paddle's pipeline scheduler splits a rank's program into job programs and a
job list; 3.3.1's ``StandaloneExecutor`` runs each job in its own
``PirInterpreter``, one after the other on the host, without waiting for
the device in between.  What orders two ops on the device (the executor's,
read as ``verify/ir/executor_streams.py`` says):

* within one job, the interpreter's own analysis: an edge for every RAW,
  WAR and WAW on a *variable* (an in-place result is its operand's
  variable, a ``builtin.shadow_output`` names its operand's variable in the
  scope), ops on one stream in program order, and an event for a
  cross-stream edge (``streams.happens_before_edges`` on the job, its values
  renamed to their variables);
* across jobs, only the stream (ops on one stream run in launch order, and
  jobs launch in list order) and the manual events: an op that waits for
  event ``e`` runs after the op that last recorded ``e`` in an earlier job
  (``force_record_event`` + ``event_to_record`` / ``events_to_wait``; the
  scheduler's ``_add_dependency``).  A data dependence across jobs orders
  nothing: the later job's core never saw the earlier job's ops.

Buffers: a value a job hands on by name (a ``builtin.shadow_output``'s
name, read back as a keyword block argument) lives in its micro-batch's
scope, one buffer per micro-batch; parameters and other persistables (the
gradient-merge accumulators) live in the rank's scope; every other value is
the job run's own.  Knowingly coarser than the executor: a manual event
recorded and awaited inside one job gets no credit (the host order of the
two is not fixed there), and host-synchronous ops are treated as
asynchronous.  A conflicting pair on two streams that no path of these
edges orders is NOT_EQUIVALENT, with a Z3 schedule in which the later op
starts before the earlier one ends.
"""
from __future__ import annotations

from ..ir.executor_streams import awaited_events, executed_stream, recorded_event, runs_at_all
from ..ir.snapshot import Op, ProgramSnapshot
from ..verdicts import CheckResult, Verdict
from . import streams

KIND = "dataflow"
NAME = "job stream order"
MAX_WITNESSES = 3  # Z3 schedules per rank (each finding is counted)


class _Buffers:
    """Union-find of buffer names across the job list."""

    def __init__(self):
        self.parent = {}

    def find(self, v):
        while self.parent.get(v, v) != v:
            v = self.parent[v]
        return v

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _handed_names(snaps) -> set:
    """Names some job stores for a later one (``builtin.shadow_output``)."""
    return {n for s in snaps.values() for o in s.ops if o.type == "builtin.shadow_output"
            for n in o.outputs.get("output", [])}


def _scoped(pos, mb, snap, handed, name) -> str:
    """The scope-level name of a job's value ``name``: see the module docstring."""
    inplace = (snap.meta or {}).get("inplace") or {}
    seen = set()
    while name in inplace and name not in seen:  # an in-place result is its operand's variable
        seen.add(name)
        name = inplace[name]
    var = snap.vars.get(name)
    if name in handed or (var is not None and var.is_data):
        return f"mb{mb}:{name}"
    if var is not None and (var.persistable or var.is_parameter):
        return name
    return f"job{pos}:{name}"


def combined(jobs, snaps):
    """``(program, edges, origin)``: the ops the job list runs, in launch
    order, each value renamed to its buffer, each op on its executed
    stream; the happens-before edges (module docstring); ``origin[g]`` =
    ``(job position, job type, micro-batch, op index in the job)``."""
    handed = _handed_names(snaps)
    bufs = _Buffers()
    for pos, (kind, mb) in enumerate(jobs):  # shadow_output: its name is its operand's buffer
        s = snaps[kind]
        for o in s.ops:
            if o.type == "builtin.shadow_output":
                for a, b in zip(o.inputs.get("operands", []), o.outputs.get("output", [])):
                    bufs.union(_scoped(pos, mb, s, handed, a), _scoped(pos, mb, s, handed, b))
    ops, origin, edges = [], [], set()
    last_record = {}  # event name -> the op that last recorded it, in an earlier job
    for pos, (kind, mb) in enumerate(jobs):
        s = snaps[kind]

        def rename(slots):
            return {k: [bufs.find(_scoped(pos, mb, s, handed, n)) for n in v]
                    for k, v in slots.items()}
        first = len(ops)
        local = []
        for o in s.ops:
            if not runs_at_all(o.type):
                continue
            g = len(ops)
            op = Op(idx=g - first, type=o.type, inputs=rename(o.inputs),
                    outputs=rename(o.outputs), attrs=o.attrs, role=o.role,
                    stream=executed_stream(o.type, o.attrs))
            local.append(op)
            ops.append(Op(g, op.type, op.inputs, op.outputs, op.attrs, op.role, op.stream))
            origin.append((pos, kind, mb, o.idx))
            for e in awaited_events(o.type, o.attrs):
                if e in last_record:
                    edges.add((last_record[e], g))
        job = ProgramSnapshot(ops=local, vars={})
        edges |= {(a + first, b + first) for a, b in streams.happens_before_edges(job)}
        for g in range(first, len(ops)):
            e = recorded_event(ops[g].type, ops[g].attrs)
            if e is not None:
                last_record[e] = g
    last_on = {}  # one stream across jobs: launch order
    for op in ops:
        if op.stream in last_on:
            edges.add((last_on[op.stream], op.idx))
        last_on[op.stream] = op.idx
    return ProgramSnapshot(ops=ops, vars={}), sorted(e for e in edges if e[0] < e[1]), origin


def run_job_list(jobs, snaps, where: str, rank: int) -> list:
    """One rank's job list ``[(type, micro-batch)]`` over its job programs'
    snapshots ``{type: ProgramSnapshot}``: results as ``streams.run``'s."""
    prog, edges, origin = combined(jobs, snaps)
    names = sorted({o.stream for o in prog.ops})
    reach = streams._reachable(len(prog.ops), edges)
    found, checked = [], 0
    for i, j, var in streams.conflicts(prog, {}):
        checked += 1
        if not reach[i] >> j & 1:
            found.append((i, j, var))
    if not found:
        return [CheckResult(KIND, NAME, rank, Verdict.EQUIVALENT,
                            f"{where}: {len(jobs)} jobs, streams {names}: {checked} "
                            "cross-stream conflicts, all ordered by the executor's "
                            "dependences, streams and manual events")]
    out = []
    for i, j, var in found[:MAX_WITNESSES]:
        a, b = prog.ops[i], prog.ops[j]
        (pa, ka, ma, ia), (pb, kb, mb, ib) = origin[i], origin[j]
        sched = streams.schedule_for(prog, edges, i, j)
        first = {"job": pa, "job_type": ka, "micro_batch": ma, "op_index": ia,
                 "op_type": a.type, "stream": a.stream}
        second = {"job": pb, "job_type": kb, "micro_batch": mb, "op_index": ib,
                  "op_type": b.type, "stream": b.stream}
        if isinstance(sched, dict):
            first.update(start=sched[i][0], end=sched[i][1])
            second.update(start=sched[j][0], end=sched[j][1])
        out.append(CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: op {ib} ({b.type} on {b.stream}) of job {pb} ({kb}, micro-batch {mb}) "
            f"can run while op {ia} ({a.type} on {a.stream}) of job {pa} ({ka}, "
            f"micro-batch {ma}) is still running; both touch {var} and nothing the "
            f"executor reads orders them ({len(found)} such pairs)",
            counterexample={"rank": rank, "var": var, "first": first, "second": second,
                            "pairs": len(found)}))
    return out
