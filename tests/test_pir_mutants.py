"""The checker checks itself on PIR: in-region mutants of a faithful PIR
rewrite (``pir_mm_3d``, EQUIVALENT today) must be caught."""
from __future__ import annotations

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402


def _new_matmuls(main):
    """The pd_op.matmul ops the split inserted (the backward half of main)."""
    ops = main.global_block().ops
    first_bwd = next(i for i, o in enumerate(ops) if o.name() == "pd_op.mean_grad")
    return [o for o in ops[first_bwd:] if o.name() == "pd_op.matmul"]


def flip_dx_transpose(main, startup, snap, rank):
    """dX = dOut W (not W^T): same shapes with square weights."""
    import paddle

    with paddle.pir_utils.IrGuard():
        mm = _new_matmuls(main)[0]
        mm.set_bool_attr("transpose_y", False)
    return "transpose_y of the dX matmul flipped"


def swap_sgd_grads(main, startup, snap, rank):
    """Each weight updated with the other weight's gradient (equal shapes)."""
    import paddle

    with paddle.pir_utils.IrGuard():
        sgds = [o for o in main.global_block().ops if o.name() == "pd_op.sgd_"]
        g0, g1 = sgds[0].operand_source(2), sgds[1].operand_source(2)
        sgds[0].operand(2).set_source(g1)
        sgds[1].operand(2).set_source(g0)
    return "sgd_ grads swapped"


@pytest.mark.parametrize("mutant", [flip_dx_transpose, swap_sgd_grads],
                         ids=lambda f: f.__name__)
def test_in_region_mutants_of_a_pir_rewrite_are_caught(mutant):
    _, numeric = pick_backend("simulated", 0)
    case = cases.all_cases()["pir_mm_3d"]
    app = run_application(passes.get("vpp_split"), case, numeric=numeric,
                          mutator=(0, mutant))
    assert app.mutation
    assert app.verdict == Verdict.NOT_EQUIVALENT, [c.message for c in app.checks if not c.ok]
    kinds = {c.kind for c in app.checks if c.verdict == Verdict.NOT_EQUIVALENT}
    assert {"value", "numeric"} <= kinds, kinds


def test_every_in_region_operator_mutates_a_pir_rewrite_or_says_why_not():
    """The in-region operators of ``verify mutate`` act on PIR programs too
    (their edits are carried out by verify/ir/program_edits.py): each one that
    finds a site on a faithful PIR rewrite makes a mutant the checks kill;
    write_past_reader has no site in SSA, wrong_ring none without a
    collective."""
    from verify.selfcheck import program_mutants as pm

    _, numeric = pick_backend("simulated", 0)
    case = cases.all_cases()["pir_mm_3d"]
    adapter = passes.get("vpp_split")
    made = {}
    for op in pm.IN_REGION_OPERATORS:
        mutator = pm.prepare(op, adapter, case, 0)
        if mutator is None:
            made[op.__name__] = None
            continue
        app = run_application(adapter, case, numeric=numeric, mutator=(0, mutator))
        assert app.mutation and app.mutation.scope == "in_region", op.__name__
        made[op.__name__] = app.verdict
    assert made.pop("write_past_reader") is None
    assert made.pop("wrong_ring") is None
    assert made and all(v == Verdict.NOT_EQUIVALENT for v in made.values()), made
