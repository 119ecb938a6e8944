"""A second witness for programs with a global-norm clip: the clip off.

A clip by global norm divides every gradient by ``max(norm, c) / c``; where
it is active (norm > c) it cancels any factor common to all gradients, so a
rewrite that scales every gradient wrongly by the same factor (e.g. 1/dp
twice) runs bitwise equal to the original.  Runs with the clip inactive see
that factor.  This module finds the clip's threshold in a legacy program by
its dataflow (a ``fill_constant`` read by an ``elementwise_max`` together
with a ``sqrt``: ``max(c, sqrt(sum of squared norms))``) and gives copies of
the programs with the threshold raised to :data:`HUGE`, where
``c / max(norm, c) == 1`` exactly for every finite norm.
"""
from __future__ import annotations

import dataclasses

HUGE = 1e30
_MAX = ("elementwise_max", "maximum")


def thresholds(program) -> list:
    """Indices of the ``fill_constant`` ops that are a clip threshold."""
    ops = program.global_block().ops
    writer = {}
    for i, op in enumerate(ops):
        for n in op.output_arg_names:
            writer.setdefault(n, []).append(i)
    out = []
    for op in ops:
        if op.type not in _MAX:
            continue
        srcs = [ops[writer[n][-1]] if n in writer else None for n in op.input_arg_names]
        types = [s.type if s is not None else None for s in srcs]
        if "sqrt" in types and "fill_constant" in types:
            for n in op.input_arg_names:
                if n in writer and ops[writer[n][-1]].type == "fill_constant":
                    out.append(writer[n][-1])
    return sorted(set(out))


def clip_off(rp):
    """A copy of RankProgram ``rp`` whose clip thresholds are :data:`HUGE`,
    or None when its main program has no global-norm clip."""
    main = rp.main.clone()
    found = thresholds(main)
    if not found:
        return None
    ops = main.global_block().ops
    for i in found:
        ops[i]._set_attr("value", HUGE)
        if ops[i].has_attr("str_value") and ops[i].attr("str_value"):
            ops[i]._set_attr("str_value", repr(HUGE))
    return dataclasses.replace(rp, main=main)
