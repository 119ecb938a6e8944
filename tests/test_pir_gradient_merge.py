"""The PIR gradient merge (``passes/pir_gradient_merge.py``): the micro-step
oracle (``verify/numeric/micro_steps.py``) and the contract catch a broken
merge with the right counterexample, and pass a correct one."""
from __future__ import annotations

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402

FIXED = "tests/fixed_passes/gradient_merge_scale_mended.py"
# not in tests/mutants (the catalogue of mutants of EQUIVALENT applications):
# no avg=True merge is EQUIVALENT on 3.3.1 to catalogue it against
MUTANT = "tests/gm_mutants/gradient_merge_scale_dropped.py"


def _app(case_name, pass_file=None):
    from verify.ir.pass_files import load_pass_file

    loaded = load_pass_file(pass_file) if pass_file else None
    try:
        _, numeric = pick_backend("simulated", 0)
        return run_application(passes.get("grad_merge"), cases.all_cases()[case_name],
                               numeric=numeric)
    finally:
        if loaded is not None:
            loaded.restore()


def _checks(app, kind, name=None):
    return [c for c in app.checks if c.kind == kind and (name is None or c.name == name)]


@pytest.mark.parametrize("case_name", ["pir_gm_sgd_sum_k2", "pir_gm_adam_sum_k4"])
def test_a_correct_merge_passes_and_the_value_proof_proves_it(case_name):
    """The oracle holds and the value proof of the schedule proves it
    (``verify/value/merged_application.py``; its own tests:
    ``tests/test_pir_gradient_merge_proof.py``)."""
    app = _app(case_name)
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks if not c.ok]
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.EQUIVALENT and "unchanged through micro-steps" in num.message
    (val,) = _checks(app, "value")
    assert val.verdict == Verdict.EQUIVALENT and not val.advisory
    assert "PROVED for B in" in val.message and app.proof.startswith("proved at sizes")


def test_momentum_avg_scales_after_the_optimizer_and_the_zeroing():
    """The reported 3.3.1 defect: NOT_EQUIVALENT with the states that differ,
    and the contract's op indices (scales after the optimizer and the zeroing)."""
    app = _app("pir_gm_momentum_avg_k2")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.NOT_EQUIVALENT
    cex = num.counterexample
    assert cex["tensor"] in ("w", "b", "w_velocity_0", "b_velocity_0")
    assert abs(cex["merged"] - cex["reference"]) > cex["tol"]
    bad = _checks(app, "contract", "1/k scale before the optimizer")
    assert bad and all(c.verdict == Verdict.CONTRACT_BROKEN for c in bad)
    for c in bad:
        x = c.counterexample
        assert x["optimizer"] == "pd_op.momentum_" and x["scale_ops"]
        assert min(x["scale_ops"]) > x["optimizer_op"]
        assert x["zeroing_ops"] and min(x["scale_ops"]) > min(x["zeroing_ops"])


def test_the_oracle_holds_on_a_mended_merge():
    """The same pass with its scale loop moved out of the walk (one change):
    the scales precede the optimizer, and k micro-steps equal one step on the
    mean of the k gradients (the oracle holds on a correct merge).  Its
    in-place scale and zeroing stay unordered by data dependences, which the
    in-place order check still reports (not mended here)."""
    for name in ("pir_gm_momentum_avg_k2", "pir_gm_momentum_avg_k4"):
        app = _app(name, FIXED)
        (num,) = _checks(app, "numeric")
        assert num.verdict == Verdict.EQUIVALENT, num.message
        scale = _checks(app, "contract", "1/k scale before the optimizer")
        assert scale and all(c.verdict == Verdict.EQUIVALENT for c in scale)
        left = [c for c in app.checks if not c.ok and not c.advisory]
        assert left and all(c.name == "in-place order" for c in left), \
            [c.message for c in left]
        # the twin of 3.3.1's refuted merge: the optimizer reads the scale_'s
        # in-place write of its accumulator (its operand is the accumulator)
        (val,) = _checks(app, "value")
        assert val.verdict == Verdict.EQUIVALENT, val.message


def test_unordered_inplace_writes_of_an_accumulator_are_caught():
    """SGD avg=True on 3.3.1: the scale_ the optimizer reads and the zeroing
    both write the accumulator in place with no dependence between them."""
    app = _app("pir_gm_sgd_avg_k2")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.EQUIVALENT  # in program order the merge is right
    bad = [c for c in _checks(app, "dataflow", "in-place order") if not c.ok]
    assert bad and bad[0].verdict == Verdict.NOT_EQUIVALENT
    x = bad[0].counterexample
    assert sorted(x["types"]) == ["pd_op.scale_", "pd_op.set_value_with_tensor_"]
    assert x["accumulator"].endswith("@GRAD@MERGE")


def test_inplace_order_is_clean_when_the_writes_are_threaded():
    """The check on snapshots: a zeroing that reads the optimizer's input
    chain (threaded) is ordered; one that reads the raw argument is not."""
    from passes.pir_gradient_merge import _unordered_inplace
    from verify.ir.snapshot import Op, ProgramSnapshot, Var

    def prog(zero_reads):
        ops = [Op(0, "pd_op.scale_", {"x": ["acc"], "scale": ["k"]}, {"out": ["s"]}, {}, 2),
               Op(1, "pd_op.sgd_", {"param": ["w"], "grad": ["s"]}, {"param_out": ["w2"]},
                  {}, 2),
               Op(2, "pd_op.set_value_with_tensor_", {"x": [zero_reads], "values": ["z"]},
                  {"out": ["acc0"]}, {}, 2)]
        vars_ = {n: Var(n, [4], "float32") for n in ("acc", "k", "s", "w", "w2", "z",
                                                     "acc0")}
        snap = ProgramSnapshot(ops, vars_)
        writers = [o for o in snap.ops if o.type != "pd_op.sgd_"]
        return snap, writers, snap.ops[1]
    snap, writers, opt = prog("acc")
    got = _unordered_inplace(snap, "acc", writers, opt)
    assert got and {got[0].idx, got[1].idx} == {0, 2}
    snap, writers, opt = prog("w2")  # the zeroing waits for the update
    assert _unordered_inplace(snap, "acc", writers, opt) is None


def test_a_merge_without_the_scale_is_caught():
    app = _app("pir_gm_sgd_avg_k2", MUTANT)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.NOT_EQUIVALENT and num.counterexample["tensor"] in ("w", "b")
    bad = _checks(app, "contract", "1/k scale before the optimizer")
    assert bad and "no 1/k scale on it" in bad[0].message
    assert bad[0].counterexample["scale_ops"] == []


def test_judge_catches_an_update_before_the_kth_micro_step():
    from verify.numeric.micro_steps import judge

    w0 = np.zeros((2, 2), dtype=np.float32)
    w1 = w0 + 0.5
    ref = [{"w": w1}]
    early = [[{"w": w0}, {"w": w1}, {"w": w1}, {"w": w1}]]  # moved at micro-step 1 of 2
    r = judge("t", 0, ref, early, ["w"], 2)
    assert r.verdict == Verdict.NOT_EQUIVALENT
    assert r.counterexample["micro_step"] == 1 and r.counterexample["tensor"] == "w"
    ok = [[{"w": w0}, {"w": w0}, {"w": w0}, {"w": w1}]]
    assert judge("t", 0, ref, ok, ["w"], 2).verdict == Verdict.EQUIVALENT


def test_no_exact_reference_is_inconclusive():
    """avg=False needs a sum loss (avg=True a mean one): any other pairing is
    not judged, never passed."""
    from verify.numeric.micro_steps import micro_step_checks

    case = cases.all_cases()["pir_gm_sgd_sum_k2"]
    outcome = type("Outcome", (), {"rank": 0})()
    got = micro_step_checks(passes.get("grad_merge"), case, [outcome], 2, "mean", False)
    assert got[0].verdict == Verdict.INCONCLUSIVE and "no exact reference" in got[0].message


def test_shape_rules_of_the_merged_programs_on_concrete_programs():
    """Every op of merged Momentum/Adam programs has a rule that holds on
    the shapes Paddle declared; a wrong declared shape of each new row's
    result is caught, naming the op."""
    from verify.checks import shape_check
    from verify.ir.pir_snapshot import snapshot_rank
    from verify.ir.snapshot import Var

    adapter = passes.get("grad_merge")
    for name, op_types in (("pir_gm_momentum_avg_k2", ("pd_op.momentum_", "pd_op.scale_",
                                                        "pd_op.set_value_with_tensor_",
                                                        "pd_op.subtract_grad")),
                           ("pir_gm_adam_sum_k4", ("pd_op.adam_", "pd_op.sum",
                                                   "pd_op.sum_grad", "pd_op.subtract"))):
        case = cases.all_cases()[name]
        run = adapter.apply_local(case, 0)
        snap = snapshot_rank(run.rewritten)
        every = set(range(len(snap.ops)))
        ok = shape_check.check_snapshot(snap, 0, "test", case.symbols, every)
        assert all(r.verdict == Verdict.EQUIVALENT for r in ok), [r.message for r in ok]
        for t in op_types:
            op = next(o for o in snap.ops if o.type == t)
            out = next(n for ns in op.outputs.values() for n in ns if n in snap.vars)
            saved = snap.vars[out]
            snap.vars[out] = Var(out, list(saved.shape) + [3], saved.dtype)
            bad = shape_check.check_snapshot(snap, 0, "test", case.symbols, every)
            snap.vars[out] = saved
            assert any(r.verdict != Verdict.EQUIVALENT and str(op.idx) in r.message
                       for r in bad), (t, [r.message for r in bad])


def test_block_kwargs_are_named_and_the_value_proof_never_passes_them():
    """A merged program reads its accumulators as keyword block arguments:
    the snapshot names each by its keyword (persistable, listed in
    meta["block_kwargs"], written by the startup's shadow_output), and the
    value proof on such programs is INCONCLUSIVE and advisory, never a proof
    or a refutation."""
    from verify.ir.pir_snapshot import snapshot_rank
    from verify.value import prove_application

    case = cases.all_cases()["pir_gm_momentum_sum_k2"]
    run = passes.get("grad_merge").apply_local(case, 0)
    before, after = snapshot_rank(run.original), snapshot_rank(run.rewritten)
    assert sorted(after.meta["block_kwargs"]) == ["b@GRAD@MERGE", "w@GRAD@MERGE"]
    assert "block_kwargs" not in before.meta
    for acc in after.meta["block_kwargs"]:
        assert after.vars[acc].persistable and not after.vars[acc].is_data
        assert any(acc in o.outputs.get("output", []) for o in after.startup_ops)
        assert any(o.type == "pd_op.momentum_" and o.inputs["grad"] == [acc]
                   for o in after.ops)
    got = prove_application("t", [0], {}, {0: before}, {0: after})
    assert [r.verdict for r in got] == [Verdict.INCONCLUSIVE] and got[0].advisory


def zero_every_micro_step(main, startup, snap, rank):
    """The accumulator's zeroing (and its constants) moved to the backward
    role: it runs every micro-step, not under the k-th step condition."""
    import paddle

    with paddle.pir_utils.IrGuard():
        for op in main.global_block().ops:
            if op.name() == "pd_op.set_value_with_tensor_":
                op.op_role = 1
                for i in range(1, op.num_operands()):
                    op.operand_source(i).get_defining_op().op_role = 1
    return "zeroing in the backward role"


def test_a_program_mutant_of_a_correct_merge_is_caught_on_the_live_program():
    _, numeric = pick_backend("simulated", 0)
    app = run_application(passes.get("grad_merge"), cases.all_cases()["pir_gm_sgd_sum_k2"],
                          numeric=numeric, mutator=(0, zero_every_micro_step))
    assert app.mutation and app.verdict == Verdict.NOT_EQUIVALENT
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.NOT_EQUIVALENT, num.message
    bad = _checks(app, "contract", "accumulator zeroed after the update")
    assert bad and all(c.verdict == Verdict.CONTRACT_BROKEN for c in bad)


def test_in_region_mutants_reach_the_accumulator_of_a_merged_program():
    """verify mutate's in-region operators edit a merged program too (its
    accumulators are keyword block arguments): reading a sibling value
    instead of the accumulator is caught by the micro-step runs."""
    from verify.selfcheck import program_mutants as pm

    _, numeric = pick_backend("simulated", 0)
    case = cases.all_cases()["pir_gm_sgd_sum_k2"]
    adapter = passes.get("grad_merge")
    op = next(o for o in pm.IN_REGION_OPERATORS if o.__name__ == "sibling_operand")
    mutator = pm.prepare(op, adapter, case, 0)
    assert mutator is not None
    app = run_application(adapter, case, numeric=numeric, mutator=(0, mutator))
    assert app.mutation and app.verdict == Verdict.NOT_EQUIVALENT
    assert any(c.kind == "numeric" and c.verdict == Verdict.NOT_EQUIVALENT for c in app.checks)


def drop_last_startup_write(main, startup, snap, rank):
    """The merged startup's last persistable write (an accumulator's zero
    fill) is dropped: the merged steps read a value nothing made."""
    import paddle

    with paddle.pir_utils.IrGuard():
        writes = [op for op in startup.global_block().ops
                  if op.name() == "builtin.shadow_output"]
        writes[-1].erase()
    return "the last startup write dropped"


def test_a_merged_program_that_no_longer_runs_is_not_equivalent():
    """The reference runs and the merged program's steps raise: a finding
    (NOT_EQUIVALENT, "no longer runs"), not INCONCLUSIVE; the checker's
    environment failing stays INCONCLUSIVE.  (The numeric layer on its own:
    in an application the dataflow check sees this read before any run.)"""
    from verify.numeric import micro_steps as ms

    case = cases.all_cases()["pir_gm_sgd_sum_k2"]
    run = passes.get("grad_merge").apply_local(case, 0)
    assert not run.error
    drop_last_startup_write(run.rewritten.main, run.rewritten.startup, None, 0)
    import paddle

    with paddle.pir_utils.IrGuard():
        params = {}
        for op in run.original.startup.global_block().ops:
            if op.name() == "builtin.set_parameter":
                v = op.operand_source(0)
                params[op.attrs()["parameter_name"]] = np.full(
                    v.shape, 0.1, dtype=str(v.dtype).replace("paddle.", ""))
    feeds = [(f.name, list(f.shape), f.dtype) for f in run.original.feeds]
    got = ms.both_runs(run.original, run.rewritten, params, params, feeds, list(params),
                       2, 2, 0)
    assert got["reference"] and "merged" not in got
    assert "@GRAD@MERGE" in got["merged_error"], got["merged_error"][:400]
    c = ms.no_longer_runs("micro-step run", 0, got["merged_error"])
    assert c.verdict == Verdict.NOT_EQUIVALENT and c.counterexample["rank"] == 0
    assert "the rewritten program no longer runs (the reference runs): " in c.message
    env = ms.no_longer_runs("micro-step run", 0, "OSError: [Errno 24] Too many open files")
    assert env.verdict == Verdict.INCONCLUSIVE and "checker environment" in env.message


# -- a program that already holds the merge is the pass's output, not its input --
def _merged_case(base_name):
    """``base_name``'s case built as the Engine leaves it after its merge: the
    real pass applied once, and no ``params_grads`` (as a planned dir's rank
    program carries none)."""
    import dataclasses

    base = cases.all_cases()[base_name]

    def build(case, rank):
        run = passes.get("grad_merge").apply_local(base, rank)
        assert not run.error, run.error
        rp = run.rewritten
        rp.params_grads = []
        rp.merge = {"k_steps": base.params["k"], "avg": base.params["avg"]}
        return rp
    return dataclasses.replace(base, name=base_name + "_merged", builder=build)


def _not_applied_again(app):
    assert app.verdict == Verdict.INCONCLUSIVE, [(c.name, c.verdict, c.message)
                                                 for c in app.checks if not c.ok]
    assert not [c for c in app.checks if c.verdict in (Verdict.NOT_EQUIVALENT,
                                                        Verdict.CONTRACT_BROKEN)]
    (inp,) = _checks(app, "contract", "the pass's input")
    assert "already holds a merge" in inp.message and "@GRAD@MERGE" in inp.message
    assert set(inp.details["merged_reads"].values()) and all(
        a.endswith("@GRAD@MERGE") for a in inp.details["merged_reads"].values())
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.INCONCLUSIVE and "not run" in num.message


def test_an_already_merged_program_is_not_merged_again():
    """The pass's output fed back (avg=True): 3.3.1's pass would append a
    second 1/k scale_ before every optimizer (it scales every Adam/SGD it
    finds); the adapter reads the merge from the program and does not apply
    it again (before: NOT_EQUIVALENT, 'adam_ reads ..., not a merged-gradient
    accumulator')."""
    _, numeric = pick_backend("simulated", 0)
    app = run_application(passes.get("grad_merge"), _merged_case("pir_gm_sgd_avg_k2"),
                          numeric=numeric)
    _not_applied_again(app)


def test_an_already_merged_plan_is_not_merged_again():
    """A one-rank plan made with strategy.gradient_merge on (Paddle's
    gradient-merge pass test, examples/paddle_gm_mlp.py): its rank program,
    as a program dir gives it, is the merge's output."""
    import dataclasses

    planned = cases.all_cases()["planner_paddle_gm_mlp"]
    case = dataclasses.replace(planned, expect={},
                               params={**planned.params, "only_pass": None})
    _, numeric = pick_backend("simulated", 0)
    _not_applied_again(run_application(passes.get("grad_merge"), case, numeric=numeric))


def read_raw_gradient(main, startup, snap, rank):
    """Every optimizer reads the raw gradient its accumulator adds, not the
    (scaled) accumulator: the merge is built but not used."""
    import paddle

    with paddle.pir_utils.IrGuard():
        ops = main.global_block().ops
        raw = {}
        for op in ops:
            if op.name() == "pd_op.add_" and op.has_attr("grad_merge_add"):
                raw[op.operand_source(0).id] = op.operand_source(1)
        for op in ops:
            if op.name() in ("pd_op.sgd_", "pd_op.adam_", "pd_op.adamw_"):
                slot = op.get_input_names().index("grad")
                src = op.operand_source(slot)
                while src.id not in raw and src.get_defining_op() is not None and \
                        src.get_defining_op().name() in ("pd_op.scale_", "pd_op.scale"):
                    src = src.get_defining_op().operand_source(0)
                op.operand(slot).set_source(raw[src.id])
    return "optimizers read the raw gradient"


def test_a_merge_whose_optimizer_reads_the_raw_gradient_is_still_caught():
    """The twin: the pass's output with each optimizer reading the raw
    gradient is not 'already merged' (merged_reads follows the program) and
    is caught by the contract (the oracle cannot split it into jobs: an
    optimize op reads a value the backward job computes) and refuted by the
    value proof (the optimize job reads what the last micro-step left: one
    micro-batch's gradient, not the merged one)."""
    from passes.pir_gradient_merge import already_merged, merged_reads

    _, numeric = pick_backend("simulated", 0)
    app = run_application(passes.get("grad_merge"), cases.all_cases()["pir_gm_adam_sum_k4"],
                          numeric=numeric, mutator=(0, read_raw_gradient))
    assert app.mutation and app.verdict == Verdict.NOT_EQUIVALENT
    (val,) = _checks(app, "value")
    assert val.verdict == Verdict.NOT_EQUIVALENT and val.counterexample["value"] in (
        "w@GRAD", "b@GRAD"), val.message
    bad = _checks(app, "contract", "optimizer reads the merged gradient")
    assert bad and all(c.verdict == Verdict.CONTRACT_BROKEN for c in bad)
    assert {c.counterexample["op_index"] for c in bad} == \
        {op.idx for op in app.outcomes[0].after.ops if op.type == "pd_op.adam_"}
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.INCONCLUSIVE and "cannot be split into jobs" in num.message
    after = app.outcomes[0].after
    assert merged_reads(after) == {} and already_merged(after) == {}
    assert passes.get("grad_merge").pattern_present(after)


def test_without_params_grads_the_pass_gets_the_programs_own():
    """A program that carries no ``params_grads`` (a planned dir's) is given
    the pairs its optimizers update, as the Engine gives them: the merge is
    built and holds (before: the pass merged nothing, NOT_APPLIED; with
    avg=True it only appended 1/k scales, a false NOT_EQUIVALENT)."""
    import dataclasses

    base = cases.all_cases()["pir_gm_sgd_sum_k2"]

    def build(case, rank):
        rp = base.build(rank)
        rp.params_grads = []
        return rp
    from verify.numeric.micro_steps import micro_step_checks

    case = dataclasses.replace(base, name="pir_gm_sgd_sum_k2_no_params_grads", builder=build)
    adapter = passes.get("grad_merge")
    # the oracle on the live programs (a local builder does not travel to a worker)
    app = run_application(adapter, case, numeric=lambda c, a, outcomes, m, notes:
                          micro_step_checks(a, c, outcomes, 2, "sum", False, live=True))
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks if not c.ok]
    (num,) = _checks(app, "numeric")
    assert num.verdict == Verdict.EQUIVALENT, num.message
    reads = _checks(app, "contract", "no scale when avg=False")
    assert len(reads) == 2 and all("@GRAD@MERGE" in c.message for c in reads)
