"""Several ranks of PIR programs in lock step, in one process: the PIR side
of the simulator (``simulated_ranks.py`` does the same for legacy programs
and owns the lock-step loop and the collectives, which this module reuses).

A PIR program cannot be cut into pieces that share a scope the way a legacy
block can (its values are SSA results, not scope variables), so each rank's
main program becomes *stages*: stage j is a clone in which the results of
the first j communicating collectives are replaced by fed ``pd_op.data``
values (``__pir_coll_<i>``), the j-th collective and everything after it
erased, and the j-th collective's input fetched; the last stage keeps every
op, all collectives replaced, and fetches the watched values.  The
simulator performs each collective between stages (``simulated_ranks.
_perform``: sum/max/min/prod/avg all-reduce, reduce-scatter and all-gather
along dim 0, broadcast) over the case's rings, and a pipeline's sends and
recvs through its mailbox (``_point_to_point``).  A stage re-runs the ops
before its collective: fine for pure ops, wrong for state, so a program with
an in-place write to a persistable value (an optimizer update) before its
last collective is refused (``BackendError``), never run -- unless the caller
asks for ``restore_state``: then every stage starts from the step's saved
persistable state (parameters, optimizer states), so the re-run prefix
computes the same values and only the last stage's updates remain.

Limits, stated: startup programs must hold no collective; nested blocks are
not cut (a collective inside one is not found).
"""
from __future__ import annotations

import contextlib

import numpy as np

from verify.ir.collectives import POINT_TO_POINT, exchanges
from verify.ir.collectives import kind as collective_kind

from .run_spec import BackendError


class _PirColl:
    """What ``simulated_ranks._lockstep``/``_perform`` read of a collective."""

    def __init__(self, op, index, n):
        attrs = dict(op.attrs())
        self.type = op.name()
        self.index = index
        # a send has no result, a recv no operand (POINT_TO_POINT)
        self.x = f"__pir_in_{n}" if op.num_operands() else None
        self.out = f"__pir_coll_{n}" if op.num_results() else None
        self.ring = int(attrs.get("ring_id", 0))
        self.kind = collective_kind(op.name(), attrs)
        self.root = int(attrs.get("root", 0))
        self.peer = int(attrs.get("peer", 0))  # send/recv: an index in the ring's group
        # what a recv declares it receives (checked against what was sent)
        self.shape = [int(d) for d in op.result(0).shape] if self.kind == "recv" else None
        self.dtype = str(op.result(0).dtype).replace("paddle.", "") \
            if self.kind == "recv" else None


def _stage(main, cut_ops: list, j: int, watch_pos: list):
    """Stage ``j`` of ``main`` (see the module docstring): ``(program,
    fetch values)``; ``cut_ops`` are the collectives' op indices and
    ``watch_pos`` ``[(op index, result index)]`` of the watched values."""
    import paddle

    prog = main.clone()
    ops = list(prog.global_block().ops)
    fed = {}  # op index of a replaced collective -> the data value standing for it
    with paddle.static.program_guard(prog):
        paddle.pir.reset_insertion_point_to_start()
        for i in range(min(j, len(cut_ops))):
            op = ops[cut_ops[i]]
            if not op.num_results():  # a send
                continue
            res = op.result(0)
            new = paddle.static.data(f"__pir_coll_{i}", list(res.shape),
                                     str(res.dtype).replace("paddle.", ""))
            res.replace_all_uses_with(new)
            fed[cut_ops[i]] = new
        paddle.pir.reset_insertion_point_to_end()
    if j < len(cut_ops):
        fetch = [ops[cut_ops[j]].operand_source(0)] if ops[cut_ops[j]].num_operands() else []
    else:
        fetch = [fed[i] if i in fed else ops[i].result(k) for i, k in watch_pos]
    if j < len(cut_ops):
        for op in reversed(ops[cut_ops[j]:]):
            op.erase()
    for i in range(min(j, len(cut_ops))):
        ops[cut_ops[i]].erase()
    feeds = [op.attrs()["name"] for op in prog.global_block().ops if op.name() == "pd_op.data"]
    return prog, fetch, feeds


def _refuse_state_before_cut(main, cut_ops, where, rank):
    """An in-place op on a persistable value before the last collective would
    run once per stage: refuse the program."""
    if not cut_ops:
        return
    for idx, op in enumerate(main.global_block().ops[:cut_ops[-1]]):
        name = op.name()
        if not name.endswith("_") or exchanges(name):
            continue
        for v in op.operands_source():
            d = v.get_defining_op() if v.initialized() else None
            # a parameter, a persistable data, or a keyword block argument (no op)
            if v.initialized() and (d is None or d.name() in ("builtin.parameter",
                                                              "pd_op.data")) and \
                    getattr(v, "persistable", False):
                raise BackendError(f"{where}: rank {rank} op {idx} ({name}) writes the "
                                   "persistable value in place before the last collective; "
                                   "the PIR simulator re-runs that prefix per stage and "
                                   "cannot run it", rank)


def _argument_reads_copied(main) -> None:
    """A collective reading a keyword block argument directly (a gradient
    merge's accumulator all-reduced in the optimize job) reads it through a
    ``pd_op.assign`` inserted just before it: the simulator fetches each
    collective's input, and a block argument cannot be fetched (3.3.1's
    executor crashes on it).  The copy is the value read, unchanged."""
    import paddle

    with paddle.static.program_guard(main):
        for op in list(main.global_block().ops):
            if not exchanges(op.name()) or op.num_operands() < 1:
                continue
            src = op.operand_source(0)
            if src.initialized() and src.get_defining_op() is None:
                paddle.pir.set_insertion_point(op)
                op.operand(0).set_source(paddle._C_ops.assign(src))
        paddle.pir.reset_insertion_point_to_end()


def rank_scope(startup, params: dict, states, seed: int, rank: int, exe=None):
    """A rank's scope set up: its startup program run seeded by ``seed``,
    what the startup wrote coarser than the main reads replaced by the
    rank's piece (``states``), then ``params`` set."""
    import paddle

    from .inputs import run_startup
    from .startup_pieces import set_startup_states

    place = paddle.CPUPlace()
    exe = exe or paddle.static.Executor(place)
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        run_startup(exe, startup, seed)
    set_startup_states(scope, states or {}, rank, place)
    for name, value in params.items():
        if scope.find_var(name) is not None:
            scope.var(name).get_tensor().set(np.ascontiguousarray(value), place)
    return scope


class _PirRank:
    """One rank: its stages, scope, and the values exchanged at collectives
    (the interface ``simulated_ranks._lockstep`` drives)."""

    def __init__(self, rank, exported, params, feeds, watch, where, restore_state=False,
                 seed=0, last_stage_only=False, segments=False, states=None, scope=None):
        import paddle

        from verify.ir.pir_snapshot import import_programs

        self.rank = rank
        self.where = where
        from .pir_execution import translate_for_execution

        main, startup, names = import_programs(exported)
        translate_for_execution(main, names)
        _argument_reads_copied(main)
        ops = list(main.global_block().ops)
        self.cut_ops = [i for i, op in enumerate(ops) if exchanges(op.name())]
        for i in self.cut_ops:
            if ops[i].name() in POINT_TO_POINT:
                continue
            if ops[i].num_operands() != 1 or ops[i].num_results() != 1:
                raise BackendError(f"{where}: rank {rank} op {i} ({ops[i].name()}) is not "
                                   "a one-in one-out collective", rank)
        # restore_state: every stage starts from the step's persistable state
        # (parameters, optimizer states), so an in-place update before a cut
        # that a stage re-runs is applied once, by the stage that keeps it
        self.restore_state = restore_state
        self.state_names = [op.attrs()["parameter_name"] if op.name() == "builtin.parameter"
                            else op.attrs()["name"] for op in ops
                            if op.name() in ("builtin.parameter", "pd_op.data")
                            and getattr(op.result(0), "persistable", False)]
        # keyword block arguments (a gradient merge's accumulators) live in the scope too
        self.state_names += list(main.global_block().kwargs().keys())
        # segments (pir_segments.py): each op once per step; else prefix stages
        self.carried, self.why_prefix = None, "not asked for"
        if segments and not last_stage_only:
            from .pir_segments import plan

            self.carried, self.why_prefix = plan(main, self.cut_ops, [])
        if not restore_state and self.carried is None:
            _refuse_state_before_cut(main, self.cut_ops, where, rank)
        if any(exchanges(op.name()) for op in startup.global_block().ops):
            raise BackendError(f"{where}: rank {rank}'s startup program holds a collective "
                               "(not simulated for PIR programs)", rank)
        pos = {names.table.get((op.id(), k)): (i, k) for i, op in enumerate(ops)
               for k in range(op.num_results())}
        missing = [n for n in watch if n not in pos]
        if missing:
            raise KeyError(f"rank {rank}: no value named {missing[0]} in the program")
        self.watch = list(watch)
        self.colls = [_PirColl(ops[i], i, n) for n, i in enumerate(self.cut_ops)]
        # last_stage_only: a caller that cuts its own stages (the planner's
        # wave runner) needs only the last one (every op, collectives fed)
        first = len(self.cut_ops) if last_stage_only else 0
        watch_pos = [pos[n] for n in watch]
        if self.carried is not None:
            from .pir_segments import plan, stage

            self.carried, self.why_prefix = plan(main, self.cut_ops, watch_pos)
        if self.carried is not None:
            self.stages = [stage(main, self.cut_ops, j, watch_pos, self.carried)
                           for j in range(len(self.cut_ops) + 1)]
        else:
            self.stages = [None] * first + [_stage(main, self.cut_ops, j, watch_pos) + ([],)
                                            for j in range(first, len(self.cut_ops) + 1)]
        self.place = paddle.CPUPlace()
        self.exe = paddle.static.Executor(self.place)  # the startup's
        self._exes = {}
        # scope: another program of this rank already set it up (a job of the
        # rank's schedule, verify/numeric/merged_relation.py): shared as is
        self.scope = scope if scope is not None else rank_scope(
            startup, params, states, seed, rank, self.exe)
        self.feeds = feeds  # [{name: array}] per step
        self.values, self.result, self.pos, self.step = {}, None, 0, 0

    def exe_for(self, prog):
        """The executor of ``prog``: one per program, since an executor keeps
        only 8 programs (an LRU) and, with more stages, re-cloned and
        re-planned every stage at every step."""
        import paddle

        exe = self._exes.get(id(prog))
        if exe is None:
            exe = self._exes[id(prog)] = paddle.static.Executor(self.place)
        return exe

    def start(self, step: int):
        self.values, self.result, self.pos, self.step = {}, None, 0, step
        if self.restore_state:
            self.saved = {}
            for n in self.state_names:
                var = self.scope.find_var(n)
                if var is not None and var.get_tensor()._is_initialized():
                    self.saved[n] = np.array(var.get_tensor())

    def _restore(self):
        """The step's saved state written back where it lives: a job run in a
        micro-batch scope (``job_plan_runs.py``) finds the rank's parameters,
        optimizer states and accumulators in the parent scope, and
        ``scope.var`` would make a micro-batch-local shadow of each instead,
        which the job's updates then went to (every later job of that
        micro-batch read the shadows; the rank's own state never changed)."""
        for n, value in self.saved.items():
            self.scope.find_var(n).get_tensor().set(value.copy(), self.place)

    def get(self, name):
        return self.values.get(name)

    def set(self, name, value):
        self.values[name] = value

    def advance(self):
        """Run the stage up to the next collective; return it, or None after
        the last stage (the watched values are then in ``result``)."""
        import paddle

        prog, fetch, feed_names, carried = self.stages[self.pos]
        if self.restore_state and self.pos > 0 and self.carried is None:
            self._restore()
        feed = {**self.feeds[self.step], **self.values}
        feed = {n: feed[n] for n in feed_names if n in feed}
        with paddle.static.scope_guard(self.scope):
            got = self.exe_for(prog).run(prog, feed=feed, fetch_list=fetch)
        if self.pos < len(self.colls):
            c = self.colls[self.pos]
            if c.x is not None:  # a recv reads nothing
                self.values[c.x] = np.array(got[0])
            for name, a in zip(carried, got[1 if c.x is not None else 0:]):  # read later
                self.values[name] = np.array(a)
            return c
        self.result = {n: np.array(a) for n, a in zip(self.watch, got)}
        return None


@contextlib.contextmanager
def serial_interpreter():
    """Paddle's interpreter with ``FLAGS_new_executor_serial_run``: every op
    of a run in the calling thread, none handed to its thread pool.  The
    stages here are a few tiny kernels each (hundreds of runs per
    application); the hand-offs cost more than the kernels on 2 cores:
    the 4-rank stage-1 LLaMA's 3 steps took 6.4-8.0 CPU s instead of
    13.6-15.3 (16-19 s wall instead of 35-39), with bitwise the same
    results (``benchmarks/README.md``).  Each op still runs, after its
    inputs are written; an unordered in-place race is the dataflow check's
    to decide, never a run's timing (as ``micro_steps.py``)."""
    import paddle

    flag = "FLAGS_new_executor_serial_run"
    saved = paddle.get_flags([flag])[flag]
    paddle.set_flags({flag: True})
    try:
        yield
    finally:
        paddle.set_flags({flag: saved})


@contextlib.contextmanager
def program_order():
    """Paddle's interpreter with ``FLAGS_new_executor_sequential_run``: the
    ops of a run in program order.  A stage program here feeds what a
    collective made (``__pir_coll_<n>``), which cuts the dependence of
    everything after the collective on everything before it: an optimizer's
    in-place update of a parameter then reads only a fed gradient and the
    scope, and the default scheduler may run it before a forward op that
    reads the parameter through an alias the executor does not see
    (``pd_op.share_data_``, which a reshard inserts), so the forward read
    the updated parameter, at random.  The rank's own program orders that
    read before the write through the collective; program order is one
    schedule of it.  (Whether the rank's own program orders every in-place
    write is the dataflow check's to decide, never a run's timing.)"""
    import paddle

    flag = "FLAGS_new_executor_sequential_run"
    saved = paddle.get_flags([flag])[flag]
    paddle.set_flags({flag: True})
    try:
        yield
    finally:
        paddle.set_flags({flag: saved})


def run_exported_ranks(ranks: dict, rings: dict, steps: int, where: str = "PIR simulator",
                       restore_state: bool = False, seed: int = 0, segments: bool = True):
    """``{rank: [{name: ndarray}] per step}``; ``ranks`` = ``{rank: {"exported",
    "params": {name: array}, "feeds": [{name: array}] per step, "watch"}}``
    (see :func:`verify.numeric.pir_runner.run_ranks`); each rank's startup
    program runs seeded by ``seed`` before ``params`` are set.  (Programs that
    went through a gradient merge run as the Engine's jobs instead:
    ``merged_relation.run_schedule``.)  Each stage's ops run in program
    order (:func:`program_order`: a stage fed a collective's result frees an
    in-place update from the aliased reads before it)."""
    import paddle

    with paddle.pir_utils.IrGuard(), serial_interpreter(), program_order():
        states = {int(r): _PirRank(int(r), d["exported"], d["params"], d["feeds"],
                                   d["watch"], where, restore_state, seed,
                                   segments=segments, states=d.get("states"))
                  for r, d in sorted(ranks.items())}
        return run_steps(states, rings, steps, where)


def run_steps(states: dict, rings: dict, steps: int, where: str) -> dict:
    """``steps`` training steps of rank states (objects with ``start(step)``
    and ``result``) in lock step, collectives done between their pieces;
    ``{rank: [result per step]}``."""
    from .simulated_ranks import _lockstep

    out = {r: [] for r in states}
    for k in range(steps):
        for st in states.values():
            st.start(k)
        _lockstep(states, rings, f"{where} step {k}")
        for r, st in states.items():
            out[r].append(st.result)
    return out
