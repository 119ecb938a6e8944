"""The value proof of a gradient-merge plan's relation: every rank's program
run as the Engine's job schedule ``[forward, backward] * k + [optimize]``
against the serial program's ``k`` micro-steps, for ALL inputs, at the real
shapes (``passes/planner.py`` calls it; ``verify/numeric/merged_relation.py``
is the numeric witness of the same relation).

A merged rank program is split by op role, as the Engine splits it: the
*accumulate* job (every op not of role Optimize) runs once per micro-batch,
the *optimize* job (the ops of role Optimize) once per optimizer step.  One
environment per rank persists from job to job, as the rank's scope does:
every value the program reads before defining it (parameters, persistable
data, the merge's accumulators, keyword block arguments the startup sets)
carries from one job to the next as the in-place writes left it
(``relation.final_states``), and the optimize job reads the values the last
micro-step left (as Paddle's job split hands them over).

The serial side is the serial program's own job split: its accumulate job
on ``k`` global micro-batches (fresh feed symbols per micro-step, the same
parameter and state symbols: the update is deferred), then its optimize job
once, reading every gradient merged: the sum of the ``k`` micro-step
gradients, times ``1/k`` when ``avg`` (the strategy's definition).  A value
its optimize ops read from its accumulate job that is not a gradient has no
merged meaning: INCONCLUSIVE.

Compared on every rank through the placements (``relation._relate``): the
loss of each micro-step, each parameter and persistable state after each
micro-step (still the start value on the serial side) and after the step,
and every gradient the optimizer reads against the merged one.  The proof
is by induction over optimizer steps only when each rank-only state (no
serial counterpart: the accumulators) is back at its start value after the
step; that is compared too.  Where one is not, a second optimizer step is
run on both sides from the states the first left (fresh micro-batches): a
difference there is a refutation of the second step; none leaves the
application INCONCLUSIVE (later steps start elsewhere).  A refutation names
rank, value, element and the global inputs, replayed with the real kernels
(``relation._judge_rank``); the first divergent op is searched in the last
micro-step's and the optimize job's values.
"""
from __future__ import annotations

import time
from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from verify.ir.inplace import grads_read, resolved
from verify.numeric.placements import PlacementError, holds
from verify.verdicts import CheckResult, Verdict

from .proof import ROUNDING, Z3Terms, _Z3Budget, _collector_paused, budget_settings
from .relation import KIND, NAME, SERIAL, _cpu_limit, _judge_rank, _leaf, _OverCPU, \
    _region_ops, compositional_limit, final_states, input_elements, input_limit, \
    input_piece
from .semantics import Tensor, Unsupported
from .symbolic import Budget, ExecError, Executor, Rank, Store, T, ids

OPTIMIZE = 2  # Paddle's OpRole.Optimize
# over relation_input_elements (up to relation.compositional_limit()) the proof
# is attempted within this many work units, so a plan it does not suit costs a
# bounded time (INCONCLUSIVE past them, saying so).  Measured
# (benchmarks/README.md): the zoo two-stage pipelines' job lists (18783
# inputs) 30.7 M, ~17 CPU s for both ranks, PROVED; zoo_llama_tp2_gm's merged
# schedule 25.4 M, PROVED.
BOUNDED_WORK_UNITS = 40_000_000


def split_by_role(snap):
    """``(accumulate ops, optimize ops)`` of ``snap``, program order kept."""
    return ([op for op in snap.ops if op.role != OPTIMIZE],
            [op for op in snap.ops if op.role == OPTIMIZE])


def crossing(acc_ops, opt_ops) -> list:
    """Names the optimize ops read that an accumulate op defines."""
    made = {n for op in acc_ops for ns in op.outputs.values() for n in ns if n}
    out = []
    for op in opt_ops:
        for ns in op.inputs.values():
            out += [n for n in ns if n in made and n not in out]
    return out


def program_inputs(snap) -> list:
    """Names ``snap``'s main program reads before an op of it writes them,
    and the names its ``builtin.parameter`` / ``pd_op.data`` ops bind: what a
    rank's scope holds across jobs."""
    written, out = set(), []
    for op in snap.ops:
        if op.type in ("builtin.parameter", "pd_op.data"):
            out += [n for ns in op.outputs.values() for n in ns if n and n not in out]
        for ns in op.inputs.values():
            out += [n for n in ns if n and n not in written and n not in out]
        written.update(n for ns in op.outputs.values() for n in ns if n)
    return out


def _carry(env, ops, roots) -> dict:
    """Each root's value after ``ops`` ran (``{root: tensor}``), following the
    in-place writes; rebinds ``env[root]`` to it."""
    final = final_states(SimpleNamespace(ops=ops), roots)
    got = {n: env[final[n]] for n in roots if final[n] in env}
    env.update(got)
    return got


def _merged(store, tensors, k, avg):
    flat = [t.arr.reshape(-1) for t in tensors]
    out = np.empty(flat[0].size, dtype=object)
    scale = store.const(Fraction(1, k)) if avg else None
    for j in range(out.size):
        s = T.total([f[j] for f in flat])
        out[j] = T(store.mul(s.i, scale)) if scale is not None else s
    t0 = tensors[0]
    return Tensor(out.reshape(t0.arr.shape), t0.dims, t0.dtype)


def as_read(snap, rel: dict) -> dict:
    """``rel`` with each parameter's ``read``: the value its optimizer reads
    in one SSA execution of ``snap`` (``inplace.grads_read``).  A table may name
    the gradient by the optimizer's literal operand (the planner records a
    merge's accumulator, a keyword block argument, by its keyword): after an
    in-place ``scale_`` of it in the optimize job (``avg``) the optimizer
    reads the scaled tensor, not the accumulator the accumulate job left."""
    reads = grads_read(snap)
    return {**rel, "params": {pname: {**p, "read": reads.get(p["grad"]) or p["grad"]}
                              for pname, p in rel["params"].items()}}


def _read(p) -> str:
    """The name of the value the optimizer reads (``as_read``)."""
    return p.get("read") or p["grad"]


def _own(t, r) -> dict:
    """The placement of a rank's own value compared with itself."""
    return {"dims_mapping": [-1] * t.arr.ndim, "mesh_shape": [1], "process_ids": [r],
            "partial": {}}


class _Schedule:
    """Both sides run ``steps`` optimizer steps of ``k`` micro-steps; the
    values compared, by label: ``serial[label]`` / ``ranks[r][label]``,
    ``pairs[r]`` = ``[(label, serial key, rank key, placement)]``."""

    def __init__(self, ex, store, serial_snap, rank_snaps, serial_rel, rank_rels, k, avg):
        self.ex, self.store, self.k, self.avg = ex, store, k, avg
        self.s_snap, self.r_snaps = serial_snap, rank_snaps
        self.s_rel, self.r_rels = serial_rel, rank_rels
        self.ranks = sorted(rank_snaps)
        self.serial, self.rank_vals = {}, {r: {} for r in self.ranks}
        self.pairs = {r: [] for r in self.ranks}
        self.s_acc, self.s_opt = split_by_role(serial_snap)
        self.s_roots = list(serial_rel["parameters"]) + [
            n for n, v in serial_rel["feeds"].items() if v.get("persistable")]
        # what the serial optimize job reads from its accumulate job, scope aside
        self.s_cross = [n for n in crossing(self.s_acc, self.s_opt) if n not in self.s_roots]
        self.s_grads = {_read(p) for p in serial_rel["params"].values()} & set(self.s_cross)
        self.micro_feeds = [n for n, v in serial_rel["feeds"].items()
                            if not v.get("persistable")]
        self.r_split = {r: split_by_role(s) for r, s in rank_snaps.items()}
        self.r_roots = {r: [n for n in program_inputs(s)
                            if n not in self._micro(rank_rels[r])]
                        for r, s in rank_snaps.items()}

    @staticmethod
    def _micro(rel):
        return {n for n, v in rel["feeds"].items() if not v.get("persistable")}

    def _related(self, r):
        """``{name: placement}`` of rank ``r``'s states the serial program holds."""
        rel = self.r_rels[r]
        out = {n: v.get("placement") for n, v in rel["parameters"].items()
               if n in self.s_roots}
        out.update({n: v.get("placement") for n, v in rel["feeds"].items()
                    if v.get("persistable") and n in self.s_roots})
        return out

    def run(self, steps):
        ex = self.ex
        inputs = {}
        for n in self.s_roots:
            v = self.s_rel["parameters"].get(n) or self.s_rel["feeds"][n]
            inputs[n] = self._global_leaf(n, v)
        senv = dict(inputs)
        states = {r: Rank(r, self.r_snaps[r], list(self.r_snaps[r].startup_ops), {})
                  for r in self.ranks}
        ex.run(states, startup=True)
        envs = {r: states[r].env for r in self.ranks}
        for r in self.ranks:
            for n in self._related(r):
                envs[r][n] = self._piece(r, n, inputs[n], self._rank_var(r, n))
        start = {r: {n: envs[r][n] for n in self.r_roots[r]
                     if n in envs[r] and n not in self._related(r)} for r in self.ranks}
        for c in range(steps):
            self._step(c, steps, senv, envs)
        for r in self.ranks:  # rank-only states back at their start values
            for n, t in sorted(start[r].items()):
                label = f"{n} (rank-only state, back to its start value after the step)"
                self.serial[f"{label}#{r}"] = t
                self.rank_vals[r][label] = envs[r][n]
                self.pairs[r].append((label, f"{label}#{r}", label, _own(t, r)))
        return senv, envs

    def _step(self, c, steps, senv, envs):
        tag = "" if steps == 1 else f" (step {c + 1})"
        self._ranks_step(tag, self._serial_step(c, senv), envs)

    def _serial_step(self, c, senv) -> dict:
        """The serial program's k micro-steps and its optimize job on the
        merged gradients: ``{"feeds", "loss", "states"}`` per micro-step
        (global feed tensors, the loss, ``{state: tensor}``), ``"grads"``
        ``{name: merged tensor}``, ``"final"`` ``{state: tensor}``."""
        ex, k = self.ex, self.k
        loss = self.s_rel.get("loss")
        rec, s_grads = {"feeds": [], "loss": [], "states": []}, []
        for i in range(k):
            feeds = {n: self._global_leaf(f"{n}@step{c}.micro{i}", self.s_rel["feeds"][n])
                     for n in self.micro_feeds}
            senv.update(feeds)
            ex.run({SERIAL: Rank(SERIAL, self.s_snap, self.s_acc, senv)}, startup=False)
            rec["states"].append(_carry(senv, self.s_acc, self.s_roots))
            rec["feeds"].append(feeds)
            rec["loss"].append(senv.get(loss) if loss else None)
            s_grads.append({g: senv[g] for g in self.s_cross})
        before = dict(senv)  # the last micro-step's values, gradients unmerged
        for g in self.s_cross:
            if g in self.s_grads:
                senv[g] = _merged(self.store, [m[g] for m in s_grads], k, self.avg)
            elif len({ids(m[g].arr) for m in s_grads}) != 1:  # no one merged meaning
                raise Unsupported(f"the serial program's optimize ops read {g} from its "
                                  "accumulate job, not a gradient, and it differs between "
                                  "micro-steps: no merged value for it")
        rec["grads"] = {p["grad"]: senv.get(_read(p)) for p in self.s_rel["params"].values()}
        ex.run({SERIAL: Rank(SERIAL, self.s_snap, self.s_opt, senv)}, startup=False)
        rec["final"] = _carry(senv, self.s_snap.ops, self.s_roots)
        # where the first divergence is searched: a rank's backward op against the
        # serial one of the same micro-batch, its optimizer op against the serial's
        self.located = {**before, **{n: senv[n] for op in self.s_opt
                                     for ns in op.outputs.values() for n in ns if n in senv}}
        return rec

    def _micro_pieces(self, r, env, feeds):
        """Rank ``r``'s pieces of a micro-step's global feeds, into ``env``."""
        rel = self.r_rels[r]
        for n in self._micro(rel):
            # a feed placed on a mesh without the rank: no piece (a fresh input)
            if n in feeds and holds(rel["feeds"][n].get("placement"), r):
                env[n] = self._piece(r, n, feeds[n], rel["feeds"][n])

    def _ranks_step(self, tag, rec, envs):
        """Every rank's accumulate job on each micro-batch, then its optimize
        job, all ranks in lock step; pairs against ``rec``."""
        ex = self.ex
        for i in range(self.k):
            for r in self.ranks:
                self._micro_pieces(r, envs[r], rec["feeds"][i])
            ex.run({r: Rank(r, self.r_snaps[r], self.r_split[r][0], envs[r])
                    for r in self.ranks}, startup=False)
            for r in self.ranks:
                rel = self.r_rels[r]
                r_states = _carry(envs[r], self.r_split[r][0], self.r_roots[r])
                self._micro_pairs(r, i, tag, rec, envs[r].get(rel.get("loss")), r_states)
        ex.run({r: Rank(r, self.r_snaps[r], self.r_split[r][1], envs[r])
                for r in self.ranks}, startup=False)
        for r in self.ranks:
            grads = {p["grad"]: envs[r].get(_read(p))  # as the optimizer reads it
                     for p in self.r_rels[r]["params"].values()}
            self._step_pairs(r, tag, rec, grads,
                             _carry(envs[r], self.r_snaps[r].ops, self.r_roots[r]))

    def _micro_pairs(self, r, i, tag, rec, r_loss, r_states):
        rel = self.r_rels[r]
        if rec["loss"][i] is not None and rel.get("loss"):
            self._pair(r, f"loss (micro-step {i + 1}){tag}", rec["loss"][i], r_loss,
                       rel.get("loss_placement"))
        for n, plc in sorted(self._related(r).items()):
            self._pair(r, f"{n} (after micro-step {i + 1}){tag}", rec["states"][i].get(n),
                       r_states.get(n), plc)

    def _step_pairs(self, r, tag, rec, r_grads, r_final):
        """The gradients the optimizer read (``r_grads``: by the rank's
        relation's names) and the states after the step."""
        rel = self.r_rels[r]
        for pname, p in sorted(rel["params"].items()):
            sp = self.s_rel["params"].get(pname)
            self._pair(r, f"{pname}@GRAD{tag}", sp and rec["grads"].get(sp["grad"]),
                       r_grads.get(p["grad"]), p["grad_placement"])
        for n, plc in sorted(self._related(r).items()):
            self._pair(r, f"{n} (after the step){tag}", rec["final"].get(n), r_final.get(n),
                       plc)

    def _pair(self, r, label, serial_t, rank_t, plc):
        if serial_t is not None:
            self.serial[label] = serial_t
        if rank_t is not None:
            self.rank_vals[r][label] = rank_t
        self.pairs[r].append((label, label if serial_t is not None else None, label, plc))

    def _global_leaf(self, name, v):
        if any(int(d) < 0 for d in v["shape"]):
            raise Unsupported(f"serial input {name} has a -1 dim {v['shape']}: the relation "
                              "needs the global batch")
        return _leaf(self.ex, name, v["shape"], v["dtype"])

    def _rank_var(self, r, n):
        rel = self.r_rels[r]
        return rel["parameters"].get(n) or rel["feeds"][n]

    def _piece(self, r, n, t, v):
        piece = input_piece(t, v.get("placement"), r, self.store)
        if list(piece.arr.shape) != [int(d) for d in v["shape"]]:
            raise PlacementError(f"rank {r}'s {n} is {list(v['shape'])}, its piece of the "
                                 f"serial {list(t.arr.shape)} is {list(piece.arr.shape)}")
        return piece


@_collector_paused
def prove_merged_relation(where, serial_snap, rank_snaps: dict, serial_rel: dict,
                          rank_rels: dict, final_ops: dict, rings: dict, k: int, avg: bool,
                          hang_guard_s: float = 600.0, max_inputs: int | None = None,
                          schedule=None, schedule_text: str | None = None,
                          sizes: dict | None = None, symbols: dict | None = None) -> list:
    """One CheckResult (kind "value", ``planner relation proof``) per rank:
    see the module docstring.  Budget and hang guard as
    ``relation.prove_relation``'s (the inputs counted with every micro-step's
    feeds); over ``max_inputs`` (default ``relation_input_elements``) up to
    ``relation.compositional_limit()`` inputs, the same proof within
    ``BOUNDED_WORK_UNITS`` (INCONCLUSIVE past them).  ``schedule``: what
    makes the ranks' side (default ``_Schedule``, its arguments;
    ``job_list_relation`` passes its own) and ``schedule_text`` what the
    messages call it.  ``sizes``: ``{size symbol: size}`` every -1 dim the
    programs declare takes (``symbols`` ``{var: (symbol or None, ...)}``
    names them, as ``proof.prove_application``'s); the relation tables'
    shapes are then those sizes' (a pass's own application on a program with
    a dynamic batch, proved size by size)."""
    start = time.perf_counter()
    ranks = sorted(rank_snaps)
    schedule_text = schedule_text or f"[forward, backward] * {k} + [optimize]"

    def every(verdict, msg, **details):
        return [CheckResult(KIND, NAME, r, verdict, f"{where} rank {r}: {msg}",
                            details={"seconds": round(time.perf_counter() - start, 3),
                                     "not_proved": verdict != Verdict.EQUIVALENT,
                                     "schedule": schedule_text,
                                     **details})
                for r in ranks]

    if max_inputs is None:
        max_inputs = input_limit()
    micro = sum(int(np.prod(v["shape"])) if v["shape"] else 1
                for v in serial_rel["feeds"].values() if not v.get("persistable"))
    size = input_elements(serial_rel) + (k - 1) * micro
    bounded = max_inputs < size <= compositional_limit()
    if size > max_inputs and not bounded:
        return every(Verdict.INCONCLUSIVE, f"not proved: not attempted: the serial program's "
                     f"parameters, states and {k} micro-batches of feeds hold {size} "
                     f"elements, over the relation proof's {max_inputs} "
                     f"(--value-relation-inputs) and over the {compositional_limit()} a "
                     "bounded proof is attempted up to", reason="over budget (inputs)")
    if k < 1:
        return every(Verdict.INCONCLUSIVE, f"not proved: k_steps {k}", reason="k_steps")
    regions = _region_ops({"serial": serial_snap}, rank_snaps)
    if regions:
        return every(Verdict.INCONCLUSIVE, f"not proved: {regions[0]} has nested blocks "
                     "(a branch or loop body); the symbolic execution runs no regions",
                     reason="nested regions", region_ops=regions)
    # the gradient each optimizer reads, resolved on the literal programs
    serial_rel = as_read(serial_snap, serial_rel)
    rank_rels = {r: as_read(rank_snaps[r], rel) for r, rel in rank_rels.items()}
    serial_snap = resolved(serial_snap)
    rank_snaps = {r: resolved(s) for r, s in rank_snaps.items()}
    with _cpu_limit(hang_guard_s):
        try:
            bud = budget_settings()
            if bounded:  # over the input cap: a bounded time, deterministic
                bud = {**bud, "work_units": min(bud["work_units"], BOUNDED_WORK_UNITS)}
            out = _prove(where, ranks, every, serial_snap, rank_snaps, serial_rel, rank_rels,
                         final_ops, rings, k, avg, bud, start,
                         schedule or _Schedule, sizes, symbols)
            if bounded:  # say so: a bounded attempt's INCONCLUSIVE is its budget's
                for c in out:
                    c.details.update({"input_elements": size,
                                      "bounded_work_units": bud["work_units"]})
                    if c.verdict == Verdict.INCONCLUSIVE:
                        c.message += (f" (the inputs, {size} elements, are over "
                                      f"relation_input_elements {max_inputs}: attempted "
                                      f"within {bud['work_units']} work units)")
            shapes = ("at the real shapes" if not sizes else "with " + ", ".join(
                f"{n} = {v}" for n, v in sorted(sizes.items())))
            return [_claimed(where, c, k, avg, schedule_text, shapes) for c in out]
        except _OverCPU as exc:
            return every(Verdict.INCONCLUSIVE, f"not proved: {exc}",
                         reason=f"hang guard: {exc}", hang_guard=True)


def _prove(where, ranks, every, serial_snap, rank_snaps, serial_rel, rank_rels, final_ops,
           rings, k, avg, bud, start, schedule, sizes=None, symbols=None):
    store = Store(work_limit=bud["work_units"], stored_limit=bud["stored_monomials"])
    store.probe_work = True
    T.store = store
    # every -1 dim at ``sizes`` (else 1: the planner's programs have none)
    ex = Executor(store, rings, dict(sizes) if sizes else 1, None, symbols)
    zt = Z3Terms(store)
    z3b = _Z3Budget(bud["z3_rlimit_per_application"], bud["z3_rlimit_per_query"],
                    bud["z3_random_seed"], bud["z3_hang_guard_s"],
                    bud.get("z3_max_memory_mb", 0))

    def judged(steps):
        sched = schedule(ex, store, serial_snap, rank_snaps, serial_rel, rank_rels, k, avg)
        _, envs = sched.run(steps)
        out = [_judge_rank(where, r, store, zt, z3b, sched.serial, sched.rank_vals, None,
                           None, None, None, final_ops.get(r, []), start,
                           pairs=sched.pairs[r], located=(sched.located, envs),
                           locate_snap=rank_snaps[r]) for r in ranks]
        for c in out:  # a job list's refutation names the job that stored the value
            src = getattr(sched, "sources", {}).get(c.rank, {})
            cex = c.counterexample or {}
            if c.verdict == Verdict.NOT_EQUIVALENT and cex.get("value") in src:
                cex["job"] = src[cex["value"]]
                c.message += f"; {cex['value']} as stored by {cex['job']}"
        return out

    try:
        out = judged(1)
        back = _not_back(out)
        if back:  # the induction fails: does the second step relate?
            second = judged(2)
            out = [_second_step(c, c2, back) for c, c2 in zip(out, second)]
    except Budget as exc:
        return every(Verdict.INCONCLUSIVE, f"not proved: over budget running the schedule: "
                     f"{exc}", reason=str(exc))
    except (Unsupported, PlacementError) as exc:
        return every(Verdict.INCONCLUSIVE, f"the schedule cannot be executed symbolically on "
                     f"the ranks' pieces of the serial inputs: {exc}", reason=str(exc))
    except ExecError as exc:
        # the serial side runs first (its own ExecError: no rank is to blame)
        bad = exc.rank if exc.rank in ranks and exc.rank != SERIAL else None
        out = every(Verdict.INCONCLUSIVE, f"not compared: the schedule does not run "
                    f"symbolically ({exc})", reason=str(exc))
        for c in out:
            if c.rank == bad:  # the schedule cannot complete, whatever the inputs
                c.verdict = Verdict.NOT_EQUIVALENT
                c.message = (f"{where} rank {bad}: its schedule does not run on its pieces of "
                             f"the serial inputs where the serial program runs: {exc}")
                c.counterexample = {"rank": bad, "error": str(exc), "value": "the schedule"}
        return out
    return out


BACK = "(rank-only state, back to its start value after the step)"


def _not_back(out) -> list:
    """The rank-only states some rank's result did not prove back at their
    start values (refuted or unknown)."""
    return sorted({lb for c in out for lb in (c.details.get("refuted", []) +
                                              c.details.get("unknown", [])) if BACK in lb})


def _second_step(first, second, back):
    """Rank's verdict when rank-only states ``back`` are not back at their
    start: the second step's refutation, else INCONCLUSIVE."""
    steps2 = [lb for lb in second.details.get("refuted", []) if BACK not in lb]
    if steps2:
        second.details["rank_only_not_back"] = back
        return second
    if first.verdict == Verdict.NOT_EQUIVALENT and not any(
            BACK not in lb for lb in first.details.get("refuted", [])):
        first.verdict = Verdict.INCONCLUSIVE
        first.counterexample = None
    first.details.update({"not_proved": True, "rank_only_not_back": back,
                          "reason": f"{back[0]} is not proved"})
    if first.verdict == Verdict.INCONCLUSIVE:
        first.message = (f"{first.message.split(': ', 1)[0]}: not proved: {back[0].split()[0]} "
                         "is not back at its start value after the optimizer step, and the "
                         "second step (run from the states the first left) relates: later "
                         "steps start elsewhere, the proof covers steps 1-2 only")
    return first


def _claimed(where, c, k, avg, schedule_text, shapes="at the real shapes"):
    c.details["schedule"] = schedule_text
    if c.verdict != Verdict.EQUIVALENT:
        return c
    proved = c.details.get("proved", [])
    back = sum(1 for lb in proved if BACK in lb)
    grads = sum(1 for lb in proved if lb.endswith("@GRAD"))
    losses = (f"the loss of each of the {k} micro-steps"
              if any(lb.startswith("loss (micro-step ") for lb in proved)
              else "no loss (the rank holds none)")
    c.message = (
        f"{where} rank {c.rank}: PROVED {shapes} for the schedule "
        f"{schedule_text}: {losses}, "
        f"{grads} gradient{'s' if grads != 1 else ''} the optimizer reads (the "
        f"{'mean' if avg else 'sum'} of the serial micro-step gradients) and the states "
        f"after each micro-step and after the step ({len(proved)} values) relate to the "
        f"serial program's {k} micro-steps through their placements for all parameters, "
        f"states and micro-batches related by placements; {back} rank-only state"
        f"{'s' if back != 1 else ''} (accumulators) back at {'their' if back != 1 else 'its'} "
        f"start values after the step, so for every optimizer step ({c.details['by_z3']} "
        f"by Z3, the others by canonical forms); {ROUNDING}")
    return c
