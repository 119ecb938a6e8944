"""The loss of a planned PIR training program: the value its backward starts from.

Paddle's backward seeds the gradient of the loss ``L`` with
``pd_op.full_like(L, 1.0)`` (``L`` a scalar) and hands it as ``out_grad`` to
the grad op of ``L``'s defining op; a ``full_like`` of the forward feeds
forward ops.  That holds
whatever computes the loss (a scalar ``mean``, or the ``sum / count`` of
paddleformers' criterion), so it finds the loss where a search for a scalar
``pd_op.mean`` does not.  It is the loss every PIR plan records (``verify/plan/pir_rank.py``'s
``meta.json``, the planner records' relation tables: ``verify/plan/stages.py``),
and what a program dir whose ``meta.json`` names no loss (one planned before
format version 3) is watched by (``cases/program_dirs.build_pir``).
"""
from __future__ import annotations


def _full_value(value):
    """The constant of a ``pd_op.full`` defining ``value``, else None."""
    op = value.get_defining_op() if value.initialized() else None
    if op is None or op.name() != "pd_op.full":
        return None
    try:
        return float(op.attrs()["value"])
    except (KeyError, TypeError, ValueError):
        return None


def seeded_loss_value(main):
    """The value ``main``'s backward is seeded from: the ``x`` of a
    ``pd_op.full_like(x, 1.0)`` of a one-element ``x`` whose result a
    ``*_grad`` op reads; the first such, or None (a forward-only program).
    Call under ``paddle.pir_utils.IrGuard``."""
    for op in main.global_block().ops:
        if op.name() != "pd_op.full_like" or op.num_operands() < 2:
            continue
        x, fill = op.operand_source(0), op.operand_source(1)
        if _full_value(fill) != 1.0 or int(_numel(x)) != 1:
            continue
        if any(user.name().endswith("_grad") for user in op.result(0).all_used_ops()):
            return x
    return None


def seeded_loss(main, names) -> str | None:
    """The name (``names.name``) of :func:`seeded_loss_value`, or None.
    Call under ``paddle.pir_utils.IrGuard``."""
    x = seeded_loss_value(main)
    return names.name(x) if x is not None else None


def _numel(value) -> int:
    n = 1
    for d in value.shape:
        n *= int(d)
    return n
