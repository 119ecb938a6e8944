"""Verdicts rest on the program the pass built, with witnesses that can see a
wrong value: each test fed a broken (or mended) pass or program, beside the
correct one."""
import os

import numpy as np
import pytest

import cases
import passes
from verify.ir.pass_files import load_pass_file
from verify.engine.application import run_application
from verify.engine.matrix_runner import pick_backend
from verify.verdicts import Verdict
from verify.engine.isolation import run_pass  # noqa: E402

_, SIM = pick_backend("simulated", 11)
HERE = os.path.dirname(__file__)


def _bad(app, kind=None):
    return [c for c in app.checks if not c.ok and not c.advisory
            and (kind is None or c.kind == kind)]


# -- 1. a fixed pass is judged on its own program ------------------------------
def test_mended_overlap_pass_is_judged_on_what_it_built():
    case = cases.all_cases()["col_3d_dynamic_batch"]
    broken = run_application(passes.get("overlap"), case)
    assert broken.verdict == Verdict.PASS_CRASHED
    loaded = load_pass_file(os.path.join(HERE, "fixed_passes", "overlap_fold_mended.py"))
    try:
        app = run_application(passes.get("overlap"), case, source=loaded.path, numeric=SIM)
    finally:
        loaded.restore()
    # the prediction of 3.3.1's plan still explains, but does not decide
    preds = [c for c in app.checks if c.name == "prediction" and not c.ok]
    assert preds and all(c.advisory for c in preds)
    assert app.fired_ranks == [0, 1]
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in _bad(app)]
    assert any(c.kind == "numeric" and c.ok for c in app.checks)


# -- 2. numeric runs skipped only where execution would fail --------------------
def test_stale_declared_shape_does_not_hide_the_value_finding():
    """The clip finding: the declared ``stack`` shape is stale (CONTRACT_BROKEN),
    and the numeric run shows the real defect: rank 1's weight grad differs."""
    app = run_application(passes.get("promotion"), cases.all_cases()["row_mp_o0_sgd_clip_tp2"],
                          numeric=SIM)
    stale = [c for c in app.checks if c.name == "declared shapes"]
    assert stale and stale[0].verdict == Verdict.CONTRACT_BROKEN
    assert not any(c.name == "not run" for c in app.checks)
    num = [c for c in _bad(app, "numeric") if c.rank == 1]
    assert num and num[0].verdict == Verdict.NOT_EQUIVALENT
    wrong = {t["name"] for t in num[0].details["tensors"] if not t["ok"]}
    assert "linear_0.w_0@GRAD" in wrong
    assert app.verdict == Verdict.NOT_EQUIVALENT


def _drop_startup_init(main, startup, snap, rank):
    """Delete the startup init of the first parameter: main then reads a
    tensor nothing ever writes."""
    from verify.selfcheck.program_mutants import Mutation

    block = startup.global_block()
    for i, op in enumerate(block.ops):
        if op.type == "uniform_random":
            name = op.output("Out")[0]
            block._remove_op(i)
            return Mutation("drop init", f"deleted the startup init of {name}")
    return None


def test_numeric_run_is_skipped_where_a_tensor_is_never_written():
    app = run_application(passes.get("overlap"), cases.all_cases()["col_3d_static"],
                          numeric=SIM, mutator=(0, _drop_startup_init))
    du = [c for c in _bad(app) if c.name == "def before use"]
    assert du and du[0].details["crashes_executor"]
    skipped = [c for c in app.checks if c.name == "not run"]
    assert skipped and "def before use" in skipped[0].message


# -- 3. witnesses that see forward values ---------------------------------------
def _swap_first_axes_before_bias_add(main, startup, snap, rank):
    """Rank 0's matmul output with its first two axes swapped right before
    the promoted bias add: shape-preserving because B == S."""
    from verify.selfcheck.program_mutants import Mutation

    block = main.global_block()
    for i, op in enumerate(block.ops):
        if op.type != "elementwise_add" or op.attr("op_role") != 0:
            continue
        x = op.input("X")[0]
        src = block.var(x)
        if len(src.shape) != 3 or src.shape[0] != src.shape[1]:
            continue
        t = block.create_var(name=x + "@swapped", shape=src.shape, dtype=src.dtype)
        xs = block.create_var(name=x + "@swapped.xshape", shape=[0] + list(src.shape),
                              dtype=src.dtype)
        block._insert_op(i, type="transpose2", inputs={"X": [src]},
                         outputs={"Out": [t], "XShape": [xs]},
                         attrs={"axis": [1, 0, 2], "op_role": 0})
        block.ops[i + 1].desc.set_input("X", [t.name])
        block._sync_with_cpp()
        return Mutation("swap axes", f"transposed {x} (axes 0,1) before op {i}")
    return None


def test_forward_axes_swap_before_promoted_bias_add_is_caught():
    case = cases.all_cases()["row_mp_o0_sgd_tp2"]
    app = run_application(passes.get("promotion"), case, numeric=SIM,
                          mutator=(0, _swap_first_axes_before_bias_add))
    assert app.mutation is not None
    num = _bad(app, "numeric")
    assert num and app.verdict == Verdict.NOT_EQUIVALENT
    # the forward output, renamed by the pass, is what shows it on rank 0
    r0 = [c for c in num if c.rank == 0][0]
    out = [t for t in r0.details["tensors"] if t["name"] == "linear_0.tmp_2"]
    assert out and not out[0]["ok"] and "renamed" in out[0]["note"]
    # the value proof sees it too, comparing the output under its new name
    refuted = [c for c in app.checks if c.kind == "value" and c.rank == 0 and not c.ok]
    assert refuted and "linear_0.tmp_2" in refuted[0].details["refuted"]
    good = run_application(passes.get("promotion"), case, numeric=SIM)
    assert good.verdict == Verdict.EQUIVALENT


def test_every_rank_compares_its_forward_output():
    app = run_application(passes.get("promotion"), cases.all_cases()["row_mp_o0_sgd_tp2"],
                          numeric=SIM)
    for c in (c for c in app.checks if c.kind == "numeric" and c.rank is not None):
        names = {t["name"] for t in c.details["tensors"]}
        assert "linear_0.tmp_2" in names and "mean_0.tmp_0" in names


def test_watched_value_vanishing_without_rename_fails():
    from verify.numeric.equivalence import compare_runs
    from verify.numeric.run_spec import RankResult

    case = cases.all_cases()["col_3d_static"]
    ref = np.ones((2, 3), np.float32)
    orig = RankResult(0, [{"a": ref, "b": ref}])
    rew = RankResult(0, [{"a": ref}])
    diffs = compare_runs(case, 0, orig, rew, {0: rew}, 8, set())
    gone = [d for d in diffs if d.name == "b"]
    assert gone and not gone[0].ok and "without a declared rename" in gone[0].note
    renamed = RankResult(0, [{"a": ref, "b@new": ref}])
    diffs = compare_runs(case, 0, orig, renamed, {0: renamed}, 8, set(), {"b": "b@new"})
    assert all(d.ok for d in diffs)


# -- 6. say what was really run --------------------------------------------------
def test_twin_that_is_another_rewrite_is_refused():
    from verify.numeric.equivalence import same_rewrite
    from verify.ir.snapshot import Op

    case = cases.all_cases()["row_mp_o1_sgd_tp2"]
    run = run_pass(passes.get("promotion"), case, 0)
    twin_run = run_pass(passes.get("promotion"), case.numeric_twin(), 0)
    from verify.ir.snapshot import from_programs

    a = from_programs(run.rewritten.main, run.rewritten.startup)
    t = from_programs(twin_run.rewritten.main, twin_run.rewritten.startup)
    assert same_rewrite(a, t) == ""  # same ops, dtypes aside
    ops = list(t.ops)
    ops.insert(3, Op(0, "scale", {"X": ["x"]}, {"Out": ["x"]}, {"scale": 1.0}))
    assert "main op 3" in same_rewrite(a, t.with_ops(ops))


def test_simulator_only_evidence_says_so():
    case = cases.all_cases()["row_dp_mp_o0_sgd"]  # two rings per rank: no gloo
    _, both = pick_backend("both", 11)
    app = run_application(passes.get("promotion"), case, numeric=both)
    num = [c for c in app.checks if c.kind == "numeric" and c.rank is not None]
    assert num and all(c.details["witness"] == "simulator only" for c in num)
    assert all("simulator only" in c.message for c in num)
    assert any("ranks backend not run" in n for n in app.notes)


@pytest.mark.slow
def test_simulator_disagreeing_with_real_ranks_is_inconclusive(monkeypatch):
    """A simulator whose all-reduce is wrong (sum doubled) disagrees with the
    real gloo ranks on the original program: the verdict is INCONCLUSIVE."""
    from verify.engine import isolation
    from verify.numeric import simulated_ranks

    # the fault is injected in this process: run the simulator here too
    monkeypatch.setitem(isolation._SETTINGS, "enabled", False)
    real_reduce = simulated_ranks._reduce

    def wrong_reduce(kind, xs):
        out = real_reduce(kind, xs)
        return out * 2 if kind == "sum" else out

    monkeypatch.setattr(simulated_ranks, "_reduce", wrong_reduce)
    _, both = pick_backend("both", 11)
    app = run_application(passes.get("overlap"), cases.all_cases()["col_3d_static"],
                          numeric=both)
    agree = [c for c in app.checks if c.name == "simulator vs ranks"]
    assert agree and any(c.verdict == Verdict.INCONCLUSIVE for c in agree)
    assert app.verdict == Verdict.INCONCLUSIVE


# -- 7. CONTRACT_BROKEN, and the pattern matcher against the declared fires ------
def test_pass_that_keeps_values_but_breaks_its_contract_is_contract_broken():
    loaded = load_pass_file(os.path.join(HERE, "mutants", "overlap_stream_dropped.py"))
    try:
        app = run_application(passes.get("overlap"), cases.all_cases()["col_3d_static"],
                              source=loaded.path, numeric=SIM)
    finally:
        loaded.restore()
    assert app.verdict == Verdict.CONTRACT_BROKEN
    assert all(c.ok for c in app.checks if c.kind == "numeric")
    broken = [c for c in app.checks if c.verdict == Verdict.CONTRACT_BROKEN]
    assert broken[0].counterexample["stream"] == "default"


@pytest.mark.parametrize("short", ["overlap", "promotion"])
def test_pattern_matcher_agrees_with_every_case_declaration(short):
    """The matcher, written from the pass's documented pattern, and each
    case's declared ``fires`` must agree on every rank's original program."""
    from verify.ir.snapshot import from_programs

    adapter = passes.get(short)
    disagree = []
    for case in cases.all_cases().values():
        if not adapter.handles(case):
            continue
        declared = case.expectation(adapter.name).fires
        for rank in case.ranks[:2]:
            rp = case.build(rank)
            found = adapter.pattern_present(from_programs(rp.main, rp.startup))
            if found != declared:
                disagree.append((case.name, rank, declared, found))
    assert not disagree


def test_left_alone_is_shown_apart_from_a_rewrite_found_equivalent():
    left = run_application(passes.get("promotion"), cases.all_cases()["col_3d_static"])
    rewrite = run_application(passes.get("overlap"), cases.all_cases()["col_3d_static"])
    assert left.verdict == rewrite.verdict == Verdict.EQUIVALENT
    assert left.status == "LEFT_ALONE" and rewrite.status == "EQUIVALENT"


def test_pass_firing_where_its_pattern_is_absent_is_contract_broken():
    from passes.base import PassAdapter
    from verify.ir.snapshot import Op, ProgramSnapshot

    class Never(PassAdapter):
        name = "never"

        def pattern_present(self, snap):
            return False

    case = cases.all_cases()["col_3d_static"]
    before = ProgramSnapshot([Op(0, "relu", {"X": ["x"]}, {"Out": ["y"]})], {})
    after = before.with_ops([Op(0, "gelu", {"X": ["x"]}, {"Out": ["y"]})])
    r = Never().fired_check(case, 0, before, after)
    assert r.verdict == Verdict.CONTRACT_BROKEN
    assert Never().fired_check(case, 0, before, before).ok


def test_a_missing_cpu_kernel_is_the_checker_environment_not_a_finding():
    """A rank that raises because this CPU build of Paddle has no kernel for
    an op (s_to_s's ``all_to_all``: the text 3.3.1 gives) is the machine's
    limit: ``environment_cause`` names it, so "the rewritten program no
    longer runs" is not claimed (INCONCLUSIVE); a program's own error is not."""
    from verify.verdicts import environment_cause

    text = ("NotImplementedError: In user code: UnimplementedError: Unimplemented cpu "
            "kernel for all_to_all. (at /paddle/paddle/phi/kernels/cpu/all_to_all_kernel.cc:29)")
    assert "CPU kernel" in environment_cause(text)
    assert environment_cause("RuntimeError: (NotFound) Cannot find linear_1.b_0 in scope.") \
        is None
