"""A pass that changes how a parameter is initialised is seen by both the
value proof and the numeric runs (issue 19, class 6): the issue's example,
a uniform_random range widened from [-0.5, 0.5] to [-50, 50] in the
rewritten startup program, passed every backend before."""
from __future__ import annotations

import numpy as np
import pytest

import cases
import passes
from verify.engine.application import run_application
from verify.engine.matrix_runner import pick_backend
from verify.numeric.inputs import init_like, init_signature
from verify.selfcheck.program_mutants import Mutation
from verify.verdicts import Verdict


def widen(main, startup, snap, rank):
    for op in startup.global_block().ops:
        if op.type == "uniform_random":
            op._set_attr("min", -50.0)
            op._set_attr("max", 50.0)
            return Mutation("widen init", f"{op.output_arg_names[0]}: [-0.5, 0.5] -> [-50, 50]")
    return None


def test_init_like_maps_onto_the_other_distribution_and_keeps_equal_ones():
    v = np.array([-0.25, 0.0, 0.5], dtype=np.float32)
    u = ("uniform_random", {"min": -0.5, "max": 0.5, "seed": 0})
    assert init_like(v, "w", 0, u, ("uniform_random", {"min": -0.5, "max": 0.5, "seed": 9})) \
        is v  # the seed aside: the same draw
    np.testing.assert_allclose(init_like(v, "w", 0, u, ("uniform_random",
                                                         {"min": -50.0, "max": 50.0})),
                               [-25.0, 0.0, 50.0])
    g = init_like(v, "w", 0, ("gaussian_random", {"mean": 0.0, "std": 1.0}),
                  ("gaussian_random", {"mean": 1.0, "std": 2.0}))
    np.testing.assert_allclose(g, [0.5, 1.0, 2.0])
    other = init_like(v, "w", 0, u, ("gaussian_random", {"mean": 0.0, "std": 1.0}))
    assert not np.allclose(other, v)
    assert init_signature("uniform_random", {"min": 1, "seed": 3}) == \
        init_signature("uniform_random", {"min": 1, "seed": 4})


def _app(mutant, backend):
    case = cases.all_cases()["row_mp_o0_sgd_tp2"]
    _, numeric = pick_backend(backend)
    return run_application(passes.get("promotion"), case, numeric=numeric,
                           mutator=(0, mutant))


def test_a_widened_initialisation_is_caught_by_the_numeric_runs_and_the_proof():
    app = _app(widen, "simulated")
    assert app.mutation is not None
    assert app.verdict == Verdict.NOT_EQUIVALENT, [c.message for c in app.checks]
    numeric = [c for c in app.checks if c.kind == "numeric"]
    assert any(c.verdict == Verdict.NOT_EQUIVALENT for c in numeric), \
        [c.message for c in numeric]
    value = [c for c in app.checks if c.kind == "value" and c.rank == 0]
    assert value and value[0].verdict == Verdict.NOT_EQUIVALENT, value[0].message


def _numeric_app(mutator=None):
    """The promotion on row_mp_o0_sgd_tp2 with its simulated numeric runs
    only (the value proof is not what is judged here: left out, cheap)."""
    _, numeric = pick_backend("simulated")
    return run_application(passes.get("promotion"), cases.all_cases()["row_mp_o0_sgd_tp2"],
                           numeric=numeric, mutator=mutator, value=False)


def shift_last(main, startup, snap, rank):
    """The last uniform draw of the startup program moves to [0, 0.5]."""
    ops = [op for op in startup.global_block().ops if op.type == "uniform_random"]
    if not ops:
        return None
    ops[-1]._set_attr("min", 0.0)
    return Mutation("shift init", f"{ops[-1].output_arg_names[0]}: [-0.5, 0.5] -> [0, 0.5]")


@pytest.fixture(scope="module")
def faithful():
    return _numeric_app()


def test_the_faithful_promotion_names_no_changed_initialisation(faithful):
    num = [c for c in faithful.checks if c.kind == "numeric"]
    assert num and all(c.verdict == Verdict.EQUIVALENT for c in num), [c.message for c in num]
    assert all("init_changes" not in (c.counterexample or {}) for c in faithful.checks)


@pytest.mark.parametrize("mutant,rank,op,attr", [
    (widen, 1, "uniform_random", "max"),
    (shift_last, 0, "uniform_random", "min"),
])
def test_the_legacy_numeric_runs_name_a_changed_initialisation(mutant, rank, op, attr):
    """A legacy startup init attr changed by a program edit: each differing
    numeric check names rank, parameter and startup op (as the PIR runs do);
    the faithful pass's checks name none and pass (the test above)."""
    app = _numeric_app((rank, mutant))
    assert app.mutation is not None and app.verdict == Verdict.NOT_EQUIVALENT
    var = app.mutation.description.split(":")[0]
    bad = [c for c in app.checks if c.kind == "numeric" and c.verdict == Verdict.NOT_EQUIVALENT]
    assert bad, [c.message for c in app.checks]
    after = next(o.after for o in app.outcomes if o.rank == rank)
    for c in bad:
        (ch,) = c.counterexample["init_changes"]
        assert (ch["var"], ch["rank"], ch["op"]) == (var, rank, op), ch
        assert attr in ch["rewritten"], ch
        assert after.startup_ops[ch["op_index"]].type == op
        assert f"rank {rank}'s rewritten startup program initialises parameter {var} " \
            f"differently: startup op {ch['op_index']} ({op})" in c.message, c.message
