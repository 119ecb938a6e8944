"""Numeric equivalence: run original and rewritten on every rank, compare.

For each backend, both programs of every rank run K training steps with the
same seeded parameters and inputs; outputs, loss, every parameter's gradient
and every parameter after each step are compared per rank.  Where the pass
removed a parameter on some ranks (the promoted bias on non-first TP ranks),
what it stands for is compared instead: the first TP rank's copy in the
rewritten program against the original's (replicated) value on this rank.

The tolerance is ``compare.py``'s depth-derived one only.  The floor the PIR
runs add (the original's own float32 error, measured by its float64 run:
``pir_runner.measured``) would apply here by the same argument, but a
ProgramDesc has no float64 twin yet: PIR's is a rewrite of the serialized
types, while a ProgramDesc spells a dtype in each var and in op attrs of
several names (``dtype``, ``in_dtype``, ``out_dtype``, ``assign_value``'s
typed value lists), and a missed one would make the float64 run another
function, whose difference the floor would then accept as rounding.
"""
from __future__ import annotations

from verify.ir.legacy_ir import paddle_module, translate_for_execution
from verify.verdicts import CheckResult, Verdict, environment_cause, failure_line

from . import offload, run_memo

from .compare import compare
from .inputs import (describe_init_changes, feed_value, init_changes, initial_params,
                     startup_inits)
from .run_spec import BackendError, ProcessCrash, RankSpec, UnsupportedJob

KIND = "numeric"
DEFAULT_STEPS = 3


def _serialize(program) -> bytes:
    clone = program.clone()
    translate_for_execution(clone)
    return clone.desc.serialize_to_string()


def _params(rp):
    from paddle.base.framework import Parameter

    return {n: v for n, v in rp.main.global_block().vars.items()
            if isinstance(v, Parameter)}


def reduction_depth(rp, world: int, steps: int) -> int:
    k = 1
    for op in rp.main.global_block().ops:
        if op.type in ("matmul_v2", "matmul_v2_grad"):
            shape = rp.main.global_block().var(op.input("X")[0]).shape
            k = max(k, max([abs(int(d)) for d in shape[-1:]] + [1]))
    return k * max(world, 1) * steps


def make_specs(case, programs: dict, seed: int, steps: int, renames=None,
               inits_of=None) -> dict:
    """``{rank: RankSpec}`` for ``programs`` = ``{rank: RankProgram}``.

    ``renames`` (``{rank: {original var: rewritten var}}``) adds the new
    names of watched values the pass moved, so they are fetched too.
    ``inits_of`` (the ORIGINAL programs, when these are the rewritten
    ones): a parameter the rewritten startup initialises differently gets
    what that initialisation draws (``inputs.init_like``), so a changed
    initialisation is seen; identical ones keep identical values.
    """
    specs = {}
    for rank, rp in programs.items():
        shard = case.tp_index(rank)
        src = startup_inits(inits_of[rank].startup) if inits_of and rank in inits_of else None
        dst = startup_inits(rp.startup) if src is not None else None
        params = initial_params(
            seed, {n: (p.shape, str(p.dtype).replace("paddle.", ""))
                   for n, p in _params(rp).items()},
            lambda n: shard if n in case.sharded_params else 0, src, dst)
        feeds = [{f.name: feed_value(seed, f.name, f.shape, f.dtype,
                                     case.dp_index(rank) if f.split == "dp"
                                     else case.dp_index(rank) * 1000 + shard, k)
                  for f in rp.feeds} for k in range(steps)]
        watch = list(dict.fromkeys(
            list(rp.fetches) + ([rp.loss] if rp.loss else []) +
            [g.name for _, g in rp.params_grads] + list(_params(rp)) +
            list((renames or {}).get(rank, {}).values())))
        specs[rank] = RankSpec(rank, _serialize(rp.main), _serialize(rp.startup),
                               params, feeds, watch, dict(case.rings))
    return specs


def legacy_init_changes(originals: dict, rewrittens: dict) -> list:
    """``inputs.init_changes`` of every rank's parameters ({rank:
    RankProgram} each): what each rewritten startup program initialises
    differently from the original's (rank order)."""
    out = []
    for rank in sorted(rewrittens):
        if rank in originals:
            out += init_changes(startup_inits(originals[rank].startup),
                                startup_inits(rewrittens[rank].startup),
                                list(_params(rewrittens[rank])), rank)
    return out


def _results_shape(v) -> bool:
    """``{rank: RankResult}`` with each rank's steps as runs give them."""
    from .run_spec import RankResult

    return isinstance(v, dict) and all(
        isinstance(r, int) and isinstance(x, RankResult) and run_memo.steps_shape(x.steps)
        for r, x in v.items())


def _run(backend, specs, where):
    """``{rank: RankResult}`` of ``specs`` on ``backend``; inside a run-memo
    session (the gate) a job already run in this run (the same case's
    original programs under another pass, or a rewritten program identical
    to the original) is reused (:func:`memo_key`); ``where`` only names the
    run.  ``run_memo.LAST`` says whether it was reused."""
    results = run_memo.remembered(memo_key(backend, specs),
                                  lambda: _run_fresh(backend, specs, where), disk="session",
                                  valid=_results_shape)
    if run_memo.LAST:  # the values read back in the order this job asked for them
        for r, res in results.items():
            order = list(dict.fromkeys(list(specs[r].watch) + [n for st in res.steps
                                                                  for n in st]))
            res.steps = [{n: st[n] for n in order if n in st} for st in res.steps]
    return results


def memo_key(backend, specs) -> tuple:
    """What a legacy run's result depends on: the backend, the build
    (CPU/CUDA), and per rank its programs' bytes, every seeded value, the
    watched names and the rings.  Left out, because no successful run reads
    them (a failed run is never remembered): the order of names in the dicts
    and the watch list (values are set and read back by name); Paddle's
    ``op_callstack`` attr, the Python stack that appended the op (a rewritten
    program rebuilt in the isolation worker carries the worker's stack),
    which Paddle reads only to decorate an error message; and the
    ``stop_gradient`` flag of the startup program's vars (the rebuilt startup
    clears it), which only ``append_backward`` reads: a startup program has
    no backward, and the executor runs the ops it is given."""
    key = ("legacy_run", backend, _has_gpu(), [
        (r, s.rank, without_callstack(s.main), without_callstack(s.startup, startup=True),
         sorted(s.params.items(), key=lambda kv: kv[0]),
         [sorted(f.items(), key=lambda kv: kv[0]) for f in s.feeds],
         sorted(s.watch), sorted(s.rings.items()))
        for r, s in sorted(specs.items())])
    if backend == "simulated":  # a simulator with a test's op override is another run
        from .simulated_ranks import overrides_key

        if overrides_key():
            key += (("simulator overrides", overrides_key()),)
    return key


def without_callstack(program_bytes: bytes, startup: bool = False) -> bytes:
    """A serialized ProgramDesc without its ops' ``op_callstack`` attrs
    (with ``startup``: every var's ``stop_gradient`` False), serialized
    deterministically (:func:`memo_key` says why these do not count)."""
    from paddle.base.proto import framework_pb2

    desc = framework_pb2.ProgramDesc.FromString(program_bytes)
    for block in desc.blocks:
        if startup:
            for var in block.vars:
                var.stop_gradient = False
        for op in block.ops:
            keep = [a for a in op.attrs if a.name != "op_callstack"]
            if len(keep) != len(op.attrs):
                del op.attrs[:]
                op.attrs.extend(keep)
    return desc.SerializeToString(deterministic=True)


def _run_fresh(backend, specs, where):
    if backend == "simulated":
        # in an isolation worker when enabled: an executor crash (SIGSEGV)
        # becomes a WorkerCrash naming the rank and program (verify/numeric/offload.py)
        return offload.run_simulated(specs, where)
    if backend == "ranks":
        from .rank_pool import run_ranks

        return run_ranks(specs, raise_on_error=True)
    raise ValueError(f"unknown numeric backend {backend!r}")


def _has_gpu() -> bool:
    return bool(paddle_module().is_compiled_with_cuda())


def _first_tp_rank(case, rank):
    for r in case.ranks:
        if case.dp_index(r) == case.dp_index(rank) and case.tp_index(r) == 0:
            return r
    return None


def compare_runs(case, rank, orig, rew, rew_all, depth, params_removed, renames=None,
                 unobserved=()) -> list:
    """TensorDiffs of one rank over all steps.

    A watched value of the original is compared under its name in the
    rewritten program, or under the new name the adapter maps it to
    (``renames``); a parameter the pass removed on this rank is compared
    with the first TP rank's copy; any other watched value that vanished is
    a failure, never dropped, except a value the pass leaves stale on
    purpose that is dead in the rewritten program (``unobserved``, checked by
    ``verify/ir/dead_values.py``).
    """
    renames = renames or {}
    diffs = []
    for k, (ref_step, cand_step) in enumerate(zip(orig.steps, rew.steps)):
        for name, ref in ref_step.items():
            if name in unobserved:
                continue
            new = renames.get(name)
            if name in cand_step:
                diffs.append(compare(name, k, ref, cand_step[name], depth))
            elif new is not None and new in cand_step:
                diffs.append(compare(name, k, ref, cand_step[new], depth,
                                     note=f"renamed by the pass to {new}"))
            elif name in params_removed:
                first = _first_tp_rank(case, rank)
                src = rew_all.get(first)
                if src is not None and name in src.steps[k]:
                    diffs.append(compare(name, k, ref, src.steps[k][name], depth,
                                         note=f"removed on rank {rank}; compared with "
                                              f"rank {first}'s copy"))
                else:
                    diffs.append(_vanished(name, k, ref, depth,
                                           "vanished from every rank of its TP group"))
            else:
                diffs.append(_vanished(name, k, ref, depth,
                                       "vanished from the rewritten program without a "
                                       "declared rename"))
    return diffs


def worst_per_tensor(diffs) -> list:
    """One row per tensor: its worst step (a failing step first), so the
    report grows with the watched tensors, not with tensors x steps."""
    worst = {}
    for d in diffs:
        w = worst.get(d.name)
        if w is None or (w.ok and not d.ok) or (w.ok == d.ok and d.max_abs > w.max_abs):
            worst[d.name] = d
    return [d.to_dict() for d in worst.values()]


def _vanished(name, step, ref, depth, why):
    d = compare(name, step, ref, ref, depth)
    d.ok, d.note, d.bitwise = False, why, False
    d.max_abs, d.candidate = float("inf"), float("nan")
    return d


def same_rewrite(a, b) -> str:
    """'' when snapshots ``a`` and ``b`` hold the same ops, dtypes aside;
    else the first difference (the float32 twin must stand for the case)."""
    import re

    def plain(op):  # dtype attrs dropped, dtype words in names blurred
        keep = {k: v for k, v in op.attrs.items() if "dtype" not in k}
        return re.sub(r"(bfloat16|float16|float32|fp16|fp32|bf16)", "DT",
                      repr((op.type, sorted(op.inputs.items()), sorted(op.outputs.items()),
                            sorted(keep.items()))))

    for which, xs, ys in (("main", a.ops, b.ops), ("startup", a.startup_ops, b.startup_ops)):
        xs_, ys_ = [plain(o) for o in xs], [plain(o) for o in ys]
        if xs_ == ys_:
            continue
        for i, (x, y) in enumerate(zip(xs_, ys_)):
            if x != y:
                return f"{which} op {i}: {xs[i].render()} vs {ys[i].render()}"
        return f"{which}: {len(xs_)} ops vs {len(ys_)}"
    return ""


def numeric_checks(case, outcomes, backends=("simulated",), seed: int = 0,
                   steps: int = DEFAULT_STEPS, adapter=None, mutator=None,
                   notes=None) -> list:
    """CheckResults of kind ``numeric`` for one application."""
    hook = getattr(adapter, "numeric_checks", None)
    if hook is not None:  # a pass with its own oracle (the micro-step runs, AMP's rounding)
        return hook(case, outcomes, backends=backends, seed=seed, notes=notes,
                    mutator=mutator)
    if getattr(case, "ir", "legacy") == "pir":  # PIR programs: their own runner
        from .pir_runner import pir_numeric_checks

        return pir_numeric_checks(case, outcomes, backends=backends, seed=seed, steps=steps,
                                  adapter=adapter, notes=notes)
    paddle_module()
    originals = {o.rank: o.run.original for o in outcomes}
    rewrittens = {o.rank: o.run.rewritten for o in outcomes}
    twin = case.numeric_twin()
    twin_note = ""
    if twin is not case and adapter is not None:
        # Same ops in float32: the case's own programs miss CPU kernels in
        # their dtype (named from Paddle's registries, op by op)
        from .low_precision_kernels import describe, missing_kernels

        missing = [m for o in outcomes for which, rp in (("original", o.run.original),
                                                         ("rewritten", o.run.rewritten))
                   if rp is not None
                   for m in missing_kernels(rp.main, f"{which} rank {o.rank}")]
        why_twin = (f"the case's own {case.params.get('amp_dtype')} programs do not run on "
                    f"this build: {describe(missing)}" if missing else
                    f"Paddle registers a CPU kernel for every op of the case's own "
                    f"{case.params.get('amp_dtype')} programs in its dtype (no promise that "
                    "they run: a kernel may read a mixed-precision input in the wrong "
                    "dtype); numeric runs take the float32 twin on a CPU build")
        runs = {r: offload.run_pass(adapter, twin, r) for r in twin.ranks}
        crashed = [r for r, run in runs.items() if run.error]
        if crashed:
            return [CheckResult(KIND, "numeric twin", None, Verdict.INCONCLUSIVE,
                                f"the pass raised on the float32 twin of {case.name} "
                                f"(rank {crashed[0]}), so nothing ran",
                                details={"traceback": runs[crashed[0]].error})]
        if mutator is not None:  # the mutant under test, applied to the twin too
            from verify.ir.snapshot import from_programs

            rr = runs[mutator[0]].rewritten
            mutator[1](rr.main, rr.startup, from_programs(rr.main, rr.startup), mutator[0])
        from verify.ir.snapshot import from_programs

        for o in outcomes:  # the twin must be the same rewrite, dtypes aside
            t = runs[o.rank].rewritten
            why = same_rewrite(o.after, from_programs(t.main, t.startup))
            if why:
                return [CheckResult(KIND, "numeric twin", o.rank, Verdict.INCONCLUSIVE,
                                    f"the pass rewrote the float32 twin of {case.name} "
                                    f"differently on rank {o.rank} ({why}), so its runs "
                                    f"cannot stand in for the case; {why_twin}",
                                    details={"missing_kernels": missing})]
        originals = {r: run.original for r, run in runs.items()}
        rewrittens = {r: run.rewritten for r, run in runs.items()}
        twin_note = f" [float32 twin: same ops, float32 compute; {why_twin}]"
    renames = {o.rank: adapter.renames(case, o.rank, o.before, o.after)
               for o in outcomes} if adapter is not None else {}
    from verify.ir.dead_values import unobserved

    dead = {o.rank: unobserved(adapter, case, o.rank, o.before, o.after)
            for o in outcomes} if adapter is not None else {}
    results = []
    runs = {}
    # what keeps real CPU ranks from running this case faithfully (a float32
    # twin has no half-precision problem)
    unfaithful = [r for r in (case.gloo_unfaithful or "").split("; ")
                  if r and not (twin_note and "float16" in r)]
    for backend in backends:
        _backend_checks(case, backend, f"{backend} run of {case.name}", originals,
                        rewrittens, seed, steps, renames, dead, notes, unfaithful,
                        results, runs)
    if "simulated" in runs:  # a clip can hide a factor common to all gradients
        results += _clip_off_checks(case, originals, rewrittens, seed, steps, renames,
                                    dead, notes)
    if "simulated" in runs and "ranks" in runs:
        programs = {"original": originals, "rewritten": rewrittens}

        def rerun(backend, which, extra_watch):  # the localisation's runs (one rank's names)
            specs = make_specs(case, programs[which], seed, steps,
                               *((renames, originals) if which == "rewritten" else ()))
            for r, sp in specs.items():
                sp.watch = list(dict.fromkeys(list(sp.watch) + list(extra_watch.get(r, ()))))
            return _run(backend, specs, f"{backend} run of {case.name} ({which}, every "
                        "value watched)")

        agree = _agreement(case, runs["simulated"], runs["ranks"], programs, steps, rerun)
        results += agree
        distrust_simulator(results, agree)
    # say what was really run: real ranks, or the simulator alone
    witness = "real ranks" if "ranks" in runs else \
        "simulator only" if "simulated" in runs else "nothing ran"
    for r in results:
        r.message += twin_note
        if witness == "simulator only" and "ranks" in backends and r.verdict != Verdict.INCONCLUSIVE:
            r.message += " [simulator only: real ranks did not run this case]"
        r.details["twin"] = bool(twin_note)
        if twin_note:
            r.details.setdefault("missing_kernels", missing)
        r.details["witness"] = witness
    return results



def _backend_checks(case, backend, where, originals, rewrittens, seed, steps, renames,
                    dead, notes, unfaithful, results, runs) -> None:
    """Run ``originals`` and ``rewrittens`` ({rank: RankProgram}) on ``backend``
    and append the per-rank comparisons to ``results`` (``runs[backend]``: the
    original's results, for the agreement check).  A run reused from the
    run memo (``_run``) is said in each check's message and details."""
    first, reused = len(results), {}
    _run_and_compare(case, backend, where, originals, rewrittens, seed, steps, renames,
                     dead, notes, unfaithful, results, runs, reused)
    got = {k: v for k, v in reused.items() if v}
    for r in results[first:] if got else ():  # said, never hidden
        r.details["run_reused"] = got
        r.message += "".join(f" [{k} run reused: key {v['key']} from {v['reused_from']}]"
                             for k, v in got.items())


def _run_and_compare(case, backend, where, originals, rewrittens, seed, steps, renames,
                     dead, notes, unfaithful, results, runs, reused) -> None:
    if backend == "ranks" and unfaithful and not _has_gpu():
        if notes is not None:
            notes.append(f"ranks backend not run: real CPU ranks cannot run this case "
                         f"faithfully ({'; '.join(unfaithful)}); numeric evidence comes "
                         "from the simulator only")
        return
    # what the rewritten startup programs initialise differently: named in
    # every difference the runs show (a rank's init can move other ranks' values)
    changed = legacy_init_changes(originals, rewrittens)
    why = f"; {describe_init_changes(changed)}" if changed else ""
    extra = {"init_changes": changed} if changed else {}
    try:
        orig = _run(backend, make_specs(case, originals, seed, steps), where + " (original)")
        reused["original"] = dict(run_memo.LAST)
    except BackendError as exc:
        if isinstance(exc, UnsupportedJob) and notes is not None:
            notes.append(f"{backend} backend not run: {exc}")
            return
        results.append(CheckResult(KIND, f"{backend} run", None, Verdict.INCONCLUSIVE,
                                   f"the ORIGINAL program does not run: {failure_line(exc)}",
                                   details={"backend": backend}))
        return
    try:
        rew = _run(backend, make_specs(case, rewrittens, seed, steps, renames, originals),
                   where + " (rewritten)")
        reused["rewritten"] = dict(run_memo.LAST)
    except BackendError as exc:
        if isinstance(exc, ProcessCrash) or environment_cause(str(exc)):
            # crashed/overran, or the checker's environment failed: no evidence
            results.append(CheckResult(KIND, f"{backend} run", exc.rank,
                                       Verdict.INCONCLUSIVE,
                                       f"the rewritten program's run did not complete: "
                                       f"{failure_line(exc)}",
                                       details={"backend": backend, "error": str(exc)}))
            return
        results.append(CheckResult(KIND, f"{backend} run", exc.rank, Verdict.NOT_EQUIVALENT,
                                   f"the rewritten program no longer runs (the original runs): "
                                   f"{str(exc).splitlines()[0]}{why}",
                                   counterexample={"rank": exc.rank,
                                                   "error": str(exc)[:2000], **extra},
                                   details={"backend": backend}))
        return
    runs[backend] = {"original": orig, "rewritten": rew}  # for the cross-check
    for rank in case.ranks:
        rp_o, rp_r = originals[rank], rewrittens[rank]
        removed = set(_params(rp_o)) - set(_params(rp_r))
        # a removed parameter's gradient goes with it (compared likewise)
        removed |= {g.name for p, g in rp_o.params_grads if p.name in removed}
        depth = reduction_depth(rp_o, case.world_size, steps)
        diffs = compare_runs(case, rank, orig[rank], rew[rank], rew, depth, removed,
                             renames.get(rank), dead.get(rank) or ())
        bad = [d for d in diffs if not d.ok]
        table = worst_per_tensor(diffs)
        if not diffs:
            results.append(CheckResult(KIND, f"{backend} run", rank, Verdict.INCONCLUSIVE,
                                       f"{where} rank {rank}: nothing to compare",
                                       details={"backend": backend}))
        elif bad:
            w = max(bad, key=lambda d: d.max_abs)
            results.append(CheckResult(
                KIND, f"{backend} run", rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {rank}: {len(bad)} of {len(diffs)} tensor comparisons "
                f"differ; worst {w.name} at step {w.step} index {w.worst_index}: "
                f"{w.candidate:.6g} vs {w.reference:.6g} (abs err {w.max_abs:.3g} > "
                f"tol {w.tol:.3g}){' ' + w.note if w.note else ''}{why}",
                counterexample={"rank": rank, "backend": backend, "tensor": w.name,
                                "step": w.step, "index": w.worst_index,
                                "original": w.reference, "rewritten": w.candidate,
                                "abs_err": w.max_abs, "tol": w.tol, **extra},
                details={"backend": backend, "tensors": table}))
        else:
            w = max(diffs, key=lambda d: d.max_abs)
            nbit = sum(d.bitwise for d in diffs)
            results.append(CheckResult(
                KIND, f"{backend} run", rank, Verdict.EQUIVALENT,
                f"{where} rank {rank}: {len(diffs)} tensor comparisons over {steps} steps "
                f"agree ({nbit} bitwise); largest abs err {w.max_abs:.3g} on {w.name} "
                f"(tol {w.tol:.3g})",
                details={"backend": backend, "tensors": table}))


def _clip_off_checks(case, originals, rewrittens, seed, steps, renames, dead, notes) -> list:
    """The simulated comparison once more with every global-norm clip
    threshold raised so that no clip is active (verify/numeric/clip_witness.py):
    a clip active in every step cancels a factor common to all gradients."""
    from .clip_witness import HUGE, clip_off

    off_o = {r: clip_off(rp) for r, rp in originals.items()}
    if not any(v is not None for v in off_o.values()):
        return []
    off_r = {r: clip_off(rp) for r, rp in rewrittens.items()}
    missing = [r for r in originals if off_o[r] is None or off_r[r] is None]
    if missing:
        return [CheckResult(KIND, "simulated run (clip off)", missing[0], Verdict.INCONCLUSIVE,
                            f"rank {missing[0]}: a global-norm clip threshold is not found in "
                            "both programs, so the run with the clip inactive was not made",
                            details={"backend": "simulated", "clip": "off"})]
    results = []
    _backend_checks(case, "simulated", f"simulated run of {case.name} with the clip off "
                    f"(threshold {HUGE:g})", off_o, off_r, seed, steps, renames, dead, notes,
                    [], results, {})
    for r in results:
        r.name = "simulated run (clip off)"
        r.details["clip"] = "off"
    return results

def _agreement(case, sim, real, programs, steps, rerun=None) -> list:
    """The simulator is trusted only where it agrees with real ranks: on
    every rank, the original's runs and the rewritten's runs of the two
    backends compared (``sim``/``real``: ``{"original"|"rewritten": {rank:
    RankResult}}``; ``programs``: the same keys, ``{rank: RankProgram}``).
    Where they part, the check is INCONCLUSIVE naming the first op whose
    value parts (:func:`first_parting_op`) and both backends' values there."""
    out = []
    for which in ("original", "rewritten"):
        if which not in sim or which not in real:
            continue
        for rank in case.ranks:
            if rank not in sim[which] or rank not in real[which]:
                continue
            depth = reduction_depth(programs["original"][rank], case.world_size, steps)
            diffs = compare_runs(case, rank, real[which][rank], sim[which][rank],
                                 sim[which], depth, set())
            bad = [d for d in diffs if not d.ok]
            name = "simulator vs ranks" + ("" if which == "original" else " (rewritten)")
            details = {"backend": "both", "program": which,
                       "tensors": [d.to_dict() for d in diffs]}
            if not diffs:
                out.append(CheckResult(KIND, name, rank, Verdict.INCONCLUSIVE,
                                       f"nothing to compare between simulator and ranks "
                                       f"({which} program, rank {rank})", details=details))
                continue
            if not bad:
                out.append(CheckResult(KIND, name, rank, Verdict.EQUIVALENT,
                                       f"simulator and real ranks agree on {len(diffs)} "
                                       f"tensors of the {which} program", details=details))
                continue
            at = _localise(case, rank, which, programs[which][rank], bad, depth, rerun)
            out.append(CheckResult(
                KIND, name, rank, Verdict.INCONCLUSIVE,
                f"simulator DISAGREES with real ranks on the {which} program, rank {rank} "
                f"({len(bad)} of {len(diffs)} tensors): first at {_where(at)}: simulator "
                f"{at['simulator']:.6g} vs real ranks {at['ranks']:.6g}: the simulator's "
                "numeric results on this rank are untrusted",
                counterexample={"rank": rank, "program": which, **at}, details=details))
    return out


def _where(at) -> str:
    op = (f"op {at['op_index']} ({at['op_type']})" if at.get("op_index") is not None
          else "no op of the main program")
    return f"{op} writing {at['var']}, step {at['step']} index {at['index']}"


def last_writers(program) -> dict:
    """``{var: index of the last op of main's global block writing it}``:
    a value read after a step is the one its last writer left (an in-place
    collective overwrites its input)."""
    out = {}
    for i, op in enumerate(program.global_block().ops):
        for n in op.output_arg_names:
            out[n] = i
    return out


def first_parting_op(program, bad) -> dict:
    """Of the TensorDiffs ``bad`` (simulator vs real ranks, one rank), the one
    at the earliest step whose value's last writer comes first in program
    order: ``{op_index, op_type, var, step, index, simulator, ranks}``."""
    ops = program.global_block().ops
    writer = last_writers(program)
    step = min(d.step for d in bad)
    first = min((d for d in bad if d.step == step),
                key=lambda d: (writer.get(d.name, len(ops)), d.name))
    i = writer.get(first.name)
    return {"op_index": i, "op_type": ops[i].type if i is not None else None,
            "var": first.name, "step": step, "index": first.worst_index,
            "simulator": float(first.candidate), "ranks": float(first.reference)}


def _localise(case, rank, which, rp, bad, depth, rerun) -> dict:
    """:func:`first_parting_op` over every value the rank's main program
    writes: both backends run once more with all of them watched (only on a
    disagreement); over the watched values alone when that run fails."""
    at = first_parting_op(rp.main, bad)
    if rerun is None:
        return at
    extra = {rank: list(last_writers(rp.main))}
    try:
        real, sim = rerun("ranks", which, extra), rerun("simulated", which, extra)
    except Exception as exc:  # noqa: BLE001 (a failed localisation keeps the coarser one)
        at["localised"] = f"over the watched values only ({failure_line(exc)})"
        return at
    diffs = compare_runs(case, rank, real[rank], sim[rank], sim, depth, set())
    more = [d for d in diffs if not d.ok]
    if more:
        at = first_parting_op(rp.main, more)
        at["localised"] = "over every value the program writes"
    return at


def distrust_simulator(results, agreement) -> None:
    """A simulated result of a rank on which the simulator and real ranks
    disagree (``agreement``) no longer decides: it becomes advisory, saying
    why; the real ranks' results and the INCONCLUSIVE cross-check decide."""
    parted = {c.rank for c in agreement if c.verdict == Verdict.INCONCLUSIVE and c.counterexample}
    for r in results:
        if r.rank in parted and r.details.get("backend") == "simulated" and not r.advisory:
            r.advisory = True
            r.message += (f" [untrusted: the simulator disagrees with real ranks on rank "
                          f"{r.rank}; see 'simulator vs ranks']")
