"""``auto_parallel_data_parallel_optimization`` (dp_opt) and
``auto_parallel_grad_clip`` (grad_clip) on Engine-planned programs.

For each contract check: the real pass on its case (the check holds) beside
a pass mutant (``tests/dp_clip_mutants/``, loaded as a user's changed pass
file) that the check catches with the right counterexample.  Plus the
def-use finding of the real dp_opt, the shape rows it needed on concrete
values, and the Engine's inability to build the clip in legacy mode.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import cases
import passes
from verify.ir.pass_files import load_pass_file
from verify.ir.rank_snapshot import snapshot_of as _snapshot
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANTS = os.path.join(ROOT, "tests", "dp_clip_mutants")


def _apply(short, case_name, mutant=None):
    """{rank: (before, after, PassRun)} of the pass (or its mutant) on every rank."""
    adapter = passes.get(short)
    case = cases.all_cases()[case_name]
    loaded = load_pass_file(os.path.join(MUTANTS, mutant)) if mutant else None
    try:
        out = {}
        for r in case.ranks:
            run = adapter.apply_local(case, r)
            out[r] = (_snapshot(run.original, case, r, "original"),
                      _snapshot(run.rewritten, case, r, "rewritten"), run)
        contracts = {r: adapter.contract(case, r, b, a) for r, (b, a, _) in out.items()}
    finally:
        if loaded:
            loaded.restore()
    return case, out, contracts


def _named(results, name):
    return [c for c in results if c.name == name]


# -- dp_opt ------------------------------------------------------------------
def test_dp_opt_real_pass_syncs_every_grad_once_with_its_factor():
    _, out, contracts = _apply("dp_opt", "engine_dp2_sgd")
    for r, results in contracts.items():
        assert out[r][2].error is None
        (sync,) = _named(results, "each gradient synced once")
        assert sync.verdict == Verdict.EQUIVALENT and "6 gradient(s)" in sync.message
        after = out[r][1]
        assert [o.type for o in after.ops].count("coalesce_tensor") == 1
        seed = next(o for o in after.ops if o.type == "fill_constant")
        assert seed.attrs["value"] == pytest.approx(0.5)  # 1/dp moved into the seed


def test_dp_opt_gradient_left_out_of_the_fused_sum_is_caught():
    _, _, contracts = _apply("dp_opt", "engine_dp2_sgd", "dp_opt_one_grad_unsynced.py")
    for r, results in contracts.items():
        (bad,) = _named(results, "each gradient synced once")
        assert bad.verdict == Verdict.CONTRACT_BROKEN
        cex = bad.counterexample
        assert cex["var"] == "linear_1.b_0@GRAD" and cex["rank"] == r
        assert cex["op_type"] == "sgd"
        assert cex["syncs_after"] == [] and cex["syncs_before"] == [(12, "sum")]


def test_dp_opt_scale_dropped_without_moving_it_to_the_seed_is_caught():
    _, _, contracts = _apply("dp_opt", "engine_dp2_sgd", "dp_opt_seed_unscaled.py")
    bad = _named(contracts[0], "scale preserved")
    assert len(bad) == 6  # every synced grad is dp times too large
    assert {c.verdict for c in bad} == {Verdict.CONTRACT_BROKEN}
    assert bad[0].counterexample["factor_before"] == "1/2"
    assert bad[0].counterexample["factor_after"] == "1"


def test_dp_opt_coalesce_declares_its_grads_and_a_copying_one_is_caught():
    """coalesce_tensor with copy_data=False declares the grads it makes views
    of (def-use holds on the real rewrite); the same op copying their data
    (copy_data=True) would read six grads nothing has written yet."""
    import copy

    from verify.checks import CheckContext, def_use

    case, out, _ = _apply("dp_opt", "engine_dp2_sgd")
    before, after, _ = out[0]
    ok = def_use.run(CheckContext("dp_opt", case.name, 0, before, after))
    assert [c.verdict for c in ok] == [Verdict.EQUIVALENT]
    copying = copy.deepcopy(after)
    (co,) = [o for o in copying.ops if o.type == "coalesce_tensor"]
    co.attrs["copy_data"] = True
    found = def_use.run(CheckContext("dp_opt", case.name, 0, before, copying))
    bad = [c for c in found if c.verdict == Verdict.NOT_EQUIVALENT]
    assert {c.counterexample["var"] for c in bad} == {
        f"{p}@GRAD" for p in ("linear_1.b_0", "linear_1.w_0", "linear_0.b_0", "linear_0.w_0",
                              "layer_norm_0.b_0", "layer_norm_0.w_0")}
    assert {(c.counterexample["op_index"], c.counterexample["op_type"]) for c in bad} == \
        {(13, "coalesce_tensor")}


def test_coalesce_tensor_without_copy_reads_no_input_data():
    """The def-use row on concrete values: Paddle's coalesce_tensor with
    copy_data=False runs on inputs nothing has written (legacy executor)."""
    import paddle

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        xs = [block.create_var(name=f"g{i}", shape=s, dtype="float32")
              for i, s in enumerate([(3, 4), (5,)])]
        fused = block.create_var(name="fused", dtype="float32")
        block.append_op(type="coalesce_tensor", inputs={"Input": xs},
                        outputs={"Output": xs, "FusedOutput": fused},
                        attrs={"copy_data": False, "use_align": True, "dtype": 5,
                               "concated_shapes": [3, 4, 5], "concated_ranks": [2, 1]})
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    got, g0, g1 = exe.run(main, fetch_list=["fused", "g0", "g1"], scope=scope)
    assert got.size >= 17 and g0.shape == (3, 4) and g1.shape == (5,)


def test_dp_opt_leaves_tensor_parallel_programs_alone():
    adapter = passes.get("dp_opt")
    case = cases.all_cases()["engine_dp2_sgd"]
    rp = case.build(0)
    from verify.ir.snapshot import from_programs

    assert adapter.pattern_present(from_programs(rp.main, rp.startup))
    tp = cases.all_cases()["engine_tp2_sgd_clip"].build(0)
    assert not adapter.pattern_present(from_programs(tp.main, tp.startup))


# -- grad_clip ---------------------------------------------------------------
@pytest.mark.parametrize("case_name,pieces", [("engine_dp2_sgd_clip", 6),
                                              ("engine_tp2_sgd_clip", 9)])
def test_grad_clip_real_pass_makes_the_global_norm(case_name, pieces):
    _, _, contracts = _apply("grad_clip", case_name)
    for r, results in contracts.items():
        (norm,) = _named(results, "global norm")
        assert norm.verdict == Verdict.EQUIVALENT, norm.message
        assert f"{pieces} gradient piece(s)" in norm.message


def test_grad_clip_norm_not_summed_across_ranks_is_caught():
    _, _, contracts = _apply("grad_clip", "engine_dp2_sgd_clip", "grad_clip_norm_not_synced.py")
    for r, results in contracts.items():
        (bad,) = _named(results, "global norm")
        assert bad.verdict == Verdict.CONTRACT_BROKEN
        assert bad.counterexample["var"] == "sum_0.tmp_0"
        assert bad.counterexample["op_type"] == "sqrt"
        assert "summed 0 time(s)" in bad.message


def test_grad_clip_replicated_grads_counted_on_every_tp_rank_is_caught():
    _, _, contracts = _apply("grad_clip", "engine_tp2_sgd_clip", "grad_clip_every_rank_first.py")
    bad = _named(contracts[0], "global norm")
    twice = {c.counterexample["var"]: c.counterexample["counted_on"] for c in bad}
    # the replicated parameters' grads, counted on both ranks
    assert twice == {"layer_norm_0.b_0@GRAD": [0, 1], "layer_norm_0.w_0@GRAD": [0, 1],
                     "linear_1.b_0@GRAD": [0, 1]}


def test_engine_cannot_build_the_global_norm_clip_in_legacy_mode(tmp_path):
    """Why the clip cases insert the clip ops by hand: planning with
    ``grad_clip`` (ClipGradByGlobalNorm) fails inside Paddle's static clip."""
    from cases import engine_planned as ep

    cmd = ep._plan_command(0, tmp_path / "rank0", {"parallel": "dp", "post": False,
                                                   "grad_clip": 1.0})
    proc = subprocess.run(cmd, cwd=ROOT, env=ep._plan_env(0), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert "sum(): argument (position 1) must be Value" in proc.stderr


# -- shape rows the passes met, on concrete values -------------------------
def _rule(op_type, ins):
    from verify.checks.shape_rules import RULES, Shapes
    from verify.ir.snapshot import Op

    op = Op(0, op_type, {s: [f"{s}{i}" for i in range(len(v))] for s, v in ins.items()}, {})
    s = Shapes(op, {slot: [list(x) for x in v] for slot, v in ins.items()})
    return RULES[op_type](s), [why for cond, why in s.needs if cond is False]


def test_coalesce_tensor_rule_is_paddles_views():
    import paddle
    from paddle import _C_ops

    shapes = [(3, 4), (5,), (2, 2, 2)]
    out, bad = _rule("coalesce_tensor", {"Input": shapes})
    assert not bad and out["Output"] == [list(s) for s in shapes]
    with paddle.base.dygraph.guard():
        xs = [paddle.to_tensor(np.ones(s, "float32")) for s in shapes]
        views, fused = _C_ops.coalesce_tensor(xs, paddle.float32, True, False, False, 0.0,
                                              True, -1, -1, [], [])
        assert [list(v.shape) for v in views] == out["Output"]
        assert int(np.prod(fused.shape)) >= sum(int(np.prod(s)) for s in shapes)


def test_nop_rule_states_no_shapes():
    out, bad = _rule("nop", {"X": [(3, 4)]})
    assert out == {} and not bad


def test_grad_clip_global_norm_on_dp2_x_tp2():
    """Four ranks, TP groups [0,1] [2,3], DP groups [0,2] [1,3]: each shard of
    a sharded grad is counted on one rank (0 and 1), each replicated grad on
    rank 0 only, and the partial norms are summed over ring 0 (all four).
    (This case is paired with dp_opt only in the gate: the value proof of
    the clip on four ranks takes about a minute.)"""
    adapter = passes.get("grad_clip")
    case = cases.all_cases()["engine_dp2_tp2_sgd_clip"]
    adapter.apply_local(case, 0)  # a fresh application
    snaps = {}
    for r in case.ranks:
        run = adapter.apply_local(case, r)
        assert run.error is None
        snaps[r] = (_snapshot(run.original, case, r, "original"),
                    _snapshot(run.rewritten, case, r, "rewritten"))
    for r, (before, after) in snaps.items():
        (norm,) = _named(adapter.contract(case, r, before, after), "global norm")
        assert norm.verdict == Verdict.EQUIVALENT, norm.message
        assert "9 gradient piece(s)" in norm.message
    # ranks 2 and 3 hold no norm of their own: the pass fills their share with 0
    assert not any(o.type == "squared_l2_norm" for o in snaps[2][1].ops)


def test_symbolic_sum_over_four_ranks_of_0d_values():
    """The value semantics' collective over more than two 0-d values (the
    clip's partial norms on four ranks): numpy turns a 0-d object sum into a
    bare element, which the next addition could not take."""
    from fractions import Fraction

    from verify.value import semantics as S
    from verify.value import symbolic as sym

    store = sym.Store()
    sym.T.store = store
    vals = [Fraction(3), Fraction(0), Fraction(0), Fraction(5, 2)]
    xs = [S.Tensor(np.asarray(sym.T(store.const(v)), dtype=object), [], "float32")
          for v in vals]
    for i in range(4):
        out = S.collective("sum", xs, i, 0, sym.Kernels(store))
        assert out.arr.shape == () and out.arr.item().i == store.const(sum(vals))
    avg = S.collective("avg", xs, 1, 0, sym.Kernels(store))
    assert avg.arr.item().i == store.const(sum(vals) / 4)


_PIR_EXECUTOR_PROBE = r"""
import os, sys
os.environ["FLAGS_enable_pir_api"] = "0"
os.environ["FLAGS_enable_pir_in_executor"] = "1"
import numpy as np
import paddle
paddle.enable_static()
main = paddle.static.Program.parse_from_string(open(sys.argv[1], "rb").read())
if sys.argv[2] == "persistable":  # as the suite's rank worker does
    for v in main.global_block().vars.values():
        v.desc.set_persistable(True)
exe = paddle.static.Executor(paddle.CPUPlace())
scope = paddle.static.global_scope()
feed = {n: np.zeros(s, "float32") for n, s in (("x", (1, 4, 8)), ("y", (1, 4, 8)))}
for v in main.global_block().vars.values():  # parameters and lr, as startup leaves them
    if v.is_parameter or v.name.startswith("learning_rate"):
        shape = [1 if d < 0 else d for d in v.shape]
        scope.var(v.name).get_tensor().set(np.zeros(shape, "float32"), paddle.CPUPlace())
try:
    exe.run(main, feed=feed)
except Exception as exc:
    print("ERROR", type(exc).__name__, str(exc))
"""


def test_dp_opt_rewrite_builds_under_the_pir_executor_unless_all_persistable(tmp_path):
    """Why real ranks do not run the dp_opt cases (their gloo note): in a plain
    run the PIR executor builds the rewritten program (it stops only at the
    first collective, with no communicator in one process); with every var
    persistable, as the suite's rank worker makes them, it refuses the
    grads coalesce_tensor declares before their writers."""
    import os

    adapter = passes.get("dp_opt")
    case = cases.all_cases()["engine_dp2_sgd"]
    run = adapter.apply_local(case, 0)
    probe = tmp_path / "probe.py"
    probe.write_text(_PIR_EXECUTOR_PROBE)
    main = tmp_path / "rewritten.main"
    main.write_bytes(run.rewritten.main.desc.serialize_to_string())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGS_", "PADDLE_"))}
    said = {}
    for mode in ("plain", "persistable"):
        p = subprocess.run([sys.executable, str(probe), str(main), mode], env=env,
                           capture_output=True, text=True, timeout=300)
        said[mode] = p.stdout + p.stderr
    assert "Cannot find" not in said["plain"] and "CommContext" in said["plain"]
    assert "Cannot find linear_1.b_0@GRAD in scope" in said["persistable"]


# -- a clip active in every step hides a factor common to all gradients ----
def _application(short, case_name, mutant=None, backend="simulated"):
    from verify.engine.matrix_runner import run_matrix

    loaded = load_pass_file(os.path.join(MUTANTS, mutant)) if mutant else None
    try:
        apps, _ = run_matrix([passes.get(short)], [cases.all_cases()[case_name]],
                             backend=backend, out=None)
    finally:
        if loaded:
            loaded.restore()
    return apps[0]


def test_clip_threshold_is_found_by_dataflow_and_raised_in_a_copy():
    from verify.numeric.clip_witness import HUGE, clip_off, thresholds

    rp = cases.all_cases()["engine_dp2_sgd_clip"].build(0)
    found = thresholds(rp.main)
    assert len(found) == 1 and rp.main.global_block().ops[found[0]].attr("value") == \
        pytest.approx(0.05)
    off = clip_off(rp)
    assert off.main.global_block().ops[found[0]].attr("value") == pytest.approx(HUGE)
    assert rp.main.global_block().ops[found[0]].attr("value") == pytest.approx(0.05)
    assert clip_off(cases.all_cases()["engine_dp2_sgd"].build(0)) is None


def test_a_factor_the_active_clip_cancels_is_caught_with_the_clip_off():
    """dp_opt scaling every gradient by 1/dp twice: with the case's clip
    (active in every step) the runs agree; with the clip off they differ."""
    app = _application("dp_opt", "engine_dp2_sgd_clip", "dp_opt_scaled_twice.py")
    on = [c for c in app.checks if c.name == "simulated run"]
    off = [c for c in app.checks if c.name == "simulated run (clip off)"]
    assert on and all(c.verdict == Verdict.EQUIVALENT for c in on), [c.message for c in on]
    assert off and all(c.verdict == Verdict.NOT_EQUIVALENT for c in off), \
        [c.message for c in off]
    assert app.verdict == Verdict.NOT_EQUIVALENT
    assert not any("values kept" in n for n in app.notes)


def test_the_real_dp_opt_pass_agrees_with_the_clip_off_too():
    app = _application("dp_opt", "engine_dp2_sgd_clip")
    off = [c for c in app.checks if c.name == "simulated run (clip off)"]
    assert off and all(c.verdict == Verdict.EQUIVALENT for c in off), [c.message for c in off]


def test_contract_broken_says_values_kept_only_where_witnessed():
    """A real CONTRACT_BROKEN application (the clip pass on DP2): witnessed by
    the simulated runs (clip on and off) it says "values kept" naming them;
    with nothing run, it says which ranks nothing witnessed.  Without the
    value proof: its proof of this application is the gate's
    (grad_clip-engine_dp2_sgd_clip, about 50 CPU s of Z3 that a run here only
    repeated); that a proved value check is a witness is the next test's."""
    from verify.engine.application import run_application
    from verify.engine.matrix_runner import pick_backend

    adapter, case = passes.get("grad_clip"), cases.all_cases()["engine_dp2_sgd_clip"]
    _, simulated = pick_backend("simulated")
    witnessed = run_application(adapter, case, numeric=simulated, value=False)
    assert witnessed.verdict == Verdict.CONTRACT_BROKEN
    assert any(n.startswith("CONTRACT_BROKEN, values kept: witnessed equal by") and
               "simulated run (clip off)" in n for n in witnessed.notes), witnessed.notes
    unwitnessed = run_application(adapter, case, value=False)
    assert unwitnessed.verdict == Verdict.CONTRACT_BROKEN
    assert not any("values kept" in n for n in unwitnessed.notes)
    assert any("NOT witnessed equal on rank(s) [0, 1]" in n for n in unwitnessed.notes)


def test_a_proved_value_check_on_every_rank_witnesses_the_values_kept():
    """``values_statement`` (the note of every CONTRACT_BROKEN application):
    value proofs EQUIVALENT on every rank witness "values kept"; a rank
    without one, an INCONCLUSIVE proof or an advisory result does not."""
    from verify.engine.application import values_statement
    from verify.verdicts import CheckResult

    def proof(rank, verdict=Verdict.EQUIVALENT, advisory=False):
        return CheckResult("value", "value proof", rank, verdict, "m", advisory=advisory)

    contract = CheckResult("contract", "global norm", 0, Verdict.CONTRACT_BROKEN, "m")
    kept = values_statement([contract, proof(0), proof(1)], [0, 1])
    assert kept == "CONTRACT_BROKEN, values kept: witnessed equal by value proof", kept
    for checks in ([proof(0)], [proof(0), proof(1, Verdict.INCONCLUSIVE)],
                   [proof(0), proof(1, advisory=True)]):
        note = values_statement([contract, *checks], [0, 1])
        assert "values kept" not in note and "NOT witnessed equal on rank(s) [1]" in note, note
