"""The planner relation, run: the serial program on one process against every
rank's final program in lock step, K training steps.

Inputs are the relation's inputs: the serial parameters are seeded global
values (``inputs.param_value``), each rank's initial parameter is the slice
of the serial one its placement names (``verify/numeric/placements.input_piece``);
the serial feeds are seeded global batches, each rank is fed its slice
(a DP rank its rows of the batch).  The ranks' own startup programs run
first (they initialise optimizer states and the learning rate); their
random parameter draws are then overwritten with the slices.

Compared after every step, each through its placement in the rank's final
program (``verify/numeric/placements.py``): the loss, every parameter after the
update, every gradient the optimizer reads (pieces along ``Shard(d)``,
equal along ``Replicate``, reduced along ``Partial``), with the dtype- and
depth-derived tolerances of ``compare.py``, floored by the serial run's own
float32 rounding error of each value, measured by running the serial
program again in float64 (``float64_reference.py``).  Where a rank differs, the
first divergence in that rank's program order is located: the first op
carried over from the serial program whose result no longer relates to its
serial value; the stage blamed is the stage that made the op feeding it
(e.g. ``reshard`` for a collective the reshard functions built), or, when
all its inputs still relate, the op itself.
"""
from __future__ import annotations

import numpy as np

from verify.verdicts import CheckResult, Verdict

from .compare import MEASURED_SAFETY, compare
from .divergence import blamed_op_text, first_divergent_op, serial_counterparts  # noqa: F401
from .fused_params import fuse_by_record, fused_records, with_fused_values
from .inputs import feed_value, param_value
from .peer_names import peer_view
from .run_spec import BackendError, caught_ranks_failure

KIND = "numeric"


def run_serial_exported(exported, params, feeds, watch, steps, seed: int = 0) -> list:
    """``[{name: ndarray}]`` per step of the serial program (in whichever
    process): its own startup seeded by ``seed``, then the given global
    parameters and states, then K steps: the step loop of every PIR run
    (``pir_runner.run_exported``)."""
    from .pir_runner import run_exported

    return run_exported(exported, params, feeds, watch, seed, steps)


def startup_states(exported, seed: int = 0) -> dict:
    """The persistable values a rank's startup program (seeded by ``seed``)
    writes that its main program reads and that are not parameters (learning
    rate, optimizer states): ``{name: ndarray}``."""
    import paddle

    from verify.ir.pir_snapshot import import_programs

    from .inputs import run_startup, scope_values

    with paddle.pir_utils.IrGuard():
        main, startup, _ = import_programs(exported)
        wanted = [op.attrs()["name"] for op in main.global_block().ops
                  if op.name() == "pd_op.data" and getattr(op.result(0), "persistable", False)]
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            run_startup(exe, startup, seed)
        return scope_values(scope, wanted)


def run_relation(serial, ranks, rings, state_placements, steps, where,
                 state_shapes=None, seed: int = 0) -> tuple:
    """Both sides in one process (one worker call): the ranks' startup
    states assembled into the serial run's states, the serial run, then the
    ranks in lock step; ``(serial outputs, {rank: outputs})``.

    A rank's startup that writes a state with a coarser shape than the
    rank's main program reads (``state_shapes``: ``{rank: {name: local
    shape}}``): the *global* shape, or, under a sharded optimizer on a DP x
    TP mesh, the parameter's TP piece not yet split over ``dp`` (the planned
    startup is not resharded when the planner runs without
    ``Engine._initialize``) gives its slice, on both sides."""
    return serial_then_ranks(
        ranks, state_placements, state_shapes, seed,
        lambda sstates: run_serial_measured(serial, {**sstates, **serial["params"]},
                                            serial["feeds"], serial["watch"], steps, seed),
        lambda: run_ranks_in_waves(ranks, rings, steps, where, seed))


def run_serial_measured(exported, params, feeds, watch, steps, seed: int = 0) -> list:
    """:func:`run_serial_exported`, each float32 value's float64 run beside it
    as ``<name>@float64`` (``float64_reference.py``): the measured rounding
    error of the float32 run that ``compare.tolerance`` takes as its floor."""
    from .float64_reference import with_float64

    out = run_serial_exported(exported, params, feeds, watch, steps, seed)
    return with_float64(lambda data, p, f: run_serial_exported(data, p, f, watch, steps, seed),
                        exported, params, feeds, out)


def serial_then_ranks(ranks, state_placements, state_shapes, seed, run_serial, run_ranks):
    """``(serial outputs, {rank: outputs})``: the ranks' startup states
    assembled (:func:`assembled_states`), ``run_serial(states)``, then
    ``run_ranks()``.  Where the serial side ran and the ranks' side failed
    (a rank's startup or step raised, the schedule cannot complete: not a
    limit of the runner), the ranks' outputs are ``{RANKS_FAILURE: ...}``
    saying so (:func:`ranks_failure`); a rank's startup failing, the serial
    program runs on its own startup's states instead.  A failure of the
    serial side propagates: the original does not run."""
    try:
        sstates = assembled_states(ranks, state_placements, state_shapes, seed)
    except RankStartupError as exc:
        return run_serial({}), ranks_failure(exc, "the ranks' startup programs")
    serial_out = run_serial(sstates)
    try:
        return serial_out, run_ranks()
    except Exception as exc:
        if not caught_ranks_failure(exc):
            raise
        return serial_out, ranks_failure(exc, "the ranks' steps")


class RankStartupError(BackendError):
    """A rank's startup program raised (the rank is named): the planned
    program fails, not the checker (``run_spec.RANKS_FAILURE``)."""


def ranks_failure(exc, phase) -> dict:
    """``{RANKS_FAILURE: ...}``, the ranks' outputs of a relation run whose
    serial side ran and whose ranks failed (``run_spec.ranks_failure``)."""
    from .run_spec import RANKS_FAILURE, ranks_failure as failure

    return {RANKS_FAILURE: failure(exc, phase)}


def assembled_states(ranks, state_placements, state_shapes=None, seed: int = 0) -> dict:
    """The serial run's states (``{name: ndarray}``) assembled through their
    placements from what the ranks' startup programs write; a rank's state
    written coarser than its main program reads is cut to its piece, in
    ``ranks[r]["params"]`` too (see :func:`run_relation`)."""
    from .placements import assemble_global, piece_from_coarser

    states = {}
    for r, d in ranks.items():
        try:
            states[r] = startup_states(d["exported"], seed)
        except Exception as exc:  # the executor on the rank's startup program
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise RankStartupError(f"rank {r}'s startup program raised: "
                                   f"{type(exc).__name__}: {first}", r) from exc
    for r, st in states.items():
        for n, v in list(st.items()):
            local = list((state_shapes or {}).get(r, {}).get(n, v.shape))
            plc = state_placements.get(n)
            if list(v.shape) != local:
                piece = piece_from_coarser(v, local, plc, r)
                if piece is not None:
                    st[n] = np.ascontiguousarray(piece)
                    ranks[r]["params"][n] = st[n]
    names = sorted({n for s in states.values() for n in s})
    sstates = {}
    for n in names:
        pieces = {r: s[n] for r, s in states.items() if n in s}
        sstates[n] = assemble_global(pieces, state_placements.get(n))
    return sstates


def collective_waves(main, cut_ops) -> list:
    """``(waves, deps)``: the wave of each collective (in program order): 0 when its input
    depends on no earlier collective's output, else one more than the
    latest wave it depends on; made non-decreasing in program order, so a
    wave's stage runs after every earlier wave's collectives were performed; and per op
    index the collectives (ordinals) its values depend on."""
    ops = list(main.global_block().ops)
    index = {op.id(): i for i, op in enumerate(ops)}
    ordinal = {i: n for n, i in enumerate(cut_ops)}
    deps, waves = {}, []
    for i, op in enumerate(ops):
        d = set()
        for v in op.operands_source():
            if v.initialized() and v.get_defining_op() is not None:
                d |= deps.get(index.get(v.get_defining_op().id()), set())
        if i in ordinal:
            w = 1 + max((waves[m] for m in d), default=-1)
            waves.append(max(w, waves[-1] if waves else 0))
            d = d | {ordinal[i]}
        deps[i] = d
    return waves, deps


def _wave_stage(main, cut_ops, waves, deps, w):
    """Stage of wave ``w``: the collectives of earlier waves replaced by fed
    values, every op that depends on a collective of wave ``w`` or later
    erased, the inputs of wave ``w``'s collectives fetched."""
    import paddle

    prog = main.clone()
    ops = list(prog.global_block().ops)
    later = {n for n, wn in enumerate(waves) if wn >= w}
    with paddle.static.program_guard(prog):
        paddle.pir.reset_insertion_point_to_start()
        for n, i in enumerate(cut_ops):
            if waves[n] < w and ops[i].num_results():  # a send makes nothing
                res = ops[i].result(0)
                new = paddle.static.data(f"__pir_coll_{n}", list(res.shape),
                                         str(res.dtype).replace("paddle.", ""))
                res.replace_all_uses_with(new)
        paddle.pir.reset_insertion_point_to_end()
    # a recv reads nothing (what its peer sends is the lock step's mailbox)
    fetch = [ops[i].operand_source(0) for n, i in enumerate(cut_ops)
             if waves[n] == w and ops[i].num_operands()]
    for i in range(len(ops) - 1, -1, -1):
        if deps[i] & later:
            ops[i].erase()
    for n, i in enumerate(cut_ops):
        if waves[n] < w:
            ops[i].erase()
    feeds = [op.attrs()["name"] for op in prog.global_block().ops if op.name() == "pd_op.data"]
    return prog, fetch, feeds


def _wave_rank_class():
    from .pir_ranks import _PirRank

    class WaveRank(_PirRank):
        """A rank whose stages run once per *wave* of independent collectives
        (``collective_waves``), not once per collective: the lock step still
        performs the collectives one by one, the inputs of a wave's
        collectives come from one run of its stage.  Every stage run of a
        step after the first starts from the step's saved persistable state."""

        def __init__(self, rank, exported, params, feeds, watch, where, seed=0):
            super().__init__(rank, exported, params, feeds, watch, where, restore_state=True,
                             seed=seed, last_stage_only=True)
            import paddle

            from verify.ir.pir_snapshot import import_programs

            from .pir_execution import translate_for_execution

            with paddle.pir_utils.IrGuard():
                main, _, _ = import_programs(exported)
                translate_for_execution(main)
            self.waves, deps = collective_waves(main, self.cut_ops)
            self.wave_stages = {w: _wave_stage(main, self.cut_ops, self.waves, deps, w)
                                for w in sorted(set(self.waves))}
            self.ran = None
            self.runs = 0

        def start(self, step):
            super().start(step)
            self.ran, self.runs = None, 0

        def _run(self, prog, fetch, feed_names):
            import paddle

            if self.runs:
                self._restore()
            self.runs += 1
            feed = {**self.feeds[self.step], **self.values}
            feed = {n: feed[n] for n in feed_names if n in feed}
            with paddle.static.scope_guard(self.scope):
                return self.exe_for(prog).run(prog, feed=feed, fetch_list=fetch)

        def advance(self):
            if self.pos < len(self.colls):
                w = self.waves[self.pos]
                if self.ran != w:
                    got = self._run(*self.wave_stages[w])
                    members = [n for n, wn in enumerate(self.waves)
                               if wn == w and self.colls[n].x is not None]
                    for n, a in zip(members, got):
                        self.values[self.colls[n].x] = np.array(a)
                    self.ran = w
                return self.colls[self.pos]
            got = self._run(*self.stages[-1][:3])
            self.result = {n: np.array(a) for n, a in zip(self.watch, got)}
            return None

    return WaveRank


def run_ranks_in_waves(ranks: dict, rings: dict, steps: int, where: str, seed: int = 0):
    """``{rank: [{name: ndarray}] per step}`` as ``pir_ranks.run_exported_ranks``,
    each rank's program run once per wave of collectives (``WaveRank``), its ops in
    program order (``pir_ranks.program_order``: a stage feeds what a collective
    made, which frees an in-place update from the reads before it)."""
    import paddle

    from .pir_ranks import program_order, run_steps

    WaveRank = _wave_rank_class()
    with paddle.pir_utils.IrGuard(), program_order():
        states = {int(r): WaveRank(int(r), d["exported"], d["params"], d["feeds"],
                                   d["watch"], where, seed) for r, d in sorted(ranks.items())}
        return run_steps(states, rings, steps, where)


def relation_inputs(serial_rel: dict, rank_rels: dict, seed: int, steps: int):
    """``(serial params, serial feeds per step, {rank: (params, feeds per step)})``."""
    from .placements import feed_piece, input_piece

    sparams = {n: param_value(seed, n, p["shape"], p["dtype"])
               for n, p in serial_rel["parameters"].items()}
    # a parameter the rank holds fused of several serial ones: their fusion
    # by its recorded layout (verify/numeric/fused_params.py)
    fused = {n: fuse_by_record(rec, sparams) for n, rec in fused_records(serial_rel).items()}
    sfeeds = []
    for k in range(steps):
        sfeeds.append({n: feed_value(seed, n, f["shape"], f["dtype"], 0, k)
                       for n, f in serial_rel["feeds"].items() if not f["persistable"]})
    ranks = {}
    for r, rel in rank_rels.items():
        params = {n: np.ascontiguousarray(input_piece({**fused, **sparams}[n],
                                                      p["placement"], r))
                  for n, p in rel["parameters"].items() if n in sparams or n in fused}
        feeds = [{n: np.ascontiguousarray(feed_piece(sf[n], f["placement"], r, f["shape"],
                                                     f["dtype"]))
                  for n, f in rel["feeds"].items() if n in sf}
                 for sf in sfeeds]
        ranks[r] = (params, feeds)
    return sparams, sfeeds, ranks


def watched(serial_rel, rank_rels, final_ops) -> tuple:
    """``(serial names, {rank: names})``: the relation's values (loss, grads,
    updated params) and every result of a carried-over op (localisation)."""
    snames, rnames = [], {}
    if serial_rel.get("loss"):
        snames.append(serial_rel["loss"])
    for p in serial_rel["params"].values():
        snames += [p["grad"], p["param"]]
    for r, rel in rank_rels.items():
        names = [rel["loss"]] if rel.get("loss") else []
        for p in rel["params"].values():
            names += [p["grad"], p["param"]]
        for res, ser in serial_counterparts(final_ops.get(r, [])).items():
            names.append(res)
            snames.append(ser)
        rnames[r] = [n for n in dict.fromkeys(names) if n]
    return [n for n in dict.fromkeys(snames) if n], rnames


def _depth(serial_rel, world: int, steps: int) -> int:
    dims = [d for p in serial_rel["params"].values() for d in p["shape"]] or [1]
    return int(max(dims)) * max(world, 1) * max(steps, 1)


def relate_value(serial_value, pieces: dict, placement, rank: int, name: str, step: int,
                 depth: int, rounding=None, measured=None):
    """``TensorDiff`` of rank ``rank``'s piece of a value (assembled through
    ``placement`` with the other ranks' pieces) against the serial value's slice.
    ``rounding``: ``(low dtype, R)`` when the programs compute the value through
    ``R`` roundings to a low dtype (AMP): both sides carry such roundings, at
    places the partition moves (a row-parallel bfloat16 matmul rounds each
    partial sum), so the tolerance is ``amp_runs``' for ``2 R`` roundings (the
    serial side's and the rank's), not float32's.  (The parameters' drift over
    the steps is ``lr`` times a gradient's rounding error: far inside a
    bound relative to the parameter.)  ``measured``: the serial value's float64
    run (``float64_reference.py``), its float32 error the tolerance's floor
    (``compare.py``)."""
    from .placements import assembled_per_rank, local_piece

    expected = np.asarray(local_piece(serial_value, placement, rank))
    got = assembled_per_rank(pieces, placement)[rank]
    got = np.asarray(got).astype(expected.dtype) if np.asarray(got).shape == expected.shape \
        else np.asarray(got)
    if rounding is not None and expected.dtype.kind == "f":
        from .amp_runs import within

        d = within(name, expected, got, rounding[0], 2 * max(rounding[1], 1))
        d.step = step
        return d
    if measured is not None:
        measured = np.asarray(local_piece(np.asarray(measured), placement, rank))
    return compare(name, step, expected, got, depth, measured=measured)


def measured_of(serial_step: dict, name: str):
    """The float64 run of serial value ``name`` (``float64_reference.SUFFIX``),
    or None."""
    from .float64_reference import SUFFIX

    return serial_step.get(name + SUFFIX)


def first_divergence(rank, step, final_ops, serial_out, rank_outs, placements_of, depth,
                     snapshot=None, micro_steps: int = 0):
    """The first carried-over op of ``rank`` (program order) whose result no
    longer relates to its serial value at ``step``, at the same point of the
    step, with the stage blamed (``divergence.first_divergent_op``;
    ``snapshot``: the rank's final program as a plain snapshot, its in-place
    writes).  A merged run (``micro_steps``) copies each value as made; a
    plain run fetches at the program's end."""
    from .divergence import START, UNKNOWN

    def serial_value(ser):
        if not ser.endswith(START):
            return serial_out[step].get(ser)
        name = ser[:-len(START)]  # an input as at the step's start (before its update)
        if micro_steps:  # unchanged through the micro-steps, updated after them
            return serial_out[step].get(f"{name}@micro0")
        return serial_out[step - 1].get(name) if step else None

    def differs(res, ser, plc):
        expected = serial_value(ser)
        if expected is None:
            return UNKNOWN
        pieces = {r: outs[step][res] for r, outs in rank_outs.items() if res in outs[step]}
        try:
            d = relate_value(expected, pieces, plc, rank, res, step, depth,
                             measured=measured_of(serial_out[step], ser))
        except Exception:
            return UNKNOWN
        if d.ok:
            return None
        return ("shape" if d.note.startswith("shape") else "value",
                {"index": d.worst_index, "serial": d.reference, "rank_value": d.candidate})

    return first_divergent_op(final_ops, differs, snapshot, fetched_as_made=bool(micro_steps))


def compare_runs(where, serial_rel, rank_rels, final_ops, serial_out, rank_outs,
                 steps, micro_steps: int = 0, roundings=None, programs=None) -> list:
    """One CheckResult per rank: the loss, every gradient and every updated
    parameter related to the serial run, step by step.  ``micro_steps``: the
    runs are of a gradient merge's job schedule (``merged_relation.py``), a
    step an optimizer step; the loss of each micro-step is compared
    (``<loss>@micro<i>``) and the gradients are the merged ones.  ``roundings``:
    ``{serial value name: (low dtype, R)}`` of an AMP plan (:func:`relate_value`).
    ``programs``: ``{rank: a callable giving its final program as a plain
    snapshot, or None}``, read only to locate a divergence
    (:func:`first_divergence`)."""
    from .placements import PlacementError, describe

    roundings = roundings or {}
    # the serial counterparts of fused parameters: their parts' values fused
    serial_params, serial_out = with_fused_values(serial_rel, serial_out)

    depth = _depth(serial_rel, len(rank_rels), steps * max(micro_steps, 1))
    checks = []
    for r in sorted(rank_rels):
        rel = rank_rels[r]
        items = []
        if rel.get("loss") and serial_rel.get("loss") and micro_steps:
            items += [(f"loss (micro-step {i + 1})", f"{serial_rel['loss']}@micro{i}",
                       f"{rel['loss']}@micro{i}", rel.get("loss_placement"))
                      for i in range(micro_steps)]
        elif rel.get("loss") and serial_rel.get("loss"):
            items.append(("loss", serial_rel["loss"], rel["loss"], rel.get("loss_placement")))
        for pname, p in rel["params"].items():
            sp = serial_params.get(pname)
            if sp is None:
                continue
            # merged: the serial gradient of the last micro-step stays under its
            # name (a counterpart), the merged one is <name>@merged
            items.append((f"{pname}@GRAD", sp["grad"] + ("@merged" if micro_steps else ""),
                          p["grad"], p["grad_placement"]))
            items.append((f"{pname} (after the update)", sp["param"], p["param"],
                          p["placement"]))
            # merged: the update deferred, the parameter as it was after each micro-step
            items += [(f"{pname} (after micro-step {i + 1})", f"{sp['param']}@micro{i}",
                       f"{p['param']}@micro{i}", p["placement"]) for i in range(micro_steps)]
        missing = sorted(set(serial_rel["params"]) - set(rel["params"]))
        failure, compared, worst, measured_n = None, 0, 0.0, 0
        live_grad = False  # a gradient compared that is not zero everywhere
        for k in range(steps):
            # every rank's piece under rank r's names (programs differ: names do)
            views = {q: outs[k] if q == r else peer_view(outs[k], rank_rels[q], rel)
                     for q, outs in rank_outs.items()}
            for label, sname, rname, plc in items:
                pieces = {q: v[rname] for q, v in views.items() if rname in v}
                if not pieces:  # no rank's run made it: nothing to relate
                    failure = failure or ("inconclusive", label, k,
                                          f"no rank's run gave {rname}", plc, None)
                    continue
                try:
                    d = relate_value(serial_out[k][sname], pieces, plc, r, label, k, depth,
                                     roundings.get(sname), measured_of(serial_out[k], sname))
                except PlacementError as exc:
                    failure = failure or ("inconclusive", label, k, str(exc), plc, None)
                    continue
                compared += 1
                if label.endswith("@GRAD") and np.any(np.asarray(serial_out[k][sname]) != 0):
                    live_grad = True
                worst = max(worst, d.max_abs if np.isfinite(d.max_abs) else float("inf"))
                if not d.ok and (failure is None or failure[0] == "inconclusive"):
                    failure = ("differs", label, k, d, plc, rname)
                elif d.ok and not d.resolved and failure is None:
                    sv = np.asarray(serial_out[k][sname], dtype=np.float64)
                    err = np.nanmax(np.abs(sv - measured_of(serial_out[k], sname)))
                    failure = ("inconclusive", label, k, (
                        f"its serial float32 value at step {k} is rounding noise (its "
                        f"float64 run differs by up to {err:.3g}, {MEASURED_SAFETY:g} times "
                        f"that reaches half its largest magnitude {np.nanmax(np.abs(sv)):.3g}"
                        "): no halving or zeroing of it could be seen"), plc, None)
                if d.ok and measured_of(serial_out[k], sname) is not None:
                    measured_n += 1
            if failure and failure[0] == "differs":
                break
        if failure and failure[0] == "differs":
            _, label, k, d, plc, rname = failure
            program = (programs or {}).get(r)
            loc = first_divergence(r, k, final_ops.get(r, []), serial_out, rank_outs, None,
                                   depth, program() if program else None, micro_steps)
            stage = loc["stage"] if loc else "unknown"
            cex = {"rank": r, "step": k, "value": label, "rank_value_name": rname,
                   "placement": describe(plc), "index": d.worst_index,
                   "serial": d.reference, "rank_piece": d.candidate, "tol": d.tol,
                   "note": d.note, "stage": stage, "first_divergence": loc}
            where_txt = (f"; first divergence: rank {r} op {loc['op_index']} "
                         f"({loc['op_type']}) value {loc['value']}, stage {stage} "
                         f"({blamed_op_text(loc['stage_op'])})"
                         if loc else "")
            checks.append(CheckResult(
                KIND, "planner relation", r, Verdict.NOT_EQUIVALENT,
                f"{where}: rank {r}'s {label} at step {k} is not the serial program's "
                f"through its placement {describe(plc)} (index {d.worst_index}: serial "
                f"{d.reference:.6g}, rank {d.candidate:.6g}{', ' + d.note if d.note else ''})"
                f"{where_txt}", counterexample=cex))
        elif failure:
            _, label, k, why, plc, _ = failure
            checks.append(CheckResult(
                KIND, "planner relation", r, Verdict.INCONCLUSIVE,
                f"{where}: rank {r}'s {label} cannot be related to the serial value "
                f"({describe(plc)}): {why}"))
        elif missing and not rel["params"] and not compared:
            checks.append(CheckResult(
                KIND, "planner relation", r, Verdict.INCONCLUSIVE,
                f"{where}: rank {r} updates none of the serial program's parameters"))
        elif any(lb.endswith("@GRAD") for lb, *_ in items) and not live_grad:
            # a witness that cannot tell a backward from none (a dead ReLU head)
            checks.append(CheckResult(
                KIND, "planner relation", r, Verdict.INCONCLUSIVE,
                f"{where}: rank {r}: every gradient compared is zero in the serial run at "
                f"every step: the inputs witness no backward (the values agree, "
                f"{compared} comparisons, but a dropped or misrouted gradient would too)"))
        elif not compared:  # zero values compared is never a pass
            checks.append(CheckResult(
                KIND, "planner relation", r, Verdict.INCONCLUSIVE,
                f"{where}: rank {r}: no value compared (no loss, gradient or updated "
                "parameter of the serial program on this rank)"))
        else:
            has_loss = any(lb.startswith("loss") for lb, *_ in items)
            n = sum(1 for lb, *_ in items if lb.endswith("@GRAD"))
            if micro_steps:
                what = (f"{'the loss of every micro-step, ' if has_loss else ''}{n} merged "
                        f"gradient(s), {n} parameter(s) unchanged through the micro-steps "
                        f"and updated once ({len(items)} values) relate to the serial "
                        f"micro-steps through their placements for {steps} optimizer steps "
                        f"of {micro_steps} micro-steps")
            elif not rel["params"]:  # a rank of a sub-mesh's consumers: its loss only
                what = (f"the loss relates to the serial run through its placement for "
                        f"{steps} steps; the rank holds none of the serial program's "
                        f"{len(missing)} parameters (other ranks hold them: placement "
                        "coverage)")
            else:
                what = (f"{'the loss, ' if has_loss else ''}{n} gradient(s) and {n} updated "
                        f"parameter(s) ({len(items)} values) relate to the serial run "
                        f"through their placements for {steps} steps")
            checks.append(CheckResult(
                KIND, "planner relation", r, Verdict.EQUIVALENT,
                f"{where}: rank {r}: {what} ({compared} comparisons, "
                f"largest difference {worst:.3g}; executor and simulated collectives; "
                f"{measured_n} with the serial run's float32 error measured by its float64 "
                "run as tolerance floor)",
                details={"compared": compared, "max_abs": worst, "values":
                         [lb for lb, *_ in items], "params_elsewhere": missing,
                         "measured": measured_n}))
    return checks
