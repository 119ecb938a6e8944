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

* both writers matched, but different ops: two writers swapped, or a write
  moved past its reader; the read sees another value (NOT_EQUIVALENT);
* the new writer is an op the pass added or changed: the read now sees a
  value another op computes, a finding unless the adapter declares that var
  among the values its pass recomputes (``intended``; the value proof and
  the numeric runs then judge whether the new writer computes the same);
* entry before, a write now (or the reverse): a finding likewise.

Reads of ops the pass added or changed are covered by def-before-use, the
value proof and the numeric runs.
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
    seen = Counter()
    keys = []
    for op in ops:
        r = _renamed(op, renames).render()
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
        f"op {w} ({ops[w].type})"


def run(ctx) -> list:
    b_ops, a_ops = ctx.before.ops, ctx.after.ops
    b_keys, a_keys = op_keys(b_ops, ctx.renames), op_keys(a_ops)
    b_index = {k: i for i, k in enumerate(b_keys)}
    b_writers, a_writers = reaching_writers(b_ops), reaching_writers(a_ops)
    results = []
    matched = 0
    for ai, key in enumerate(a_keys):
        bi = b_index.get(key)
        if bi is None:
            continue
        matched += 1
        for var, wa in a_writers[ai].items():
            wb = b_writers[bi].get(var)
            if wb is None:
                continue
            mapped = wa if wa == ENTRY else b_index.get(a_keys[wa], ("new", wa))
            if mapped == wb:
                continue
            new_writer = isinstance(mapped, tuple)
            if new_writer and var in ctx.intended:
                continue  # a value the pass recomputes on purpose
            if wb != ENTRY and not new_writer and var in ctx.intended and mapped != ENTRY:
                # the pass moved one of its own writes; judged by value checks
                continue
            why = ("now sees a write the pass added or changed" if new_writer
                   else "sees another write than in the original")
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
            f"{matched} unchanged ops read the same writes as in the original"))
    return results
