"""Capture Paddle's PIR planner stage by stage, from inside the planning process.

``Engine._parallel_pir`` (3.3.1) calls its stage functions by the names it
imported into ``paddle.distributed.auto_parallel.static.engine``;
:func:`install` rebinds those names (and ``apply_dist2dense_pass`` on
``paddle.base.libpaddle.pir``, which the engine looks up at call time) to
wrappers that record the program after each stage.  Nothing installed is
edited: the wrappers call the installed functions, in the planning process
only, and a user's changed planner module (the overlay, ``verify/premerge/overlay.py``)
is what they call when one is given.

Stages recorded, in order (the main program; from the gradient merge on,
with the startup program it extended, which writes its accumulators; the
startup program's own reshard in ``_initialize`` is not run when planning
without running)::

    serial        the dist program before partition (after mix2dist, the
                  backward, the optimizer, mix2dist again) and before the
                  recompute pass when the strategy runs it: global shapes and
                  placements; its meaning on global tensors is the
                  single-device model (dist_op.reshard is the identity there)
    recompute     after ``auto_parallel_recompute_pir``, only where the
                  strategy enables recompute: the dist program with the
                  marked forward segments cloned into the backward (global
                  shapes); the serial program, the relation's reference, is
                  the one before it, so the ranks' programs are related to
                  the model without recompute and a wrong clone is this
                  stage's.  Each clone's serial position is the forward op it
                  clones (``Capture.recomputed``: by segment, type and order),
                  so its value is compared with that op's
    partition     after apply_partition_pass (reshard ops inserted)
    reshard       after ReshardPasses.apply_reshard_pass (collectives; checked
                  on a dense clone: the reshard functions' ops compute local
                  pieces under global dist types; the dist attrs and global
                  shapes of the reshards still there are recorded before the
                  clone strips them, :func:`dist_records`, for their shape rule)
    remove        after RemovePasses.apply_all (other ranks' ops gone; a dense
                  clone, as reshard)
    gradient_merge  after auto_parallel_gradient_merge_pass, only where the
                  strategy enables gradient merge (or a pipeline, which turns
                  it on): the accumulators, their zeroing and the merged
                  optimizer step (a dense clone, as reshard)
    dist2dense    after apply_dist2dense_pass on the clone (local shapes)
    remove_comm   after remove_unuseful_comm_op_pass: the rank's program
    pipeline_scheduler  after the engine's ``pipeline_scheduler_<mode>`` pass,
                  only for a pipeline: the rank's program (the pass completes
                  op roles and sets stream attrs on it in place) with the job
                  plan it made -- the job list (type, micro-batch) and one
                  sub-program per job type (``Capture.job_plan``), what the
                  Engine's executor runs

A stage that raises is recorded with its traceback and re-raised (the
planner stops there, as it would for a user).

Also built here, because the live dist program is at hand:

* the *serial program made executable* (:func:`globalize`): every dist
  value's placements set to Replicate (local shape = global shape), every
  ``dist_op.reshard`` replaced by its input (the identity on global
  tensors), then Paddle's own dist2dense: a dense program on global
  tensors, run on one process as the reference;
* the placements of the final program's values (parameters, feeds, the
  optimizer's gradient operands), read from the dist program the
  dist2dense stage receives (the same ops, by op id).
"""
from __future__ import annotations

import traceback

STAGES = ("serial", "recompute", "partition", "reshard", "remove", "gradient_merge",
          "dist2dense", "remove_comm", "pipeline_scheduler")
LOCAL_STAGES = ("reshard", "remove", "gradient_merge")  # snapshotted through dist2dense of a clone
# stages of the dist program (their op ids map the final ops back to a stage)
DIST_STAGES = ("recompute", "partition", "reshard", "remove", "gradient_merge")
# run only where the strategy asks for them (``Capture.optional``)
OPTIONAL_STAGES = ("recompute", "gradient_merge", "pipeline_scheduler")
GRADIENT_MERGE_PASS = "auto_parallel_gradient_merge_pass"
# the engine's passes on the global program after its backward and before
# partition: the serial program is taken before the first of them.  (The
# parallel cross entropy and c_embedding passes run before the backward: a
# serial program before them has no backward to relate, so they are not here.)
PRE_PARTITION_PASSES = {"auto_parallel_recompute_pir": "recompute"}
SCHEDULER_PREFIX = "pipeline_scheduler_"  # + FThenB, 1F1B, VPP, ...
# the op types whose shape rule reads their dist attr (verify/ir/read_sets.py
# DECLARED: "dist_attr" in their reads; tests/test_reshard_dist_attrs.py keeps
# the two equal): a local stage's snapshot keeps theirs (:func:`dist_records`)
DIST_ATTR_OPS = ("dist_op.reshard",)


def placement_of(value) -> dict | None:
    """A dist value's placement record: ``{"process_ids", "mesh_shape",
    "dims_mapping", "partial": {mesh axis: reduce type name}}``; None for a
    dense (or uninitialized) value."""
    if not value.initialized() or not value.is_dist_dense_tensor_type():
        return None
    da = value.dist_attr()
    mesh = da.process_mesh
    partial = {}
    for axis, rtype in dict(da.partial_status).items():
        kind = str(rtype).split(".")[-1].upper()  # ReduceType.kRedSum -> KREDSUM
        partial[str(int(axis))] = kind[4:] if kind.startswith("KRED") else kind
    return {"process_ids": [int(i) for i in mesh.process_ids],
            "mesh_shape": [int(d) for d in mesh.shape],
            "dims_mapping": [int(d) for d in da.dims_mapping], "partial": partial}


def dist_records(prog) -> dict:
    """``{op position: (op type, record)}`` for each op of ``prog`` (a dist
    program) whose shape rule reads its dist attr (:data:`DIST_ATTR_OPS`):
    the op's dist attr as the snapshot renders it (``dist_attr_record``: mesh,
    each operand's and result's placement text, with process ids, dims
    mapping and partial dims) and ``shapes``: each operand's and result's
    global shape.  Taken before a local stage's dense clone is made, which
    strips every dist attr."""
    from verify.ir.pir_snapshot import dist_attr_record

    def shape(v):
        return [int(d) for d in v.shape] if v.initialized() else None

    out = {}
    for i, op in enumerate(prog.global_block().ops):
        if op.name() not in DIST_ATTR_OPS:
            continue
        rec = dist_attr_record(op)
        if not isinstance(rec, dict):
            continue
        rec["shapes"] = {"operands": [shape(v) for v in op.operands_source()],
                         "results": [shape(v) for v in op.results()]}
        out[i] = (op.name(), rec)
    return out


def kept_for(dense, kept: dict, n_ops: int) -> dict:
    """``{op position: record}`` of ``kept`` (:func:`dist_records` of the
    ``n_ops`` ops before dist2dense) where the dense clone ``dense`` has, at
    that position, an op of the same type without a dist attr of its own.
    dist2dense keeps the ops in place; should it add or drop one, nothing is
    kept (the rule then says it cannot check, never a wrong op's attrs)."""
    from verify.ir.pir_snapshot import dist_attr_record

    ops = list(dense.global_block().ops)
    if len(ops) != n_ops:
        return {}
    return {i: rec for i, (kind, rec) in kept.items()
            if ops[i].name() == kind and dist_attr_record(ops[i]) is None}


def _clear_chunk_ids(prog) -> None:
    for op in prog.global_block().ops:
        if op.name().startswith("builtin.") and op.has_attr("chunk_id"):
            op.erase_attr("chunk_id")  # 3.3.1's serializer refuses it there


def globalize(dist_program):
    """A dense program on global tensors from a (pre-partition) dist program:
    see the module docstring.  ``dist_program`` is not changed."""
    from paddle.base import libpaddle

    prog = dist_program.clone()
    positions = list(prog.global_block().ops)
    for op in prog.global_block().ops:
        for v in op.results():
            if v.initialized() and v.is_dist_dense_tensor_type():
                da = v.dist_attr()
                v.update_dist_attr(libpaddle.pir.create_tensor_dist_attribute(
                    da.process_mesh, [-1] * len(v.shape), {}))
    for op in list(prog.global_block().ops):
        if op.name() == "dist_op.reshard":
            op.result(0).replace_all_uses_with(op.operand_source(0))
            op.erase()
    _ORIGINAL["dist2dense"](prog)
    _clear_chunk_ids(prog)
    prog.serial_positions = positions  # op i of dist_program (erased reshards stale)
    return prog


_ORIGINAL: dict = {}


class Capture:
    """The records of one planning run (one rank)."""

    def __init__(self):
        self.stages = []  # [{"stage", "program" (live clone) | None, "error"}]
        self.serial = None  # the live dist program before partition (a clone)
        self.serial_startup = None
        self.final_placements = {}  # op id in the dense program -> [placement per result]
        # keyword block argument (a gradient merge's accumulator) -> its placement
        self.final_kwarg_placements = {}
        self.serial_pos = {}
        self.recomputed = {}  # op id of a recompute clone -> serial position of its original

        self.serial_ids = []  # op ids of the dist program before partition, by position
        self.ids_after = {}  # stage -> op ids of the dist program after it
        self.dense_of_dist = {}  # op id in the dense clone -> op id in the dist program
        self.optional = set()  # the optional stages this plan's strategy runs
        self.startup = None  # the startup program a stage extended (record)
        # the pipeline scheduler's plan: {"pass", "jobs": [(type, micro)], "programs":
        # {type: live sub-program}} (None without a pipeline)
        self.job_plan = None
        self.trace = None  # a file naming the stage being run (a crash that kills
        # the process, SIGABRT in a pass, leaves it behind: verify/plan/crash_records.py)

    def enter(self, stage) -> None:
        """Name ``stage`` as running in the trace file, before it runs."""
        if self.trace is not None:
            import json
            from pathlib import Path

            Path(self.trace).parent.mkdir(parents=True, exist_ok=True)
            Path(self.trace).write_text(json.dumps({
                "stage": stage, "done": [s["stage"] for s in self.stages],
                "expected": self.expected()}))

    def record(self, stage, prog, error=None, startup=None):
        if startup is not None and error is None:
            # the startup program a stage extended (the gradient merge's zeroed
            # accumulators): it goes with this stage's snapshot and every later one,
            # so their reads of those persistables have their writer
            self.startup = startup.clone()
        entry = {"stage": stage, "program": None if prog is None else prog.clone(),
                 "error": error, "shapes": "global", "startup": getattr(self, "startup", None)}
        if prog is not None and error is None and stage in LOCAL_STAGES:
            # after reshard the reshard functions' ops compute local pieces under
            # global dist types: the stage is checked on its dense clone (local shapes)
            try:
                local = prog.clone()
                kept, n_ops = dist_records(local), len(local.global_block().ops)
                _ORIGINAL["dist2dense"](local)
                entry["program"], entry["shapes"] = local, "local"
                entry["dist_attrs"] = kept_for(local, kept, n_ops)
            except Exception as exc:
                entry["local_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        self.stages.append(entry)
        if prog is not None and stage in DIST_STAGES:
            self.ids_after[stage] = {op.id() for op in prog.global_block().ops}
            self.last_dist_ids = [op.id() for op in prog.global_block().ops]

    def origin(self, dense_op_id):
        """``(stage, serial position)`` of a final op: the stage that made it
        (``"serial"`` with its position in the serial program when it was
        there before partition), or ``(None, None)`` when unknown."""
        did = self.dense_of_dist.get(dense_op_id)
        if did is None:
            return None, None
        if did in self.serial_pos:
            return "serial", self.serial_pos[did]
        if did in self.recomputed:  # a clone: its values are its original's
            return "recompute", self.recomputed[did]
        for stage in DIST_STAGES:
            if did in self.ids_after.get(stage, ()):
                return stage, None
        return None, None

    def expected(self) -> list:
        """The stages this plan runs, in order (the optional ones its
        strategy enables)."""
        return [s for s in STAGES if s not in OPTIONAL_STAGES or s in self.optional]

    def not_run_after(self, stage):
        names = self.expected()
        return names[names.index(stage) + 1:]


def install(capture: Capture) -> None:
    """Rebind the engine's stage functions to recording wrappers."""
    from paddle.base import libpaddle
    from paddle.distributed.auto_parallel.static import engine as E

    _ORIGINAL.setdefault("partition", E.apply_partition_pass)
    _ORIGINAL.setdefault("reshard", E.ReshardPasses.apply_reshard_pass)
    _ORIGINAL.setdefault("remove", E.RemovePasses.apply_all)
    _ORIGINAL.setdefault("dist2dense", libpaddle.pir.apply_dist2dense_pass)
    _ORIGINAL.setdefault("remove_comm", E.remove_unuseful_comm_op_pass)
    _ORIGINAL.setdefault("new_pass", E.new_pass)

    def staged(stage, fn, main_of=lambda a: a[0], before=None, startup_of=None):
        def wrapper(*args, **kwargs):
            prog = main_of(args)
            if before is not None:
                before(prog)
            capture.enter(stage)
            try:
                out = fn(*args, **kwargs)
            except Exception:
                capture.record(stage, prog, traceback.format_exc())
                raise
            capture.record(stage, prog, startup=startup_of(args) if startup_of else None)
            return out
        return wrapper

    def take_serial(prog):
        if capture.serial is not None:  # taken before a pre-partition pass
            return
        capture.serial = prog.clone()
        engine = getattr(capture, "engine", None)
        if engine is not None:  # the optimizer's accumulators are initialised there by now
            capture.serial_startup = engine._startup_progs["train"].clone()
        capture.serial_pos = {op.id(): i for i, op in enumerate(prog.global_block().ops)}
        capture.record("serial", prog)

    def before_dense(prog):
        # the clone dist2dense is given: its ops are the final program's ops,
        # position for position the dist program's after the last stage
        ops = list(prog.global_block().ops)
        last = getattr(capture, "last_dist_ids", [])
        if len(last) == len(ops):
            capture.dense_of_dist = {op.id(): d for op, d in zip(ops, last)}
        for op in ops:
            capture.final_placements[op.id()] = [placement_of(v) for v in op.results()]
        # a keyword argument has no defining op: by its keyword, which dist2dense keeps
        try:
            kwargs = prog.global_block().kwargs().items()
        except Exception:
            kwargs = ()
        for key, v in kwargs:
            capture.final_kwarg_placements[key] = placement_of(v)

    first_comm = {"done": False}

    def remove_comm(prog):
        if first_comm["done"]:  # later calls (other modes) are not the train program
            return _ORIGINAL["remove_comm"](prog)
        first_comm["done"] = True
        return staged("remove_comm", _ORIGINAL["remove_comm"])(prog)

    E.apply_partition_pass = staged("partition", _ORIGINAL["partition"],
                                    before=take_serial)
    E.ReshardPasses = type("ReshardPasses", (E.ReshardPasses,), {
        "apply_reshard_pass": staticmethod(staged("reshard", _ORIGINAL["reshard"]))})
    E.RemovePasses = type("RemovePasses", (E.RemovePasses,), {
        "apply_all": staticmethod(staged("remove", _ORIGINAL["remove"]))})
    libpaddle.pir.apply_dist2dense_pass = staged("dist2dense", _ORIGINAL["dist2dense"],
                                                 before=before_dense)
    E.remove_unuseful_comm_op_pass = remove_comm

    def new_pass(name, *args, **kwargs):
        # the engine makes its gradient-merge pass with new_pass and applies
        # it to ([dist main], [startup]) between remove and dist2dense
        made = _ORIGINAL["new_pass"](name, *args, **kwargs)
        if name in PRE_PARTITION_PASSES:  # applied to ([dist main], [startup])
            stage = PRE_PARTITION_PASSES[name]
            capture.optional.add(stage)
            apply = staged(stage, made.apply, main_of=lambda a: a[0][0], before=take_serial)

            def apply_mapping_clones(mains, startups, context=None):
                out = apply(mains, startups, context)
                capture.recomputed.update(recompute_clones(mains[0], capture.serial_pos))
                return out

            made.apply = apply_mapping_clones
        elif name == GRADIENT_MERGE_PASS:
            capture.optional.add("gradient_merge")
            made.apply = staged("gradient_merge", made.apply, main_of=lambda a: a[0][0],
                                startup_of=lambda a: a[1][0])
        elif name.startswith(SCHEDULER_PREFIX):
            # pipeline_pass applies it to ([dense], [dense], context) after remove_comm
            capture.optional.add("pipeline_scheduler")
            apply = staged("pipeline_scheduler", made.apply, main_of=lambda a: a[0][0])

            def apply_keeping_plan(mains, startups, context=None):
                out = apply(mains, startups, context)
                plan = context.get_attr("plan")
                capture.job_plan = {
                    "pass": name, "jobs": [(j.type(), int(j.micro_batch_id()))
                                           for j in plan.job_list()],
                    "programs": {t: plan.ir_program(t) for t in plan.job_types()}}
                return out

            made.apply = apply_keeping_plan
        return made

    E.new_pass = new_pass
    # pipeline_pass (pir_pass.py) makes the scheduler pass with its own import
    from paddle.distributed.auto_parallel.static import pir_pass

    pir_pass.new_pass = new_pass


def recompute_clones(prog, serial_pos) -> dict:
    """``{clone op id: serial position of the op it clones}``: the recompute
    pass clones each marked forward op (``fwd_recompute_id``) of a segment,
    in order, into ops marked ``bwd_recompute_id`` with the same id; a clone
    is paired with the next forward op of its segment of the same type (by
    segment, type and order, never by its operands: a clone reading the
    wrong value is still compared with the op it stands for)."""
    ops = list(prog.global_block().ops)
    out = {}
    forward = {}  # segment id -> [forward op] in order
    for op in ops:
        if op.has_attr("fwd_recompute_id") and op.id() in serial_pos:
            forward.setdefault(op.attrs()["fwd_recompute_id"], []).append(op)
    at = {k: 0 for k in forward}
    for op in ops:
        if not op.has_attr("bwd_recompute_id"):
            continue
        seg = op.attrs()["bwd_recompute_id"]
        cands = forward.get(seg, [])
        i = at.get(seg, 0)
        while i < len(cands) and cands[i].name() != op.name():
            i += 1
        if i < len(cands):
            out[op.id()] = serial_pos[cands[i].id()]
            at[seg] = i + 1
    return out


def optimizer_ops(program) -> list:
    """``[(op, param value, grad value)]``: ops whose ``param`` operand is a
    parameter and that read a ``grad`` operand (sgd_, adam_, adamw_,
    momentum_, ... by their operand names, not their op names)."""
    from verify.ir.optimizer_operands import param_grad_operands

    out = []
    for op, p, g in param_grad_operands(program):
        root = parameter_root(p)
        if root is not None:
            out.append((op, root, g))
    return out


def parameter_root(value):
    """The ``builtin.parameter`` value ``value`` is, or is a slice of (a
    sharded optimizer updates the rank's slice of a replicated parameter)."""
    while value is not None and value.initialized():
        d = value.get_defining_op()
        if d is None:
            return None
        if d.name() == "builtin.parameter":
            return value
        if d.name() != "pd_op.slice":
            return None
        value = d.operand_source(0)
    return None


def param_name(value) -> str | None:
    d = value.get_defining_op() if value.initialized() else None
    if d is not None and d.name() == "builtin.parameter":
        return d.attrs()["parameter_name"]
    return None


def loss_value(program):
    """The loss: the value the program's backward is seeded from
    (``verify/ir/loss_seed.py``: the ``x`` of the ``full_like(x, 1.0)`` a grad op
    reads), whatever computes it (a scalar mean, paddleformers' masked
    ``sum / count``); None in a program without a backward.  Found by
    structure, never by an op or value name, in the serial program and in
    each rank's final program alike."""
    from verify.ir.loss_seed import seeded_loss_value

    return seeded_loss_value(program)


def _keyword_of(program, value):
    """The keyword of ``value`` when it is a keyword block argument of
    ``program`` (a gradient merge's accumulator an optimizer reads unscaled),
    else None."""
    try:
        for key, kv in program.global_block().kwargs().items():
            if value.is_same(kv):
                return key
    except Exception:
        pass
    return None


def relation_table(program, names, placements_by_op=None, kwarg_placements=None) -> dict:
    """What the planner relation compares in ``program`` (the serial global
    program, or a rank's final program with ``placements_by_op`` and, for its
    keyword block arguments, ``kwarg_placements`` by keyword): by
    parameter name, the updated parameter (the optimizer op's first result)
    and the gradient it reads, each with its value name and placement; the
    feeds by data name; the loss."""
    def placement(v):
        if placements_by_op is None or not v.initialized():
            return None
        d = v.get_defining_op()
        if d is None:  # a keyword block argument (a merged gradient's accumulator)
            key = _keyword_of(program, v)
            return (kwarg_placements or {}).get(key) if key is not None else None
        recs = placements_by_op.get(d.id())
        return recs[v.index()] if recs else None

    params = {}
    for op, p, g in optimizer_ops(program):
        pname = param_name(p)
        # the parameter itself, fetched after the step: its value then is the
        # update (in place, or gathered back from the updated slices)
        params[pname] = {"param": names.name(p), "grad": names.name(g) or _keyword_of(program, g),
                         "placement": placement(p), "grad_placement": placement(g),
                         "shape": [int(d) for d in p.shape],
                         "dtype": str(p.dtype).replace("paddle.", ""),
                         "optimizer": op.name()}
    feeds = {}
    for op in program.global_block().ops:
        if op.name() == "pd_op.data":
            v = op.result(0)
            feeds[op.attrs()["name"]] = {"shape": [int(d) for d in v.shape],
                                        "dtype": str(v.dtype).replace("paddle.", ""),
                                        "placement": placement(v),
                                        "persistable": bool(getattr(v, "persistable", False))}
    parameters = {}  # every parameter, updated or not: the inputs of the relation
    for op in program.global_block().ops:
        if op.name() == "builtin.parameter":
            v = op.result(0)
            parameters[op.attrs()["parameter_name"]] = {
                "shape": [int(d) for d in v.shape],
                "dtype": str(v.dtype).replace("paddle.", ""), "placement": placement(v)}
    loss = loss_value(program)
    return {"params": params, "feeds": feeds, "parameters": parameters,
            "loss": names.name(loss) if loss is not None else None,
            "loss_placement": placement(loss) if loss is not None else None}


def install_engine_hook(capture: Capture) -> None:
    """Keep the serial startup program: ``Engine._parallel_pir`` is wrapped to
    know the engine, whose ``_startup_progs["train"]`` is cloned when the
    serial main program is (before partition, after the optimizer)."""
    from paddle.distributed.auto_parallel.static.engine import Engine

    original = Engine._parallel_pir

    def parallel_pir(self, mode):
        if mode == "train":
            capture.engine = self
        return original(self, mode)

    Engine._parallel_pir = parallel_pir


def write(capture: Capture, out_dir, final_main=None, final_names=None) -> dict:
    """Write ``out_dir/planner.json``, ``out_dir/stages/<i>_<stage>.json``
    (the suite's snapshot of each stage's program) and ``out_dir/serial.json``
    (the serial program made executable, with its startup, in PIR's own
    serialization); returns the planner record."""
    import json
    from pathlib import Path

    import paddle

    from verify.ir.pir_snapshot import export_programs, from_pir_programs, value_names

    out = Path(out_dir)
    (out / "stages").mkdir(parents=True, exist_ok=True)
    from verify.plan.program_format import VERSION

    # the format version: the planner family reuses no records older than its
    # PLANNER_RECORDS_SINCE (verify/plan/program_format.py)
    record = {"stages": [], "not_run": [], "serial_error": None, "version": VERSION,
              # {"k_steps", "avg"} when the planner applied gradient merge: the rank's
              # program then runs as [forward, backward] * k_steps + [optimize]
              "gradient_merge": getattr(capture, "gradient_merge", None),
              # the trainable parameters an eager step gives a gradient
              # (verify/plan/eager_grads.py; verify/checks/lost_gradients.py)
              "eager_gradients": getattr(capture, "eager_gradients", None)}
    with paddle.pir_utils.IrGuard():
        for i, st in enumerate(capture.stages):
            entry = {"stage": st["stage"], "error": st["error"], "snapshot": None,
                     "shapes": st["shapes"], "local_error": st.get("local_error")}
            if st["program"] is not None:
                try:
                    snap = from_pir_programs(st["program"], st.get("startup"),
                                             meta={"stage": st["stage"],
                                                   "shapes": st["shapes"]})
                    for pos, rec in (st.get("dist_attrs") or {}).items():
                        # what the dense clone stripped (recorded before it)
                        snap.ops[pos].attrs.setdefault("dist_attr", rec)
                    fname = f"stages/{i:02d}_{st['stage']}.json"
                    (out / fname).write_text(snap.to_json())
                    entry["snapshot"] = fname
                    entry["ops"] = len(snap.ops)
                except Exception as exc:  # a program the snapshot cannot read
                    entry["snapshot_error"] = f"{type(exc).__name__}: {exc}"
            record["stages"].append(entry)
        done = [s["stage"] for s in capture.stages]
        failed = [s["stage"] for s in capture.stages if s["error"]]
        if failed:
            record["not_run"] = capture.not_run_after(failed[0])
        else:
            record["not_run"] = [s for s in capture.expected() if s not in done]
        if capture.job_plan is not None:
            record["pipeline"] = write_job_plan(capture.job_plan, out)
        if capture.serial is not None:
            try:
                g = globalize(capture.serial)
                gs = globalize(capture.serial_startup) if capture.serial_startup is not None \
                    else paddle.static.Program()
                names = value_names(g)
                exported = export_programs(g, gs, names)
                (out / "serial.json").write_text(json.dumps({
                    "main": exported["main"].decode(), "startup": exported["startup"].decode(),
                    "names": exported["names"], "counter": exported["counter"],
                    "attrs": exported["attrs"]}))
                record["serial_relation"] = relation_table(g, names)
                alive = {op.id() for op in g.global_block().ops}
                serial_names = {}  # serial position -> value names of its results
                for i, op in enumerate(g.serial_positions):
                    if op.id() in alive:
                        serial_names[i] = [names.table.get((op.id(), k))
                                           for k in range(op.num_results())]
            except Exception:
                record["serial_error"] = traceback.format_exc()
        if final_main is not None:
            record["relation"] = relation_table(final_main, final_names,
                                                capture.final_placements,
                                                capture.final_kwarg_placements)
            record["final_ops"] = final_ops(capture, final_main, final_names,
                                            locals().get("serial_names", {}))
    (out / "planner.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    return record


def write_job_plan(plan: dict, out) -> dict:
    """Write each job type's sub-program to ``out/jobs/<type>.json`` (PIR's
    serialization, the value-name table and the keyword block arguments,
    through which the sub-programs hand values to each other); the
    record: ``{"pass", "jobs": [[type, micro-batch]], "programs": {type: file}}``."""
    import json
    from pathlib import Path

    import paddle

    from verify.ir.pir_snapshot import export_programs, value_names

    (Path(out) / "jobs").mkdir(parents=True, exist_ok=True)
    files = {}
    for kind, prog in plan["programs"].items():
        _clear_chunk_ids(prog)
        names = value_names(prog)
        exported = export_programs(prog, paddle.static.Program(), names)
        fname = f"jobs/{kind}.json"
        (Path(out) / fname).write_text(json.dumps({
            "main": exported["main"].decode(), "startup": exported["startup"].decode(),
            "names": exported["names"], "counter": exported["counter"],
            "attrs": exported["attrs"], "kwargs": exported["kwargs"]}))
        files[kind] = fname
    return {"pass": plan["pass"], "jobs": [list(j) for j in plan["jobs"]], "programs": files}


def read_job(folder, fname):
    """The exported form of a job's sub-program (``write_job_plan``), as
    ``pir_snapshot.import_programs`` takes it."""
    import json
    from pathlib import Path

    data = json.loads((Path(folder) / fname).read_text())
    data["main"], data["startup"] = data["main"].encode(), data["startup"].encode()
    return data


def read_serial(folder):
    """``(main, startup, names)`` of ``folder/serial.json`` (PIR mode inside)."""
    import json
    from pathlib import Path

    import paddle

    from verify.ir.pir_snapshot import import_programs

    data = json.loads((Path(folder) / "serial.json").read_text())
    data["main"], data["startup"] = data["main"].encode(), data["startup"].encode()
    with paddle.pir_utils.IrGuard():
        return import_programs(data)


def final_ops(capture: Capture, main, names, serial_names: dict) -> list:
    """Per op of the rank's final program: its type, the stage that made it
    (``origin``), its results' value names and placements, its operands'
    names, and, for an op of the serial program, the serial value names of
    its results (the values the relation compares)."""
    out = []
    for op in main.global_block().ops:
        stage, pos = capture.origin(op.id())
        res = [names.table.get((op.id(), k)) for k in range(op.num_results())]
        plc = capture.final_placements.get(op.id()) or [None] * op.num_results()
        serial = serial_names.get(pos) if pos is not None else None
        if serial is not None and len(serial) != len(res):
            serial = None
        operands = []
        for v in op.operands_source():
            operands.append(names.name(v) if v.initialized() and
                            v.get_defining_op() is not None else None)
        out.append({"type": op.name(), "origin": stage, "serial_op": pos,
                    "results": res, "placements": plc, "serial": serial,
                    "operands": operands})
    return out
