"""Numeric runs of PIR programs: Paddle's executor under PIR, in this process.

For each rank, the original and the rewritten programs run K training steps
with identical seeded parameters (set after each side's own startup program
ran, seeded) and seeded inputs (``inputs.py``: values depend on seed, name
and step only), except a parameter the rewritten startup program initialises
differently: it gets what that initialisation draws (``inputs.init_like``),
and a difference the runs show names it (rank, startup op, attrs);
every watched value (the case's loss and fetches, by value name; a value the
pass renamed is fetched under its new name) is compared per element with
the dtype- and depth-derived tolerances of ``compare.py``, whose floor is
also the original programs' own float32 error measured by their float64 run
(:func:`measured`): the rewritten program is another float32 computation of
the same sums, so where terms cancel it may differ by the rounding of the
terms, not of the result.  Ops run in program order (``pir_ranks.program_order``).

A run whose payload (serialized programs, seeded values, rings, steps) was
run before in this process is not run again (``run_memo.py``): the
original programs of a case run once for all passes applied to it.

Each run goes to an isolation worker (``verify/numeric/offload.py``; the
programs travel in PIR's own serialization), so an executor crash is an
INCONCLUSIVE check, not the end of the run.  Limits, stated: real ranks do
not run PIR programs yet, so the witness is the executor (and the
simulator's collectives) alone and the checks say so.
"""
from __future__ import annotations

import traceback

from verify.verdicts import CheckResult, Verdict, environment_cause, failure_line

from . import run_memo
from .compare import MEASURED_SAFETY, compare
from .float64_reference import SUFFIX
from .inputs import (describe_init_changes, feed_value, init_changes, initial_params,
                     snapshot_inits)
from .startup_pieces import Unresolved, set_startup_states, startup_states
from .run_spec import ProcessCrash

KIND = "numeric"


def _values_by_name(program, names) -> dict:
    out = {}
    for op in program.global_block().ops:
        for i in range(op.num_results()):
            v = op.result(i)
            if not v.initialized():
                continue
            n = names.name(v)
            if n is not None:
                out.setdefault(n, v)
    return out


def run_program(rp, snap, watch: list, seed: int, steps: int, where: str = "",
                original=None, case=None, measure: bool = False) -> list:
    """``[{name: ndarray}]`` per step of a one-rank program; ``watch`` names
    values of ``rp.main`` (named by ``rp.names``); ``original``: the
    original's snapshot when ``rp`` is the rewritten program (see
    :func:`rank_inputs`; ``case``, when given, picks the inputs of its
    first rank).  Runs in an isolation worker when isolation is
    enabled (the programs travel in PIR's serialization): a crash of Paddle's
    executor is then a ``WorkerCrash``, never the end of the run.
    ``measure``: each float32 value's float64 run beside it (:func:`measured`)."""
    from . import offload

    rank = case.ranks[0] if case is not None else 0
    params, feeds = rank_inputs(case, rank, rp, snap, seed, steps, original)
    rest = {"params": params, "feeds": feeds,
            "watch": list(watch), "seed": seed, "steps": steps,
            "states": startup_states(snap, rank), "rank": rank}
    exports = _Exports({0: rp})
    payload = lambda by: {**by(0), **rest}  # noqa: E731
    out = _remembered(
        "run_exported", payload, exports,
        lambda: offload.run_call("verify.numeric.pir_runner", "run_exported",
                                 {"exported": exports.get(0), **rest},
                                 where or "PIR executor run"))
    if not measure:
        return out
    return measured({0: out}, "run_exported", payload, exports, lambda data: {
        0: offload.run_call("verify.numeric.pir_runner", "run_exported",
                            {"exported": data[0], **rest, **_widened(params, feeds)},
                            (where or "PIR executor run") + " in float64")})[0]


def _widened(params, feeds) -> dict:
    from .float64_reference import widened

    return {"params": widened(params), "feeds": [widened(f) for f in feeds]}


def measured(out32: dict, name: str, payload, exports, run64) -> dict:
    """``out32`` (``{rank: [{name: array}] per step}``) with each float32
    value's float64 run added as ``<name>@float64``
    (``float64_reference.py``): ``run64({rank: float64 exported})`` runs the
    programs made float64 on widened inputs, through the run memo (keyed as
    the float32 run, ``name`` marked).  The measured rounding error of the
    ORIGINAL programs is the tolerance's floor (``compare.py``): a rewrite
    is another float32 computation of the same sums.  Where a program holds
    a low-precision type or its float64 run fails: ``out32`` as it is (no
    measurement; the depth-derived tolerance).  ``run_memo.LAST`` stays the
    float32 run's."""
    from .float64_reference import SUFFIX, float64_exported, merged

    last = dict(run_memo.LAST)
    data = {r: float64_exported(exports.get(r)) for r in exports.rps}
    if any(d is None for d in data.values()):
        return out32
    try:
        out64 = _remembered(name + SUFFIX, payload, exports, lambda: run64(data))
    except Exception:  # noqa: BLE001 (an op without a float64 kernel: no measurement)
        return out32
    finally:
        run_memo.LAST.clear()
        run_memo.LAST.update(last)
    return {r: merged(steps, out64.get(r, [])) for r, steps in out32.items()}


class _Exports:
    """The serialization of each rank's programs, made at most once per run."""

    def __init__(self, rps: dict):
        self.rps, self._done = rps, {}

    def get(self, r) -> dict:
        if r not in self._done:
            import paddle

            from verify.ir.pir_snapshot import export_programs

            rp = self.rps[r]
            with paddle.pir_utils.IrGuard():
                self._done[r] = export_programs(rp.main, rp.startup, rp.names)
        return self._done[r]

    def stamped(self) -> bool:
        from verify.ir.origin import key_of

        return all(key_of(rp) is not None for rp in self.rps.values())

    def stamp(self, r) -> dict:
        from verify.ir.origin import key_of

        return {"stamp": key_of(self.rps[r])}

    def exported(self, r) -> dict:
        """The key's form of :meth:`get`: the same programs, canonical bytes
        (``canonical_serialization``: two imports of one program serialize
        their named attributes in different orders, and list an op's
        attributes in different orders)."""
        from verify.ir.pir_snapshot import canonical_serialization

        def canonical(k, v):
            if k in ("main", "startup"):
                return canonical_serialization(v)
            if k == "attrs":  # {name: value} per op, in op.attrs()'s (hash map) order
                return [dict(sorted(a.items())) for a in v]
            return v
        return {"exported": {k: canonical(k, v) for k, v in self.get(r).items()}}


def _remembered(name, payload, exports: _Exports, run):
    """``run()``'s result through the run memo.  Programs that carry a stamp
    (``verify/ir/origin.py``: the bytes they were imported from, untouched
    since) are keyed by it, and nothing is serialized when that key is
    known; otherwise, and on a stamp's miss, by their serialization (what
    the run is sent): a pass that left a program alone serializes to the
    original's bytes and so reuses the original's run.  ``payload(by)``:
    the key payload with ``by(rank)`` giving each rank's program part."""
    by_bytes = lambda: run_memo.remembered(  # noqa: E731
        (name, payload(exports.exported)), run, disk=True, valid=run_memo.run_shape)
    if not exports.stamped():
        return by_bytes()
    return run_memo.remembered((name, payload(exports.stamp)), by_bytes, disk=True,
                               valid=run_memo.run_shape)


def merged_steps(outcomes) -> int | None:
    """``k_steps`` when the programs went through a gradient merge (their
    snapshots hold keyword block arguments, the accumulators): the Engine runs
    them as ``[forward, backward] * k + [optimize]``, and so do the numeric
    runs.  ``k`` is the case's (``rp.merge``, a plan's records), else 2."""
    if not any((o.before.meta or {}).get("block_kwargs") or
               (o.after is not None and (o.after.meta or {}).get("block_kwargs"))
               for o in outcomes):
        return None
    for o in outcomes:
        got = getattr(o.run.original, "merge", None)
        if got:
            return int(got.get("k_steps", 2))
    return 2


def multi_rank(case, outcomes) -> bool:
    """Whether a case's programs need every rank at once (several ranks, or a
    collective anywhere): then :func:`run_ranks` runs them in lock step."""
    from verify.ir.collectives import communicates

    return case.world_size > 1 or any(communicates(op.type) for o in outcomes
                                      for op in o.before.ops + o.after.ops)


def rank_inputs(case, rank: int, rp, snap, seed: int, steps: int, original=None) -> tuple:
    """``(params, feeds per step)`` of ``rank``, chosen as the legacy
    simulator's specs choose them (``equivalence.make_specs``): a sharded
    parameter by the rank's TP index, a feed by its DP replica (and TP
    index for ``split="tp"``).  ``original``: the original program's
    snapshot when ``snap`` is the rewritten one: a parameter whose startup
    initialisation differs gets what the rewritten one draws
    (``inputs.initial_params``).  ``case`` None: one rank, nothing sharded."""
    shard = case.tp_index(rank) if case is not None else 0
    dp = case.dp_index(rank) if case is not None else 0
    sharded = case.sharded_params if case is not None else ()
    src = snapshot_inits(original) if original is not None else None
    drawn, pieces = _param_draws(snap, rank)
    params = initial_params(seed, drawn,
                            lambda n: 0 if n in pieces else shard if n in sharded else 0,
                            src, snapshot_inits(snap) if src is not None else None, pieces)
    feeds = [{f.name: feed_value(seed, f.name, f.shape, f.dtype,
                                 dp if f.split == "dp" else dp * 1000 + shard, k)
              for f in rp.feeds} for k in range(steps)]
    return params, feeds


def _param_draws(snap, rank: int) -> tuple:
    """``({param: (shape drawn, dtype)}, {param: piece taker})``: a parameter
    the startup writes at another shape than the main program reads (the
    planner's global value) is drawn at the written shape (one value for
    every rank: TP shard 0) and the rank's piece taken by its placement
    (``startup_pieces.take``; ``Unresolved`` names rank, var and shapes)."""
    from .startup_pieces import mismatched, spec, take

    odd = mismatched(spec(snap))
    drawn, pieces = {}, {}
    for n, v in snap.vars.items():
        if not v.is_parameter:
            continue
        e = odd.get(n)
        if e is None:
            drawn[n] = (v.shape, v.dtype)
            continue
        drawn[n] = (e["written"], v.dtype)
        pieces[n] = lambda arr, e=e, n=n: take(e, rank, n, arr)
    return drawn, pieces


def run_ranks(case, rps: dict, snaps: dict, watch: dict, seed: int, steps: int,
              where: str = "", originals=None, merge_k: int | None = None,
              measure: bool = False) -> dict:
    """Every rank's PIR programs in lock step (``verify/numeric/pir_ranks.py``),
    in an isolation worker when isolation is enabled; ``{rank: [{name:
    ndarray}] per step}``.  ``watch``: ``{rank: [value names]}``;
    ``originals``: ``{rank: original snapshot}`` when these are the
    rewritten programs (see :func:`rank_inputs`); ``measure``: each float32
    value's float64 run beside it (:func:`measured`)."""
    from . import offload

    rest = {}
    for r, rp in rps.items():  # a merged program: a feed per micro-step
        params, feeds = rank_inputs(case, r, rp, snaps[r], seed, steps * (merge_k or 1),
                                    (originals or {}).get(r))
        rest[r] = {"params": params, "feeds": feeds,
                   "watch": list(watch[r]), "states": startup_states(snaps[r], r)}
    common = {"rings": dict(case.rings), "steps": steps, "seed": seed,
              **({"k": int(merge_k)} if merge_k else {})}
    exports = _Exports(rps)
    # merged programs run as the Engine's job schedule (merged_relation.run_schedule)
    module, function = ("verify.numeric.merged_relation", "run_schedule") if merge_k else \
        ("verify.numeric.pir_ranks", "run_exported_ranks")

    def payload(by):  # ``where`` names the run, not part of it
        return {"ranks": {r: {**by(r), **rest[r]} for r in rps}, **common}

    out = _remembered(
        function, payload, exports,
        lambda: offload.run_call(module, function,
                                 {**payload(lambda r: {"exported": exports.get(r)}),
                                  "where": where or "PIR simulator"},
                                 where or "PIR simulator run"))
    if not measure:
        return out
    wide = {r: _widened(rest[r]["params"], rest[r]["feeds"]) for r in rps}
    return measured(out, function, payload, exports, lambda data: offload.run_call(
        module, function, {"ranks": {r: {**rest[r], "exported": data[r], **wide[r]} for r in rps},
                           **common, "where": (where or "PIR simulator") + " in float64"},
        (where or "PIR simulator run") + " in float64"))


def load_for_fetch(exported, watch, what: str = "the program"):
    """(main, startup, the values of ``watch`` by name) of an exported PIR
    program (under ``IrGuard``); KeyError naming a watched value it lacks."""
    from verify.ir.pir_snapshot import import_programs

    from .pir_execution import translate_for_execution

    main, startup, names = import_programs(exported)
    translate_for_execution(main, names)
    values = _values_by_name(main, names)
    missing = [n for n in watch if n not in values]
    if missing:
        raise KeyError(f"no value named {missing[0]} in {what}")
    return main, startup, [values[n] for n in watch]


def run_exported(exported, params, feeds, watch, seed, steps, states=None, rank=0) -> list:
    """The run itself (in whichever process): see :func:`run_program`;
    ``params`` ``{name: ndarray}``, ``feeds`` ``[{name: ndarray}]`` per step;
    ``states``: :func:`startup_states` (``rank``'s pieces taken after the
    startup ran).  The ops run in program order (``pir_ranks.program_order``):
    the dependency order alone does not see a read through
    ``pd_op.share_data_``, and ran an in-place update whose inputs do not
    depend on that read before it, collective or not."""
    import numpy as np
    import paddle

    from .inputs import run_startup

    from .pir_ranks import program_order, serial_interpreter

    with paddle.pir_utils.IrGuard(), serial_interpreter(), program_order():
        main, startup, fetch = load_for_fetch(exported, watch)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        out = []
        with paddle.static.scope_guard(scope):
            run_startup(exe, startup, seed)
            set_startup_states(scope, states or {}, rank, paddle.CPUPlace())
            for name, val in params.items():
                scope.var(name).get_tensor().set(np.ascontiguousarray(val), paddle.CPUPlace())
            for k in range(steps):
                got = exe.run(main, feed=feeds[k], fetch_list=fetch)
                out.append({n: np.array(a) for n, a in zip(watch, got)})
        return out


def init_changes_of(outcomes) -> list:
    """``inputs.init_changes`` of every rank's parameters: what each
    rewritten startup program initialises differently from the original's."""
    out = []
    for o in outcomes:
        if o.before is None or o.after is None:
            continue
        params = [n for n, v in o.after.vars.items() if v.is_parameter]
        out += init_changes(snapshot_inits(o.before), snapshot_inits(o.after), params, o.rank)
    return out


def _why(exc) -> str:
    """One line: the exception line of a worker's traceback, or the exception."""
    from verify.verdicts import error_line

    text = str(exc)
    return error_line(text) if "Traceback" in text else \
        f"{type(exc).__name__}: {(text.strip().splitlines() or [''])[0][:300]}"


def _over_measured(ref, cand, measured) -> float:
    """``max |cand - ref|`` over the original's largest measured float32 error
    ``max |ref - measured|`` (0 where either is 0): what ``MEASURED_SAFETY``
    bounds, recorded so that a run shows its margin."""
    import numpy as np

    r = np.asarray(ref, dtype=np.float64)
    err = np.abs(r - np.asarray(measured, dtype=np.float64))
    diff = np.abs(r - np.asarray(cand, dtype=np.float64))
    err, diff = err[np.isfinite(err)], diff[np.isfinite(diff)]
    if not err.size or not diff.size or not err.max() or not diff.max():
        return 0.0
    return float(diff.max() / err.max())


def _depth(snap, steps) -> int:
    k = 1
    for op in snap.ops:
        if op.type in ("pd_op.matmul", "pd_op.matmul_grad"):
            x = snap.shape((op.inputs.get("x") or [""])[0]) or []
            k = max(k, max([abs(int(d)) for d in x] + [1]))
    return k * steps


def pir_numeric_checks(case, outcomes, backends=("simulated",), seed: int = 0, steps: int = 3,
                       adapter=None, notes=None) -> list:
    results = []
    backend = "simulated"
    if notes is not None and "ranks" in backends:
        notes.append("ranks backend not run: PIR programs are run by Paddle's executor in "
                     "one process (pir_runner); numeric evidence comes from it only")
    merge_k = merged_steps(outcomes)
    multi = bool(outcomes) and (multi_rank(case, outcomes) or bool(merge_k))
    plan = {}
    for o in outcomes:
        rp_o = o.run.original
        ren = adapter.renames(case, o.rank, o.before, o.after) if adapter is not None else {}
        watch = list(dict.fromkeys(list(rp_o.fetches) + ([rp_o.loss] if rp_o.loss else [])))
        cand_names = [ren.get(n, n) for n in watch]
        present = set(o.after.vars)
        plan[o.rank] = (watch, cand_names, [c for c in cand_names if c in present])
    # what the rewritten startup programs initialise differently: named in
    # every difference the runs show (a rank's init can move other ranks' values)
    changed = init_changes_of(outcomes)
    ref_all = cand_all = ref_err = cand_err = None
    reused = {}  # {rank: {"original"/"rewritten": run_memo.LAST}}: runs not re-run
    if multi:  # every rank at once, collectives simulated between stages
        where = f"PIR simulator run of {case.name}"
        try:
            ref_all = run_ranks(case, {o.rank: o.run.original for o in outcomes},
                                {o.rank: o.before for o in outcomes},
                                {r: p[0] for r, p in plan.items()}, seed, steps,
                                where + " (original)", merge_k=merge_k, measure=True)
            for o in outcomes:
                reused.setdefault(o.rank, {})["original"] = dict(run_memo.LAST)
        except Exception as exc:
            ref_err = exc
        if ref_err is None:
            try:
                cand_all = run_ranks(case, {o.rank: o.run.rewritten for o in outcomes},
                                     {o.rank: o.after for o in outcomes},
                                     {r: p[2] for r, p in plan.items()}, seed, steps,
                                     where + " (rewritten)",
                                     {o.rank: o.before for o in outcomes}, merge_k=merge_k)
                for o in outcomes:
                    reused.setdefault(o.rank, {})["rewritten"] = dict(run_memo.LAST)
            except Exception as exc:
                cand_err = exc
    for o in outcomes:
        rp_o, rp_r = o.run.original, o.run.rewritten
        watch, cand_names, cand_present = plan[o.rank]
        where = f"PIR {'simulator' if multi else 'executor'} run of {case.name}"
        try:
            if ref_err is not None:
                raise ref_err
            ref = ref_all[o.rank] if multi else \
                run_program(rp_o, o.before, watch, seed, steps, where + " (original)",
                            case=case, measure=True)
            if not multi:
                reused.setdefault(o.rank, {})["original"] = dict(run_memo.LAST)
        except Unresolved as exc:  # which piece of a startup value: not known
            results.append(CheckResult(KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                                       f"{where} rank {o.rank}: not run: the ORIGINAL "
                                       f"programs' {exc}",
                                       details={"backend": backend, "reason": str(exc)}))
            continue
        except Exception as exc:
            results.append(CheckResult(KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                                       f"the ORIGINAL program does not run: {_why(exc)}",
                                       details={"backend": backend,
                                                "traceback": traceback.format_exc()}))
            continue
        vanished = [n for n, c in zip(watch, cand_names) if c not in cand_present]
        try:
            if cand_err is not None:
                bad = getattr(cand_err, "rank", None)
                if bad is not None and bad != o.rank and not isinstance(cand_err, Unresolved):
                    results.append(CheckResult(
                        KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                        f"{where} rank {o.rank}: not compared: rank {bad}'s rewritten "
                        f"program does not run ({_why(cand_err)})",
                        details={"backend": backend}))
                    continue
                raise cand_err
            cand = cand_all[o.rank] if multi else \
                run_program(rp_r, o.after, cand_present, seed, steps,
                            where + " (rewritten)", o.before, case)
            if not multi:
                reused.setdefault(o.rank, {})["rewritten"] = dict(run_memo.LAST)
        except Unresolved as exc:  # which piece of a startup value: not known
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                f"{where} rank {o.rank}: not compared: the rewritten programs' {exc}",
                details={"backend": backend, "reason": str(exc)}))
            continue
        except Exception as exc:
            if isinstance(exc, ProcessCrash) or environment_cause(
                    f"{exc}\n{getattr(exc, 'traceback', '')}"):
                # crashed, overran, or the checker's environment failed: no evidence
                results.append(CheckResult(
                    KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                    f"the rewritten program's run did not complete: {failure_line(exc)}",
                    details={"backend": backend, "error": str(exc)}))
                continue
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {o.rank}: the rewritten program no longer runs (the original runs): "
                f"{_why(exc)}",
                counterexample={"rank": o.rank, "error": str(exc)[:2000]},
                details={"backend": backend}))
            continue
        depth = _depth(o.before, steps) * (case.world_size if multi else 1)
        diffs, measured_n, ratio = [], 0, 0.0
        for k in range(steps):
            for n, c in zip(watch, cand_names):
                if n in vanished:
                    continue
                note = f"renamed by the pass to {c}" if c != n else ""
                m = ref[k].get(n + SUFFIX)
                d = compare(n, k, ref[k][n], cand[k][c], depth, note=note, measured=m)
                diffs.append(d)
                if m is not None:
                    measured_n += 1
                    if d.ok:  # what the safety factor is measured against
                        ratio = max(ratio, _over_measured(ref[k][n], cand[k][c], m))
        bad = [d for d in diffs if not d.ok]
        noise = [d for d in diffs if d.ok and not d.resolved]
        if vanished:
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {o.rank}: watched value(s) {vanished} vanished from the "
                "rewritten program without a declared rename",
                counterexample={"rank": o.rank, "vanished": vanished},
                details={"backend": backend}))
        if bad:
            w = max(bad, key=lambda d: d.max_abs)
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.NOT_EQUIVALENT,
                f"{where} rank {o.rank}: {len(bad)} of {len(diffs)} tensor comparisons "
                f"differ; worst {w.name} at step {w.step} index {w.worst_index}: "
                f"{w.candidate:.6g} vs {w.reference:.6g} (abs err {w.max_abs:.3g} > "
                f"tol {w.tol:.3g}){' ' + w.note if w.note else ''}"
                f"{'; ' + describe_init_changes(changed) if changed else ''}",
                counterexample={"rank": o.rank, "backend": backend, "tensor": w.name,
                                "step": w.step, "index": w.worst_index,
                                "original": w.reference, "rewritten": w.candidate,
                                "abs_err": w.max_abs, "tol": w.tol,
                                **({"init_changes": changed} if changed else {})},
                details={"backend": backend, "tensors": [d.to_dict() for d in bad[:20]]}))
        elif noise and not vanished:  # decided nothing: never EQUIVALENT
            w = noise[0]
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.INCONCLUSIVE,
                f"{where} rank {o.rank}: {w.name} at step {w.step} is rounding noise in the "
                f"original's float32 run ({MEASURED_SAFETY:g} times its float32 error, "
                "measured by the original's float64 run, reaches half its largest "
                "magnitude): no halving or zeroing of it could be seen",
                details={"backend": backend, "tensors": [d.to_dict() for d in noise[:20]]}))
        elif diffs and not vanished:
            w = max(diffs, key=lambda d: d.max_abs)
            results.append(CheckResult(
                KIND, f"{backend} run", o.rank, Verdict.EQUIVALENT,
                f"{where} rank {o.rank}: {len(diffs)} tensor comparisons over {steps} steps "
                f"agree ({sum(d.bitwise for d in diffs)} bitwise); largest abs err "
                f"{w.max_abs:.3g} on {w.name} (tol {w.tol:.3g}); {measured_n} with the "
                "original's float32 error measured by its float64 run",
                details={"backend": backend, "measured": measured_n,
                         "error_over_measured": ratio}))
    for r in results:
        got = {k: v for k, v in reused.get(r.rank, {}).items() if v}
        if got:  # said, never hidden: which runs were not run again, from which key
            r.details["run_reused"] = got
            r.message += "".join(f" [{k} run reused: key {v['key']} from {v['reused_from']}]"
                                 for k, v in got.items())
        if merge_k and r.verdict != Verdict.INCONCLUSIVE:
            r.message += (f" [merged programs: both driven as the Engine's job schedule, "
                          f"[forward, backward] * {merge_k} + [optimize], a step an optimizer "
                          "step]")
            r.details["merge_k"] = merge_k
        r.details["witness"] = "simulator only"
        r.details["seed"] = seed  # parameters, feeds and the startup programs' draws
        if "ranks" in backends and r.verdict != Verdict.INCONCLUSIVE:
            r.message += (f" [simulator only: {case.gloo_unfaithful}]" if case.gloo_unfaithful
                          else " [simulator only: real ranks did not run this case]")
    return results
