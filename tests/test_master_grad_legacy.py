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


# -- can the case's own low-precision programs run on this CPU build? ------

def _to_bf16(a):
    """float32 -> bfloat16 bits (round to nearest even), as Paddle stores them."""
    import numpy as np

    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _run_bf16(rp, feeds, skip_before_optimizer=False):
    """Run ``rp`` (a RankProgram) one step in Paddle's CPU executor, every
    bfloat16 parameter and feed set as bfloat16 (``feeds``: name -> float32
    or int64 array); with ``skip_before_optimizer`` only its optimize-role
    ops, the clip's float32 inputs fed.  Returns each parameter before and
    after the step."""
    import numpy as np

    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    main = rp.main.clone()
    block = main.global_block()
    if skip_before_optimizer:
        first = next(i for i, op in enumerate(block.ops) if op.attr("op_role") & 2)
        for i in range(first - 1, -1, -1):
            block._remove_op(i)
    scope, place = paddle.static.Scope(), paddle.CPUPlace()
    exe = paddle.static.Executor(place)
    exe.run(rp.startup, scope=scope)
    params = [p.name for p in block.all_parameters()]
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in params}
    low = {n for n in feeds if block.var(n).dtype == paddle.bfloat16}
    exe.run(main, scope=scope, feed={n: _to_bf16(v) if n in low else v
                                     for n, v in feeds.items()})
    return before, {n: np.array(scope.find_var(n).get_tensor()) for n in params}


def test_the_missing_kernels_are_named_from_paddles_registries():
    """bfloat16: every op but AdamW has a CPU kernel (oneDNN's matmul, add,
    mean, clip); float16: matmul_v2 has none either; float32 and the SGD
    model: nothing missing."""
    from verify.numeric.low_precision_kernels import describe, missing_kernels

    def missing(name):
        _, _, run, _ = _apply(name)
        return [(w, m["op_type"], m["dtype"]) for w, rp in
                (("original", run.original), ("rewritten", run.rewritten))
                for m in missing_kernels(rp.main, w)]

    bf16 = missing("master_grad_bf16")
    assert sorted(set(bf16)) == [("original", "adamw", "bfloat16"),
                                 ("rewritten", "adamw", "bfloat16")]
    assert len(bf16) == 4  # one adamw per parameter, before and after
    fp16 = {t for _, t, d in missing("master_grad_fp16") if d == "float16"}
    assert {"matmul_v2", "matmul_v2_grad", "adamw"} <= fp16
    assert "cast" not in fp16  # the pass's widening casts have float16 kernels
    assert missing("master_grad_fp32") == []
    # the original SGD model runs (the pass crashes on it before rebuilding)
    _, _, run, _ = _apply("master_grad_bf16_sgd")
    assert missing_kernels(run.original.main) == []
    text = describe([{"op_index": 9, "op_type": "adamw", "dtype": "bfloat16",
                      "program": "original rank 0"}] * 2)
    assert text == "no bfloat16 CPU kernel for adamw (original rank 0 op 9, 1 more)"


def test_the_executor_refuses_the_bfloat16_adamw_and_runs_the_float32_one():
    """What the registry says, seen in Paddle's executor: the rewritten
    program's optimizer (clip, then AdamW reading the float32 master gradient
    and updating the float32 master copy of a bfloat16 parameter) raises for
    want of a bfloat16 AdamW kernel; the float32 twin's optimizer runs."""
    import numpy as np
    import pytest

    feeds = {"linear_0.w_0@GRAD": np.full([8, 8], 0.01, np.float32),
             "linear_0.b_0@GRAD": np.full([8], 0.01, np.float32)}
    _, _, run, _ = _apply("master_grad_bf16")
    with pytest.raises(Exception) as exc:
        _run_bf16(run.rewritten, feeds, skip_before_optimizer=True)
    assert "no kernels" in str(exc.value) and "adamw" in str(exc.value)
    _, _, run32, _ = _apply("master_grad_fp32")
    before, after = _run_bf16(run32.rewritten, feeds, skip_before_optimizer=True)
    assert set(after) == {"linear_0.w_0", "linear_0.b_0"}
    assert all((before[n] != after[n]).all() for n in after)  # each element stepped


def test_with_sgd_the_original_bfloat16_program_runs_and_the_pass_raises():
    """SGD, the one optimizer with a bfloat16 CPU kernel, on a model whose
    matmul input has a gradient (oneDNN's bfloat16 matmul_v2_grad needs it):
    the original program runs in bfloat16 here, but the pass reads every
    optimizer's SkipUpdate input, which sgd has not, and raises after
    casting the gradients."""
    import numpy as np

    _, after, run, _ = _apply("master_grad_bf16_sgd")
    assert run.error_type == "RuntimeError"
    assert "SkipUpdate" in run.error and "operator sgd" in run.error
    assert "_regenerate_optimizer" in run.error
    assert [o.type for o in after.ops].count("cast") == 3  # one per parameter
    ids = np.array([0, 3, 1, 3], np.int64)
    before, after = _run_bf16(run.original, {"ids": ids})
    # bfloat16 parameters (uint16 bits), each updated by the bfloat16 SGD
    assert {n: v.dtype for n, v in after.items()} == {
        "embedding_0.w_0": np.uint16, "linear_0.w_0": np.uint16, "linear_0.b_0": np.uint16}
    assert all((before[n] != after[n]).any() for n in after)


def test_the_twin_note_names_the_missing_kernel():
    """The numeric twin's INCONCLUSIVE says which kernel keeps the case's
    own programs from running, op by op (details too)."""
    apps, _ = run_matrix([passes.get("master_grad")], [cases.all_cases()["master_grad_bf16"]],
                         backend="simulated", out=None)
    (twin,) = [c for c in apps[0].checks if c.name == "numeric twin"]
    assert twin.verdict == Verdict.INCONCLUSIVE
    assert "no bfloat16 CPU kernel for adamw" in twin.message
    assert {m["op_type"] for m in twin.details["missing_kernels"]} == {"adamw"}


MENDED = os.path.join(ROOT, "tests", "fixed_passes", "master_grad_skip_update_mended.py")


def test_the_mended_pass_rebuilds_sgd_whose_bfloat16_rewrite_cpu_cannot_run():
    """With SkipUpdate asked for only where the op declares it, the pass
    rebuilds the SGD optimizer and its contract holds; the rewritten
    program still cannot run here: the bfloat16 SGD kernel reads the
    float32 master gradient as bfloat16 (3.3.1's CPU SGD has no mixed
    path), so no run decides a firing application on this build."""
    import numpy as np
    import pytest

    _, after, run, results = _apply("master_grad_bf16_sgd", MENDED)
    assert run.error is None, run.error
    assert [c.name for c in results] == ["fired", *CONTRACT]
    assert all(c.verdict == Verdict.EQUIVALENT for c in results), \
        [(c.name, c.message) for c in results if not c.ok]
    assert [o.type for o in after.ops if o.role & 2].count("sgd") == 3
    with pytest.raises(Exception) as exc:
        _run_bf16(run.rewritten, {"ids": np.array([0, 3, 1, 3], np.int64)})
    assert "operator < sgd > error" in str(exc.value)
    assert "(bfloat16) does not match the type of data (float32)" in str(exc.value)


def test_the_master_gradients_are_the_only_intended_new_writers():
    """A kept clip reading a gradient from the pass's cast is intended (the
    master grad check judges the cast); the same gradient written by any
    other new op is not, so reaching definitions still flags it."""
    adapter = passes.get("master_grad")
    case = cases.all_cases()["master_grad_bf16_sgd"]
    before, after, _, _ = _apply(case.name, MENDED)
    grads = {"embedding_0.w_0@GRAD", "linear_0.w_0@GRAD", "linear_0.b_0@GRAD"}
    assert set(adapter.intended_changes(case, 0, before, after)) == grads
    # the embedding's clip keeps its name (opt_clip_0) across the rebuild,
    # so reaching definitions matches it as a kept op
    EMB_G = "embedding_0.w_0@GRAD"
    ops = list(after.ops)
    (cast,) = [o for o in ops if o.type == "cast" and o.writes() == [EMB_G]]
    ops[cast.idx] = dataclasses.replace(cast, type="scale")
    edited = after.with_ops(ops)
    assert set(adapter.intended_changes(case, 0, before, edited)) == \
        grads - {EMB_G}
    from verify.checks import reaching_defs

    class Ctx:  # what the check reads of an application's context
        rank, renames = 0, {}
        intended = adapter.intended_changes(case, 0, before, edited)

        def where(self):
            return "master_grad_bf16_sgd rank 0"

    ctx = Ctx()
    ctx.before, ctx.after = before, edited
    bad = [r for r in reaching_defs.run(ctx) if not r.ok]
    assert bad and {r.counterexample["var"] for r in bad} == {EMB_G}
    ctx.after, ctx.intended = after, adapter.intended_changes(case, 0, before, after)
    assert all(r.ok for r in reaching_defs.run(ctx))
