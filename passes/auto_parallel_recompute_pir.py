"""The PIR recompute pass, ``auto_parallel_recompute_pir`` (3.3.1's
``auto_parallel_recompute_pir.py``), where Paddle's planner applies it.

``Engine._parallel_pir`` applies it, when ``strategy.recompute.enable``, to
the global dist program after the backward and the optimizer and before
partition.  The planning process records it as the planner stage
``recompute`` (``verify/plan/stages.py``), and the serial program -- the
relation's reference -- is taken before it: the ranks' programs are related
to the model WITHOUT recompute, so a wrong rewrite shows as NOT_EQUIVALENT
with the stage ``recompute`` blamed (each clone is compared with the forward
op it clones).  This adapter is the planner application (``passes/planner.py``)
on the planner cases whose strategy enables recompute, plus the pass's
contract on its stage (the serial program before, the stage's program after).

What the pass exists for (the contract), both ways:

* fires where its pattern is present: a segment is the forward ops a
  ``recompute()`` marked with one ``fwd_recompute_id``; its *activations*
  are the results of a segment op that another op of the segment reads.
  Each activation the backward read is recomputed: a clone of its defining
  op (same type and attrs, marked ``bwd_recompute_id``) inside the backward,
  and every backward op that read it reads the clone's result instead
  (``reads the recomputed value``);
* the memory it exists to save: after it, no backward op and no clone reads
  an activation of a segment (``activations released``); the segment's last
  results (read outside the segment) stay, as they must;
* random ops recomputed draw what the original drew: a recomputed dropout
  reads the original's seed tensor (never a re-run ``pd_op.seed``), or fixes
  the same seed (``dropout seeds``);
* changes nothing where absent: every op that is not a clone is the op it
  was (same type, attrs, order), and reads the values it read, but for a
  backward op's read of an activation re-pointed to its clone
  (``outside the segments``).  A program with no segment is refused by the
  pass (``AssertionError: No segment found``), never rewritten.
"""
from __future__ import annotations

import json

from verify.verdicts import CheckResult, Verdict

from .planner import PlannerAdapter, _snap, planner_dir

STAGE = "recompute"
FORWARD, BACKWARD = 0, 1
# attrs the pass sets on a clone (its role, chunk, segment mark)
CLONE_ATTRS = ("fwd_recompute_id", "bwd_recompute_id", "op_role", "chunk_id")
RANDOM_OPS = ("pd_op.dropout", "pd_op.fused_dropout_add")
SEED_OPS = ("pd_op.seed",)


class RecomputePirAdapter(PlannerAdapter):
    name = "auto_parallel_recompute_pir"
    short = "recompute_pir"
    planner_family = True  # declared here: verify premerge reads class bodies (ast)
    paddle_modules = ("paddle.distributed.passes.auto_parallel_recompute_pir",)
    repro_blocker = ("applied by Paddle's planner in the planning process (its stage "
                     "'recompute'); the program dir holds the programs before and after it")

    def handles(self, case) -> bool:
        """Planner cases whose strategy enables recompute: a built-in case
        says so (``params["strategy_passes"]``), a program dir by its records
        (a ``recompute`` stage)."""
        if getattr(case, "ir", "legacy") != "pir":
            return False
        params = getattr(case, "params", None) or {}
        if params.get("planner"):
            return self.name in (params.get("strategy_passes") or ())
        return super().handles(case) and _has_stage(params.get("dir"), case.ranks)

    def pattern_present(self, snap) -> bool:
        """A training program with a recompute segment: a forward op marked
        ``fwd_recompute_id`` and a backward op."""
        return bool(segments(snap)) and any(_role(op) == BACKWARD for op in snap.ops)

    def whole_application(self, case, numeric: bool) -> dict:
        """The planner application (the stages, the relation to the serial
        program taken before this pass) and the contract on the stage."""
        got = super().whole_application(case, numeric)
        try:
            folder = planner_dir(case)
            for r in case.ranks:
                rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
                got["checks"] += stage_contract(self, case, r, folder, rec)
        except Exception as exc:
            from verify.verdicts import failure_line

            got["checks"].append(CheckResult(
                "contract", f"{STAGE} contract", None, Verdict.INCONCLUSIVE,
                f"{self.name} on {case.name}: its stage programs could not be read: "
                f"{failure_line(exc)}"))
        return got

    def contract(self, case, rank, before, after) -> list:
        return [self.fired_check(case, rank, before, after)] + \
            recompute_contract(self.name, case.name, rank, before, after)


def _has_stage(folder, ranks) -> bool:
    from pathlib import Path

    if not folder:
        return False
    for r in ranks:
        p = Path(folder) / f"rank{r}" / "planner.json"
        if p.is_file() and any(st.get("stage") == STAGE
                               for st in json.loads(p.read_text()).get("stages", [])):
            return True
    return False


def stage_contract(adapter, case, rank, folder, rec) -> list:
    """The contract on ``rank``'s stage records: the serial program (before)
    against the ``recompute`` stage's program (after)."""
    by = {st["stage"]: st for st in rec.get("stages", [])}
    st, serial = by.get(STAGE), by.get("serial")
    where = f"{adapter.name} on {case.name} rank {rank}"
    if st is None or serial is None or st.get("error") or not st.get("snapshot") \
            or not serial.get("snapshot"):
        why = ("it raised (see 'after recompute')" if st and st.get("error") else
               "the planner recorded no recompute stage" if st is None else
               "its program was not recorded")
        return [CheckResult("contract", f"{STAGE} contract", rank, Verdict.INCONCLUSIVE,
                            f"{where}: the contract was not checked: {why}")]
    before, after = _snap(folder, rank, serial["snapshot"]), _snap(folder, rank, st["snapshot"])
    return adapter.contract(case, rank, before, after)


# -- the structure the contract reads ------------------------------------------
def _role(op) -> int | None:
    r = op.attrs.get("op_role")
    return int(r) if isinstance(r, (int, float)) else None


def segments(snap) -> dict:
    """``{segment id: [op index]}`` of the forward ops a recompute marked."""
    out = {}
    for i, op in enumerate(snap.ops):
        if "fwd_recompute_id" in op.attrs:
            out.setdefault(op.attrs["fwd_recompute_id"], []).append(i)
    return out


def _definers(snap) -> dict:
    """``{value name: (op index, slot, position)}`` of the values ops make."""
    out = {}
    for i, op in enumerate(snap.ops):
        for slot, names in op.outputs.items():
            for k, n in enumerate(names):
                if n:
                    out[n] = (i, slot, k)
    return out


def _reads(op):
    for slot, names in op.inputs.items():
        for k, n in enumerate(names):
            if n:
                yield slot, k, n


def pair_ops(before, after) -> tuple:
    """``(origin, clones)``: ``origin[j]`` is the before-op index after-op
    ``j`` stands for (positional for the ops that are not clones; a clone's
    original by segment, type and order); ``clones`` the after indices of
    the clones.  None for an after-op not paired."""
    segs = segments(before)
    at = {k: 0 for k in segs}
    origin, clones = [], []
    plain = [j for j, op in enumerate(after.ops) if "bwd_recompute_id" not in op.attrs]
    pos = dict(zip(plain, range(len(before.ops))))
    for j, op in enumerate(after.ops):
        if "bwd_recompute_id" not in op.attrs:
            origin.append(pos.get(j))
            continue
        clones.append(j)
        seg = op.attrs["bwd_recompute_id"]
        cands, i = segs.get(seg, []), at.get(seg, 0)
        while i < len(cands) and before.ops[cands[i]].type != op.type:
            i += 1
        origin.append(cands[i] if i < len(cands) else None)
        at[seg] = i + 1 if i < len(cands) else at.get(seg, 0)
    return origin, clones


def activations(before) -> dict:
    """``{value name: segment id}``: results of a segment op that another op
    of the same segment reads (what the pass exists not to keep)."""
    segs = segments(before)
    member = {i: k for k, idx in segs.items() for i in idx}
    defs = _definers(before)
    out = {}
    for i, op in enumerate(before.ops):
        if i not in member:
            continue
        for _, _, n in _reads(op):
            d = defs.get(n)
            if d and member.get(d[0]) == member[i] and d[0] != i:
                out[n] = member[i]
    return out


def recompute_contract(pass_name, case_name, rank, before, after) -> list:
    """The contract's checks (module docstring), one result each."""
    where = f"{pass_name} on {case_name} rank {rank} (stage {STAGE})"
    if not segments(before):
        return []  # the fired check says whether it left the program alone
    origin, clones = pair_ops(before, after)
    clone_set = set(clones)
    bdefs, adefs = _definers(before), _definers(after)
    acts = activations(before)
    plain = [j for j in range(len(after.ops)) if j not in clone_set]

    def cx(j, **kw):
        op = after.ops[j]
        return {"stage": STAGE, "rank": rank, "op_index": j, "op": op.type, **kw}

    outside, memory, reads, seeds, faithful = [], [], [], [], []
    if len(plain) != len(before.ops):
        outside.append((f"{len(before.ops)} ops before, {len(plain)} after besides the "
                        f"{len(clones)} clones: the pass added or removed an op that is "
                        "not a clone", {"stage": STAGE, "rank": rank,
                                        "ops_before": len(before.ops),
                                        "ops_after": len(after.ops)}))
    for j, i in enumerate(origin):
        op = after.ops[j]
        if i is None:
            faithful.append((f"op {j} ({op.type}) is marked bwd_recompute_id "
                             f"{op.attrs.get('bwd_recompute_id')} but clones no forward op "
                             "of that segment", cx(j)))
            continue
        orig = before.ops[i]
        keep = {k: v for k, v in orig.attrs.items() if k not in CLONE_ATTRS}
        got = {k: v for k, v in op.attrs.items() if k not in CLONE_ATTRS}
        if op.type != orig.type or keep != got:
            diff = sorted(k for k in set(keep) | set(got) if keep.get(k) != got.get(k))
            msg = (f"op {j} ({op.type}) stands for op {i} ({orig.type}) but differs in "
                   f"{'type' if op.type != orig.type else 'attrs ' + ', '.join(diff)}")
            (faithful if j in clone_set else outside).append((msg, cx(j, serial_op=i)))
            continue
        if j in clone_set and orig.type in SEED_OPS:
            seeds.append((f"op {j} re-runs the seed op {i} ({orig.type}) in the backward: "
                          "the recomputed random ops draw another seed", cx(j, serial_op=i)))
        # what each read of op j is, against what op i read
        for slot, k, a in _reads(op):
            b = (orig.inputs.get(slot) or [None] * (k + 1))[k] if k < len(
                orig.inputs.get(slot) or []) else None
            da, db = adefs.get(a), bdefs.get(b) if b else None
            if db is None:  # a feed, a parameter, a state: read by its name
                if a != b:
                    (faithful if j in clone_set else outside).append((
                        f"op {j} ({op.type}) reads {a} as {slot} where op {i} read {b}",
                        cx(j, serial_op=i, value=a, slot=slot)))
                continue
            same = da is not None and origin[da[0]] == db[0] and da[1:] == db[1:]
            if not same:  # a clone's read, or a read of a clone: the recomputation's
                wrong = j in clone_set or (da is not None and da[0] in clone_set)
                (faithful if wrong else outside).append((
                    f"op {j} ({op.type}) reads {a} as {slot}, not the value op {i} read "
                    f"({b}, from op {db[0]} {before.ops[db[0]].type}) nor its recomputation",
                    cx(j, serial_op=i, value=a, slot=slot)))
                continue
            recomputed = da[0] in clone_set
            if b in acts and not recomputed:
                if j in clone_set:
                    memory.append((f"the clone op {j} ({op.type}) reads the forward "
                                   f"activation {a} (op {da[0]} {after.ops[da[0]].type}): kept "
                                   "alive into the backward", cx(j, value=a, slot=slot)))
                elif _role(op) == BACKWARD:
                    memory.append((f"backward op {j} ({op.type}) still reads the forward "
                                   f"activation {a} (op {da[0]} {after.ops[da[0]].type}, "
                                   f"segment {acts[b]}) as {slot}: kept alive into the "
                                   "backward, not recomputed", cx(j, value=a, slot=slot)))
            if recomputed and j not in clone_set and _role(op) != BACKWARD:
                outside.append((f"op {j} ({op.type}, role {_role(op)}) reads the recomputed "
                                f"{a}: only the backward may", cx(j, value=a, slot=slot)))
            if j in clone_set and orig.type in RANDOM_OPS and "seed" in slot.lower() \
                    and recomputed:
                seeds.append((f"the recomputed {op.type} op {j} reads a recomputed seed {a}: "
                              "its mask is drawn again", cx(j, value=a, slot=slot)))
        if j in clone_set and orig.type in RANDOM_OPS and not any(
                "seed" in s.lower() for s, _, _ in _reads(orig)) and \
                not orig.attrs.get("fix_seed"):
            seeds.append((f"the recomputed {op.type} op {j} has no seed tensor and no fixed "
                          "seed: its mask is drawn again, unlike the forward's", cx(j)))
        if j not in clone_set and _role(op) == BACKWARD:
            for slot, k, a in _reads(op):
                da = adefs.get(a)
                if da is not None and da[0] in clone_set:
                    reads.append(j)
    out = []

    def result(name, found, ok_msg, verdict=Verdict.CONTRACT_BROKEN):
        if found:
            msg, ce = found[0]
            more = f" ({len(found) - 1} more)" if len(found) > 1 else ""
            out.append(CheckResult("contract", name, rank, verdict, f"{where}: {msg}{more}",
                                   counterexample=ce))
        else:
            out.append(CheckResult("contract", name, rank, Verdict.EQUIVALENT,
                                   f"{where}: {ok_msg}"))

    read_by_backward = {x for op in before.ops if _role(op) == BACKWARD
                        for _, _, x in _reads(op)}
    needed = {n for n in acts if n in read_by_backward}
    fired = [] if (clones and reads) or not needed else [(
        f"the backward read {len(needed)} activation(s) of a recompute segment (e.g. "
        f"{sorted(needed)[0]}) and no backward op reads a recomputed value", {
            "stage": STAGE, "rank": rank, "value": sorted(needed)[0]})]
    result("reads the recomputed value", fired + faithful,
           f"{len(clones)} forward op(s) cloned into the backward, each the op it stands "
           f"for, read by {len(set(reads))} backward op(s)")
    result("activations released", memory,
           f"no backward op nor clone reads any of the {len(acts)} activation(s) of the "
           "recomputed segments")
    result("dropout seeds", seeds, "every recomputed random op draws the forward's seed"
           if any(before.ops[origin[j]].type in RANDOM_OPS for j in clones
                  if origin[j] is not None) else "no random op recomputed")
    result("outside the segments", outside,
           f"the {len(plain)} other ops are unchanged, the backward's reads of activations "
           "re-pointed to their clones only")
    return out


ADAPTER = RecomputePirAdapter()
