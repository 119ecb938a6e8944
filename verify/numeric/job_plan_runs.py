"""A pipeline's ranks run as the scheduler planned them: each rank's job
list, its sub-programs in micro-batch scopes, all ranks in lock step.

Paddle's ``pipeline_scheduler_<mode>`` pass (FThenB, 1F1B, VPP, ...) splits a
rank's program into one sub-program per job type (``forward``,
``backward``, ``optimizer``; ``recv_forward`` / ``send_backward`` under 1F1B;
one per chunk under VPP) and a job list of ``(type, micro-batch)`` pairs,
which the Engine's executor runs in order.  As 3.3.1's ``StandaloneExecutor``
does, each micro-batch has its own scope, a child of the rank's scope: a
job runs in its micro-batch's scope, so the values one job hands to a later
one by name (``set_persistable_value`` / ``shadow_output`` results, read back
as keyword block arguments) stay apart per micro-batch, while parameters,
optimizer states and gradient-merge accumulators live in the rank's scope.
Sends leave their tensor in a mailbox and go on; a recv waits for its
peer's tensor (``simulated_ranks._lockstep``, one mailbox for the whole job
list: under 1F1B a job's peer is a job at another position of the other
rank's list).

What is read, per optimizer step, under the names of the rank's whole
(pre-split) program so ``planner_runs.compare_runs`` relates them as it
relates the merged schedule (``merged_relation.py``): the loss of micro-step
``i`` (``<loss>@micro<i>``, the value the forward job stores under the
loss's ``shadow_output`` name), every parameter after micro-step ``i``'s
backward job (``<param>@micro<i>``) and after the optimizer job, and each
gradient operand an optimizer op reads in the optimizer job.  Parameters
are found by their parameter names and optimizer ops by their ``param`` /
``grad`` operands: nothing here names a model's value.
"""
from __future__ import annotations

import contextlib

from .inputs import scope_values
from .run_spec import ScheduleError

# what run_job_plan_relation gives instead of the ranks' outputs when they
# could not run their job lists to the end (a ScheduleError)
SCHEDULE_FAILURE = "schedule_failure"


# the scheduler's cross-job stream events (``_add_dependency``: a recv's result
# waited for by its first reader in the next job).  They order streams, not
# values, and every job here runs on one stream in program order; the
# executor refuses a job whose event was recorded by another job's core
# (3.3.1's StandaloneExecutor shares them across a plan's cores), so a job
# run alone has them erased.
STREAM_EVENT_ATTRS = ("events_to_wait", "event_to_record", "force_record_event")


class JobMapError(ValueError):
    """What the relation compares cannot be found in the job programs."""


class JobPlanError(ScheduleError):
    """A job plan its ranks cannot run (the reason): a job reads a value no
    earlier job of its micro-batch stored."""


def _pir_value_by_name(program, names, name):
    for op in program.global_block().ops:
        for k in range(op.num_results()):
            if names.table.get((op.id(), k)) == name:
                return op.result(k)
    return None


def _stored_as(value) -> str | None:
    """The scope name a value of the whole program is stored under: a
    parameter's name, or the ``output_name`` of a ``builtin.shadow_output``
    reading it (the scheduler's split hands such values over by that name)."""
    d = value.get_defining_op()
    if d is not None and d.name() == "builtin.parameter":
        return d.attrs()["parameter_name"]
    for u in value.all_used_ops():
        if u.name() == "builtin.shadow_output":
            return u.attrs()["output_name"]
    return None


def _optimizer_grads(program, names) -> dict:
    """``{parameter name: grad operand's value name}`` of the optimizer ops
    of ``program`` (ops with ``param`` and ``grad`` operands, the param a
    ``builtin.parameter``)."""
    from verify.ir.optimizer_operands import param_grad_operands

    out = {}
    for op, p, g in param_grad_operands(program):
        d = p.get_defining_op() if p.initialized() else None
        if d is not None and d.name() == "builtin.parameter":
            pname = d.attrs()["parameter_name"]
        else:  # in a job program a parameter is a keyword block argument
            pname = _keyword(program, p)
        if pname is None:
            continue
        gname = names.table.get((g.get_defining_op().id(), g.index())) \
            if g.get_defining_op() is not None else None
        if gname is None:  # a keyword block argument read as is (an accumulator)
            gname = _keyword(program, g)
        out[pname] = gname
    return out


def _keyword(program, value) -> str | None:
    return next((key for key, kv in program.global_block().kwargs().items()
                 if value.is_same(kv)), None)


def watch_map(whole, plan_programs: dict, loss: str | None, params: list) -> dict:
    """What to read where (see the module docstring), from the rank's whole
    program ``whole`` (exported) and its job programs: ``{"loss": (job type,
    value name in that job, whole name) | None, "params": {whole name:
    parameter name}, "grads": {job type: {value name in the job: whole
    name}}}``.  ``params``: the whole program's updated-parameter names the
    relation compares."""
    import paddle

    from verify.ir.pir_snapshot import import_programs

    out = {"loss": None, "params": {}, "grads": {}}
    with paddle.pir_utils.IrGuard():
        main, _, names = import_programs(whole)
        whole_grads = {p: g for p, g in _optimizer_grads(main, names).items()}
        for pname in params:
            v = _pir_value_by_name(main, names, pname)
            stored = _stored_as(v) if v is not None else None
            if stored is None:
                raise JobMapError(f"the parameter value {pname} is no parameter of the "
                                   "rank's program")
            out["params"][pname] = stored
        loss_store = None
        if loss:
            v = _pir_value_by_name(main, names, loss)
            loss_store = _stored_as(v) if v is not None else None
            if loss_store is None:
                raise JobMapError(f"the loss {loss} is stored under no name the jobs share "
                                   "(no shadow_output reads it)")
        for kind, exported in plan_programs.items():
            prog, _, jnames = import_programs(exported)
            if loss_store is not None and out["loss"] is None:
                for op in prog.global_block().ops:
                    if op.name() == "builtin.shadow_output" and \
                            op.attrs()["output_name"] == loss_store:
                        src = op.operand_source(0)
                        d = src.get_defining_op()
                        n = jnames.table.get((d.id(), src.index())) if d is not None else None
                        if n is not None:
                            out["loss"] = (kind, n, loss)
            grads = {}
            for pname, gname in _optimizer_grads(prog, jnames).items():
                whole_g = whole_grads.get(pname)
                if whole_g is not None and gname is not None:
                    grads[gname] = whole_g
            if grads:
                out["grads"][kind] = grads
    if loss and out["loss"] is None:
        raise JobMapError(f"no job stores the loss (shadow_output {loss_store})")
    return out


def _job_exported(exported, watch):
    """``(exported, stores)``: a job's program with every value it stores for
    a later job (a ``builtin.shadow_output``'s operand) named and watched,
    and its ``watch`` values copied right after the op making them
    (``merged_relation.copy_watched``: the optimizer job zeroes an
    accumulator after its optimizer read it); ``stores`` = ``{output name:
    value name}``."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, import_programs

    from .merged_relation import copy_watched

    with paddle.pir_utils.IrGuard():
        prog, startup, names = import_programs(exported)
        _stored_exchanges_copied(prog)
        for op in prog.global_block().ops:
            for attr in STREAM_EVENT_ATTRS:
                if op.has_attr(attr):
                    op.erase_attr(attr)
        stores = {}
        for op in prog.global_block().ops:
            if op.name() != "builtin.shadow_output":
                continue
            src = op.operand_source(0)
            key = names.key(src)
            if key is None:  # a keyword block argument stored again: already by name
                continue
            out_name = op.attrs()["output_name"]
            stores[out_name] = names.table.setdefault(key, f"__stored_{out_name}")
        copy_watched(prog, names, watch)
        return export_programs(prog, startup, names), stores


def _stored_exchanges_copied(program) -> None:
    """A ``builtin.shadow_output`` storing a recv's (or a collective's)
    result for a later job stores it through a ``pd_op.assign``: the
    simulator feeds that result as a ``pd_op.data`` value, and the executor
    names a stored value's variable by its ``output_name``, which a fed
    data's variable cannot take.  The copy is the value stored, unchanged."""
    import paddle

    from verify.ir.collectives import exchanges

    with paddle.static.program_guard(program):
        for op in list(program.global_block().ops):
            if op.name() != "builtin.shadow_output":
                continue
            src = op.operand_source(0)
            d = src.get_defining_op() if src.initialized() else None
            if d is None or not exchanges(d.name()):
                continue
            paddle.pir.set_insertion_point(op)
            op.operand(0).set_source(paddle._C_ops.assign(src))
        paddle.pir.reset_insertion_point_to_end()


def _check_coverage(jobs, k: int, where: str, rank) -> None:
    """A step's job list runs each micro-batch through each job type once:
    every type but the optimizer's on micro-batches 0..k-1 exactly once
    each, the optimizer's once.  JobPlanError naming the type otherwise (a
    micro-batch run twice merges its gradients twice; one never run is
    missing from the merged gradients)."""
    from collections import Counter

    by_type = {}
    for t, m in jobs:
        by_type.setdefault(t, []).append(m)
    for t, ms in by_type.items():
        if t.startswith("optimizer"):
            if len(ms) != 1:
                raise JobPlanError(f"{where}'s job list runs the {t} job {len(ms)} times a "
                                   "step", rank)
            continue
        count = Counter(ms)
        twice = sorted(m for m, n in count.items() if n > 1)
        never = sorted(set(range(k)) - set(count))
        if twice or never:
            raise JobPlanError(
                f"{where}'s job list runs its {t} job " + "; ".join(
                    ([f"on micro-batch {twice[0]} {count[twice[0]]} times"] if twice else [])
                    + ([f"never on micro-batch {never[0]}"] if never else []))
                + f" (of {k} micro-batches a step)", rank)


class _JobListRank:
    """One rank running its job list (the interface ``simulated_ranks.
    _lockstep`` drives: ``advance``, ``pos``, ``get``, ``set``)."""

    def __init__(self, rank, spec, k, where, seed):
        import paddle

        from verify.ir.pir_snapshot import import_programs

        from .pir_ranks import _PirRank, rank_scope

        self.rank, self.k, self.where = rank, k, where
        self.jobs = [(str(t), int(m)) for t, m in spec["jobs"]]
        self.map = spec["map"]
        with paddle.pir_utils.IrGuard():
            _, startup, _ = import_programs(spec["whole"])
        self.scope = rank_scope(startup, spec["params"], spec.get("states"), seed, rank)
        micro_ids = sorted({m for _, m in self.jobs})
        bad = [m for m in micro_ids if not 0 <= m < k]
        if bad:
            raise JobPlanError(f"{where}: rank {rank}'s job list names micro-batch {bad[0]}, "
                               f"outside the {k} micro-batches of a step", rank)
        _check_coverage(self.jobs, k, f"{where}: rank {rank}", rank)
        self.micro_scopes = {m: self.scope.new_scope() for m in micro_ids}
        loss = self.map["loss"]
        self.watch = {kind: ([loss[1]] if loss and loss[0] == kind else [])
                      + sorted(self.map["grads"].get(kind, {})) for kind in spec["programs"]}
        self.runs = {}  # (type, micro) -> _PirRank of that job in that micro scope
        self.stores = {}  # type -> {output name: value name} of what the job stores
        self.handed = {}  # type -> keyword arguments it reads from an earlier job
        for kind in dict.fromkeys(t for t, _ in self.jobs):
            exported, self.stores[kind] = _job_exported(spec["programs"][kind],
                                                        self.watch[kind])
            watch = list(dict.fromkeys(self.watch[kind] + list(self.stores[kind].values())))
            with paddle.pir_utils.IrGuard():
                prog, _, _ = import_programs(exported)
                self.handed[kind] = [key for key, kv in prog.global_block().kwargs().items()
                                     if not kv.persistable]
            for m in sorted({m for t, m in self.jobs if t == kind}):
                self.runs[(kind, m)] = _PirRank(
                    rank, exported, {}, spec["feeds"], watch,
                    f"{where} ({kind} job, micro-batch {m})", restore_state=True, seed=seed,
                    segments=True, scope=self.micro_scopes[m])
        self.cycle, self.at, self.result = 0, 0, None

    @property
    def current(self):
        return self.runs[self.jobs[self.at]]

    @property
    def pos(self):
        return self.current.pos

    @pos.setter
    def pos(self, value):
        self.current.pos = value

    def get(self, name):
        return self.current.get(name)

    def set(self, name, value):
        self.current.set(name, value)

    def start(self, cycle: int):
        self.cycle, self.at, self.got = cycle, 0, {}
        self.stored = {m: {} for m in self.micro_scopes}
        self._start_job()

    def _start_job(self):
        """Hand the job what earlier jobs of its micro-batch stored (by name, in
        the micro-batch's scope), then start it on its micro-batch's feeds."""
        import paddle

        kind, m = self.jobs[self.at]
        feeds = self.current.feeds[self.cycle * self.k + m]
        for name in self.handed[kind]:
            # a value an earlier job stored, or a feed (a data op's value is
            # handed over under its data name: the micro-batch's feed)
            value = self.stored[m].get(name)
            value = feeds.get(name) if value is None else value
            if value is None:
                raise JobPlanError(
                    f"{self.where}: rank {self.rank} job {self.at} ({kind}, micro-batch {m}) "
                    f"reads {name}, which no earlier job of micro-batch {m} stored "
                    f"(stored: {sorted(self.stored[m]) or 'nothing'})", self.rank)
            self.micro_scopes[m].var(name).get_tensor().set(value, paddle.CPUPlace())
        self.current.start(self.cycle * self.k + m)

    def advance(self):
        while True:
            try:
                coll = self.current.advance()
            except Exception as exc:  # name the job and its piece
                kind, m = self.jobs[self.at]
                raise RuntimeError(f"job {self.at} ({kind}, micro-batch {m}), piece "
                                   f"{self.current.pos}: {type(exc).__name__}: "
                                   f"{str(exc).strip()[:2000]}") from exc
            if coll is not None:
                return coll
            self._finished(*self.jobs[self.at])
            self.at += 1
            if self.at == len(self.jobs):
                self.result = self.got
                return None
            self._start_job()

    def _finished(self, kind, m):
        res = self.current.result
        for out_name, vname in self.stores[kind].items():
            self.stored[m][out_name] = res[vname]
        loss = self.map["loss"]
        if loss and loss[0] == kind:
            self.got[f"{loss[2]}@micro{m}"] = res[loss[1]]
        for jname, wname in self.map["grads"].get(kind, {}).items():
            self.got[wname] = res[jname]
        params = scope_values(self.scope, list(self.map["params"].values()))
        if kind.startswith("backward"):  # the deferred update: unchanged after micro-step m
            for wname, stored in self.map["params"].items():
                if stored in params:
                    self.got[f"{wname}@micro{m}"] = params[stored]
        if self.at == len(self.jobs) - 1:  # after the last job (the optimizer's)
            for wname, stored in self.map["params"].items():
                if stored in params:
                    self.got[wname] = params[stored]


@contextlib.contextmanager
def values_kept():
    """Paddle's interpreter with its garbage collection off
    (``FLAGS_eager_delete_tensor_gb`` -1).  A job here runs as pieces cut at
    its collectives, each a program of its own, and the interpreter frees a
    value handed to the job (a keyword argument in the micro-batch scope)
    after its last read *in the piece*: a later piece reading it again read a
    tensor that holds no memory ("Call Tensor::mutable_data firstly").  In
    Paddle the job is one program, the value freed after its last read in the
    job (and kept for a later job by the scheduler's ``skip_gc_vars``); here
    each job's handed values are set again from what the earlier jobs stored
    when it starts, so keeping every value is the job's own reads, no more."""
    import paddle

    flag = "FLAGS_eager_delete_tensor_gb"
    saved = paddle.get_flags([flag])[flag]
    paddle.set_flags({flag: -1.0})
    try:
        yield
    finally:
        paddle.set_flags({flag: saved})


def run_job_plans(ranks: dict, rings: dict, k: int, cycles: int, where: str,
                  seed: int = 0) -> dict:
    """``{rank: [{name: ndarray}] per optimizer step}`` (module docstring);
    ``ranks[r]`` = ``{"jobs", "programs": {type: exported}, "whole": exported,
    "map": watch_map(...), "params", "feeds": [{name: array}] per micro-step,
    "states"}``."""
    import paddle

    from .pir_ranks import program_order, serial_interpreter
    from .simulated_ranks import _lockstep

    # program order: a job piece fed a collective's or a recv's result frees an
    # in-place update from the reads before it (``pir_ranks.program_order``)
    with paddle.pir_utils.IrGuard(), serial_interpreter(), program_order(), values_kept():
        states = {int(r): _JobListRank(int(r), d, k, where, seed)
                  for r, d in sorted(ranks.items())}
        out = {r: [] for r in states}
        mailbox = {}
        for c in range(cycles):
            for st in states.values():
                st.start(c)
            _lockstep(states, rings, f"{where} optimizer step {c} (job lists)", mailbox)
            for r, st in states.items():
                out[r].append(st.result)
        unread = {key: len(v) for key, v in mailbox.items() if v}
        if unread:
            (ring, src, dst), n = next(iter(sorted(unread.items())))
            raise ScheduleError(f"{where}: rank {src} sent {n} tensor(s) on ring {ring} that "
                               f"rank {dst}'s job list never received", src)
    return out


def run_job_plan_relation(serial, ranks, rings, state_placements, k, avg, cycles, where,
                          grads, loss=None, state_shapes=None, seed: int = 0, params=()):
    """Both sides in one worker call: the serial program's micro-steps
    (``merged_relation._run_serial``: the gradients merged) and every rank's
    job list; ``(serial outputs, {rank: outputs})`` for
    ``planner_runs.compare_runs`` (``micro_steps=k``).  ``ranks[r]`` as
    :func:`run_job_plans` takes it, less ``map``, plus ``loss`` and
    ``params`` (the whole program's names the relation compares)."""
    from .merged_relation import run_serial_measured
    from .pir_ranks import program_order, serial_interpreter
    from .planner_runs import serial_then_ranks

    import paddle

    specs = {}
    for r, d in ranks.items():
        m = watch_map(d["whole"], d["programs"], d.get("loss"), list(d.get("param_names", ())))
        specs[r] = {**d, "map": m}

    def run_serial(sstates):
        with paddle.pir_utils.IrGuard(), serial_interpreter(), program_order():
            return run_serial_measured(serial, {**sstates, **serial["params"]}, k, avg,
                                       cycles, grads, loss, seed, list(params))

    def run_ranks():
        try:
            return run_job_plans(specs, rings, k, cycles, where, seed)
        except ScheduleError as exc:  # data, not an exception: it crosses the worker boundary
            return {SCHEDULE_FAILURE: {"rank": exc.rank, "error": str(exc)}}

    return serial_then_ranks({r: {"exported": d["whole"], "params": d["params"],
                                  "states": d.get("states")} for r, d in ranks.items()},
                             state_placements, state_shapes, seed, run_serial, run_ranks)
