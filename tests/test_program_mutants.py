"""A fixed sample of program-level mutants: each must be caught, by the
check that can see it."""
import pytest

import cases
import passes
from verify import program_mutants as pm
from verify.application import run_application
from verify.gate import pick_backend

SAMPLE = [
    ("overlap", "col_3d_static", pm.drop_op, "dataflow"),
    ("overlap", "col_3d_static", pm.swap_dependent, "dataflow"),
    ("overlap", "col_3d_static", pm.swap_across_collective, "contract"),
    ("overlap", "col_3d_static", pm.rename_input, "numeric"),
    ("overlap", "col_3d_static", pm.reshape_target, "shape"),
    ("overlap", "col_3d_static", pm.collective_attr, "numeric"),
    ("overlap", "col_3d_static", pm.delete_startup_init, "dataflow"),
    ("overlap", "col_3d_static", pm.remove_collective, "contract"),
    ("overlap", "col_3d_static", pm.flip_trans, "numeric"),
    ("overlap", "col_cast_window", pm.cast_dtype, "shape"),
    ("promotion", "row_mp_o0_sgd_tp2", pm.duplicate_bias_add, "numeric"),
    ("promotion", "engine_mlp_tp2_sgd", pm.collective_attr, "numeric"),
]


@pytest.mark.parametrize("short,case_name,operator,kind", SAMPLE,
                         ids=[f"{s[2].__name__}-{s[1]}" for s in SAMPLE])
def test_mutant_is_caught(short, case_name, operator, kind):
    _, numeric = pick_backend("simulated", 3)
    case = cases.all_cases()[case_name]
    app = run_application(passes.get(short), case, numeric=numeric,
                          mutator=(case.ranks[0], operator))
    assert app.mutation is not None, "operator found no site"
    assert app.verdict.value == "NOT_EQUIVALENT", app.mutation.description
    kinds = {c.kind for c in app.checks if c.verdict.value == "NOT_EQUIVALENT"}
    assert kind in kinds, (app.mutation.description, kinds)
    cex = next(c.counterexample for c in app.checks
               if c.kind == kind and c.counterexample)
    assert cex.get("rank") == case.ranks[0] or "first" in cex, cex
