"""The legacy ``auto_parallel_master_grad_pass`` (``passes/auto_parallel_master_grad.py``)
on the hand-built AMP O2 programs of ``cases/master_grad.py``.

On this CPU build the pass applies to bfloat16 and float16 programs: each
low-precision gradient is widened by a cast to the float32 gradient the
(rebuilt) clip and AdamW read, and AdamW updates the float32 master copy.
On a float32 program it rebuilds the same optimizer with renamed state
(left alone).  Without a gradient clip it raises.  Broken passes
(``tests/master_grad_mutants/``) and rewrites (snapshot edits) are caught
with the op and the variable.
"""
from __future__ import annotations

import dataclasses
import os

import cases
import passes
from verify.engine.matrix_runner import run_matrix
from verify.ir.pass_files import load_pass_file
from verify.ir.rank_snapshot import snapshot_of
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANTS = os.path.join(ROOT, "tests", "master_grad_mutants")
CONTRACT = ("master grad", "master param updated", "outside the optimizer")


def _apply(case_name, pass_file=None):
    adapter = passes.get("master_grad")
    case = cases.all_cases()[case_name]
    loaded = load_pass_file(pass_file) if pass_file else None
    try:
        run = adapter.apply_local(case, 0)
    finally:
        if loaded:
            loaded.restore()
    before = snapshot_of(run.original, case, 0, "original")
    after = snapshot_of(run.rewritten, case, 0, "rewritten")
    return before, after, run, adapter.contract(case, 0, before, after)


def _named(results, name):
    (got,) = [c for c in results if c.name == name]
    return got


def test_installed_pass_casts_each_low_precision_grad_for_the_optimizer():
    for name, low in (("master_grad_bf16", "bfloat16"), ("master_grad_fp16", "float16")):
        before, after, run, results = _apply(name)
        assert run.error is None, run.error
        assert passes.get("master_grad").pattern_present(before)
        assert [c.name for c in results] == ["fired", *CONTRACT]
        assert all(c.verdict == Verdict.EQUIVALENT for c in results), \
            [(c.name, c.message) for c in results if not c.ok]
        for p in ("linear_0.w_0", "linear_0.b_0"):
            g = f"{p}@GRAD"
            assert (before.vars[g].dtype, after.vars[g].dtype) == (low, "float32")
            (cast,) = [o for o in after.ops if o.type == "cast" and o.writes() == [g]]
            assert after.vars[cast.reads()[0]].dtype == low
            (opt,) = [o for o in after.ops if o.type == "adamw" and o.inputs["Param"] == [p]]
            assert opt.attrs["multi_precision"] and \
                opt.inputs["MasterParam"] == opt.outputs["MasterParamOut"]


def test_float32_program_gets_the_same_optimizer_back():
    before, after, run, results = _apply("master_grad_fp32")
    assert run.error is None
    assert not passes.get("master_grad").pattern_present(before)
    (left,) = results
    assert left.name == "left alone" and left.verdict == Verdict.EQUIVALENT
    assert left.details["fired"]  # the state's names changed, nothing else
    names_b = {n for o in before.ops if o.type == "adamw" for n in o.reads()}
    names_a = {n for o in after.ops if o.type == "adamw" for n in o.reads()}
    assert names_b != names_a


def test_without_a_gradient_clip_the_pass_raises():
    _, after, run, _ = _apply("master_grad_bf16_no_clip")
    assert run.error_type == "AssertionError"
    assert "The first optimizer op is not found!" in run.error
    assert "_regenerate_optimizer" in run.error
    # it had cast the gradients already
    assert [o.type for o in after.ops].count("cast") == 2


def test_casts_reading_each_others_gradient_are_caught():
    _, after, run, results = _apply("master_grad_bf16",
                                    os.path.join(MUTANTS, "master_grad_casts_swapped.py"))
    assert run.error is None
    bad = _named(results, "master grad")
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    cex = bad.counterexample
    opt = after.ops[cex["op_index"]]
    assert opt.type == "adamw" and cex["op_type"] == "adamw"
    cast = after.ops[cex["cast_op_index"]]
    assert cast.type == "cast" and cast.reads() == [cex["var"]]
    # the cast widens another parameter's gradient than the one it writes
    assert cex["var"].split("@")[0] != cast.writes()[0].split("@")[0]


def test_an_optimizer_without_master_weights_is_caught():
    _, after, run, results = _apply("master_grad_bf16",
                                    os.path.join(MUTANTS, "master_grad_no_master_weight.py"))
    assert run.error is None
    bad = _named(results, "master param updated")
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    cex = bad.counterexample
    assert cex["op_type"] == "adamw" and cex["var"] in ("linear_0.w_0", "linear_0.b_0")
    assert after.ops[cex["op_index"]].inputs["Param"] == [cex["var"]]
    assert _named(results, "outside the optimizer").counterexample["differs_in"] == \
        "optimizer type or attrs"


def test_broken_rewrites_as_snapshots_are_caught():
    """The optimizer reading the low-precision gradient again; a master copy
    the startup no longer casts from the parameter (left at zeros)."""
    adapter = passes.get("master_grad")
    case = cases.all_cases()["master_grad_bf16"]
    before, after, _, _ = _apply(case.name)
    ops = list(after.ops)
    (clip,) = [o for o in ops if o.type == "clip" and o.reads() == ["linear_0.w_0@GRAD"]]
    low = "linear_0.w_0@GRAD@master_grad_bf16"
    ops[clip.idx] = dataclasses.replace(clip, inputs={"X": [low]})
    edited = after.with_ops(ops)
    edited.vars[clip.writes()[0]] = dataclasses.replace(after.vars[clip.writes()[0]],
                                                        dtype="bfloat16")
    bad = _named(adapter.contract(case, 0, before, edited), "master grad")
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    (opt,) = [o for o in after.ops if o.type == "adamw"
              and o.inputs["Param"] == ["linear_0.w_0"]]
    assert (bad.counterexample["op_index"], bad.counterexample["var"]) == \
        (opt.idx, clip.writes()[0])

    (m,) = opt.inputs["MasterParam"]
    sops = [o for o in after.startup_ops if not (o.type == "cast" and o.writes() == [m])]
    zeroed = after.with_ops(list(after.ops), startup_ops=sops)
    bad = _named(adapter.contract(case, 0, before, zeroed), "master param updated")
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    assert (bad.counterexample["op_index"], bad.counterexample["var"]) == (opt.idx, m)
    assert "fill_constant" in bad.message


def test_whole_applications_prove_the_values():
    """The widening cast is the identity on values and the clip bound is
    exact in both dtypes, so the proof holds on the low-precision cases; no
    run witnesses them (the float32 twin is not the same rewrite), so they
    stay INCONCLUSIVE.  The float32 case is proved and runs bitwise equal."""
    apps, _ = run_matrix([passes.get("master_grad")],
                         [cases.all_cases()[n] for n in ("master_grad_bf16", "master_grad_fp32")],
                         backend="simulated", out=None)
    low, fp32 = apps
    (proof,) = [c for c in low.checks if c.kind == "value"]
    assert proof.verdict == Verdict.EQUIVALENT and "PROVED" in proof.message
    bad = [c for c in low.checks if not c.ok and not getattr(c, "advisory", False)]
    assert [(c.kind, c.name) for c in bad] == [("numeric", "numeric twin")]
    assert low.verdict == Verdict.INCONCLUSIVE
    assert fp32.verdict == Verdict.EQUIVALENT, [(c.name, c.message) for c in fp32.checks
                                               if not c.ok]
