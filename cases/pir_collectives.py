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

``rs_sp_bias`` is the pass's second documented pattern (a row-parallel
linear with bias under sequence parallelism, forward and hand-written
backward: ``build_programs_sp``), and ``planned_row_sp_pir`` is
``examples/row_sp_pir.py`` planned by Paddle itself (``dist.to_static``, PIR,
cached): what 3.3.1's reshard emits for the same computation.

The all-reduce carries the four stream/event attrs a multi-stream schedule
sets (``execution_stream``, ``force_record_event``, ``event_to_record``,
``events_to_wait``); the DRR pattern binds them, so without them it cannot
match (case ``rs_no_stream_attrs``).  The weight is fed (no optimizer):
what the pass rewrites is the collective, and ``y`` on every rank is the
whole observable result.
"""
from __future__ import annotations

from .base import Case, Expect, FeedSpec
from .pir_matmul_grad import SPLIT, PirCase, PirRankProgram

PASS = "fuse_allreduce_split_to_reducescatter_pass"
S, H, N = 4, 6, 8
SP_S = 2  # the SP case's sequence: one row per rank (reduced shapes of the value
# proof then agree between the gathered grad and the all-reduced output)
RINGS = {0: [[0, 1]]}
STREAM_ATTRS = {"execution_stream": "default", "force_record_event": False,
                "event_to_record": "", "events_to_wait": []}


def build_programs(params, rank):
    """``(main, startup)`` PIR programs of ``rank``: see the module docstring."""
    import paddle

    old_ir = paddle.pir_utils.OldIrGuard()  # written as a legacy desc, then translated
    old_ir.__enter__()
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
    old_ir.__exit__(None, None, None)
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


def _grad_op(blk, type_, inputs, outputs, attrs):
    """A grad op appended to the desc directly (grad ops have no op proto for
    ``Block.append_op``; the PIR translator reads descs)."""
    d = blk.desc.append_op()
    d.set_type(type_)
    for slot, vs in inputs.items():
        d.set_input(slot, [v.name for v in vs])
    for slot, vs in outputs.items():
        d.set_output(slot, [v.name for v in vs])
    for k, v in attrs.items():
        d._set_attr(k, v)


def build_programs_sp(params, rank):
    """``(main, startup)`` of the documented pattern 2 (row-parallel linear
    with bias under sequence parallelism, forward and backward), rank ``rank``::

        out1 = matmul(x [S=2, B, K/2], w [K/2, H])    partial sums [2, 2, 6]
        out2 = all_reduce_(out1); out3 = add(out2, bias [H])
        out6 = assign(builtin.slice(split_with_num(out3, 2, axis 0), rank))
        y    = scale(out6, 2.0)                                  watched
        backward of out6 (its grad ``dy`` [1, 2, 6] fed):
        dall = all_gather(assign(dy)); d2, db = add_grad(out2, bias, dall)
        db2  = add_(db_acc, db)     (a bias grad accumulated, ``db_acc`` fed)
        dx, dw = matmul_grad(x, w, d2)                           watched
        scale(dw, 1.0)                          (dW's reader, as an optimizer's)
    """
    import paddle

    old_ir = paddle.pir_utils.OldIrGuard()  # written as a legacy desc, then translated
    old_ir.__enter__()
    legacy = paddle.static.Program()
    blk = legacy.global_block()

    def var(name, shape, data=False):
        return blk.create_var(name=name, shape=shape, dtype="float32", is_data=data)

    S = SP_S
    x, w, b = var("x", [S, 2, 4], True), var("w", [4, H], True), var("bias", [H], True)
    dy, acc = var("dy", [S // 2, 2, H], True), var("db_acc", [H], True)
    out1, out3 = var("out1", [S, 2, H]), var("out3", [S, 2, H])
    blk.append_op(type="matmul_v2", inputs={"X": [x], "Y": [w]}, outputs={"Out": [out1]},
                  attrs={"trans_x": False, "trans_y": False})
    blk.append_op(type="all_reduce", inputs={"x": [out1]}, outputs={"out": [out1]},
                  attrs={"ring_id": 0, "reduce_type": 0})
    blk.append_op(type="elementwise_add", inputs={"X": [out1], "Y": [b]},
                  outputs={"Out": [out3]}, attrs={"axis": -1})
    chunks = [var(f"chunk{i}", [S // 2, 2, H]) for i in range(2)]
    blk.append_op(type="split", inputs={"X": [out3]}, outputs={"Out": chunks},
                  attrs={"num": 2, "axis": 0})
    out6, y = var("out6", [S // 2, 2, H]), var("y", [S // 2, 2, H])
    blk.append_op(type="assign", inputs={"X": [chunks[rank]]}, outputs={"Out": [out6]})
    blk.append_op(type="scale", inputs={"X": [out6]}, outputs={"Out": [y]},
                  attrs={"scale": 2.0})
    dya, dall = var("dy_assign", [S // 2, 2, H]), var("dall", [S, 2, H])
    blk.append_op(type="assign", inputs={"X": [dy]}, outputs={"Out": [dya]})
    blk.append_op(type="all_gather", inputs={"x": [dya]}, outputs={"out": [dall]},
                  attrs={"ring_id": 0, "nranks": 2})
    d2, db = var("d2", [S, 2, H]), var("db", [H])
    _grad_op(blk, "elementwise_add_grad", {"X": [out1], "Y": [b], "Out@GRAD": [dall]},
             {"X@GRAD": [d2], "Y@GRAD": [db]}, {"axis": -1})
    blk.append_op(type="elementwise_add", inputs={"X": [acc], "Y": [db]},
                  outputs={"Out": [acc]}, attrs={"axis": -1})
    dx, dw = var("dx", [S, 2, 4]), var("dw", [4, H])
    _grad_op(blk, "matmul_v2_grad", {"X": [x], "Y": [w], "Out@GRAD": [d2]},
             {"X@GRAD": [dx], "Y@GRAD": [dw]}, {"trans_x": False, "trans_y": False})
    dw_used = var("dw_used", [4, H])  # dW has a reader, as an optimizer would read it
    blk.append_op(type="scale", inputs={"X": [dw]}, outputs={"Out": [dw_used]},
                  attrs={"scale": 1.0})
    old_ir.__exit__(None, None, None)
    with paddle.pir_utils.IrGuard():
        main = paddle.pir.translate_to_pir(legacy.desc)
        startup = paddle.static.Program()
        for op in main.global_block().ops:
            if op.name() == "pd_op.all_reduce_":
                op.set_bool_attr("force_record_event", STREAM_ATTRS["force_record_event"])
                op.set_str_attr("event_to_record", STREAM_ATTRS["event_to_record"])
                op.set_str_array_attr("events_to_wait", STREAM_ATTRS["events_to_wait"])
    return main, startup


def build_sp(case: Case, rank: int) -> PirRankProgram:
    import paddle

    from verify.ir.pir_snapshot import value_names

    main, startup = build_programs_sp(case.params, rank)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        watch = []
        for op in main.global_block().ops:
            if op.name() in ("pd_op.scale", "pd_op.add_", "pd_op.matmul_grad"):
                watch += [names.name(v) for v in op.results() if v.initialized()]
    feeds = [FeedSpec("x", (SP_S, 2, 4), split="tp"), FeedSpec("w", (4, H), split="tp"),
             FeedSpec("bias", (H,)), FeedSpec("dy", (SP_S // 2, 2, H), split="tp"),
             FeedSpec("db_acc", (H,))]
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=[], feeds=feeds, loss=None,
                          fetches=[n for n in watch if n], names=names)


# what a reproducer (verify/repro/pir_ranks_script.py) embeds besides a builder's programs
REPRO_CONSTANTS = {"S": S, "H": H, "N": N, "SP_S": SP_S, "STREAM_ATTRS": STREAM_ATTRS}


def build(case: Case, rank: int) -> PirRankProgram:
    import paddle

    from verify.ir.pir_snapshot import value_names

    main, startup = build_programs(case.params, rank)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        y = [names.name(op.result(0)) for op in main.global_block().ops
             if op.name() == "pd_op.scale"]
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=[], feeds=[FeedSpec("g", (S, N), split="tp"),
                                                  FeedSpec("w", (H, N), split="tp")],
                          loss=None, fetches=y, names=names)


# -- a 2-rank program planned by Paddle itself (dist.to_static, PIR) -----------
MODEL = "examples/row_sp_pir.py"
PLANNED_RINGS = {12: [[0, 1]]}  # the TP ring 3.3.1's planner gives the 2-rank mesh


def planned_dir():
    """The program dir of ``examples/row_sp_pir.py`` planned for 2 ranks with
    ``python -m verify plan --ir pir`` (``verify.plan.planner.plan``: one fresh
    subprocess per rank), cached under ``$PADDLE_PASS_VERIFY_CACHE`` (default
    ``~/.cache/paddle-pass-verify``) ``/pir_collectives/<key>``, the key a hash
    of the model file, the PIR planner's source, Paddle's version and the
    ``--paddle-file`` overlay; a plan
    is written aside and renamed into place, so a reader never sees half."""
    import json
    import hashlib
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from verify.ir.legacy_ir import paddle_module
    from verify.plan.planner import plan

    repo = Path(__file__).resolve().parent.parent
    model = repo / MODEL
    h = hashlib.sha256(model.read_bytes())
    from verify.plan import source_digest_parts

    for part in source_digest_parts():
        h.update(part)
    h.update(paddle_module().__version__.encode())
    from verify.ir.paddle_overlay import fingerprint

    h.update(fingerprint().encode())  # a --paddle-file overlay plans apart
    root = Path(os.environ.get("PADDLE_PASS_VERIFY_CACHE",
                               Path.home() / ".cache" / "paddle-pass-verify"))
    from verify.cache_files import cached_dir

    key = h.hexdigest()  # the full sha256 (the seal's); the dir's name is a prefix
    folder = root / "pir_collectives" / key[:16]

    def make():
        tmp = Path(tempfile.mkdtemp(prefix=".plan-", dir=folder.parent))
        try:
            plan(str(model), 2, out=tmp / "dir", ir="pir")
            os.rename(tmp / "dir", folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return folder
    # sealed with the key and every file's sha256: a damaged plan is planned again
    return cached_dir(folder, key, make, lambda f: isinstance(
        json.loads((f / "plan.json").read_text()), dict))


def build_planned(case: Case, rank: int) -> PirRankProgram:
    """Rank ``rank``'s PIR programs from the cached plan (``program_dir.build_pir``);
    raises, naming the case, when the plan's rings are not the case's.  The case
    is paired with rs_fuse only (``only_pass``): it exists for the question
    whether the fusion fires on what 3.3.1's planner emits.  (The VPP split
    does fire on it, but its value proof is INCONCLUSIVE there: the planned
    startup fills each parameter with its GLOBAL shape, [8, 16] for the
    column-parallel weight whose shard is [8, 8].)"""
    import dataclasses
    import json

    from cases.program_dirs import build_pir

    folder = planned_dir()
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             ["rings"].items()}
    if rings != case.rings:
        raise ValueError(f"case {case.name}: the plan's rings {rings} are not the case's "
                         f"{case.rings} (Paddle planned differently)")
    return build_pir(dataclasses.replace(case, params={**case.params, "dir": str(folder)}),
                     rank)


build.programs = build_programs
build_sp.programs = build_programs_sp
REPRO_SOURCES = (_grad_op,)

GLOO = ("reduce_scatter does not run on gloo (CPU), and real ranks do not run PIR "
        "programs yet: the simulator alone decides")


def _case(name, summary, expect, builder=build, also=None, **params):
    return PirCase(name=name, family="pir_collectives", summary=summary, mesh=[0, 1],
                   builder=builder, expect={PASS: expect, **(also or {})}, rings=RINGS,
                   params=params, ir="pir", gloo_unfaithful=GLOO)


_UNCHECKED_EV = ("contract names rank, reduce type, axis, chunk vs ring position; value proof "
                 "refutes each rank's chunk (`max(...)` vs the sum; rank 0 now holds chunk 0 "
                 "where it kept chunk 1); simulated runs: each rank gets the other's value "
                 "(rs_other_chunk), the stale declared `[4, 3]` of the axis-1 consumer")

CASES = [
    _case("rs_own_chunk", "TP2: dX partial sums all_reduce_(SUM), split along dim 0, each "
          "rank keeps its own chunk",
          Expect(True, "EQUIVALENT", "the pattern: all_reduce_ + assign + split_with_num + "
                 "builtin.slice become one reduce_scatter over ring 0; rank r's chunk r is "
                 "exactly what reduce_scatter leaves it (proved and simulated)")),
    _case("rs_sp_bias", "TP2+SP row-parallel linear with bias: all_reduce_ -> add(bias) -> "
          "split along dim 0 -> own chunk, backward all_gather -> add_grad -> matmul_grad",
          Expect(True, "NOT_EQUIVALENT", "pattern 2 fuses to reduce_scatter -> add(bias) and "
                 "moves add_grad before the all_gather: the bias grad becomes the sum over "
                 "this rank's rows only (the other rank's share is lost), where the program "
                 "summed the gathered grad of all ranks; nothing in the pattern all-reduces "
                 "it afterwards. Forward chunk, dX and dW stay equal",
                 evidence="value proof: `db_acc + dy@tp0 rows` vs `db_acc + dy@tp0 + "
                 "dy@tp1 rows` on rank 0 (exact counterexample); simulated run: the bias "
                 "grad differs on both ranks; forward chunk, dX, dW equal"),
          builder=build_sp,
          also={SPLIT: Expect(True, "EQUIVALENT", "an untransposed matmul_grad with a 3-D x: "
                              "the VPP split folds and splits it faithfully")}),
    _case("rs_no_stream_attrs", "the same program without the all-reduce's stream/event "
          "attrs (as a program without a multi-stream schedule has it)",
          Expect(True, "NOT_APPLIED", "the DRR source pattern binds execution_stream, "
                 "force_record_event, event_to_record and events_to_wait of the all_reduce_; "
                 "an all_reduce_ without them never matches ('Not found attribute "
                 "[event_to_record]'), so the fusion silently does nothing",
                 evidence="the documented pattern is present, the program unchanged. On "
                 "what 3.3.1's planner emits (`planned_row_sp_pir`: `pd_op.all_reduce` + add "
                 "+ `pd_op.slice`) the pass cannot fire at all: LEFT_ALONE"),
          stream_attrs=False),
    _case("rs_max", "near-miss: the all-reduce is a MAX (reduce_type 1)",
          Expect(False, "NOT_EQUIVALENT", "the pattern binds reduce_type but never checks it, "
                 "and reduce_scatter always sums: the pass fires and each rank gets the sum "
                 "of the partial dX chunks where the program took their maximum",
                 evidence=_UNCHECKED_EV),
          reduce_type=1),
    _case("rs_axis1", "near-miss: split along dim 1 (the hidden dim), not dim 0",
          Expect(False, "NOT_EQUIVALENT", "the split axis (a pd_op.full operand) is not "
                 "checked, and reduce_scatter scatters dim 0: the pass fires and rank r gets "
                 "rows [2r, 2r+2) of all 6 columns instead of all 4 rows of columns "
                 "[3r, 3r+3); the consumer's declared [4, 3] goes stale",
                 evidence=_UNCHECKED_EV), axis=1),
    _case("rs_other_chunk", "near-miss: rank r keeps chunk 1-r (not its own)",
          Expect(False, "NOT_EQUIVALENT", "the slice index is not checked against the "
                 "rank: the pass fires and rank r keeps chunk r, where the program kept "
                 "chunk 1-r", evidence=_UNCHECKED_EV),
          chunk="other"),
    PirCase(name="planned_row_sp_pir", family="pir_collectives",
            summary="examples/row_sp_pir.py planned by dist.to_static (PIR) for TP2: column- "
            "then row-parallel linear, output resharded to the sequence dim",
            mesh=[0, 1], builder=build_planned, rings=PLANNED_RINGS, ir="pir",
            gloo_unfaithful=GLOO,
            expect={PASS: Expect(False, "EQUIVALENT", "what 3.3.1's reshard emits is not the "
                                 "pattern: the partial sum becomes pd_op.all_reduce (not the "
                                 "in-place all_reduce_ the DRR names), then add(bias) and a "
                                 "pd_op.slice along dim 1 (r->s), and the backward's s->r is "
                                 "all_gather + split_with_num + concat (a p->s reshard is a "
                                 "reduce_scatter already): no split_with_num + builtin.slice "
                                 "after an all-reduce, so the pass cannot fire; left alone, "
                                 "proved and simulated"),
                    "planner": Expect(True, "EQUIVALENT",
                                      "the planner itself (passes/planner.py): r_to_s "
                                      "(pd_op.slice along the sequence dim) and s_to_r "
                                      "(all_gather + split + concat) keep every rank's "
                                      "piece the serial value's slice; every stage holds "
                                      "def-use, the serial run and the ranks agree for 3 "
                                      "steps")},
            # the planner family reads its stage records from a plan of the same model
            # (cases/planner_models.py), the other passes the plan above
            params={"only_pass": PASS, "planner": "cases.planner_models:planned_dir",
                    "model": "row_sp_pir.py", "mesh": [0, 1]}),
]
