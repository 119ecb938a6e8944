"""The value proof of the planner relation: every rank's final program
against the serial program, through placements, for ALL inputs, at the real
shapes (``passes/planner.py`` calls it; ``verify/numeric/planner_runs.py`` is
the numeric witness of the same relation).

The serial program (the dist program before partition, made a dense program
on global tensors) is executed symbolically (``symbolic.py``) on global input
symbols: every parameter, every persistable state it reads (learning rate,
optimizer moments, beta powers) and every feed is a symbol per element.
Each rank's final program runs on its pieces of those symbols: a rank's
input is the slice of the serial symbol its placement names
(``Shard(d)``: the rank's chunk along ``d``; ``Replicate``: the whole;
``Partial(SUM)``: the first rank of the axis holds it, the others zero),
after its own startup program (whatever the serial program has no
counterpart of keeps the rank's own startup value; a trainable parameter
that startup sets to a constant is an input symbol, as in the value proof:
``symbolic._constant_parameter``).  All ranks run in lock
step, collectives over the plan's rings.

Compared on every rank, each through its placement in the rank's program
(Shard: the slice of the serial value; Replicate: equal; Partial(SUM/AVG):
the sum / mean of the group's pieces equals the serial value): the loss,
every gradient the optimizer reads, and the state after the step -- every
parameter and every persistable state the serial program also holds, as the
in-place writes left it (:func:`final_states`).  The inputs are ALL
parameters and states related by placements, not the startup's values, so a
proof of one step is a proof of every step (the states after a step are
related as the states before were: induction), for the programs' shapes.

How each value is decided is the proof's (``proof.py``): equal canonical
forms, else probes replayed with the real kernels (a difference is a
refutation naming global inputs a user can feed), else Z3, whose models are
replayed before they count.  Sound by construction: a value whose placement
this module cannot relate (no placement recorded and not the whole serial
value, a MAX/MIN partial, a piece of another shape, a value the serial
program has no counterpart of) is INCONCLUSIVE saying which and why, never
proved.  A refuted rank names the first op of its program whose result no
longer relates and the planner stage blamed (``numeric/divergence.py``).

Above ``relation_input_elements`` (the real-model plans) the proof runs by
segments (:func:`_prove_segmented`, cuts in ``segments.py``): the programs
cut where a reshard chain holding a collective ends, each boundary value
proved related where its segment ends and then replaced, on both sides, by
a fresh symbol tensor and its slices; it proves or is INCONCLUSIVE, never
refutes (the numeric relation decides a difference).
"""
from __future__ import annotations

import time
from fractions import Fraction

import numpy as np

from verify.numeric.divergence import START, UNKNOWN, blamed_op_text, first_divergent_op
from verify.numeric.peer_names import peer_view
from verify.numeric.placements import PlacementError, coords, describe, holds, local_piece
from verify.verdicts import CheckResult, Verdict

from verify.ir.inplace import pairs_by_name, resolved

from .proof import ROUNDING, Z3Terms, _ask_z3, _collector_paused, _compare, _counterexample, \
    _region_ops, _Z3Budget, budget_settings
from .expand import expander
from .linear_form import LinearForm
from .paired_form import PairedForm
from .semantics import Ragged, Tensor, Unsupported, leaf_dims
from .symbolic import Budget, ExecError, Executor, Rank, Store, T

KIND, NAME = "value", "planner relation proof"
# inputs (elements of the serial program's parameters, states and feeds) above
# which the proof is not attempted by default: a budget setting
# (proof.DEFAULT_BUDGET "relation_input_elements", --value-relation-inputs)
MAX_INPUT_ELEMENTS = 4096
SERIAL = "serial"  # the leaf suffix of the serial program's input symbols


# -- the state a program leaves ------------------------------------------------
def final_states(snap, roots) -> dict:
    """``{root: value name}``: the value each persistable ``root`` (a
    parameter, a persistable data) holds after the main program, following
    the in-place writes (an optimizer's ``param_out``, ``assign_out_``)."""
    alias = {r: r for r in roots}
    final = {r: r for r in roots}
    for op in snap.ops:
        for src, dst in pairs_by_name(op):
            ins, outs = op.inputs.get(src) or [], op.outputs.get(dst) or []
            if ins and outs and ins[0] in alias:
                root = alias[ins[0]]
                final[root] = outs[0]
                alias[outs[0]] = root
    return final


# -- placements on terms ---------------------------------------------------------
def _tensor(arr, dtype):
    arr = np.asarray(arr, dtype=object)
    return Tensor(arr, leaf_dims(list(arr.shape)), dtype)


def _zero_piece(arr, store):
    out = np.empty(arr.shape, dtype=object)
    out.fill(T(store.ZERO))
    return out


def input_piece(t, placement, rank, store):
    """Rank ``rank``'s input piece of the serial leaf tensor ``t``."""
    arr = local_piece(t.arr, placement, rank)
    if placement and placement.get("partial"):
        c = coords(placement, rank)
        for axis, rtype in placement["partial"].items():
            if rtype != "SUM":
                raise PlacementError(f"an input partial over mesh axis {axis} by {rtype}")
            if c[int(axis)] != 0:
                arr = _zero_piece(arr, store)
    return _tensor(arr, t.dtype)


def assembled(pieces: dict, placement, rank, store):
    """What rank ``rank``'s piece stands for: itself, or, along partial axes,
    the SUM / AVG of its group's pieces (terms); PlacementError for MAX/MIN
    (not a polynomial of the pieces) or a missing addend."""
    mine = pieces[rank]
    if not placement or not placement.get("partial"):
        return mine
    types = set(placement["partial"].values())
    if len(types) != 1 or next(iter(types)) not in ("SUM", "AVG"):
        raise PlacementError(f"a Partial({'/'.join(sorted(types))}) value: not a polynomial "
                             "of the pieces, the proof does not relate it")
    axes = {int(a) for a in placement["partial"]}
    c = coords(placement, rank)
    group = []
    for other in placement["process_ids"]:
        oc = coords(placement, other)
        if all(oc[a] == c[a] for a in range(len(c)) if a not in axes):
            if other not in pieces:
                raise PlacementError(f"rank {other}'s addend of a partial value is missing")
            group.append(pieces[other])
    if any(p.arr.shape != mine.arr.shape for p in group):
        raise PlacementError("partial pieces of different shapes")
    flat = [p.arr.reshape(-1) for p in group]
    out = np.empty(mine.arr.size, dtype=object)
    scale = store.const(Fraction(1, len(group))) if "AVG" in types else None
    for j in range(out.size):
        s = T.total([f[j] for f in flat])
        out[j] = T(store.mul(s.i, scale)) if scale is not None else s
    return Tensor(out.reshape(mine.arr.shape), mine.dims, mine.dtype)


# -- running both sides ----------------------------------------------------------
def _leaf(ex, name, shape, dtype):
    return ex.leaf(f"{name}@{SERIAL}", shape, dtype)


def _run_serial(ex, snap, serial_rel):
    """The serial main program on global input symbols; ``(env, inputs)``."""
    inputs = {}
    for table in ("parameters", "feeds"):
        for n, v in serial_rel[table].items():
            if any(int(d) < 0 for d in v["shape"]):
                raise Unsupported(f"serial input {n} has a -1 dim {v['shape']}: the relation "
                                  "needs the global batch")
            inputs[n] = _leaf(ex, n, v["shape"], v["dtype"])
    st = Rank(SERIAL, snap, list(snap.ops), dict(inputs))
    ex.run({SERIAL: st}, startup=False)
    return st.env, inputs


def fused_inputs(serial_rel, inputs) -> dict:
    """``{fused parameter: global tensor}``: each parameter a rank holds
    fused of several serial ones (``verify/numeric/fused_params.py``), the
    serial leaves' columns in its recorded layout."""
    from verify.numeric.fused_params import fused_records

    return {n: fused_tensor(rec, inputs) for n, rec in fused_records(serial_rel).items()}


def fused_tensor(rec, tensors):
    """The tensor ``rec``'s layout makes of ``tensors`` (``{part: Tensor}``)."""
    parts = [tensors[p] for p in rec["parts"]]
    arr = np.concatenate([tensors[p].arr[..., a:b] for p, a, b, _ in rec["blocks"]], axis=-1)
    return _tensor(arr, parts[0].dtype)


def _rank_inputs(ex, ranks, snaps, rels, inputs, store):
    """Every rank's env before its main program: its startup's values (all
    ranks' startups together: they may broadcast), then every parameter /
    state / feed the serial program has (or a fusion of its parameters,
    ``inputs`` holding it), as the rank's piece of it."""
    states = {r: Rank(r, snaps[r], list(snaps[r].startup_ops), {}) for r in ranks}
    ex.run(states, startup=True)
    for r in ranks:
        env = states[r].env
        for table in ("parameters", "feeds"):
            for n, v in rels[r][table].items():
                if n not in inputs:
                    continue  # the rank's own (its startup's, or a fresh input)
                if table == "feeds" and not v.get("persistable") and \
                        not holds(v.get("placement"), r):
                    continue  # no piece here: a fresh input, so a read of it shows
                piece = input_piece(inputs[n], v.get("placement"), r, store)
                if list(piece.arr.shape) != [int(d) for d in v["shape"]]:
                    raise PlacementError(f"rank {r}'s {n} is {list(v['shape'])}, the serial "
                                         f"{list(inputs[n].arr.shape)} sliced by "
                                         f"{describe(v.get('placement'))} is "
                                         f"{list(piece.arr.shape)}")
                env[n] = piece
    return {r: states[r].env for r in ranks}


def watched_pairs(serial_snap, serial_rel, rank_snap, rel) -> list:
    """``[(label, serial value, rank value, placement)]`` the proof compares on
    one rank: the loss, each gradient, the state after the step; a rank
    value without a serial counterpart has serial value None."""
    out = []
    if rel.get("loss") and serial_rel.get("loss"):
        out.append(("loss", serial_rel["loss"], rel["loss"], rel.get("loss_placement")))
    from verify.numeric.fused_params import FUSED, fused_records

    fused = fused_records(serial_rel)  # their serial values: _with_fused's
    for pname, p in sorted(rel["params"].items()):
        sp = serial_rel["params"].get(pname)
        sgrad = sp and sp["grad"]
        if sp is None and pname in fused:
            sgrad = f"{pname}@GRAD{FUSED}"
        out.append((f"{pname}@GRAD", sgrad, p["grad"], p["grad_placement"]))
    states = {n: v.get("placement") for n, v in rel["parameters"].items()}
    states.update({n: v.get("placement") for n, v in rel["feeds"].items()
                   if v.get("persistable")})
    sroots = set(serial_rel["parameters"]) | {n for n, v in serial_rel["feeds"].items()
                                              if v.get("persistable")}
    sfinal = final_states(serial_snap, sroots)
    rfinal = final_states(rank_snap, set(states))
    for n in sorted(states):
        label = f"{n} (after the step)"
        sname = f"{n}{FUSED}" if n in fused and n not in sroots else sfinal.get(n)
        out.append((label, sname, rfinal[n], states[n]))
    return out


def _with_fused(senv, serial_snap, serial_rel):
    """``senv`` with each fused parameter's serial counterparts
    (``<name>@GRAD@fused``, ``<name>@fused``: its parts' gradients and
    updated values in its recorded layout)."""
    from verify.numeric.fused_params import FUSED, fused_records

    recs = fused_records(serial_rel)
    if not recs:
        return senv
    senv = dict(senv)
    params = serial_rel["params"]
    sfinal = final_states(serial_snap, {p for rec in recs.values() for p in rec["parts"]})
    for n, rec in recs.items():
        grads = {p: senv.get(params[p]["grad"]) for p in rec["parts"]}
        if all(v is not None for v in grads.values()):
            senv[f"{n}@GRAD{FUSED}"] = fused_tensor(rec, grads)
        final = {p: senv.get(sfinal.get(p)) for p in rec["parts"]}
        if all(v is not None for v in final.values()):
            senv[f"{n}{FUSED}"] = fused_tensor(rec, final)
    return senv


@_collector_paused
def prove_relation(where, serial_snap, rank_snaps: dict, serial_rel: dict,
                   rank_rels: dict, final_ops: dict, rings: dict, hang_guard_s: float = 600.0,
                   max_inputs: int | None = None, by_segments: bool | None = None) -> list:
    """One CheckResult (kind "value", ``planner relation proof``) per rank:
    see the module docstring.  ``rank_snaps``/``rank_rels``/``final_ops``
    by rank; ``rings``: the plan's ``{ring: [groups]}``.  The budget is
    deterministic: past the value proof's work units
    (``proof.budget_settings``), past its Z3 rlimits, or with more than
    ``max_inputs`` input elements (default: the budget setting
    ``relation_input_elements``), INCONCLUSIVE "over budget".
    ``hang_guard_s`` CPU seconds is a hang guard, not the budget (no case
    comes near it; INCONCLUSIVE, saying so, never memoized).  ``by_segments``:
    prove by segments (``_prove_segmented``); None: where the inputs are over
    ``max_inputs`` but within ``compositional_limit()``."""
    start = time.perf_counter()
    ranks = sorted(rank_snaps)

    def every(verdict, msg, **details):
        return [CheckResult(KIND, NAME, r, verdict, f"{where} rank {r}: {msg}",
                            details={"seconds": round(time.perf_counter() - start, 3),
                                     "not_proved": verdict != Verdict.EQUIVALENT, **details})
                for r in ranks]

    if max_inputs is None:
        max_inputs = input_limit()
    size = input_elements(serial_rel)
    if by_segments is None:  # above the whole proof's cap, up to the segments' cap
        by_segments = max_inputs < size <= compositional_limit()
    if size > max_inputs and not by_segments:
        return every(Verdict.INCONCLUSIVE, f"not proved: not attempted: the serial program's "
                     f"parameters, states and feeds hold {size} elements, over the relation "
                     f"proof's {max_inputs} (--value-relation-inputs; the real-model plans "
                     "spend the work budget cold and leave values unproved: "
                     "benchmarks/README.md)", reason="over budget (inputs)")
    if by_segments and serial_rel.get("fused"):
        return every(Verdict.INCONCLUSIVE, "not proved: the proof by segments does not "
                     "relate fused parameters", reason="segments: fused parameters")
    regions = _region_ops({"serial": serial_snap}, rank_snaps)
    if regions:  # one SSA execution has no branches or loops
        return every(Verdict.INCONCLUSIVE, f"not proved: {regions[0]} has nested blocks "
                     "(a branch or loop body); the symbolic execution runs no regions",
                     reason="nested regions", region_ops=regions)
    # a read after an in-place write reads the write (verify/ir/inplace.py)
    serial_snap = resolved(serial_snap)
    rank_snaps = {r: resolved(s) for r, s in rank_snaps.items()}
    with _cpu_limit(hang_guard_s):
        return _prove(where, ranks, every, serial_snap, rank_snaps, serial_rel, rank_rels,
                      final_ops, rings, budget_settings(), start, by_segments)


def input_limit() -> int:
    """The input elements above which the proof is not attempted (the budget
    setting ``relation_input_elements`` in force)."""
    return int(budget_settings().get("relation_input_elements", MAX_INPUT_ELEMENTS))


def input_elements(serial_rel) -> int:
    """Elements of the serial program's parameters, states and feeds."""
    return sum(int(np.prod(v["shape"])) if v["shape"] else 1
               for table in ("parameters", "feeds") for v in serial_rel[table].values())


class _OverCPU(Exception):
    pass


class _cpu_limit:
    """Raise ``_OverCPU`` in the main thread once this process spent
    ``seconds`` CPU seconds more (probes and expansions have no deadline of
    their own); elsewhere (a worker thread) only the executor's deadline."""

    def __init__(self, seconds):
        self.seconds, self.armed = seconds, False

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread() and \
                hasattr(signal, "setitimer"):
            def fire(*_):
                raise _OverCPU(f"stopped by the hang guard after {self.seconds:g} CPU s "
                               "(not the budget: that is work units and Z3 rlimits)")
            self.old = signal.signal(signal.SIGPROF, fire)
            signal.setitimer(signal.ITIMER_PROF, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        import signal

        if self.armed:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, self.old)
        return False


def _prove(where, ranks, every, serial_snap, rank_snaps, serial_rel, rank_rels, final_ops,
           rings, bud, start, by_segments=False):
    try:
        if by_segments:
            try:
                return _prove_segmented(where, ranks, every, serial_snap, rank_snaps,
                                        serial_rel, rank_rels, final_ops, rings, bud, start)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                # a record of a shape the cuts do not expect: no proof, said so
                return every(Verdict.INCONCLUSIVE, f"not proved: the proof by segments "
                             f"could not state its cuts: {type(exc).__name__}: {exc}",
                             reason=f"segments: {exc!r}")
        return _prove_inner(where, ranks, every, serial_snap, rank_snaps, serial_rel,
                            rank_rels, final_ops, rings, bud, start)
    except _OverCPU as exc:
        return every(Verdict.INCONCLUSIVE, f"not proved: {exc}",
                     reason=f"hang guard: {exc}", hang_guard=True)


def _prove_inner(where, ranks, every, serial_snap, rank_snaps, serial_rel, rank_rels,
                 final_ops, rings, bud, start):

    # deterministic, as the value proof's
    store = Store(work_limit=bud["work_units"], stored_limit=bud["stored_monomials"])
    store.probe_work = True  # the probes' exact evaluation spends work units too
    T.store = store
    ex = Executor(store, rings, 1, None)
    try:
        senv, inputs = _run_serial(ex, serial_snap, serial_rel)
    except Budget as exc:
        return every(Verdict.INCONCLUSIVE, f"not proved: over budget running the serial "
                     f"program: {exc}", reason=str(exc))
    except (Unsupported, ExecError) as exc:
        return every(Verdict.INCONCLUSIVE, f"the serial program cannot be executed "
                     f"symbolically: {exc}", reason=str(exc))
    try:
        envs = _rank_inputs(ex, ranks, rank_snaps, rank_rels,
                            {**fused_inputs(serial_rel, inputs), **inputs}, store)
        states = {r: Rank(r, rank_snaps[r], list(rank_snaps[r].ops), envs[r]) for r in ranks}
        ex.run(states, startup=False)
    except Budget as exc:
        return every(Verdict.INCONCLUSIVE, f"not proved: over budget running the ranks' "
                     f"programs: {exc}", reason=str(exc))
    except (Unsupported, PlacementError) as exc:
        return every(Verdict.INCONCLUSIVE, f"the ranks' programs cannot be executed on their "
                     f"pieces of the serial inputs: {exc}", reason=str(exc))
    except ExecError as exc:
        bad = exc.rank if exc.rank is not None else ranks[0]
        out = every(Verdict.INCONCLUSIVE, f"not compared: rank {bad}'s program does not run "
                    f"symbolically ({exc})", reason=str(exc))
        for c in out:
            if c.rank == bad:  # the serial program runs; this rank's does not
                c.verdict = Verdict.NOT_EQUIVALENT
                c.message = (f"{where} rank {bad}: its program does not run on its pieces "
                             f"of the serial inputs where the serial program runs: {exc}")
                c.counterexample = {"rank": bad, "error": str(exc)}
        return out
    envs = {r: st.env for r, st in states.items()}
    senv = _with_fused(senv, serial_snap, serial_rel)
    zt = Z3Terms(store)
    z3b = _Z3Budget(bud["z3_rlimit_per_application"], bud["z3_rlimit_per_query"],
                    bud["z3_random_seed"], bud["z3_hang_guard_s"],
                    bud.get("z3_max_memory_mb", 0))
    # every rank's pieces under rank r's names (programs differ: names do)
    return [_judge_rank(where, r, store, zt, z3b, senv,
                        {q: e if q == r else peer_view(e, rank_rels[q], rank_rels[r])
                         for q, e in envs.items()},
                        serial_snap, serial_rel, rank_snaps[r], rank_rels[r],
                        final_ops.get(r, []), start)
            for r in ranks]


def _relate(store, zt, z3b, stats, serial_t, envs, rname, plc, r):
    """``_compare``'s answer for rank ``r``'s value ``rname`` against the
    serial tensor, through ``plc``; ("unknown", why) where the placement
    cannot be related; expected tensor second."""
    if serial_t is None:
        return ("unknown", "the serial program has no counterpart of it"), None
    pieces = {q: env[rname] for q, env in envs.items() if rname in env}
    if r not in pieces:
        return ("unknown", f"rank {r}'s program gives {rname} no value"), None
    try:
        expected = _tensor(local_piece(serial_t.arr, plc, r), serial_t.dtype)
        got = assembled(pieces, plc, r, store)
    except PlacementError as exc:
        return ("unknown", f"its placement {describe(plc)} cannot be related: {exc}"), None
    if got.arr.shape != expected.arr.shape:  # the record and the value disagree: no inputs
        return ("unknown", f"its shape {list(got.arr.shape)} is not the slice "
                           f"{list(expected.arr.shape)} its placement {describe(plc)} names"
                if plc is not None else "no placement recorded, and it is not the whole "
                "serial value"), None
    try:
        out = _compare(store, zt, expected, got, z3b, stats, ask_z3=False)
    except Budget as exc:  # deterministic: the probes' evaluation spends work units
        return ("unknown", f"over budget evaluating probes: {exc} ({store.work} work "
                           f"units of {store.work_limit})"), None
    if plc is None and out is not None and out[0] == "refuted":
        # with no placement recorded the piece may be any slice: not a refutation
        return ("unknown", "no placement recorded, and it is not the whole serial value"), \
            expected
    return out, expected


def _judge_rank(where, r, store, zt, z3b, senv, envs, serial_snap, serial_rel, rank_snap,
                rel, final_ops, start, pairs=None, located=None, expand_cuts=True,
                locate_snap=None):
    """Rank ``r``'s CheckResult.  ``pairs`` (default: ``watched_pairs``)
    name values of ``senv`` / ``envs``; ``located``: ``(serial env, rank
    envs)`` the first divergence is searched in (default: those);
    ``expand_cuts=False`` (by segments) stops at the normal forms."""
    stats = {"queries": 0, "normal_form": 0, "z3_proved": 0, "probe_refuted": 0,
             "z3_refuted": 0, "expanded": 0, "linear": 0, "paired": 0}
    proved, refuted, unknown, cexs, pending = [], [], [], [], []
    if pairs is None:
        pairs = watched_pairs(serial_snap, serial_rel, rank_snap, rel)
    for label, sname, rname, plc in pairs:
        out, expected = _relate(store, zt, z3b, stats, senv.get(sname) if sname else None,
                                envs, rname, plc, r)
        if out is None:
            proved.append(label)
        elif out[0] == "z3":
            pending.append((label, rname, plc, expected, out))
        elif out[0] == "refuted":
            refuted.append(label)
            cexs.append(_cex(store, r, label, rname, plc, expected, out[1]))
        else:
            unknown.append((label, out[1]))
    expand, linear = expander(store), _linear_form(store)
    paired = _paired_form(store, linear)
    for label, rname, plc, expected, (_, zpairs, why_not) in pending:
        try:  # the cheap normal form first, then every cut expanded (expand.py)
            if linear.equal(zpairs):
                proved.append(label)
                stats["linear"] += 1
                continue
            if paired.equal(zpairs):  # cuts opened only where the sides differ
                proved.append(label)
                stats["paired"] += 1
                continue
            if not expand_cuts:  # by segments: the full expansion is not paid for
                unknown.append((label, "not proved by the normal forms with linear or "
                                       "paired cuts (the full expansion and Z3 are not "
                                       "tried by segments)"))
                continue
            if expand.equal(zpairs):
                proved.append(label)
                stats["expanded"] += 1
                continue
        except Budget as exc:  # deterministic (work units)
            unknown.append((label, f"over budget expanding cuts: {exc} ({store.work} "
                                   f"work units of {store.work_limit})"))
            continue
        if refuted:
            unknown.append((label, "not asked of Z3: another value of this rank differs "
                                   "already (probes could not tell this one apart)"))
            continue
        got = assembled({q: env[rname] for q, env in envs.items() if rname in env}, plc, r,
                        store)
        try:
            res = _ask_z3(store, zt, expected.arr.reshape(-1), got.arr.reshape(-1), zpairs,
                          why_not, z3b, stats)
        except Budget as exc:  # a model's replay spends work units too
            unknown.append((label, f"over budget replaying a model: {exc}"))
            continue
        if res is None:
            proved.append(label)
        elif res[0] == "refuted" and plc is None:  # the piece may be any slice
            unknown.append((label, "no placement recorded, and it is not the whole serial "
                                   "value"))
        elif res[0] == "refuted":
            refuted.append(label)
            cexs.append(_cex(store, r, label, rname, plc, expected, res[1]))
        else:
            unknown.append((label, res[1]))
    secs = round(time.perf_counter() - start, 3)
    details = {"seconds": secs, "proved": proved, "refuted": refuted,
               "unknown": [n for n, _ in unknown], "queries": stats["queries"],
               "by_normal_form": stats["normal_form"], "by_linear_form": stats["linear"],
               "by_paired_form": stats["paired"],
               "by_expanded_form": stats["expanded"], "work_units": store.work,
               "stored_monomials": store.stored,
               "by_z3": stats["z3_proved"],
               "refuted_replayed": stats["probe_refuted"] + stats["z3_refuted"],
               "shapes": "at the programs' real shapes (global on the serial side)",
               "terms": len(store.polys)}
    if refuted:
        c = cexs[0]
        loc = _locate(store, zt, *(located or (senv, envs)), r, final_ops,
                      locate_snap if locate_snap is not None else rank_snap)
        c["stage"] = loc["stage"] if loc else "unknown"
        c["first_divergence"] = loc
        where_txt = (f"; first divergence: rank {r} op {loc['op_index']} ({loc['op_type']}) "
                     f"value {loc['value']}, stage {loc['stage']} "
                     f"({blamed_op_text(loc['stage_op'])})"
                     if loc else "")
        val = (f"serial {c['original_value']} vs rank {c['rewritten_value']} at element "
               f"{c['element']}, {c['found_by']}" if "element" in c else c.get("reason", ""))
        return CheckResult(
            KIND, NAME, r, Verdict.NOT_EQUIVALENT,
            f"{where} rank {r}: REFUTED: {len(refuted)} of {len(pairs)} values do not relate "
            f"to the serial program through their placements on inputs replayed through the "
            f"real kernels; first {c['value']} ({describe(plc_of(pairs, c['value']))}): "
            f"{val}{where_txt} ({ROUNDING})",
            counterexample=c, details={**details, "counterexamples": cexs[:5]})
    if unknown:
        return CheckResult(
            KIND, NAME, r, Verdict.INCONCLUSIVE,
            f"{where} rank {r}: not proved: {unknown[0][0]}: {unknown[0][1]} "
            f"({len(proved)} of {len(pairs)} values proved)",
            details={**details, "reason": unknown[0][1], "not_proved": True})
    if not proved:  # zero values compared is never a proof
        return CheckResult(KIND, NAME, r, Verdict.INCONCLUSIVE,
                           f"{where} rank {r}: not proved: no value compared (the rank's "
                           "program holds no loss, gradient or state of the serial program)",
                           details={**details, "not_proved": True})
    return CheckResult(
        KIND, NAME, r, Verdict.EQUIVALENT,
        f"{where} rank {r}: PROVED at the real shapes: {compared_text(proved)} relate to "
        f"the serial program through their placements for all parameters, states and feeds "
        f"related by placements (so for every step) ({stats['normal_form']} by canonical form, "
        f"{stats['linear']} by canonical form with linear cuts expanded, "
        f"{stats['paired']} by canonical forms with cuts opened where the sides differ, "
        f"{stats['expanded']} by canonical form with cuts expanded, {stats['z3_proved']} by "
        f"Z3); {ROUNDING}", details=details)


def _linear_form(store) -> LinearForm:
    """The store's one linear form (its memo shared by every rank's values)."""
    lf = getattr(store, "linear_form", None)
    if lf is None:
        lf = store.linear_form = LinearForm(store)
    return lf


def _paired_form(store, linear) -> PairedForm:
    """The store's one paired form (its memo of proved pairs shared by every
    rank's values: a rank's gradient proved once)."""
    pf = getattr(store, "paired_form", None)
    if pf is None:
        pf = store.paired_form = PairedForm(store, linear)
    return pf


def compared_text(labels) -> str:
    """What ``labels`` (``watched_pairs``' labels) are, counted by kind:
    ``the loss, 4 gradients and 9 states after the step (14 values)``."""
    loss = sum(1 for lb in labels if lb == "loss")
    grads = sum(1 for lb in labels if lb.endswith("@GRAD"))
    states = sum(1 for lb in labels if lb.endswith("(after the step)"))
    parts = (["the loss"] if loss else []) + \
        ([f"{grads} gradient{'s' if grads != 1 else ''}"] if grads else []) + \
        ([f"{states} state{'s' if states != 1 else ''} after the step"] if states else [])
    if not parts:
        return f"{len(labels)} values"
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{text} ({len(labels)} value{'s' if len(labels) != 1 else ''})"


def plc_of(pairs, label):
    return next((p for lb, _, _, p in pairs if lb == label), None)


def _cex(store, r, label, rname, plc, expected, info):
    c = _counterexample(store, r, label, expected, info, None, "at the real shapes")
    c.update({"value": label, "rank_value_name": rname, "placement": describe(plc)})
    if "original_value" in c:
        c["serial_value"], c["rank_piece_value"] = c["original_value"], c["rewritten_value"]
    return c


def _locate(store, zt, senv, envs, r, final_ops, rank_snap=None):
    """The first op of rank ``r`` whose result no longer relates (probes only:
    a replayed difference), with the stage blamed; ``rank_snap``: the rank's
    final program (its in-place writes, ``divergence.program_reads``).  One
    SSA execution keeps every value as made: an input's name is its value at
    the step's start (``<name>@start``), an in-place write's result its own."""
    def differs(res, ser, plc):
        if ser.endswith(START):
            ser = ser[:-len(START)]
        if ser not in senv or res not in envs[r]:
            return UNKNOWN
        try:
            expected = _tensor(local_piece(senv[ser].arr, plc, r), senv[ser].dtype)
            got = assembled({q: env[res] for q, env in envs.items() if res in env}, plc, r,
                            store)
        except (PlacementError, KeyError):
            return UNKNOWN
        if expected.arr.shape != got.arr.shape:
            return "shape", {}
        stats = {"normal_form": 0, "probe_refuted": 0}
        try:
            out = _compare(store, zt, expected, got, None, stats, ask_z3=False)
        except Budget:  # the location is a help, not the verdict
            return UNKNOWN
        if out is None:
            return None
        if out[0] != "refuted":
            return UNKNOWN
        info = out[1]
        idx = [int(x) for x in np.unravel_index(info["index"], expected.arr.shape)] \
            if expected.arr.shape else []
        return "value", {"index": idx, "serial": str(info["va"]), "rank_value": str(info["vb"])}

    return first_divergent_op(final_ops, differs, rank_snap)


# -- the compositional proof -------------------------------------------------------
# above relation_input_elements, up to this many input elements, the proof
# runs by segments (a budget key relation_compositional_inputs would override it;
# proof.DEFAULT_BUDGET holds none yet, so this constant decides): zoo_llama_tp2 (10957)
# PROVED in ~5 CPU s, a 2-layer LLaMA (18751) in ~10 (benchmarks/README.md)
MAX_COMPOSITIONAL_INPUT_ELEMENTS = 65536
# the work units a proof by segments may spend (deterministic; the 2-layer
# LLaMA spends 20 M): past it INCONCLUSIVE, so a plan the segments do not
# suit costs the gate a bounded time
SEGMENTED_WORK_UNITS = 40_000_000


def compositional_limit() -> int:
    """The input elements up to which the proof by segments is attempted."""
    return int(budget_settings().get("relation_compositional_inputs",
                                      MAX_COMPOSITIONAL_INPUT_ELEMENTS))


def _prove_segmented(where, ranks, every, serial_snap, rank_snaps, serial_rel, rank_rels,
                     final_ops, rings, bud, start):
    """The relation proved by segments (``segments.py`` says where the
    programs are cut and what is assumed at a cut).

    Why it is sound.  Run both sides segment by segment.  At a cut, each
    boundary value (a rank value with a stated Shard/Replicate placement
    against a serial value) becomes an obligation of the segment just ended:
    the rank's piece equals the serial value's slice its placement names,
    compared like a watched value.  Then the serial value is replaced by a
    fresh symbol tensor F, and every stated rank value by its slice of F;
    every other value keeps its term.  The next segments run on that.
    Claim: if every obligation of every segment on every rank is proved,
    the watched values relate for all inputs.  Take any inputs; by
    induction over the cuts, the real run's environment after cut j is the
    abstract run's at ``F := the serial value's real term``: before the
    first cut both are the same terms; at cut j the obligation proved the
    rank's real piece is the slice of the serial value's real term, which is
    what the abstract run puts there for that F, and unreplaced values are
    the same terms on both.  The last segment's comparisons hold for every
    F, so for that one.  A watched value replaced at a cut is compared
    through its cut's obligation (and trivially after it).  A serial value
    of an earlier segment stated at a later cut (a forward value the
    backward's recompute clones compute again) is compared with its serial
    ops run again on the serial env as it is then (``_serial_again``: back
    to the values whose fresh pieces the rank's clone reads, a term of the
    cuts' symbols that is its real value under their substitution); stated
    again after its first cut, the piece becomes its slice of the same F:
    the induction holds as well.  Nothing
    refutes: a difference under the abstraction names fresh symbols no
    input may reach (or a stated placement that does not hold while the
    relation may), so every failure is INCONCLUSIVE, saying which value.
    """
    from .segments import FLOATS, _defs_uses, boundary, cut_points

    store = Store(work_limit=min(bud["work_units"], SEGMENTED_WORK_UNITS),
                  stored_limit=bud["stored_monomials"])
    store.probe_work = True
    T.store = store
    ex = Executor(store, rings, 1, None)
    sops = list(serial_snap.ops)
    rops = {r: list(rank_snaps[r].ops) for r in ranks}
    fops = {r: final_ops.get(r) or [] for r in ranks}
    cuts, why = cut_points(sops, rops, fops)
    if not cuts:
        return every(Verdict.INCONCLUSIVE, f"not proved: no cut for a proof by segments "
                     f"({why or 'no data-moving op'})", reason="no cut")
    names = set(serial_rel["parameters"]) | set(serial_rel["feeds"])
    syn_s, syn_r = {}, {r: {} for r in ranks}  # the compared values, by key
    obligations = {r: [] for r in ranks}
    generalized = 0
    before = {}  # serial value -> (its term before the cut that generalized it, fresh)
    try:
        senv = {}
        for table in ("parameters", "feeds"):
            for n, v in serial_rel[table].items():
                if any(int(d) < 0 for d in v["shape"]):
                    raise Unsupported(f"serial input {n} has a -1 dim {v['shape']}")
                senv[n] = _leaf(ex, n, v["shape"], v["dtype"])
        inputs = dict(senv)
        envs = _rank_inputs(ex, ranks, rank_snaps, rank_rels, inputs, store)
        sdef = _defs_uses(sops)[0]
        rdefs = {r: _defs_uses(rops[r])[0] for r in ranks}
        replaced = {r: {} for r in ranks}  # rank value -> (serial value, cut) it is a piece of
        sstate = Rank(SERIAL, serial_snap, [], senv)
        rstates = {r: Rank(r, rank_snaps[r], [], envs[r]) for r in ranks}
        pk, pc = 0, 0
        for k, _ in cuts + [(None, None)]:
            # the serial side runs only as far as the boundary's serial values
            # are defined: a serial op past them reads the fresh symbols
            cand = {} if k is None else boundary(pk, k, len(sops), sops, rops, fops, names)
            c = None if k is None else max([pc] + [sdef[s] + 1 for s in cand])
            # one state a side across the segments: its env and its views
            # (coalesce_tensor's fused buffers) go on as in one run
            sstate.ops, sstate.pos = sops[pc:c], 0
            ex.run({SERIAL: sstate}, startup=False)
            for r in ranks:
                rstates[r].ops, rstates[r].pos = rops[r][pk:k], 0
            ex.run(rstates, startup=False)
            if k is None:
                break
            # a serial value of an earlier segment stated here: computed again from
            # the env before this cut's fresh tensors (_serial_again)
            again = {}
            for s, per_rank in cand.items():
                if sdef.get(s, len(sops)) < pc:
                    reads = set().union(*(_generalized_reads(rops[r], rdefs[r], replaced[r], v)
                                          for r, stated in per_rank.items()
                                          for v, _ in stated))
                    again[s] = _serial_again(ex, sstate, sops, sdef, s, reads | names)
            for s, per_rank in sorted(cand.items()):
                st = senv.get(s)
                # generalized at an earlier cut already, stated again: the piece
                # becomes a slice of the same fresh tensor; a piece computed again
                # (a recomputed forward value) is compared with the value computed
                # again (else the term before that cut), a piece of the fresh
                # tensor (a reshard of it) with it
                st, fresh = before.get(s, (st, None))
                now = senv.get(s)
                st = st if again.get(s) is None else again[s]
                if st is None or st.arr.dtype != object or st.dtype not in FLOATS or \
                        _constant(store, st) or isinstance(st, Ragged):
                    # a constant stays one: it folds into coefficients; a vector
                    # with empty pieces keeps its terms (its pieces, not one array)
                    continue
                for r, stated in sorted(per_rank.items()):
                    for v, plc in stated:
                        got = envs[r].get(v)
                        if got is None or got.arr.dtype != object or isinstance(got, Ragged):
                            continue
                        key = f"cut at op {k}: {v} ({s})"
                        syn_s[key], syn_r[r][key] = st, got
                        if fresh is not None and _same_terms(
                                input_piece(fresh, plc, r, store), got):
                            syn_s[key] = now
                        obligations[r].append((key, key, key, plc))
                        if fresh is None:
                            fresh = ex.leaf(f"{s}@cut{k}", list(st.arr.shape), st.dtype)
                        piece = input_piece(fresh, plc, r, store)
                        if piece.arr.shape == got.arr.shape:
                            # its own dims (how reshapes factor them: shapes, not values)
                            envs[r][v] = Tensor(piece.arr, got.dims, got.dtype)
                            replaced[r][v] = (s, k)
                            generalized += 1
                if fresh is not None and s not in before:
                    before[s] = (st, fresh)
                    senv[s] = Tensor(fresh.arr, st.dims, st.dtype)
            pk, pc = k, c
    except Budget as exc:
        return every(Verdict.INCONCLUSIVE, f"not proved: over budget running the programs "
                     f"by segments: {exc}", reason=str(exc))
    except (Unsupported, PlacementError, ExecError) as exc:
        return every(Verdict.INCONCLUSIVE, f"not proved: the programs do not run by "
                     f"segments: {exc}", reason=str(exc))
    for r in ranks:
        for label, sname, rname, plc in watched_pairs(serial_snap, serial_rel, rank_snaps[r],
                                                      rank_rels[r]):
            key = f"watched {rname}"
            if sname is not None and sname in senv:
                syn_s[f"serial {sname}"] = senv[sname]
            for q in ranks:
                if rname in envs[q]:
                    syn_r[q][key] = envs[q][rname]
            obligations[r].append((label, sname and f"serial {sname}", key, plc))
    zt = Z3Terms(store)
    z3b = _Z3Budget(bud["z3_rlimit_per_application"], bud["z3_rlimit_per_query"],
                    bud["z3_random_seed"], bud["z3_hang_guard_s"],
                    bud.get("z3_max_memory_mb", 0))
    out = [_judge_rank(where, r, store, zt, z3b, syn_s, syn_r, serial_snap, serial_rel,
                       rank_snaps[r], rank_rels[r], [], start, pairs=obligations[r],
                       expand_cuts=False)
           for r in ranks]
    segs = len(cuts) + 1
    bad = [c for c in out if c.verdict != Verdict.EQUIVALENT]
    for c in out:
        c.details.update({"segments": segs, "boundary_values": generalized,
                          "cuts": [list(x) for x in cuts]})
        if c.verdict == Verdict.EQUIVALENT and bad:
            c.verdict = Verdict.INCONCLUSIVE
            c.message = (f"{where} rank {c.rank}: not proved by segments: rank {bad[0].rank}'s "
                         "obligations are not all proved (its boundary values are this "
                         "rank's assumptions)")
            c.details.update({"not_proved": True, "reason": "another rank not proved"})
        elif c.verdict == Verdict.EQUIVALENT:
            c.message = c.message.replace(
                "PROVED at the real shapes:",
                f"PROVED at the real shapes by {segs} segments ({generalized} boundary "
                f"pieces assumed, each proved where its segment ends):")
        else:
            if c.verdict == Verdict.NOT_EQUIVALENT:
                c.details["difference_under_abstraction"] = c.counterexample
                c.counterexample = None
            c.verdict = Verdict.INCONCLUSIVE
            c.message = (f"{where} rank {c.rank}: not proved by segments (a difference "
                         f"under the boundary abstraction is no counterexample): "
                         f"{c.message.split(': ', 1)[-1]}").replace(
                             "REFUTED: ", "differing under the abstraction: ")
            c.details["not_proved"] = True
    return out


def _generalized_reads(ops, defs, replaced, v) -> set:
    """The serial values whose fresh pieces rank value ``v``'s term reads:
    ``v``'s defining ops walked back (``defs``: value -> op index), stopping
    at each value generalized at a cut before the op reading it
    (``replaced``: rank value -> (its serial value, the cut's op index))."""
    out, seen, stack = set(), set(), [defs.get(v)]
    while stack:
        i = stack.pop()
        if i is None or i in seen:
            continue
        seen.add(i)
        for vs in ops[i].inputs.values():
            for u in vs:
                if u in replaced and replaced[u][1] <= i:
                    out.add(replaced[u][0])
                elif u:
                    stack.append(defs.get(u))
    return out


def _serial_again(ex, sstate, sops, sdef, s, leaves):
    """The serial value ``s``, defined in a segment run already, computed
    again from the serial env as it is now: its defining ops back to
    ``leaves`` (the serial values whose fresh pieces the rank's piece
    reads: ``_generalized_reads``; and the serial inputs; ``s`` itself is
    computed again), each run as the serial program runs it, in a scratch
    env.  None where an op does not run again.

    Why: a rank's piece stated at this cut may be computed again after
    earlier cuts (a recomputed forward value: recompute clones the forward
    into the backward, reading what the forward left, generalized since);
    its term names the fresh symbols, while ``s``'s term from its first run
    names the real terms they stand for.  The term computed again reads
    the leaves' current values (a fresh tensor where generalized), each op
    as in the serial run, so under the substitution of every fresh symbol
    by the real value it stands for it is ``s``'s real value, whichever
    leaves were taken: a sound obligation (nothing is assumed that the
    cuts' obligations do not prove); the leaves the rank read make it
    the rank's term where the rank computes what the serial program does."""
    if sstate.views:  # fused buffers: their views are the serial run's own state
        return None
    need, stack = set(), [s]
    while stack:
        i = sdef.get(stack.pop())
        if i is None or i in need:
            continue
        need.add(i)
        stack.extend(u for vs in sops[i].inputs.values() for u in vs
                     if u and u not in leaves and u in sdef)
    scratch = Rank(SERIAL, sstate.snap, [], dict(sstate.env))
    try:
        for i in sorted(need):
            scratch.ops, scratch.pos = [sops[i]], 0
            ex.run({SERIAL: scratch}, startup=False)
            for vs in sops[i].outputs.values():  # a leaf written too keeps its symbols
                for v in vs:
                    if v and v != s and v in leaves and v in sstate.env:
                        scratch.env[v] = sstate.env[v]
    except (Unsupported, ExecError):
        return None
    return scratch.env.get(s)


def _same_terms(a, b) -> bool:
    """``a`` and ``b`` hold the same terms, element by element."""
    return a.arr.shape == b.arr.shape and all(
        x.i == y.i for x, y in zip(a.arr.reshape(-1), b.arr.reshape(-1)))


def _constant(store, t) -> bool:
    """Every element of ``t`` is a number (no input symbol in its term)."""
    polys = store.polys
    return all(isinstance(x, T) and all(not m for m, _ in polys[x.i])
               for x in t.arr.reshape(-1))
