"""Hand-built 2-rank PIR programs with collectives: the all-reduce + split
that ``fuse_allreduce_split_to_reducescatter_pass`` exists to fuse, and
near-misses it must leave alone.

Each rank's main program is written as a legacy ProgramDesc (``all_reduce``
in place, ``assign``, ``split``) and translated with
``paddle.pir.translate_to_pir``: that is how a PIR program gets the
``builtin.slice`` the pass's pattern names (PIR's Python ``paddle.split``
emits ``builtin.split``).  Per rank r of a TP2 ring (ring 0, ranks 0 and 1)::

    g  = pd_op.data [S=4, N=8]   (out grad, different on every rank)
    w  = pd_op.data [H=6, N=8]   (this rank's weight shard)
    p  = pd_op.matmul(g, w, transpose_y=True)        [4, 6] partial dX
    a  = pd_op.all_reduce_(p, ring 0, reduce_type)   (SUM = 0; MAX = 1)
    t  = pd_op.assign(a)
    v  = pd_op.split_with_num(t, num=2, axis=pd_op.full(axis))
    c  = builtin.slice(v, index)                     this rank keeps chunk ``index``
    y  = pd_op.scale(c, 2.0)                          watched

The all-reduce carries the four stream/event attrs a multi-stream schedule
sets (``execution_stream``, ``force_record_event``, ``event_to_record``,
``events_to_wait``); the DRR pattern binds them, so without them it cannot
match (case ``rs_no_stream_attrs``).  The weight is fed (no optimizer):
what the pass rewrites is the collective, and ``y`` on every rank is the
whole observable result.
"""
from __future__ import annotations

from .base import Case, Expect, FeedSpec
from .pir_matmul_grad import PirCase, PirRankProgram

PASS = "fuse_allreduce_split_to_reducescatter_pass"
S, H, N = 4, 6, 8
RINGS = {0: [[0, 1]]}
STREAM_ATTRS = {"execution_stream": "default", "force_record_event": False,
                "event_to_record": "", "events_to_wait": []}


def build_programs(params, rank):
    """``(main, startup)`` PIR programs of ``rank``: see the module docstring."""
    import paddle

    from verify.legacy_ir import paddle_module

    paddle_module()
    legacy = paddle.static.Program()
    blk = legacy.global_block()

    def var(name, shape, data=False):
        return blk.create_var(name=name, shape=shape, dtype="float32", is_data=data)

    axis = params.get("axis", 0)
    index = {"own": rank, "other": 1 - rank}[params.get("chunk", "own")]
    g, w, p, t = var("g", [S, N], True), var("w", [H, N], True), var("p", [S, H]), \
        var("t", [S, H])
    blk.append_op(type="matmul_v2", inputs={"X": [g], "Y": [w]}, outputs={"Out": [p]},
                  attrs={"trans_x": False, "trans_y": True})
    blk.append_op(type="all_reduce", inputs={"x": [p]}, outputs={"out": [p]},
                  attrs={"ring_id": 0, "reduce_type": params.get("reduce_type", 0)})
    blk.append_op(type="assign", inputs={"X": [p]}, outputs={"Out": [t]})
    piece = [S // 2, H] if axis == 0 else [S, H // 2]
    chunks = [var(f"chunk{i}", piece) for i in range(2)]
    blk.append_op(type="split", inputs={"X": [t]}, outputs={"Out": chunks},
                  attrs={"num": 2, "axis": axis})
    y = var("y", piece)
    blk.append_op(type="scale", inputs={"X": [chunks[index]]}, outputs={"Out": [y]},
                  attrs={"scale": 2.0})
    with paddle.pir_utils.IrGuard():
        main = paddle.pir.translate_to_pir(legacy.desc)
        startup = paddle.static.Program()
        if params.get("stream_attrs", True):
            for op in main.global_block().ops:
                if op.name() == "pd_op.all_reduce_":
                    op.set_execution_stream(STREAM_ATTRS["execution_stream"])
                    op.set_bool_attr("force_record_event", STREAM_ATTRS["force_record_event"])
                    op.set_str_attr("event_to_record", STREAM_ATTRS["event_to_record"])
                    op.set_str_array_attr("events_to_wait", STREAM_ATTRS["events_to_wait"])
    return main, startup


def build(case: Case, rank: int) -> PirRankProgram:
    import paddle

    from verify.pir_snapshot import value_names

    main, startup = build_programs(case.params, rank)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        y = [names.name(op.result(0)) for op in main.global_block().ops
             if op.name() == "pd_op.scale"]
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=[], feeds=[FeedSpec("g", (S, N), split="tp"),
                                                  FeedSpec("w", (H, N), split="tp")],
                          loss=None, fetches=y, names=names)


GLOO = ("reduce_scatter does not run on gloo (CPU), and real ranks do not run PIR "
        "programs yet: the simulator alone decides")


def _case(name, summary, expect, **params):
    return PirCase(name=name, family="pir_collectives", summary=summary, mesh=[0, 1],
                   builder=build, expect={PASS: expect}, rings=RINGS, params=params,
                   ir="pir", gloo_unfaithful=GLOO)


CASES = [
    _case("rs_own_chunk", "TP2: dX partial sums all_reduce_(SUM), split along dim 0, each "
          "rank keeps its own chunk",
          Expect(True, "EQUIVALENT", "the pattern: all_reduce_ + assign + split_with_num + "
                 "builtin.slice become one reduce_scatter over ring 0; rank r's chunk r is "
                 "exactly what reduce_scatter leaves it (proved and simulated)")),
    _case("rs_no_stream_attrs", "the same program without the all-reduce's stream/event "
          "attrs (as a program without a multi-stream schedule has it)",
          Expect(True, "NOT_APPLIED", "the DRR source pattern binds execution_stream, "
                 "force_record_event, event_to_record and events_to_wait of the all_reduce_; "
                 "an all_reduce_ without them never matches ('Not found attribute "
                 "[event_to_record]'), so the fusion silently does nothing"),
          stream_attrs=False),
    _case("rs_max", "near-miss: the all-reduce is a MAX (reduce_type 1)",
          Expect(False, "NOT_EQUIVALENT", "the pattern binds reduce_type but never checks it, "
                 "and reduce_scatter always sums: the pass fires and each rank gets the sum "
                 "of the partial dX chunks where the program took their maximum"),
          reduce_type=1),
    _case("rs_axis1", "near-miss: split along dim 1 (the hidden dim), not dim 0",
          Expect(False, "NOT_EQUIVALENT", "the split axis (a pd_op.full operand) is not "
                 "checked, and reduce_scatter scatters dim 0: the pass fires and rank r gets "
                 "rows [2r, 2r+2) of all 6 columns instead of all 4 rows of columns "
                 "[3r, 3r+3); the consumer's declared [4, 3] goes stale"), axis=1),
    _case("rs_other_chunk", "near-miss: rank r keeps chunk 1-r (not its own)",
          Expect(False, "NOT_EQUIVALENT", "the slice index is not checked against the "
                 "rank: the pass fires and rank r keeps chunk r, where the program kept "
                 "chunk 1-r"), chunk="other"),
]
