"""The one table of collective op types: slots and what each computes.

Every module that needs to know a collective (the simulator, the value
semantics, the pass adapters' matchers, the mutation operators) reads it
here, so a new spelling is one row.  ``kind`` is what the op does across
the ranks of its ring; ``all_reduce``'s kind comes from its ``reduce_type``
attr (phi ``ReduceType``: 0 SUM, 1 MAX, 2 MIN, 3 PROD, 4 AVG).
"""
from __future__ import annotations

# op type -> (input slot, output slot, kind)
COLLECTIVES = {
    "all_reduce": ("x", "out", "allreduce"),
    "c_allreduce_sum": ("X", "Out", "sum"),
    "c_allreduce_max": ("X", "Out", "max"),
    "c_allreduce_min": ("X", "Out", "min"),
    "c_allreduce_prod": ("X", "Out", "prod"),
    "mp_allreduce_sum": ("X", "Out", "sum"),
    "reduce_scatter": ("x", "out", "reduce_scatter"),
    "c_reducescatter": ("X", "Out", "reduce_scatter"),
    "all_gather": ("x", "out", "all_gather"),
    "c_allgather": ("X", "Out", "all_gather"),
    "broadcast": ("x", "out", "broadcast"),
    "c_broadcast": ("X", "Out", "broadcast"),
    # the sum (reduce_type, as all_reduce) lands on the group's rank root_id
    # only; the other ranks' out keeps their own x (in place: sharding stage 2)
    "reduce": ("x", "out", "reduce"),
    # forward of a column-parallel linear: identity on values (its backward
    # is the all-reduce); no communication, so the simulator does not cut at it
    "c_identity": ("X", "Out", "identity"),
    # PIR (op.name(); verify/ir/pir_snapshot.py slots).  On 3.3.1 pd_op.all_reduce(_),
    # reduce_scatter and all_gather build; pd_op.c_allreduce_sum(_) is a name in
    # the dialect but building it crashes (SIGSEGV in static_api_c_allreduce_sum)
    # and pd_op.c_allgather / c_reducescatter do not exist: no rows for those.
    "pd_op.all_reduce": ("x", "out", "allreduce"),
    "pd_op.all_reduce_": ("x", "out", "allreduce"),
    "pd_op.reduce_scatter": ("x", "out", "reduce_scatter"),
    "pd_op.all_gather": ("x", "out", "all_gather"),
    # the planner's sub_to_global reshard: the sub-mesh's value from its root
    # (``root``: an index in the ring's group) to every rank of the mesh
    "pd_op.broadcast": ("x", "out", "broadcast"),
    # the planner's s_to_s reshard: x cut into n equal chunks along dim 0 (n the
    # ring's group size); rank i's out chunk j is rank j's x chunk i, out's shape
    # x's (phi AllToAllInferMeta; the GPU kernel sends chunk j to group rank j
    # and enforces dim 0 % n == 0; 3.3.1 has no CPU kernel)
    "pd_op.all_to_all": ("x", "out", "all_to_all"),
}
# point-to-point (PIR): a pipeline's stages joined by send/recv over a ring per
# direction; ``peer`` is the other rank's index in the ring's group (in the
# group's recorded order).  Not collectives: one rank sends, one receives.
POINT_TO_POINT = {
    "pd_op.send_v2": ("x", None, "send"),
    "pd_op.recv_v2": (None, "out", "recv"),
}
REDUCE_TYPES = {0: "sum", 1: "max", 2: "min", 3: "prod", 4: "avg"}
REDUCTIONS = ("sum", "max", "min", "prod", "avg")


def is_collective(op_type: str) -> bool:
    return op_type in COLLECTIVES


def communicates(op_type: str) -> bool:
    """A collective that exchanges data between ranks (not c_identity)."""
    return op_type in COLLECTIVES and COLLECTIVES[op_type][2] != "identity"


def exchanges(op_type: str) -> bool:
    """An op that moves data between ranks: a communicating collective or a
    point-to-point send/recv (where the simulator cuts a program)."""
    return communicates(op_type) or op_type in POINT_TO_POINT


def kind(op_type: str, attrs: dict) -> str:
    """What the collective computes: sum/max/min/prod/avg, reduce_scatter,
    all_gather, all_to_all, broadcast or identity."""
    if op_type in POINT_TO_POINT:
        return POINT_TO_POINT[op_type][2]
    k = COLLECTIVES[op_type][2]
    if k == "allreduce":
        return REDUCE_TYPES.get(int(attrs.get("reduce_type", 0)), "unknown")
    if k == "reduce":  # reduce_sum, reduce_max, ...: to the root only
        return "reduce_" + REDUCE_TYPES.get(int(attrs.get("reduce_type", 0)), "unknown")
    return k


def root_of(attrs: dict) -> int:
    """The root of a rooted collective (broadcast: ``root``; reduce:
    ``root_id``), an index in its ring's group."""
    return int(attrs.get("root", attrs.get("root_id", 0)))


def is_allreduce_sum(op) -> bool:
    """A snapshot op that sums its input over a ring, in any spelling."""
    return op.type in COLLECTIVES and kind(op.type, op.attrs) == "sum"


def input_var(op):
    """The var a snapshot collective op reads (None if its slot is empty)."""
    return (op.inputs.get(COLLECTIVES[op.type][0]) or [None])[0]


def output_var(op):
    return (op.outputs.get(COLLECTIVES[op.type][1]) or [None])[0]
