"""Reaching definitions preserved, by writer: each read sees the same write.

Both programs are put in SSA form: each write of a var makes a new version,
named by the op that wrote it (a read before any write sees the *entry*
version: a feed, or what the startup program left).  Ops are matched across
the rewrite by their rendered text (type, slots, attrs, stream; the n-th
occurrence matches the n-th), after the original's var names are mapped
through the renames the pass made (``ctx.renames``), so an op the pass left
untouched, or only re-pointed at a renamed value, is compared with itself.  For every read of a matched op, its reaching writer in the
rewritten program, mapped back through the matching, must be the writer it
had in the original:

* the writers map to different original ops: two writers swapped, a
  write moved past its reader, entry before and a write now (or the
  reverse); the read sees another value (NOT_EQUIVALENT);
* the writer is the same op but the pass changed its attrs, or it is an op
  the pass added: a finding unless the adapter declares that var among the
  values its pass recomputes (``intended``; the value proof and the numeric
  runs then judge whether the new writer computes the same).

Ops are matched in two tiers: unchanged ops by their text, then ops whose
type, inputs and outputs are kept but attrs changed (an allreduce moved to
another stream is still that allreduce, so a read in its old window that
now sees it is caught).  Reads of ops the pass added are covered by
def-before-use, the value proof and the numeric runs.
"""
from __future__ import annotations

from collections import Counter

from ..verdicts import CheckResult, Verdict

KIND = "dataflow"
ENTRY = "entry"


def _renamed(op, renames):
    if not renames:
        return op
    from dataclasses import replace

    def sub(slots):
        return {k: [renames.get(n, n) for n in v] for k, v in slots.items()}

    return replace(op, inputs=sub(op.inputs), outputs=sub(op.outputs))


def op_keys(ops, renames=None) -> list:
    """``(render, occurrence)`` of each op: its identity across a rewrite."""
    from verify.ir.snapshot import rendered

    seen = Counter()
    keys = []
    for r in rendered([_renamed(op, renames) for op in ops] if renames else ops):
        keys.append((r, seen[r]))
        seen[r] += 1
    return keys


def reaching_writers(ops) -> list:
    """For each op, ``{var it reads: index of the op whose write it sees, or
    ENTRY}`` (the SSA version of each read)."""
    last = {}
    out = []
    for i, op in enumerate(ops):
        out.append({v: last.get(v, ENTRY) for v in op.reads() if v})
        for v in op.writes():
            last[v] = i
    return out


def _describe(ops, w) -> str:
    return "the program's entry (feed or startup)" if w == ENTRY else \
        f"op {w}: {ops[w].render()[:200]}"


def match_ops(b_ops, a_ops, renames=None) -> dict:
    """``{after index: (before index, exact)}``: ops the pass left as they
    were (``exact``), then ops it kept but changed attrs of (same type,
    inputs and outputs, e.g. an allreduce moved to another stream)."""
    b_keys, a_keys = op_keys(b_ops, renames), op_keys(a_ops)
    b_index = {k: i for i, k in enumerate(b_keys)}
    out = {ai: (b_index[k], True) for ai, k in enumerate(a_keys) if k in b_index}
    used = {bi for bi, _ in out.values()}

    def shape_keys(ops, skip, ren):
        seen, keys = Counter(), {}
        for i, op in enumerate(ops):
            if i in skip:
                continue
            o = _renamed(op, ren)
            k = (o.type, sorted((s, tuple(v)) for s, v in o.inputs.items()),
                 sorted((s, tuple(v)) for s, v in o.outputs.items()))
            k = repr(k)
            keys[(k, seen[k])] = i
            seen[k] += 1
        return keys

    b_struct = shape_keys(b_ops, used, renames)
    for k, ai in shape_keys(a_ops, set(out), None).items():
        if k in b_struct:
            out[ai] = (b_struct[k], False)
    return out


def run(ctx) -> list:
    b_ops, a_ops = ctx.before.ops, ctx.after.ops
    matched_ops = match_ops(b_ops, a_ops, ctx.renames)
    b_writers, a_writers = reaching_writers(b_ops), reaching_writers(a_ops)
    results = []
    for ai, (bi, _) in matched_ops.items():
        for var, wa in a_writers[ai].items():
            wb = b_writers[bi].get(var)
            if wb is None:
                continue
            if wa == ENTRY:
                mapped, how = ENTRY, "same"
            elif wa in matched_ops:
                mapped, exact = matched_ops[wa]
                how = "same" if exact else "changed"
            else:
                mapped, how = None, "new"
            intended = var in ctx.intended
            if mapped == wb and (how == "same" or intended):
                continue
            if how == "new" and intended:
                continue  # a value the pass recomputes on purpose, by a new op
            why = ("sees a write the pass added" if how == "new" else
                   "sees a write whose op the pass changed" if mapped == wb else
                   "sees another write than in the original")
            results.append(CheckResult(
                KIND, "reaching definitions", ctx.rank, Verdict.NOT_EQUIVALENT,
                f"{ctx.where()}: op {ai} ({a_ops[ai].type}) reads {var} and {why}: "
                f"{_describe(a_ops, wa)} in the rewritten program, "
                f"{_describe(b_ops, wb)} in the original (op {bi})",
                counterexample={"rank": ctx.rank, "op_index": ai, "op_type": a_ops[ai].type,
                                "var": var, "original_op_index": bi,
                                "writer_original": _describe(b_ops, wb),
                                "writer_rewritten": _describe(a_ops, wa)}))
    if not results:
        results.append(CheckResult(
            KIND, "reaching definitions", ctx.rank, Verdict.EQUIVALENT,
            f"{len(matched_ops)} kept ops read the same writes as in the original"))
    return results
