"""Pass-level mutants: a real Paddle pass with one injected bug must be caught.

Each mutant in ``verify.selfcheck.mutation_catalog.PASS_MUTANTS`` subclasses the
installed pass and re-registers it under the same name; it is loaded as a
user's changed pass file would be (``verify.ir.pass_files.load_pass_file``) and run
on a case where the real pass is EQUIVALENT.  Each test states which check
must catch it and with which counterexample; the real pass on the same case
must stay EQUIVALENT (the checker does not cry wolf).
"""
from __future__ import annotations

import ast
import os

import pytest

import cases
import passes
from verify.ir.pass_files import load_pass_file
from verify.engine import baseline
from verify.engine.matrix_runner import run_matrix
from verify.selfcheck.mutation_catalog import PASS_MUTANTS
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANT_DIR = os.path.join(ROOT, "tests", "mutants")
FIXTURES = {"overlap_raises.py", "registers_nothing.py"}  # CLI fixtures, not mutants
BY_FILE = {os.path.basename(path): (path, pass_name, case_name)
           for path, pass_name, case_name, _ in PASS_MUTANTS}


def run(pass_name, case_name):
    # No wall-clock limit here: under CI load (and the first application of a
    # worker starting its isolation pool) 5 s failed 8 of these tests; the
    # suite's time is watched by CPU figures (benchmarks/README.md).
    apps, _ = run_matrix([passes.get(pass_name)], [cases.all_cases()[case_name]],
                         backend="simulated", out=None)
    return apps[0]


def run_mutant(file_name):
    """The application of the catalogued mutant ``file_name`` on its case."""
    from paddle.distributed.passes.pass_base import PassBase

    path, pass_name, case_name = BY_FILE[file_name]
    installed = PassBase._REGISTERED_PASSES[pass_name]
    loaded = load_pass_file(os.path.join(ROOT, path))
    try:
        assert set(loaded.registered) == {pass_name}
        assert issubclass(loaded.registered[pass_name], installed), \
            "a pass mutant subclasses the real pass"
        app = run(pass_name, case_name)
    finally:
        loaded.restore()
    assert PassBase._REGISTERED_PASSES[pass_name] is installed
    return app


def deciding(app):
    """The checks that decide the verdict (predictions are advisory)."""
    return [c for c in app.checks if not getattr(c, "advisory", False)]


def failed(app, kind, name):
    return [c for c in deciding(app) if not c.ok and c.kind == kind and c.name == name]


def failing_kinds(app):
    return {c.kind for c in deciding(app) if not c.ok}


def caught_by(app, kind, name, ranks, **cex):
    """The failing ``kind``/``name`` checks: one per rank of ``ranks``, each
    with a counterexample holding ``cex`` (a value, or a predicate).  A
    contract check says CONTRACT_BROKEN (the pass did not do what it exists
    for), any other NOT_EQUIVALENT (the values differ)."""
    hits = failed(app, kind, name)
    assert sorted(c.rank for c in hits) == sorted(ranks), \
        [(c.kind, c.name, c.rank, c.message) for c in app.checks if not c.ok]
    verdict = Verdict.CONTRACT_BROKEN if kind == "contract" else Verdict.NOT_EQUIVALENT
    for c in hits:
        assert c.verdict == verdict, (c.verdict, c.message)
        assert c.counterexample is not None and c.counterexample["rank"] == c.rank
        for key, want in cex.items():
            got = c.counterexample.get(key)
            assert (want(got) if callable(want) else got == want), (key, got, c.message)
    return hits


# -- the catalog ---------------------------------------------------------------
def test_catalog_lists_every_pass_mutant_and_only_fair_cases():
    on_disk = {f for f in os.listdir(MUTANT_DIR) if f.endswith(".py")} - FIXTURES
    assert on_disk == set(BY_FILE), "every pass mutant in tests/mutants is catalogued"
    assert not os.path.exists(os.path.join(MUTANT_DIR, "__init__.py")), \
        "tests/mutants is loaded by path, it is no package"
    entries = baseline.load()["entries"]
    for path, pass_name, case_name, description in PASS_MUTANTS:
        assert os.path.isfile(os.path.join(ROOT, path)) and description
        entry = entries[baseline.key(pass_name, case_name)]
        assert entry["verdict"] == "EQUIVALENT" and entry["fires"], (path, case_name)
        with open(os.path.join(ROOT, path)) as f:
            assert ast.get_docstring(ast.parse(f.read())), f"{path} says which bug it injects"


@pytest.mark.parametrize("pass_name,case_name", sorted({(p, c) for _, p, c, _ in PASS_MUTANTS}))
def test_real_pass_is_equivalent_on_the_mutants_case(pass_name, case_name):
    app = run(pass_name, case_name)
    assert app.verdict == Verdict.EQUIVALENT, \
        [(c.kind, c.name, c.rank, c.message) for c in app.checks if not c.ok]
    assert app.fired_ranks == app.ranks
    assert any(c.kind == "numeric" and c.ok for c in app.checks), "numeric run happened"


# -- allreduce_matmul_grad_overlapping -------------------------------------------
def test_stream_dropped_is_caught_by_the_stream_contract():
    app = run_mutant("overlap_stream_dropped.py")
    assert app.verdict == Verdict.CONTRACT_BROKEN  # values kept
    caught_by(app, "contract", "allreduce on mp stream", [0, 1], op_index=10,
              op_type="c_allreduce_sum", var="linear_0.x_id@GRAD", stream="default")


def test_wrong_insert_index_is_caught_by_the_placement_contract():
    app = run_mutant("overlap_wrong_insert_index.py")
    assert app.verdict == Verdict.CONTRACT_BROKEN  # values kept
    # the dW matmul (X^T @ dOut) now runs before the allreduce is issued:
    # nothing left to overlap it with (the contract states the purpose, not
    # a position: an allreduce anywhere before the dW matmul would do)
    caught_by(app, "contract", "dW computed after the allreduce", [0, 1], op_index=12,
              op_type="matmul_v2", computes="linear_0.w_0@GRAD",
              matmul=lambda p: p.startswith("matmul_v2(X=linear_0.x_id@reshape.out")
              and "trans_x=True" in p,
              runs_before={"op_index": 13, "op_type": "c_allreduce_sum",
                           "var": "linear_0.x_id@GRAD"})
    # values are unchanged: only the contract can see a lost overlap
    assert failing_kinds(app) == {"contract"}


def test_an_allreduce_issued_elsewhere_before_the_dw_matmul_keeps_the_contract():
    """The contract states the purpose (dX's allreduce issued before the dW
    matmul, on the mp stream, values kept), not a position: a faithful
    variant issuing it after the dW operands' reshapes is EQUIVALENT (the
    rule "directly follows the dX matmul" called it CONTRACT_BROKEN), beside
    the mutant above that issues it after the dW matmul."""
    loaded = load_pass_file(os.path.join(ROOT, "tests", "fixed_passes",
                                         "overlap_allreduce_after_operand_reshapes.py"))
    try:
        app = run("allreduce_matmul_grad_overlapping", "col_3d_static")
    finally:
        loaded.restore()
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks if not c.ok]
    assert any(c.name == "allreduce placement" and c.ok for c in app.checks)


def test_removing_the_wrong_op_is_caught_by_collective_count_and_numerics():
    app = run_mutant("overlap_removes_wrong_op.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    # the original allreduce survives: dX is allreduced twice ...
    caught_by(app, "contract", "collective count", [0, 1], before=1, after=2)
    # ... the allreduce left is issued after the dW matmul (nothing overlaps) ...
    caught_by(app, "contract", "dW computed after the allreduce", [0, 1], op_index=13,
              op_type="matmul_v2", computes="linear_0.w_0@GRAD",
              runs_before=lambda r: r["op_index"] == 15)
    # ... and the weight's sgd is gone: the weight is never updated
    hits = caught_by(app, "numeric", "simulated run", [0, 1],
                     tensor=lambda t: t in {"linear_0.out", "loss", "linear_0.w_0"})
    for c in hits:
        bad = {t["name"] for t in c.details["tensors"] if not t["ok"]}
        assert "linear_0.w_0" in bad, bad


def test_dy_after_the_window_is_caught_by_def_before_use():
    app = run_mutant("overlap_dy_after_allreduce.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    # the window's cast now reads Y@GRAD before the moved dY reshape writes it
    caught_by(app, "dataflow", "def before use", [0, 1], program="main", op_index=11,
              op_type="cast", var="linear_0.w_0@GRAD")
    # ... so the read's reaching definition changed (whatever form the check
    # gives the writers in: counts of writes, or the writing ops)
    caught_by(app, "dataflow", "reaching definitions", [0, 1], op_index=11, op_type="cast",
              var="linear_0.w_0@GRAD")


# -- auto_parallel_fused_linear_promotion -----------------------------------------
def test_bias_on_every_rank_is_caught_by_contract_and_numerics():
    app = run_mutant("promotion_bias_every_rank.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    caught_by(app, "contract", "bias removed on other ranks", [1], op_index=1,
              op_type="elementwise_add", var="linear_0.b_0")
    caught_by(app, "contract", "bias init removed", [1], op_type="uniform_random",
              var="linear_0.b_0", program="startup")
    # the all_reduce sums tp copies of the bias: the forward output (and the
    # loss) differ from the first step on
    caught_by(app, "numeric", "simulated run", [0, 1],
              tensor=lambda t: t in {"mean_0.tmp_0", "linear_0.tmp_2"}, step=0,
              abs_err=lambda e: e > 1e-2)


def test_bias_removed_everywhere_is_caught_by_contract_and_numerics():
    app = run_mutant("promotion_bias_removed_everywhere.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    caught_by(app, "contract", "bias kept on first rank", [0], var="linear_0.b_0")
    # the bias and its gradient vanish from every rank (both infinitely wrong)
    hits = caught_by(app, "numeric", "simulated run", [0, 1],
                     tensor=lambda t: t in {"linear_0.b_0", "linear_0.b_0@GRAD"},
                     abs_err=float("inf"))
    assert all("vanished from every rank" in c.message for c in hits)


def test_widened_init_is_caught_by_the_numeric_run_naming_the_init():
    """The rewrite is right; only a startup draw changes.  The simulated run
    draws each side's parameters from its own startup program, so the
    difference is seen and the changed init op named (issue 19)."""
    app = run_mutant("promotion_init_widened.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    hits = [c for c in failed(app, "numeric", "simulated run")]
    assert hits, [(c.kind, c.name, c.rank, c.message) for c in app.checks if not c.ok]
    for c in hits:
        changes = c.counterexample.get("init_changes")
        assert changes, c.message
        assert any(ch["var"] == "linear_0.w_0" and ch["op"] == "uniform_random"
                   for ch in changes), changes
        assert "initialises parameter linear_0.w_0 differently" in c.message


def test_dp_broadcast_deleted_is_caught_by_the_broadcast_contract():
    app = run_mutant("promotion_dp_broadcast_deleted.py")
    # ranks 0 and 2 are the first TP ranks of the two DP replicas; ring 12 is
    # their DP ring.  The numeric runs seed the replicas alike, so they cannot
    # see a lost sync; the value proof, where every rank's init is its own
    # symbol unless a broadcast makes it the root's, refutes it on rank 2.
    assert app.verdict == Verdict.NOT_EQUIVALENT
    caught_by(app, "contract", "DP broadcast of bias kept", [0, 2], op_index=3,
              op_type="broadcast", var="linear_0.b_0", ring_id=12, program="startup")
    assert failing_kinds(app) == {"contract", "value"}
    refuted = [c for c in app.checks if c.kind == "value" and not c.ok]
    assert 2 in {c.rank for c in refuted}


# -- auto_parallel_amp ----------------------------------------------------------
def test_amp_loss_scale_applied_twice_is_refuted_by_value_and_run():
    app = run_mutant("amp_scale_twice.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (hit,) = caught_by(app, "value", "amp rounding", [0],
                       var=lambda v: v.endswith("@GRAD"))
    assert hit.counterexample["witness"]["loss_scale_exponent"] == {"expected": 0, "found": 1}
    caught_by(app, "numeric", "amp rounding run", [0])


def test_amp_wrong_dtype_is_refuted_at_the_cast_reader():
    app = run_mutant("amp_wrong_dtype.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (hit,) = caught_by(app, "value", "amp rounding", [0], op_type="matmul_v2",
                       expected=lambda e: e.startswith("round_float16("),
                       found=lambda f: f.startswith("round_bfloat16("))
    assert "input" in hit.counterexample["witness"]


def test_amp_cast_dropped_is_refuted_at_the_add():
    app = run_mutant("amp_cast_dropped.py")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    caught_by(app, "value", "amp rounding", [0], op_type="elementwise_add", slot="Y",
              var="linear_0.b_0", expected="round_float16(linear_0.b_0)",
              found="linear_0.b_0")
