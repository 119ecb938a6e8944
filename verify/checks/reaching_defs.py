"""Reaching definitions preserved: each read sees the value it saw before.

Ops are matched between the original and the rewritten program by their
rendered text (type, slots, attrs; the n-th occurrence matches the n-th), so
an op the pass left untouched is compared with itself.  For every var such
an op reads, the *version* it sees is the number of writes of that var
before it (a var written in place twice has versions 1 and 2).  A matched
read whose version changed sees another value: a finding, unless the pass
adapter declares that var as changed on purpose.

Coarser than exact: ops the pass renamed or rewrote are not matched, so
their reads are covered by def-before-use and the numeric runs instead.
"""
from __future__ import annotations

from collections import Counter

from ..verdicts import CheckResult, Verdict

KIND = "dataflow"


def read_versions(ops) -> dict:
    """``{(render, occurrence): (op, {var: version})}`` for every op."""
    writes = Counter()
    seen = Counter()
    out = {}
    for op in ops:
        key = op.render()
        occ = seen[key]
        seen[key] += 1
        out[(key, occ)] = (op, {v: writes[v] for v in op.reads() if v})
        for v in op.writes():
            writes[v] += 1
    return out


def run(ctx) -> list:
    before = read_versions(ctx.before.ops)
    after = read_versions(ctx.after.ops)
    results = []
    matched = 0
    for key, (op_a, vers_a) in after.items():
        if key not in before:
            continue
        matched += 1
        op_b, vers_b = before[key]
        for var, va in vers_a.items():
            vb = vers_b.get(var)
            if vb is None or va == vb or var in ctx.intended:
                continue
            results.append(CheckResult(
                KIND, "reaching definitions", ctx.rank, Verdict.NOT_EQUIVALENT,
                f"{ctx.where()}: op {op_a.idx} ({op_a.type}) reads {var} after "
                f"{va} write(s) in the rewritten program but after {vb} in the original "
                f"(op {op_b.idx}), so it sees another value",
                counterexample={"rank": ctx.rank, "op_index": op_a.idx,
                                "op_type": op_a.type, "var": var,
                                "writes_seen_rewritten": va, "writes_seen_original": vb}))
    if not results:
        results.append(CheckResult(
            KIND, "reaching definitions", ctx.rank, Verdict.EQUIVALENT,
            f"{matched} unchanged ops read the same definitions as in the original"))
    return results
