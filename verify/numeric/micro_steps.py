"""The gradient-merge oracle: k micro-steps of the merged program against one
step of the original on the same k micro-batches.

What is compared (per rank, for ``cycles`` optimizer steps):

* **rewritten**: the pass's program made dense (Paddle's
  ``apply_dist2dense_pass``, as ``Engine._parallel_pir`` does before it
  runs), driven as the Engine's job list for ``gradient_merge.k_steps``
  (``[forward, backward] * k + [optimize]``, jobs split by ``op_role``):
  micro-steps 1..k run the program without its optimize-role ops (the
  forward+backward jobs), then its optimize-role ops run once (the
  optimize job).  One executor scope throughout.  Jobs must be separate
  programs: inside one program Paddle's interpreter orders an in-place
  write to a keyword block argument (the accumulation ``add_``) by data
  dependences only, not after the program order of its readers.  The
  jobs run with ``FLAGS_new_executor_sequential_run`` (ops in program
  order): the oracle judges the program the pass built, deterministically.
  Under the default asynchronous scheduler, 3.3.1 CPU runs of the merged
  avg=True programs (SGD, Adam) were seen to differ from run to run (the
  in-place scale and zeroing of an accumulator, unordered by data
  dependences); that race is decided statically by the adapter's "in-place
  order" check, never by timing here.  (Paddle's own
  ``_split_program_into_forward_backward_optimize`` hands values between
  jobs through interpreter-local variables that a job-by-job
  ``Executor.run`` cannot see on 3.3.1, hence this equivalent driving.)
* **reference**: the original program, dense, run once per optimizer step
  on the concatenation of the same k micro-batches.  For a loss that is the
  mean over rows, its gradient is the mean of the k micro-batch gradients;
  for a loss that is the sum over rows, their sum (the gradient is linear in
  the per-row losses; exact in real arithmetic, floats differ only in the
  order of the sums).  So ``avg=True`` is checked on a mean loss and
  ``avg=False`` on a sum loss; a case declares which (``loss_reduction``),
  and any other pairing has no exact reference here (INCONCLUSIVE).

Both sides start from their own startup programs, run seeded; the
parameters are then set to the same seeded values (``inputs.initial_params``),
except one the merged program's startup initialises differently: it gets what
that initialisation draws (``inputs.init_like``), and a difference names it.

Watched: every persistable the original's startup program writes
(parameters, optimizer states such as velocities and Adam moments, beta
powers), read from the scope.  After each of the k micro-steps of an optimizer
step they must be bitwise unchanged (the merge defers the update); after
the k-th they are compared with the reference (``compare.py`` tolerances).
A second optimizer step (``cycles`` = 2) also catches an accumulator not
zeroed after the update.

Runs go to an isolation worker (``verify/numeric/offload.py``), so an
executor crash is INCONCLUSIVE, never the end of the run.  A merged program
whose steps raise where the reference's ran is NOT_EQUIVALENT ("the
rewritten program no longer runs"), unless the checker's own environment
failed.  The witness is
Paddle's executor in one process (no real ranks), and the checks say so.
"""
from __future__ import annotations

import traceback

from verify.verdicts import CheckResult, Verdict, environment_cause, failure_line

from .compare import compare
from .inputs import (describe_init_changes, feed_value, init_changes, initial_params,
                     run_startup, scope_values, snapshot_inits)
from .run_spec import ProcessCrash

KIND = "numeric"
NAME = "micro-steps"


def state_names(snap) -> list:
    """The persistables the startup program of ``snap`` writes, by name."""
    out = []
    for op in snap.startup_ops:
        for slot in ("parameter", "output"):
            out += op.outputs.get(slot, [])
    return list(dict.fromkeys(out))


def run_rebuilt(blob, rank, params, feeds, watch, k, cycles, seed, merged_params=None) -> dict:
    """In a worker: rebuild ``rank`` of the case and re-apply the adapter's
    pass (``blob`` = pickled ``(adapter, case)``; the worker has the
    parent's pass files loaded, verify/engine/isolation.py), then run both
    programs live (the pass applied where it runs, the runs beside it).  ``params`` / ``merged_params``: ``{name:
    ndarray}`` set after each side's startup (the merged side's default to
    ``params``).  ``{"reference": [state per optimizer step],
    "merged": [[states] per optimizer step], "applied": [pass records]}``
    (see :func:`judge`, ``verify/ir/pass_sources.py``)."""
    import pickle

    from verify.ir.pass_sources import recording

    adapter, case = pickle.loads(blob)
    with recording() as applied:
        run = adapter.apply_local(case, rank)
    if run.error:
        raise RuntimeError(f"the pass raised when re-applied: {run.error}")
    return {**both_runs(run.original, run.rewritten, params,
                        params if merged_params is None else merged_params, feeds, watch, k,
                        cycles, seed), "applied": applied}


class MergedRunError(RuntimeError):
    """The merged program's steps raised (the executor on its startup or
    its jobs), the job split having succeeded."""


def both_runs(original, rewritten, params, merged_params, feeds, watch, k, cycles,
              seed) -> dict:
    """``{"reference": ..., "merged": ...}`` of the two programs; where the
    reference ran and the merged steps raised, ``{"reference": ...,
    "merged_error": message and traceback}`` instead (data: it crosses the
    worker boundary saying that the reference ran)."""
    ref = _run(original.main, original.startup, params, feeds, watch, k, cycles, seed,
               merged=False)
    try:
        got = _run(rewritten.main, rewritten.startup, merged_params, feeds, watch, k,
                   cycles, seed, merged=True)
    except MergedRunError as exc:
        return {"reference": ref, "merged_error": str(exc)}
    return {"reference": ref, "merged": got}


def _micro_feed(seed, feeds, i):
    return {n: feed_value(seed, n, shape, dtype, 0, i) for n, shape, dtype in feeds}


def _run(main, startup, params, feeds, watch, k, cycles, seed, merged):
    import paddle

    with paddle.pir_utils.IrGuard():
        main, startup = main.clone(), startup.clone()
        for prog in (main, startup):
            paddle.base.libpaddle.pir.apply_dist2dense_pass(prog)
        if merged:
            accumulate, optimize = _jobs(main)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())

        def read():
            return scope_values(scope, watch)

        results = []
        flag = "FLAGS_new_executor_sequential_run"
        saved = paddle.get_flags([flag])[flag]
        paddle.set_flags({flag: True})  # program order (see the module docstring)
        try:
            _steps(exe, scope, main, startup, params, feeds, k, cycles, seed, merged, read,
                   results, accumulate if merged else None, optimize if merged else None)
        except Exception as exc:
            if not merged:
                raise
            raise MergedRunError(f"{type(exc).__name__}: {exc}\n"
                                 + traceback.format_exc()) from exc
        finally:
            paddle.set_flags({flag: saved})
    return results


def _steps(exe, scope, main, startup, params, feeds, k, cycles, seed, merged, read, results,
           accumulate, optimize):
    import numpy as np
    import paddle

    if True:
        with paddle.static.scope_guard(scope):
            run_startup(exe, startup, seed)
            for name, val in params.items():
                scope.var(name).get_tensor().set(np.ascontiguousarray(val), paddle.CPUPlace())
            for c in range(cycles):
                micro = [_micro_feed(seed, feeds, c * k + i) for i in range(k)]
                if not merged:
                    cat = {n: np.concatenate([m[n] for m in micro]) for n in micro[0]}
                    exe.run(main, feed=cat, fetch_list=[])
                    results.append(read())
                    continue
                states = [read()]  # at the start of this optimizer step
                for m in micro:
                    exe.run(accumulate, feed=m, fetch_list=[])
                    states.append(read())
                exe.run(optimize, feed={}, fetch_list=[])
                states.append(read())
                results.append(states)


def _jobs(main):
    """``(forward+backward job, optimize job)`` of ``main``: the Engine's job
    split by op role (``merged_relation.split_jobs``).  Raises ``ValueError``
    when an optimize op reads a value the other job computes (the Engine's
    split hands such a value over through a variable; this runner does not)."""
    from verify.ir.pir_snapshot import value_names

    from .merged_relation import split_jobs

    (accumulate, _), (optimize, _), crossing = split_jobs(main, value_names(main))
    if crossing:
        raise ValueError(f"an optimize op reads {crossing[0][0]}, which the forward/backward "
                         "job computes: the program cannot be split into jobs here")
    return accumulate, optimize


def micro_step_checks(adapter, case, outcomes, k: int, reduction: str, avg: bool,
                      seed: int = 0, cycles: int = 2, backends=("simulated",),
                      live: bool = False) -> list:
    """CheckResults (kind ``numeric``) of the merge oracle, one per rank.
    ``live``: run the outcomes' own live programs in this process (a program
    mutant edited them) instead of rebuilding them in a worker."""
    import pickle

    from verify.ir.pass_sources import note, replayable

    from . import offload

    results = []
    want = "mean" if avg else "sum"
    # a pass class a worker cannot load (a test's): the live programs, here
    live = live or not replayable(adapter.python_passes())
    for o in outcomes:
        where = f"micro-step run of {case.name} rank {o.rank} (k={k}, avg={avg})"
        if reduction != want:
            results.append(CheckResult(
                KIND, NAME, o.rank, Verdict.INCONCLUSIVE,
                f"{where}: no exact reference: avg={avg} needs a {want} loss, the case's "
                f"loss is a {reduction}"))
            continue
        shapes = {n: (list(v.shape), v.dtype) for n, v in o.before.vars.items()
                  if v.is_parameter}
        # the same seeded values, but where the merged startup initialises a
        # parameter differently: what that initialisation draws
        src, dst = snapshot_inits(o.before), snapshot_inits(o.after)
        params = initial_params(seed, shapes)
        merged_params = initial_params(seed, shapes, None, src, dst)
        changed = init_changes(src, dst, list(shapes), o.rank)
        feeds = [(f.name, list(f.shape), f.dtype) for f in o.run.original.feeds]
        watch = state_names(o.before)
        try:
            if live:
                got = both_runs(o.run.original, o.run.rewritten, params, merged_params,
                                feeds, watch, k, cycles, seed)
            else:
                got = offload.run_call(
                    "verify.numeric.micro_steps", "run_rebuilt",
                    {"blob": pickle.dumps((adapter, case)), "rank": o.rank,
                     "params": params, "feeds": feeds,
                     "watch": watch, "k": k, "cycles": cycles, "seed": seed,
                     "merged_params": merged_params}, where)
                note(got.get("applied", []))  # what the re-application ran
        except ProcessCrash as exc:
            results.append(CheckResult(KIND, NAME, o.rank, Verdict.INCONCLUSIVE,
                                       f"{where}: crashed: {str(exc).splitlines()[0]}"))
            continue
        except Exception as exc:
            results.append(CheckResult(
                KIND, NAME, o.rank, Verdict.INCONCLUSIVE,
                f"{where}: did not run: {(str(exc).strip().splitlines() or [''])[-1][:300]}",
                details={"traceback": traceback.format_exc()}))
            continue
        if "merged_error" in got:
            results.append(no_longer_runs(where, o.rank, got["merged_error"]))
            continue
        results.append(judge(where, o.rank, got["reference"], got["merged"], watch, k,
                             changed))
    for r in results:
        r.details["witness"] = "simulator only"
        r.details["seed"] = seed  # parameters, feeds and the startup programs' draws
        if "ranks" in backends and r.verdict != Verdict.INCONCLUSIVE:
            r.message += " [Paddle's executor in one process: real ranks did not run this case]"
    return results


def no_longer_runs(where, rank, error) -> CheckResult:
    """The reference ran and the merged program's steps raised ``error``:
    NOT_EQUIVALENT, unless the checker's environment failed (INCONCLUSIVE)."""
    if environment_cause(error):
        return CheckResult(KIND, NAME, rank, Verdict.INCONCLUSIVE,
                           f"{where}: did not run: {failure_line(RuntimeError(error))}",
                           details={"traceback": error})
    return CheckResult(KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
                       f"{where}: the rewritten program no longer runs (the reference runs): "
                       f"{(error.strip().splitlines() or ['unknown error'])[0][:400]}",
                       counterexample={"rank": rank, "error": error[:2000]},
                       details={"traceback": error})


def judge(where, rank, reference, merged, watch, k, changed_inits=()) -> CheckResult:
    """The verdict of one rank's run.  ``merged[c]`` is ``[state at the
    start of optimizer step c, after micro-step 1, ..., after micro-step k,
    after the optimize job]``: every micro-step leaves the watched states
    bitwise unchanged (the update is deferred to the optimize job), and the
    state after it equals ``reference[c]``.  ``changed_inits``
    (``inputs.init_changes``): named in a difference."""
    import numpy as np

    why = f"; {describe_init_changes(changed_inits)}" if changed_inits else ""
    extra = {"init_changes": list(changed_inits)} if changed_inits else {}

    diffs, early = [], []
    for c, (ref, states) in enumerate(zip(reference, merged)):
        start = states[0]
        for i, st in enumerate(states[1:-1]):
            for n in watch:
                if n in start and n in st and not np.array_equal(start[n], st[n]):
                    delta = np.abs(start[n].astype("float64") - st[n].astype("float64"))
                    idx = np.unravel_index(int(np.argmax(delta)), st[n].shape) \
                        if st[n].size else ()
                    early.append({"tensor": n, "step": c, "micro_step": i + 1,
                                  "index": [int(x) for x in idx],
                                  "before": float(start[n][idx]), "after": float(st[n][idx])})
        final = states[-1]
        for n in watch:
            if n in ref and n in final:
                diffs.append(compare(n, c, ref[n], final[n], 16 * k * (c + 1)))
    if early:
        e = early[0]
        return CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: the update is not deferred: {e['tensor']} changed after micro-step "
            f"{e['micro_step']} of {k} (optimizer step {e['step']}) at index {e['index']}: "
            f"{e['before']:.6g} -> {e['after']:.6g}{why}",
            counterexample={"rank": rank, **e, **extra}, details={"early_updates": early[:10]})
    bad = [d for d in diffs if not d.ok]
    if bad:
        w = max(bad, key=lambda d: d.max_abs)
        return CheckResult(
            KIND, NAME, rank, Verdict.NOT_EQUIVALENT,
            f"{where}: after the k-th micro-step {len(bad)} of {len(diffs)} states differ "
            f"from one step on the concatenated micro-batches; worst {w.name} at optimizer "
            f"step {w.step} index {w.worst_index}: merged {w.candidate:.6g} vs reference "
            f"{w.reference:.6g} (abs err {w.max_abs:.3g} > tol {w.tol:.3g}){why}",
            counterexample={"rank": rank, "tensor": w.name, "step": w.step,
                            "index": w.worst_index, "reference": w.reference,
                            "merged": w.candidate, "abs_err": w.max_abs, "tol": w.tol,
                            **extra},
            details={"tensors": [d.to_dict() for d in bad[:20]]})
    if not diffs:
        return CheckResult(KIND, NAME, rank, Verdict.INCONCLUSIVE,
                           f"{where}: no state of the original was found after the run")
    w = max(diffs, key=lambda d: d.max_abs)
    return CheckResult(
        KIND, NAME, rank, Verdict.EQUIVALENT,
        f"{where}: {len(watch)} states unchanged through micro-steps 1..{k} and equal "
        f"to one step on the concatenated micro-batches after the optimize job, over "
        f"{len(reference)} optimizer steps; largest abs err {w.max_abs:.3g} on {w.name} "
        f"(tol {w.tol:.3g})")
