"""The planner relation of a plan made with gradient merge: the serial
program's micro-steps against every rank's job schedule, in lock step.

A merged rank program (Paddle's ``auto_parallel_gradient_merge_pass`` run by
the planner) is not run whole per step: ``Engine._parallel_pir`` splits it by
``op_role`` into jobs and runs ``[forward, backward] * k_steps + [optimize]``
(``passes/pir_gradient_merge.py``).  So, per optimizer step ``c``:

* **ranks**: each rank's *accumulate* job (every op not of role Optimize) on
  micro-batch ``i`` = 1..k, all ranks in lock step (collectives performed
  by the simulator between segments, ``pir_ranks.py``), then each rank's
  *optimize* job (the ops of role Optimize, with the parameters and
  persistable data they read) in lock step.  One scope per rank throughout:
  parameters, optimizer states and the merge's accumulators (keyword block
  arguments) carry from job to job.  An accumulator the optimizer reads by
  its keyword is watched as the optimizer reads it: from the scope after
  the accumulate job, or, where the optimize job writes it in place first
  (an ``avg`` ``scale_``), that write (``optimizer_reads``).  A value an
  optimize op reads from the accumulate job is fed from the last micro-step
  (as Paddle's job split hands it over);
* **reference (the serial program)**: its accumulate job on each of the
  same k global micro-batches (each rank is fed its slice of them), the
  gradients the optimizer reads merged -- their mean when ``avg``, their
  sum otherwise (the strategy's definition) -- then its optimize job once,
  fed the merged gradients.  Any other value its optimize ops read from
  the accumulate job has no merged meaning: the relation is not run.

Compared through the placements (``planner_runs.compare_runs``) after every
optimizer step: the loss of every micro-step, every merged gradient the
optimizer reads, every updated parameter; a difference is located at the
first carried-over op that no longer relates (values of the last micro-step
and of the optimize job).  Watched values are copied (``pd_op.assign``) right
after the op that makes them: the optimize job zeroes an accumulator in
place after its optimizer read it, and a fetch at the end of the job would
read the zeroed buffer.  Each job's ops run in program order
(``pir_ranks.program_order``; ``serial_interpreter`` alone runs them in
the executor's dependency order, which misses an in-place write to a
value read through a ``share_data_`` alias: a segment fed a collective's
result may update a parameter before the forward's aliased read).
"""
from __future__ import annotations

import numpy as np

from .inputs import scope_values

OPTIMIZE = 2  # Paddle's OpRole.Optimize
SOURCES = ("builtin.parameter", "pd_op.data")


class JobSplitError(ValueError):
    """The program cannot be split into the Engine's jobs here (the reason)."""


def split_jobs(main, names):
    """``(accumulate, optimize, crossing)`` of a PIR program (roles completed
    by Paddle's ``forward_complete_op_role`` first): two clones of ``main``
    with their name tables (``Names``), the accumulate job keeping every op
    not of role Optimize, the optimize job the ops of role Optimize and the
    parameters and persistable data they read; ``crossing`` = ``[(value name,
    fed name, shape, dtype)]`` of the values an optimize op reads from the
    accumulate job, fed in the optimize job as ``pd_op.data`` (fed name)."""
    import paddle
    from paddle.distributed.passes.pass_utils import forward_complete_op_role

    forward_complete_op_role(main)
    acc = main.clone()
    acc_names = names.carried(main, acc)
    ops = list(acc.global_block().ops)
    for idx in range(len(ops) - 1, -1, -1):
        op = ops[idx]
        if op.op_role != OPTIMIZE:
            continue
        if any(r.initialized() and not r.use_empty() for r in op.results()):
            raise JobSplitError(f"op {idx} ({op.name()}, role optimize) is read by an op of "
                                "another role: no job split")
        op.erase()

    opt = main.clone()
    opt_names = names.carried(main, opt)
    ops = list(opt.global_block().ops)
    crossing = []
    with paddle.static.program_guard(opt):
        paddle.pir.reset_insertion_point_to_start()
        for idx, op in enumerate(ops):
            if op.op_role == OPTIMIZE or _in_scope(op):
                continue
            for k in range(op.num_results()):
                res = op.result(k)
                if not res.initialized() or not any(u.op_role == OPTIMIZE
                                                    for u in res.all_used_ops()):
                    continue
                name = opt_names.table.get((op.id(), k)) or f"op{idx}.{k}"
                fed = f"__job_{len(crossing)}"
                new = paddle.static.data(fed, list(res.shape),
                                         str(res.dtype).replace("paddle.", ""))
                res.replace_all_uses_with(new)
                crossing.append((name, fed, [int(d) for d in res.shape],
                                 str(res.dtype).replace("paddle.", "")))
        paddle.pir.reset_insertion_point_to_end()
    fed_names = {c[1] for c in crossing}
    for op in reversed(list(opt.global_block().ops)):
        if op.op_role == OPTIMIZE or (op.name() == "pd_op.data" and
                                      op.attrs().get("name") in fed_names):
            continue
        if _in_scope(op) and any(r.initialized() and not r.use_empty() for r in op.results()):
            continue
        if any(r.initialized() and not r.use_empty() for r in op.results()):
            raise JobSplitError(f"{op.name()} (role {op.op_role}) is still read in the "
                                "optimize job")
        op.erase()
    return (acc, acc_names), (opt, opt_names), crossing


def _in_scope(op) -> bool:
    return op.name() == "builtin.parameter" or (
        op.name() == "pd_op.data" and bool(getattr(op.result(0), "persistable", False)))


def defined_names(program, names) -> set:
    return {n for op in program.global_block().ops for k in range(op.num_results())
            for n in [names.table.get((op.id(), k))] if n}


def copy_watched(program, names, watch) -> None:
    """Each watched value that an op computes (not a parameter or data) read
    through a ``pd_op.assign`` inserted right after that op, under the
    value's name (the original is renamed ``<name>@made``): a fetch at the
    end of the job sees the value as made, not a later in-place write."""
    import paddle

    wanted = set(watch)
    with paddle.static.program_guard(program):
        for op in list(program.global_block().ops):
            if op.name() in SOURCES:
                continue
            for k in range(op.num_results()):
                n = names.table.get((op.id(), k))
                if n not in wanted or not op.result(k).initialized():
                    continue
                paddle.pir.set_insertion_point_after(op)
                copy = paddle._C_ops.assign(op.result(k))
                names.table[(op.id(), k)] = f"{n}@made"
                names.table[(copy.get_defining_op().id(), 0)] = n
        paddle.pir.reset_insertion_point_to_end()


def jobs_exported(exported, watch_acc, watch_opt):
    """``(accumulate job, optimize job, crossing)`` of a rank's exported
    programs, each job exported (``pir_snapshot.export_programs``: keyword
    block arguments kept) with its watched values copied; the startup
    program goes with the accumulate job (it runs once, for both)."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, import_programs

    with paddle.pir_utils.IrGuard():
        main, startup, names = import_programs(exported)
        (acc, an), (opt, on), crossing = split_jobs(main, names)
        copy_watched(acc, an, watch_acc + [c[0] for c in crossing])
        copy_watched(opt, on, watch_opt)
        return (export_programs(acc, startup, an),
                export_programs(opt, paddle.static.Program(), on), crossing)


def watch_split(exported, watch):
    """``(accumulate watch, optimize watch, scope reads)`` of ``watch``: by the
    job whose ops make each value (a parameter the optimize job reads: there,
    where it is updated), a keyword block argument read from the scope, and names made
    by neither job dropped (counterparts of ops no job keeps)."""
    import paddle

    from verify.ir.pir_snapshot import import_programs

    with paddle.pir_utils.IrGuard():
        main, _, names = import_programs(exported)
        (acc, an), (opt, on), _ = split_jobs(main, names)
        in_acc, in_opt = defined_names(acc, an), defined_names(opt, on)
        params = {op.attrs()["parameter_name"] for op in main.global_block().ops
                  if op.name() == "builtin.parameter"}
        kwargs = set(main.global_block().kwargs().keys())
    a, o, s = [], [], []
    for n in watch:
        if n in in_opt and (n in params or n not in in_acc):
            o.append(n)
        elif n in in_acc:
            a.append(n)
        elif n in kwargs:
            s.append(n)
    return a, o, s


def optimizer_reads(exported, kwargs) -> dict:
    """``{keyword argument: value}`` for each of ``kwargs`` (accumulators the
    optimizer reads by their keyword) that the optimize job writes in place
    before an optimizer reads it: the write, which is what the optimizer
    reads (a ``scale_`` by 1/k, ``avg``), where the scope after the
    accumulate job holds the accumulator unscaled (``inplace.grads_read``
    on the optimize job's snapshot)."""
    import paddle

    from verify.ir.inplace import grads_read
    from verify.ir.pir_snapshot import from_pir_programs, import_programs

    if not kwargs:
        return {}
    with paddle.pir_utils.IrGuard():
        main, _, names = import_programs(exported)
        _, (opt, on), _ = split_jobs(main, names)
        reads = grads_read(from_pir_programs(opt, None, on))
    return {n: reads[n] for n in kwargs if reads.get(n, n) != n}


def run_merged_relation(serial, ranks, rings, state_placements, k, avg, cycles, where,
                        grads, loss=None, rank_losses=None, state_shapes=None,
                        seed: int = 0, params=(), rank_params=None):
    """Both sides in one worker call; ``(serial outputs, {rank: outputs})``,
    one dict per optimizer step (``planner_runs.compare_runs`` reads them):
    the values of the last micro-step's accumulate job and of the optimize
    job; the merged gradients (serial ``grads``: names) as ``<name>@merged``
    (under its own name a gradient is the last micro-step's); the loss of each
    micro-step ``i`` as ``<loss>@micro<i>``, and each parameter (serial
    ``params``, ``rank_params[r]``: names) as it is in the scope after that
    micro-step's accumulate job, ``<name>@micro<i>`` (the update is deferred:
    still the value at the start of the optimizer step).  ``serial`` / ``ranks[r]`` as
    ``planner_runs.run_relation``'s, their feeds one dict per micro-step
    (``cycles * k``)."""
    from .pir_ranks import program_order, serial_interpreter
    from .planner_runs import serial_then_ranks

    import paddle

    with paddle.pir_utils.IrGuard(), serial_interpreter(), program_order():
        return serial_then_ranks(
            ranks, state_placements, state_shapes, seed,
            lambda sstates: run_serial_measured(serial, {**sstates, **serial["params"]}, k,
                                                avg, cycles, grads, loss, seed, list(params)),
            lambda: _run_ranks(ranks, rings, k, cycles, where, rank_losses or {}, seed,
                               rank_params or {}))


def run_serial_measured(serial, params, k, avg, cycles, grads, loss, seed,
                        watched_params=()):
    """:func:`_run_serial`, each float32 value's float64 run beside it as
    ``<name>@float64`` (``float64_reference.py``; the merged gradients too):
    the tolerance's measured floor (``compare.py``)."""
    from .float64_reference import with_float64

    out = _run_serial(serial, params, k, avg, cycles, grads, loss, seed, watched_params)
    return with_float64(lambda data, p, f: _run_serial({**data, "feeds": f}, p, k, avg, cycles,
                                                       grads, loss, seed, watched_params),
                        serial, params, serial["feeds"], out)


def _run_serial(serial, params, k, avg, cycles, grads, loss, seed, watched_params=()):
    import paddle

    from verify.ir.pir_snapshot import import_programs

    from .inputs import run_startup

    wa, wo, _ = watch_split(serial, serial["watch"])
    acc_x, opt_x, crossing = jobs_exported(serial, wa, wo)
    other = [c[0] for c in crossing if c[0] not in set(grads)]
    if other:
        raise JobSplitError(f"the serial program's optimize ops read {other[0]} from its "
                            "backward, not a gradient: no merged reference for it")
    acc, startup, an = import_programs(acc_x)
    opt, _, on = import_programs(opt_x)
    fetch_a = _values(acc, an, wa + [c[0] for c in crossing])
    fetch_o = _values(opt, on, wo)
    scope = paddle.static.Scope()
    exe = paddle.static.Executor(paddle.CPUPlace())
    out = []
    with paddle.static.scope_guard(scope):
        run_startup(exe, startup, seed)
        for name, val in params.items():
            scope.var(name).get_tensor().set(np.ascontiguousarray(val), paddle.CPUPlace())
        for c in range(cycles):
            got, micro = {}, []
            for i in range(k):
                vals = exe.run(acc, feed=serial["feeds"][c * k + i], fetch_list=fetch_a)
                step = {n: np.array(v) for n, v in zip(wa + [x[0] for x in crossing], vals)}
                micro.append(step)
                if loss and loss in step:
                    got[f"{loss}@micro{i}"] = step[loss]
                for n, v in scope_values(scope, watched_params).items():
                    got[f"{n}@micro{i}"] = v
            got.update(micro[-1])
            merged = {}
            for name, fed, _, _ in crossing:
                total = np.sum([m[name].astype("float64") for m in micro], axis=0)
                merged[name] = (total / k if avg else total).astype(micro[-1][name].dtype)
            got.update({f"{n}@merged": v for n, v in merged.items()})
            vals = exe.run(opt, feed={fed: merged[name] for name, fed, _, _ in crossing},
                           fetch_list=fetch_o)
            got.update({n: np.array(v) for n, v in zip(wo, vals)})
            out.append(got)
    return out


def _values(program, names, watch):
    pos = {}
    for op in program.global_block().ops:
        for i in range(op.num_results()):
            n = names.table.get((op.id(), i))
            if n is not None:
                pos[n] = op.result(i)
    missing = [n for n in watch if n not in pos]
    if missing:
        raise KeyError(f"no value named {missing[0]} in the job")
    return [pos[n] for n in watch]


def run_schedule(ranks, rings, steps, k, where="PIR simulator", seed: int = 0) -> dict:
    """Merged rank programs as the Engine runs them, for a differential run
    (the original against a pass's rewrite, ``pir_runner``): ``{rank:
    [{name: ndarray}] per optimizer step}``, each of ``k`` micro-steps (the
    feeds one dict per micro-step), the watched values of the last
    micro-step's accumulate job and of the optimize job."""
    import paddle

    from .pir_ranks import program_order, serial_interpreter

    with paddle.pir_utils.IrGuard(), serial_interpreter(), program_order():
        got = _run_ranks(ranks, rings, k, steps, where, {}, seed, {})
    out = {}
    for r, outs in got.items():
        watch = list(ranks[r]["watch"])
        missing = [n for n in watch if outs and n not in outs[0]]
        if missing:
            raise KeyError(f"{where}: rank {r}: watched value {missing[0]} is made by neither "
                           "job of the merged program")
        out[r] = [{n: step[n] for n in watch} for step in outs]
    return out


def _run_ranks(ranks, rings, k, cycles, where, rank_losses, seed, rank_params):
    from .pir_ranks import _PirRank
    from .simulated_ranks import _lockstep

    acc, opt, scope_reads, crossing, written = {}, {}, {}, {}, {}
    for r, d in sorted(ranks.items()):
        r = int(r)
        wa, wo, ws = watch_split(d["exported"], d["watch"])
        # an accumulator the optimize job writes before its optimizer reads it:
        # that write, watched in the optimize job under the accumulator's name
        written[r] = optimizer_reads(d["exported"], ws)
        ws = [n for n in ws if n not in written[r]]
        wo = wo + [w for w in written[r].values() if w not in wo]
        acc_x, opt_x, cross = jobs_exported(d["exported"], wa, wo)
        crossing[r], scope_reads[r] = cross, ws
        acc[r] = _PirRank(r, acc_x, d["params"], d["feeds"], wa + [c[0] for c in cross],
                          f"{where} (accumulate job)", restore_state=True, seed=seed,
                          segments=True, states=d.get("states"))
        opt_x = {**opt_x, "startup": acc_x["startup"]}  # not run: the scope is shared
        opt[r] = _PirRank(r, opt_x, {}, [{} for _ in range(cycles)], wo,
                          f"{where} (optimize job)", restore_state=True, seed=seed,
                          segments=True, scope=acc[r].scope)
    out = {r: [] for r in acc}
    for c in range(cycles):
        got = {r: {} for r in acc}
        for i in range(k):
            for st in acc.values():
                st.start(c * k + i)
            _lockstep(acc, rings, f"{where} optimizer step {c} micro-step {i + 1} "
                      "(accumulate job)")
            for r, st in acc.items():
                loss = rank_losses.get(r)
                if loss and loss in st.result:
                    got[r][f"{loss}@micro{i}"] = st.result[loss]
                for n, v in scope_values(st.scope, rank_params.get(r, ())).items():
                    got[r][f"{n}@micro{i}"] = v
        for r, st in acc.items():
            got[r].update(st.result)  # the last micro-step's values
            # an accumulator the optimizer reads as is
            got[r].update(scope_values(st.scope, scope_reads[r]))
            opt[r].feeds[c] = {fed: st.result[name] for name, fed, _, _ in crossing[r]}
        for st in opt.values():
            st.start(c)
        _lockstep(opt, rings, f"{where} optimizer step {c} (optimize job)")
        for r, st in opt.items():
            got[r].update(st.result)
            got[r].update({n: st.result[w] for n, w in written[r].items() if w in st.result})
            out[r].append(got[r])
    return out
