"""``fuse_all_reduce`` (legacy DP comm optimisation) on Engine-planned DP2 programs.

The installed pass is dead in 3.3.1: its validity test takes only
``c_allreduce_sum`` while its collective filter never lists that type, so it
fuses nothing (NOT_APPLIED where its pattern is present).  The pass with the
filter mended (``tests/fixed_passes/``) fires on syncs spelled
``c_allreduce_sum``: its contract holds; a mutant of it that leaves one
gradient out of the fused buffer is caught with that gradient, its optimizer
and the rings before/after.
"""
from __future__ import annotations

import os

import cases
import passes
from verify.ir.pass_files import load_pass_file
from verify.ir.rank_snapshot import snapshot_of as _snapshot
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MENDED = os.path.join(ROOT, "tests", "fixed_passes", "fuse_all_reduce_filter_mended.py")
MUTANT = os.path.join(ROOT, "tests", "dp_clip_mutants", "fuse_ar_one_grad_unsynced.py")
RESPELLED = "engine_dp2_sgd_c_allreduce"
GRADS = {f"{p}@GRAD" for p in ("linear_1.b_0", "linear_1.w_0", "linear_0.b_0",
                               "linear_0.w_0", "layer_norm_0.b_0", "layer_norm_0.w_0")}


def _apply(case_name, pass_file=None):
    """{rank: (before, after, PassRun, contract results)}."""
    adapter = passes.get("fuse_ar")
    case = cases.all_cases()[case_name]
    loaded = load_pass_file(pass_file) if pass_file else None
    try:
        out = {}
        for r in case.ranks:
            run = adapter.apply_local(case, r)
            b = _snapshot(run.original, case, r, "original")
            a = _snapshot(run.rewritten, case, r, "rewritten")
            out[r] = (b, a, run, adapter.contract(case, r, b, a))
    finally:
        if loaded:
            loaded.restore()
    return out


def _named(results, name):
    return [c for c in results if c.name == name]


def test_installed_pass_is_dead_on_either_spelling_of_the_syncs():
    adapter = passes.get("fuse_ar")
    for case_name in ("engine_dp2_sgd", RESPELLED):
        for r, (before, after, run, results) in _apply(case_name).items():
            assert run.error is None
            assert adapter.pattern_present(before)
            (fired,) = _named(results, "fired")
            assert fired.verdict == Verdict.NOT_APPLIED, (case_name, r, fired.message)
            assert [o.render() for o in before.ops] == [o.render() for o in after.ops]


def test_installed_filter_still_omits_c_allreduce_sum():
    """The reason the pass is dead, read from the installed code: if Paddle
    adds c_allreduce_sum to the filter (or the validity test takes all_reduce),
    this fails and the expectations above must be revisited."""
    import inspect

    from paddle.distributed.passes import fuse_all_reduce as far

    assert '"c_allreduce_sum"' not in inspect.getsource(far.filter_all_collective_op_indices)
    assert 'op.type != "c_allreduce_sum"' in inspect.getsource(
        far.find_all_fuse_all_reduce_groups)


def test_pattern_absent_on_tp_program_left_alone():
    adapter = passes.get("fuse_ar")
    for r, (before, after, run, results) in _apply("engine_tp2_sgd_clip").items():
        assert not adapter.pattern_present(before)
        (left,) = _named(results, "left alone")
        assert left.verdict == Verdict.EQUIVALENT and not left.details["fired"]


def test_mended_pass_coalesces_every_grad_sync_once():
    for r, (before, after, run, results) in _apply(RESPELLED, MENDED).items():
        assert run.error is None, run.error
        (fired,) = _named(results, "fired")
        assert fired.verdict == Verdict.EQUIVALENT and fired.details["fired"]
        (sync,) = _named(results, "each gradient synced once")
        assert sync.verdict == Verdict.EQUIVALENT and "6 gradient(s)" in sync.message
        (co,) = _named(results, "syncs coalesced")
        assert co.verdict == Verdict.EQUIVALENT and "6 gradient sums became 1" in co.message
        (buf,) = [o for o in after.ops if o.type == "coalesce_tensor"]
        assert set(buf.outputs["Output"]) == GRADS
        assert [o.type for o in after.ops].count("c_allreduce_sum") == 0


def test_grad_left_out_of_the_fused_sum_is_caught():
    for r, (before, after, run, results) in _apply(RESPELLED, MUTANT).items():
        assert run.error is None, run.error
        (bad,) = _named(results, "each gradient synced once")
        assert bad.verdict == Verdict.CONTRACT_BROKEN
        cex = bad.counterexample
        assert cex["rank"] == r and cex["op_type"] == "sgd"
        assert cex["var"] in GRADS
        (left_out,) = [g for g in GRADS if g not in
                       next(o for o in after.ops if o.type == "coalesce_tensor")
                       .outputs["Output"]]
        assert cex["var"] == left_out
        assert cex["syncs_before"] == [(12, "sum")] and cex["syncs_after"] == []


def test_mended_pass_moves_each_sum_past_its_scale_and_keeps_every_value():
    """The whole application of the mended pass (docs/passes.md): the fused
    sum comes after each gradient's in-place scale(1/2), so each scale reads
    the unsynced gradient (reaching definitions: NOT_EQUIVALENT, the scale
    and its gradient named); the value proof proves every watched value
    equal (the sum is linear) and the simulated run agrees."""
    from verify.engine.matrix_runner import run_matrix

    loaded = load_pass_file(MENDED)
    try:
        apps, _ = run_matrix([passes.get("fuse_ar")], [cases.all_cases()[RESPELLED]],
                             backend="simulated", out=None)
    finally:
        loaded.restore()
    (app,) = apps
    assert app.verdict == Verdict.NOT_EQUIVALENT
    bad = [c for c in app.checks if not c.ok and not getattr(c, "advisory", False)]
    assert {(c.kind, c.name) for c in bad} == {("dataflow", "reaching definitions")}
    assert {c.counterexample["op_type"] for c in bad} == {"scale"}
    assert {c.counterexample["var"] for c in bad} <= GRADS
    proofs = [c for c in app.checks if c.kind == "value"]
    assert proofs and all(c.verdict == Verdict.EQUIVALENT for c in proofs)
    assert all(c.ok for c in app.checks if c.kind == "numeric")


def test_contract_catches_a_double_scale_and_syncs_left_uncoalesced():
    """On snapshots of the mended rewrite: a second scale(1/2) of the fused
    buffer after its sum gives every gradient 1/4 where the original carries
    1/2 ("scale preserved", each gradient named); a rewrite that changes the
    program but leaves the six sums in place coalesced nothing."""
    from verify.ir.snapshot import Op

    adapter = passes.get("fuse_ar")
    case = cases.all_cases()[RESPELLED]
    before, after, _, _ = _apply(RESPELLED, MENDED)[0]
    (fused,) = [o for o in after.ops if o.type == "all_reduce"]
    buf = fused.outputs["out"][0]
    extra = Op(0, "scale", {"X": [buf]}, {"Out": [buf]}, {"scale": 0.5, "bias": 0.0}, fused.role)
    ops = list(after.ops)
    ops.insert(fused.idx + 1, extra)
    doubled = after.with_ops(ops)
    bad = [c for c in adapter.contract(case, 0, before, doubled) if c.name == "scale preserved"]
    assert {c.counterexample["var"] for c in bad} == GRADS
    assert {(c.counterexample["factor_before"], c.counterexample["factor_after"])
            for c in bad} == {("1/2", "1/4")}
    assert all(c.counterexample["op_type"] == "sgd" for c in bad)

    (seed,) = [o for o in before.ops if o.type == "fill_constant"][:1]
    nop = Op(0, "nop", {"X": [seed.outputs["Out"][0]]}, {"Out": [seed.outputs["Out"][0]]})
    touched = before.with_ops([nop] + list(before.ops))
    results = adapter.contract(case, 0, before, touched)
    (co,) = [c for c in results if c.name == "syncs coalesced"]
    assert co.verdict == Verdict.CONTRACT_BROKEN
    assert (co.counterexample["sums_before"], co.counterexample["sums_after"]) == (6, 6)
