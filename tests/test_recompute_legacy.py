"""The legacy Engine's ``auto_parallel_recompute`` (``passes/auto_parallel_recompute.py``)
on the ``recompute_*`` cases (``cases/recompute.py``).

The installed pass copies each marked segment into the backward before the
grad op of its last op, re-points the backward's reads to the copies and
keeps every value: the contract holds and the value proof proves the
gradients equal.  Where no segment is marked it changes nothing.  A dropout
in a segment reads a seed op the pass inserts in the forward, and its copy
reads the same seed.  Broken passes (``tests/mutants/recompute_*.py``,
``tests/recompute_mutants/``) and broken rewrites (snapshot edits) are
caught with the op and the variable.
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
MUTANTS = os.path.join(ROOT, "tests", "mutants")
SEED_MUTANT = os.path.join(ROOT, "tests", "recompute_mutants", "recompute_seed_recomputed.py")
CONTRACT = ("reads the recomputed value", "activations released", "dropout seeds",
            "outside the segments")


def _apply(case_name, pass_file=None):
    """(before, after, PassRun, contract results) of rank 0."""
    adapter = passes.get("recompute")
    case = cases.all_cases()[case_name]
    loaded = load_pass_file(pass_file) if pass_file else None
    try:
        run = adapter.apply_local(case, 0)
    finally:
        if loaded:
            loaded.restore()
    assert run.error is None, run.error
    before = snapshot_of(run.original, case, 0, "original")
    after = snapshot_of(run.rewritten, case, 0, "rewritten")
    return before, after, run, adapter.contract(case, 0, before, after)


def _named(results, name):
    (got,) = [c for c in results if c.name == name]
    return got


def _whole(case_name, pass_file=None, backend="simulated"):
    loaded = load_pass_file(pass_file) if pass_file else None
    try:
        apps, _ = run_matrix([passes.get("recompute")], [cases.all_cases()[case_name]],
                             backend=backend, out=None)
    finally:
        if loaded:
            loaded.restore()
    return apps[0]


def test_installed_pass_recomputes_each_segment_and_the_backward_reads_the_copies():
    before, after, _, results = _apply("recompute_mlp2")
    assert passes.get("recompute").pattern_present(before)
    assert all(c.verdict == Verdict.EQUIVALENT for c in results), \
        [(c.name, c.message) for c in results if not c.ok]
    assert "4 forward op(s) of 2 segment(s)" in _named(results, CONTRACT[0]).message
    # gelu_grad reads the pre-activation: the recomputed one, not the forward's
    (gelu_grad,) = [o for o in after.ops if o.type == "gelu_grad"
                    and o.outputs["X@GRAD"] == ["linear_1.tmp_1@GRAD"]]
    (x,) = gelu_grad.inputs["X"]
    assert x != "linear_1.tmp_1"
    (copy,) = [o for o in after.ops if x in o.writes()]
    assert copy.type == "elementwise_add" and copy.idx < gelu_grad.idx and copy.role & 1


def test_no_checkpoints_no_rewrite():
    before, after, _, results = _apply("recompute_mlp2_no_checkpoints")
    assert not passes.get("recompute").pattern_present(before)
    assert [c.name for c in results] == ["left alone"]
    assert results[0].verdict == Verdict.EQUIVALENT and not results[0].details["fired"]


def test_dropout_copy_reads_the_forward_seed():
    before, after, _, results = _apply("recompute_mlp2_dropout")
    assert all(c.verdict == Verdict.EQUIVALENT for c in results), \
        [(c.name, c.message) for c in results if not c.ok]
    assert "every recomputed random op reads its forward op's seed" in \
        _named(results, "dropout seeds").message
    drops = [o for o in after.ops if o.type == "dropout"]
    fwd = [o for o in drops if not o.role & 1]
    bwd = [o for o in drops if o.role & 1]
    assert len(fwd) == len(bwd) == 2
    assert {o.inputs["Seed"][0] for o in fwd} == {o.inputs["Seed"][0] for o in bwd}
    seeds = {o.outputs["Out"][0]: o for o in after.ops if o.type == "seed"}
    assert sorted(seeds[o.inputs["Seed"][0]].attrs["seed"] for o in fwd) == [11, 12]


def test_whole_applications_prove_the_values():
    app = _whole("recompute_mlp2")
    assert app.verdict == Verdict.EQUIVALENT, [(c.name, c.message) for c in app.checks
                                              if not c.ok]
    (proof,) = [c for c in app.checks if c.kind == "value"]
    assert proof.verdict == Verdict.EQUIVALENT and "PROVED" in proof.message
    # the dropout's mask is a function of its seed's value (the seed, dropout
    # and dropout_grad rows; tests/test_value_axioms.py checks them on Paddle)
    app = _whole("recompute_mlp2_dropout")
    assert app.verdict == Verdict.EQUIVALENT, [(c.name, c.message) for c in app.checks
                                              if not c.ok]
    (proof,) = [c for c in app.checks if c.kind == "value"]
    assert proof.verdict == Verdict.EQUIVALENT and "PROVED" in proof.message
    assert any(c.kind == "numeric" and c.ok for c in app.checks)


def test_grad_ops_left_on_the_forward_activations_are_caught():
    path = os.path.join(MUTANTS, "recompute_backward_reads_forward.py")
    _, _, _, results = _apply("recompute_mlp2", path)
    held = _named(results, "activations released")
    assert held.verdict == Verdict.CONTRACT_BROKEN
    cex = held.counterexample
    assert (cex["rank"], cex["op_index"], cex["op_type"], cex["var"], cex["slot"]) == \
        (0, 17, "gelu_grad", "linear_1.tmp_1", "X")
    assert _named(results, CONTRACT[0]).verdict == Verdict.CONTRACT_BROKEN
    app = _whole("recompute_mlp2", path)
    assert app.verdict == Verdict.CONTRACT_BROKEN  # values kept: proved
    assert [c.verdict for c in app.checks if c.kind == "value"] == [Verdict.EQUIVALENT]


def test_a_copy_that_reads_another_bias_is_caught_by_contract_and_values():
    path = os.path.join(MUTANTS, "recompute_clone_wrong_bias.py")
    _, _, _, results = _apply("recompute_mlp2", path)
    bad = _named(results, CONTRACT[0])
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    assert (bad.counterexample["op_index"], bad.counterexample["op_type"],
            bad.counterexample["var"]) == (16, "elementwise_add", "linear_1.tmp_1.subprog_0")
    app = _whole("recompute_mlp2", path)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    (proof,) = [c for c in app.checks if c.kind == "value"]
    assert proof.verdict == Verdict.NOT_EQUIVALENT and "REFUTED" in proof.message
    assert proof.counterexample["var"].endswith("@GRAD")


def test_a_seed_recomputed_with_its_segment_is_caught():
    _, _, _, results = _apply("recompute_mlp2_dropout", SEED_MUTANT)
    bad = _named(results, "dropout seeds")
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    cex = bad.counterexample
    assert (cex["op_type"], cex["var"]) == ("seed", "rc_seed_1.tmp_0.subprog_0")
    assert cex["op_index"] == 20 and cex["forward_op"] == 6


def _edited(after, idx, **attrs):
    ops = list(after.ops)
    ops[idx] = dataclasses.replace(ops[idx], attrs={**ops[idx].attrs, **attrs})
    return after.with_ops(ops)


def test_broken_rewrites_as_snapshots_are_caught():
    """A forward seed op that seeds another mask than the original's fixed
    seed; a copy whose attrs differ from the forward op's; a kept op's attrs
    changed outside the segments."""
    adapter = passes.get("recompute")
    case = cases.all_cases()["recompute_mlp2_dropout"]
    before, after, _, _ = _apply(case.name)
    (seed0,) = [o for o in after.ops if o.type == "seed" and o.attrs["seed"] == 11]
    bad = _named(adapter.contract(case, 0, before, _edited(after, seed0.idx, seed=12)),
                 "dropout seeds")
    assert bad.verdict == Verdict.CONTRACT_BROKEN and "fixed seed 11" in bad.message
    (fwd_drop,) = [o for o in after.ops if o.type == "dropout" and not o.role & 1
                   and o.inputs["Seed"] == seed0.outputs["Out"]]
    assert bad.counterexample["op_index"] == fwd_drop.idx

    (copy,) = [o for o in after.ops if o.type == "matmul_v2" and o.role & 1
               and o.inputs["Y"] == ["linear_1.w_0"]]
    bad = _named(adapter.contract(case, 0, before, _edited(after, copy.idx, trans_y=True)),
                 CONTRACT[0])
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    assert (bad.counterexample["op_index"], bad.counterexample["op_type"]) == \
        (copy.idx, "matmul_v2")

    (head,) = [o for o in after.ops if o.type == "matmul_v2"
               and o.inputs["Y"] == ["linear_out.w_0"]]
    bad = _named(adapter.contract(case, 0, before, _edited(after, head.idx, trans_y=True)),
                 "outside the segments")
    assert bad.verdict == Verdict.CONTRACT_BROKEN
    assert bad.counterexample["op_index"] == head.idx and \
        bad.counterexample["attrs"] == ["trans_y"]


def test_outside_the_engine_the_ordering_nops_break_the_pir_executor():
    """With FLAGS_new_executor_sequential_run off (the Engine turns it on)
    the pass puts a nop before each segment's copy, writing the copy's
    largest input (the feed x for the first block): the contract ignores
    the nop and holds, the values are proved, the simulator agrees, and the
    real ranks (the new executor with PIR) cannot run the rewritten program."""
    import paddle

    flag = "FLAGS_new_executor_sequential_run"
    assert not paddle.get_flags([flag])[flag]  # the application restored it
    before, after, _, results = _apply("recompute_mlp2_parallel_run")
    assert all(c.verdict == Verdict.EQUIVALENT for c in results)
    nops = [o for o in after.ops if o.type == "nop"]
    assert [o.writes() for o in nops] == [["gelu_0.tmp_0"], ["x"]]
    assert not [o for o in _apply("recompute_mlp2")[1].ops if o.type == "nop"]
    app = _whole("recompute_mlp2_parallel_run", backend="both")
    assert app.verdict == Verdict.NOT_EQUIVALENT
    bad = [c for c in app.checks if not c.ok and not getattr(c, "advisory", False)]
    assert [(c.kind, c.name) for c in bad] == [("numeric", "ranks run")]
    assert "var_name_2_id" in bad[0].counterexample["error"]
    (proof,) = [c for c in app.checks if c.kind == "value"]
    assert proof.verdict == Verdict.EQUIVALENT


def test_snapshots_keep_the_segment_mark_and_a_dropouts_seed():
    """Legacy snapshots keep an op's name scope only where it carries the
    recompute mark, and record dropout's seed and fix_seed (extra attrs the
    desc does not list, yet kernel arguments): a changed seed is a changed
    program."""
    from verify.ir.snapshot import changed, from_programs

    rp = cases.all_cases()["recompute_mlp2_dropout"].build(0)
    snap = from_programs(rp.main, rp.startup)
    drops = [o for o in snap.ops if o.type == "dropout"]
    assert [(o.attrs["fix_seed"], o.attrs["seed"]) for o in drops] == [(True, 11), (True, 12)]
    assert [o.attrs["op_namescope"] for o in drops] == ["/auto_parallel/rc_0",
                                                       "/auto_parallel/rc_1"]
    assert all("op_namescope" not in o.attrs for o in snap.ops if o.type == "reduce_mean")
    # the forward's head is unmarked: its name scope is noise, as before
    blk = rp.main.global_block()
    (drop0,) = [o for o in blk.ops if o.type == "dropout"][:1]
    drop0._set_attr("seed", 99)
    assert changed(snap, from_programs(rp.main, rp.startup))
    rp2 = cases.all_cases()["recompute_mlp2"].build(0)
    assert not any("seed" in o.attrs for o in from_programs(rp2.main).ops
                   if o.type == "matmul_v2")



def test_a_forward_seed_off_by_one_is_caught_by_contract_and_runs():
    """The seed op the pass inserts seeds the fixed seed + 1: the forward's
    mask is another one.  The contract names the forward dropout and its
    seed; the runs differ; the value proof cannot replay a mask (no
    reference for it) and says unknown, never equal."""
    path = os.path.join(ROOT, "tests", "recompute_mutants", "recompute_seed_off_by_one.py")
    _, after, _, results = _apply("recompute_mlp2_dropout", path)
    bad = _named(results, "dropout seeds")
    assert bad.verdict == Verdict.CONTRACT_BROKEN and "fixed seed 11" in bad.message
    cex = bad.counterexample
    assert (cex["op_index"], cex["op_type"], cex["var"]) == (2, "dropout", "rc_seed_0.tmp_0")
    assert after.ops[2].inputs["Seed"] == ["rc_seed_0.tmp_0"]
    app = _whole("recompute_mlp2_dropout", path)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    assert any(c.kind == "numeric" and c.verdict == Verdict.NOT_EQUIVALENT for c in app.checks)
    (proof,) = [c for c in app.checks if c.kind == "value"]
    assert proof.verdict == Verdict.INCONCLUSIVE and "dropout.mask" in proof.message
