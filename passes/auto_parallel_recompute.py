"""Adapter for Paddle's legacy ``auto_parallel_recompute`` (the legacy Engine's recompute).

The legacy planner marks each recompute segment's forward ops with the name
scope ``/auto_parallel/rc_<i>`` (``set_recompute_segments``, from
``strategy.recompute.checkpoints``) and applies the pass, when
``strategy.recompute.enable``, after the backward and before the optimizer
(``Parallelizer._apply_pre_optimization``) with ``loss``, ``dist_context``,
``no_grad_set`` None and the strategy's ``no_recompute_segments``.  The
snapshot keeps that mark (``verify/ir/snapshot.py``: ``RECOMPUTE_SCOPE``).
The Engine runs with ``FLAGS_new_executor_sequential_run`` on, and the
adapter applies the pass so (``apply_local``); with it off the pass also
inserts an ordering ``nop`` before each segment's copy.

Pattern (documented): a forward op marked ``/auto_parallel/rc_<i>`` whose
result another op of the same segment reads (an *activation*), and a
backward that reads one.

Contract, where present (one result each, op index and variable named):

* ``reads the recomputed value``: every op the pass inserted in the
  backward that is not a ``nop`` (the executor-ordering op it writes) is a
  *clone*: the type and attrs (but its role) of a forward op of a segment as
  the rewritten forward runs it, reading what that op read or the clone of
  it; and the backward reads the clones (a backward that read an
  activation before reads a clone after);
* ``activations released`` (the memory it exists to save): no backward op
  and no clone reads an activation of a segment; the segments' last
  results (checkpoints) stay, as they must;
* ``dropout seeds``: a recomputed random op reads the seed tensor its
  forward op reads, made by a ``seed`` op in the forward that is no clone,
  whose seed is the forward's fixed seed where the original fixed one;
* ``outside the segments``: every other op is the op it was (type, attrs,
  outputs, order), reading what it read but for a backward read re-pointed
  to a clone of that value; only a forward random op of a segment may gain
  a seed tensor from an inserted ``seed`` op.

Where absent the pass changes nothing (``fired_check``).  Values are judged
by the value proof and the numeric runs (a clone computes its original's
value from the same inputs).
"""
from __future__ import annotations

import re

from verify.ir.snapshot import RECOMPUTE_SCOPE
from verify.verdicts import CheckResult, Verdict

from .base import PassAdapter

FORWARD, BACKWARD = 0, 1
RANDOM_OPS = ("dropout", "fused_dropout_add")
SEED_SLOTS = ("Seed", "seed_tensor")  # a random op's seed tensor slot
SEED_ATTRS = ("fix_seed", "seed")  # what the pass may change on a forward random op
ASIDE = ("op_role", "op_role_var")  # attrs a clone may differ in


def _role(op) -> int:
    return int(op.attrs.get("op_role", op.role) or 0)


def is_backward(op) -> bool:
    return bool(_role(op) & BACKWARD)


def segment_of(op) -> str | None:
    """The recompute segment a marked op belongs to (``rc_<i>``), or None."""
    scope = str(op.attrs.get("op_namescope", ""))
    if RECOMPUTE_SCOPE not in scope or "exclude_rc" in scope:
        return None
    m = re.search(r"/auto_parallel/(rc_[0-9]*)", scope)
    return m.group(1) if m else None


def segments(snap) -> dict:
    """``{segment: [op index]}`` of the marked forward ops."""
    out = {}
    for op in snap.ops:
        seg = segment_of(op)
        if seg is not None and not is_backward(op):
            out.setdefault(seg, []).append(op.idx)
    return out


def activations(snap) -> dict:
    """``{value: segment}``: results of a segment op that another op of the
    same segment reads."""
    member = {i: k for k, idx in segments(snap).items() for i in idx}
    writer = {}
    for op in snap.ops:
        if op.idx in member:
            for n in op.writes():
                writer.setdefault(n, op.idx)
    out = {}
    for op in snap.ops:
        if op.idx not in member:
            continue
        for n in op.reads():
            w = writer.get(n)
            if w is not None and w != op.idx and member[w] == member[op.idx]:
                out[n] = member[op.idx]
    return out


def pair_ops(before, after) -> dict:
    """``{after index: before index}`` of the ops the pass kept: the n-th
    after op of a type and outputs is the n-th before op of them (an
    inserted op writes a new name or is a ``nop``/``seed``), so an order
    the pass changed among independent ops pairs the same."""
    from collections import defaultdict

    queues = defaultdict(list)
    for op in before.ops:
        queues[_key(op)].append(op.idx)
    out = {}
    for op in after.ops:
        q = queues.get(_key(op))
        if q:
            out[op.idx] = q.pop(0)
    return out


def _key(op):
    return op.type, tuple((s, tuple(ns)) for s, ns in sorted(op.outputs.items()))


def _slot_reads(op):
    for slot, names in op.inputs.items():
        for k, n in enumerate(names):
            yield slot, k, n


def _cx(rank, op, **kw):
    return {"rank": rank, "op_index": op.idx, "op_type": op.type, **kw}


def recompute_contract(pass_name, case_name, rank, before, after) -> list:
    """The four checks of the module docstring, one result each."""
    segs = segments(before)
    if not segs:
        return []
    where = f"{pass_name} on {case_name} rank {rank}"
    acts = activations(before)
    kept = pair_ops(before, after)
    kept_at = {i: j for j, i in kept.items()}
    seg_ops = {i for idx in segs.values() for i in idx}
    # what a clone may stand for: a marked forward op as the rewritten forward
    # runs it (kept, or a seed op the pass inserted for a segment's random op)
    candidates = [o for o in after.ops if not is_backward(o) and segment_of(o) is not None]
    inserted = [op for op in after.ops if op.idx not in kept]
    stands = {}  # a clone's result -> the value it recomputes
    clones = {}  # a clone's after index -> the after index of the forward op it copies
    faithful, memory, seeds, outside = [], [], [], []
    new_seeds = {}  # inserted forward seed op's result -> the seed op
    for op in inserted:
        if op.type == "nop":
            continue  # orders the executor; reads no data
        if not is_backward(op):
            if op.type == "seed" and not op.reads():
                new_seeds.update({n: op for n in op.writes()})
                continue
            outside.append((f"op {op.idx} ({op.type}) was inserted in the forward",
                            _cx(rank, op)))
            continue
        got = _clone_of(op, candidates, stands, set(clones.values()))
        if got is None:
            faithful.append((f"op {op.idx} ({op.type}) was inserted in the backward and "
                             "recomputes no forward op of a segment (type, attrs and "
                             "inputs of none match)", _cx(rank, op, var=(op.writes() or
                                                                         [None])[0])))
            continue
        clones[op.idx] = got
        orig = after.ops[got]
        if orig.type == "seed":
            seeds.append((f"op {op.idx} re-runs the seed op {got} in the backward: the "
                          "recomputed random ops read another seed tensor",
                          _cx(rank, op, var=(op.writes() or [None])[0], forward_op=got)))
        for slot, names in orig.outputs.items():
            for k, n in enumerate(names):
                new = (op.outputs.get(slot) or [None] * (k + 1))[k]
                if new is not None:
                    stands[new] = n
        for slot, k, n in _slot_reads(op):
            if n in acts:
                memory.append((f"the clone op {op.idx} ({op.type}) reads the forward "
                               f"activation {n} as {slot}: kept alive into the backward",
                               _cx(rank, op, var=n, slot=slot)))
            if orig.type in RANDOM_OPS and slot in SEED_SLOTS and n in stands:
                seeds.append((f"the recomputed {op.type} op {op.idx} reads seed {n}, a "
                              f"recomputation, not the seed tensor its forward op {got} "
                              f"reads ({stands[n]}): its mask is drawn again",
                              _cx(rank, op, var=n, slot=slot)))
        if orig.type in RANDOM_OPS and not any(
                op.inputs.get(s) for s in SEED_SLOTS) and not op.attrs.get("fix_seed"):
            seeds.append((f"the recomputed {op.type} op {op.idx} has no seed tensor and no "
                          "fixed seed: its mask is drawn again, unlike the forward's",
                          _cx(rank, op, var=(op.writes() or [None])[0])))
    for i, o in enumerate(before.ops):
        if i not in kept_at:
            outside.append((f"op {i} ({o.type}) of the original is gone",
                            {"rank": rank, "op_index": i, "op_type": o.type,
                             "var": (o.writes() or [None])[0]}))
    backward_reads_clone = set()
    for j, i in sorted(kept.items()):
        op, orig = after.ops[j], before.ops[i]
        seeded = orig.type in RANDOM_OPS and i in seg_ops
        aside = ASIDE + (SEED_ATTRS if seeded else ())
        keep = {k: v for k, v in orig.attrs.items() if k not in aside}
        got = {k: v for k, v in op.attrs.items() if k not in aside}
        if keep != got:
            diff = sorted(k for k in set(keep) | set(got) if keep.get(k) != got.get(k))
            outside.append((f"op {j} ({op.type}) stands for op {i} but differs in attrs "
                            f"{', '.join(diff)}", _cx(rank, op, attrs=diff)))
        for slot in sorted(set(op.inputs) | set(orig.inputs)):
            a_names, b_names = op.inputs.get(slot) or [], orig.inputs.get(slot) or []
            if seeded and slot in SEED_SLOTS and not b_names:
                for n in a_names:
                    sop = new_seeds.get(n)
                    if sop is None:
                        seeds.append((f"forward {op.type} op {j} reads seed {n}, which no "
                                      "inserted forward seed op makes", _cx(rank, op, var=n)))
                    elif orig.attrs.get("fix_seed") and \
                            sop.attrs.get("seed") != orig.attrs.get("seed"):
                        seeds.append((f"forward {op.type} op {j} fixed seed "
                                      f"{orig.attrs.get('seed')} and now reads seed op "
                                      f"{sop.idx}'s {sop.attrs.get('seed')}: another mask",
                                      _cx(rank, op, var=n)))
                continue
            if len(a_names) != len(b_names):
                outside.append((f"op {j} ({op.type}) reads {a_names} as {slot} where op {i} "
                                f"read {b_names}", _cx(rank, op, var=(a_names or b_names)[0],
                                                       slot=slot)))
                continue
            for a, b in zip(a_names, b_names):
                if a == b:
                    if b in acts and is_backward(op):
                        memory.append((f"backward op {j} ({op.type}) still reads the forward "
                                       f"activation {a} (segment {acts[b]}) as {slot}: kept "
                                       "alive into the backward, not recomputed",
                                       _cx(rank, op, var=a, slot=slot)))
                    continue
                if stands.get(a) == b and is_backward(op):
                    backward_reads_clone.add(j)
                    continue
                outside.append((f"op {j} ({op.type}) reads {a} as {slot}, not the value op "
                                f"{i} read ({b}) nor a recomputation of it",
                                _cx(rank, op, var=a, slot=slot, read_before=b)))
    needed = sorted({n for o in before.ops if is_backward(o) for n in o.reads() if n in acts})
    fired = [] if not needed or (clones and backward_reads_clone) else [(
        f"the backward read {len(needed)} activation(s) of a recompute segment (e.g. "
        f"{needed[0]}) and no backward op reads a recomputed value",
        {"rank": rank, "var": needed[0]})]
    out = []

    def result(name, found, ok_msg):
        if found:
            msg, ce = found[0]
            more = f" ({len(found) - 1} more)" if len(found) > 1 else ""
            out.append(CheckResult("contract", name, rank, Verdict.CONTRACT_BROKEN,
                                   f"{where}: {msg}{more}", counterexample=ce))
        else:
            out.append(CheckResult("contract", name, rank, Verdict.EQUIVALENT,
                                   f"{where}: {ok_msg}"))

    result("reads the recomputed value", fired + faithful,
           f"{len(clones)} forward op(s) of {len(segs)} segment(s) recomputed in the "
           f"backward, each the op it stands for, read by {len(backward_reads_clone)} "
           "backward op(s)")
    result("activations released", memory,
           f"no backward op nor clone reads any of the {len(acts)} activation(s) of the "
           "segments")
    result("dropout seeds", seeds, "every recomputed random op reads its forward op's seed"
           if any(after.ops[i].type in RANDOM_OPS for i in clones.values())
           else "no random op recomputed")
    result("outside the segments", outside,
           f"the {len(kept)} other ops are the originals, the backward's reads re-pointed "
           "to recomputed values only")
    return out


def _clone_of(op, candidates, stands, used) -> int | None:
    """The rewritten index of the marked forward op ``op`` recomputes: the
    first unused one with its type and attrs (role aside) whose every read
    ``op`` reads too, or reads through a clone."""
    got = {k: v for k, v in op.attrs.items() if k not in ASIDE}
    for fo in candidates:
        i = fo.idx
        if i in used or fo.type != op.type or \
                {k: v for k, v in fo.attrs.items() if k not in ASIDE} != got:
            continue
        if set(fo.inputs) != set(op.inputs) or set(fo.outputs) != set(op.outputs):
            continue
        if all(len(op.inputs[s]) == len(fo.inputs[s]) and all(
                a == b or stands.get(a) == b for a, b in zip(op.inputs[s], fo.inputs[s]))
               for s in fo.inputs):
            return i
    return None


class RecomputeAdapter(PassAdapter):
    name = "auto_parallel_recompute"
    short = "recompute"

    def handles(self, case) -> bool:
        """Cases that state what this pass must do: the pass reads the dist
        context's grad-op map and the planner's segment marks."""
        return super().handles(case) and self.name in case.expect

    def attrs(self, case, rp) -> dict:
        return {"dist_context": rp.dist_context, "no_grad_set": None,
                "loss": rp.main.global_block().var(rp.loss),
                "no_recompute_segments": list(case.params.get("no_recompute_segments", [])),
                "sr": 0, "refined_ops_patterns": []}

    def apply_local(self, case, rank: int):
        """As the base, with ``FLAGS_new_executor_sequential_run`` as the
        legacy Engine sets it (1, in ``Engine.__init__``): then the pass
        inserts no ordering ``nop`` before a segment's copy.  A case may say
        otherwise (``params["sequential_run"] = False``): the pass as applied
        outside the Engine (the tuner, the old parallelizer)."""
        from verify.ir.legacy_ir import paddle_module

        paddle = paddle_module()
        flag = "FLAGS_new_executor_sequential_run"
        old = paddle.get_flags([flag])[flag]
        paddle.set_flags({flag: bool(case.params.get("sequential_run", True))})
        try:
            return super().apply_local(case, rank)
        finally:
            paddle.set_flags({flag: old})

    def pattern_present(self, snap) -> bool:
        """A segment activation the backward reads."""
        acts = activations(snap)
        return any(n in acts for o in snap.ops if is_backward(o) for n in o.reads())

    def contract(self, case, rank, before, after) -> list:
        return [self.fired_check(case, rank, before, after)] + \
            recompute_contract(self.name, case.name, rank, before, after)

    def intended_changes(self, case, rank, before, after) -> dict:
        """Values whose writer the pass changed on purpose: those a ``nop``
        it inserts names (it orders the executor and writes nothing), those
        of a kept op that now reads a recomputed value or a seed tensor
        (a clone, a seed: the value proof and the runs judge them equal)."""
        out = {}
        kept = pair_ops(before, after)
        for op in after.ops:
            if op.type == "nop" and is_backward(op):
                out.update({n: "named by the recompute's ordering nop (no data written)"
                            for n in op.writes()})
            elif op.idx in kept and op.inputs != before.ops[kept[op.idx]].inputs:
                out.update({n: "written from a recomputed value or the forward's seed "
                               "tensor" for n in op.writes()})
        return out


ADAPTER = RecomputeAdapter()
