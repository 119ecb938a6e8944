"""Def-before-use: no op reads a tensor before something has written it.

A var is written before op *i* of main when it is fed, written by the
startup program (parameters and optimizer state), or written by an op
before *i*.  Startup and main
are checked together, so a bias init deleted from startup while main still
reads the bias is a finding; the startup program is checked on its own too.
``coalesce_tensor`` without ``copy_data`` or ``set_constant`` drops its
views' values (a later read needs a new write), and a read of its fused
buffer reads every view.
"""
from __future__ import annotations

from ..verdicts import CheckResult, Verdict

KIND = "dataflow"


# Input slots an op names without reading their data, one row per op type:
# ``coalesce_tensor`` with ``copy_data=False`` makes its inputs views of one
# new fused buffer (the ops after it write them: Paddle's fused all-reduce;
# phi's kernel reads their dims only); ``nop`` names vars for the executor's
# ordering only (its kernel does nothing).
DECLARED_ONLY = {
    "coalesce_tensor": lambda op: () if op.attrs.get("copy_data", True) else ("Input",),
    "nop": lambda op: tuple(op.inputs),
}


def dropped_writes(op) -> list:
    """The vars ``op`` leaves without a value: ``coalesce_tensor`` with
    neither ``copy_data`` nor ``set_constant`` makes its outputs views of a
    new buffer, their earlier values gone (verify/value/views.py)."""
    if op.type == "coalesce_tensor" and not op.attrs.get("copy_data", True) and \
            not op.attrs.get("set_constant", False):
        return list(op.outputs.get("Output") or [])
    return []


def buffers(op) -> dict:
    """``{fused buffer: its views}`` that ``op`` makes (coalesce_tensor)."""
    if op.type != "coalesce_tensor":
        return {}
    fused = (op.outputs.get("FusedOutput") or [None])[0]
    return {fused: list(op.outputs.get("Output") or [])} if fused else {}


def data_reads(op) -> list:
    """The vars ``op`` reads the data of (its reads minus declared-only slots)."""
    skip = DECLARED_ONLY.get(op.type, lambda _: ())(op)
    return [n for slot, names in op.inputs.items() if slot not in skip for n in names]


def first_undefined_reads(ops, defined) -> list:
    """``[(op, var)]`` for each var first read before any write, in order."""
    defined = set(defined)
    seen = set()
    out = []
    views = {}  # a fused buffer holds a value when every view of it does
    for op in ops:
        for name in data_reads(op):
            for part in views.get(name, [name]):
                if part and part not in defined and part not in seen:
                    seen.add(part)
                    out.append((op, part))
        defined.update(op.writes())
        defined.difference_update(dropped_writes(op))
        views.update(buffers(op))
    return out


def run(ctx) -> list:
    s = ctx.after
    startup_bad = first_undefined_reads(s.startup_ops, set())
    main_bad = first_undefined_reads(s.ops, set(s.feeds) | s.startup_writes())
    before_bad = {v for _, v in first_undefined_reads(
        ctx.before.ops, set(ctx.before.feeds) | ctx.before.startup_writes())}
    written = set(s.feeds) | s.startup_writes() | \
        {n for op in s.ops for n in op.writes()}
    results = []
    for program, bad in (("startup", startup_bad), ("main", main_bad)):
        for op, var in bad:
            inherited = program == "main" and var in before_bad
            never = var not in written
            results.append(CheckResult(
                KIND, "def before use", ctx.rank, Verdict.NOT_EQUIVALENT,
                f"{ctx.where()}: {program} op {op.idx} ({op.type}) reads {var} before "
                "anything writes it" + (" (nothing ever writes it)" if never else "")
                + (" (already so in the original)" if inherited else ""),
                counterexample={"rank": ctx.rank, "program": program, "op_index": op.idx,
                                "op_type": op.type, "var": var},
                # in the first step the read finds the tensor empty, and the
                # executor fails (or crashes) on it
                details={"crashes_executor": True}))
    if not results:
        results.append(CheckResult(
            KIND, "def before use", ctx.rank, Verdict.EQUIVALENT,
            f"every read of the {len(s.ops)} main and {len(s.startup_ops)} startup ops "
            "has a writer before it"))
    return results
