"""Sharding (``auto_parallel_sharding``) and the dependencies pass
(``auto_parallel_supplement_explicit_dependencies``) on DP2 programs planned
by Paddle's Engine (``cases/engine_sharding.py``).

Each check that decides these applications is fed a correct rewrite (the
real pass: EQUIVALENT) and a broken one (a pass mutant, a mutated program)
and must name the rank and the var; the rows they need (``reduce``,
``nop``/``depend``) are evaluated on concrete values.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import cases
import passes
from verify.ir.pass_files import load_pass_file
from verify.engine.matrix_runner import run_matrix
from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S1, S2 = "engine_shard_dp2_adamw_s1", "engine_shard_dp2_adamw_s2"
SGD_S1 = "engine_shard_dp2_sgd_s1"
PARAMS = {"layer_norm_0.w_0", "layer_norm_0.b_0", "linear_0.w_0", "linear_0.b_0",
          "linear_1.w_0", "linear_1.b_0"}
# greedy_even by numel over the use order: what rank 0 owns (rank 1: the rest)
OWNED_BY_0 = {"layer_norm_0.b_0", "linear_0.w_0", "linear_1.b_0"}


def run(pass_name, case_name, pass_file=None):
    loaded = load_pass_file(os.path.join(ROOT, pass_file)) if pass_file else None
    try:
        apps, _ = run_matrix([passes.get(pass_name)], [cases.all_cases()[case_name]],
                             backend="simulated", out=None)
    finally:
        if loaded is not None:
            loaded.restore()
    return apps[0]


def bad(app, kind=None, name=None):
    return [c for c in app.checks if not c.ok and not getattr(c, "advisory", False)
            and (kind is None or c.kind == kind) and (name is None or c.name == name)]


def why(app):
    return [(c.kind, c.name, c.rank, c.message[:300]) for c in bad(app)]


# -- the rows ------------------------------------------------------------------
class _State:
    def __init__(self, x):
        self.env = {"g": x}

    def get(self, name):
        return self.env.get(name)

    def set(self, name, value):
        self.env[name] = value


@pytest.mark.parametrize("root", [0, 1])
def test_simulator_reduce_sums_onto_the_root_only(root):
    from verify.numeric import simulated_ranks as sim

    xs = [np.arange(6, dtype="float32").reshape(2, 3) + 10 * r for r in range(2)]
    states = {r: _State(xs[r].copy()) for r in range(2)}

    class Coll:  # what _Coll reads off a reduce op
        type, index, x, out, ring, kind = "reduce", 14, "g", "g", 12, "reduce_sum"

    Coll.root = root
    sim._perform([0, 1], [Coll(), Coll()], states, "test")
    for r in range(2):
        want = xs[0] + xs[1] if r == root else xs[r]
        np.testing.assert_array_equal(states[r].get("g"), want)


def test_reduce_shape_rule_keeps_the_shape_and_catches_a_wrong_declared_one():
    from verify.checks import shape_check

    def snap(out_shape):
        vars_ = {"g": Var("g", [4, 3], "float32", is_data=True),
                 "h": Var("h", out_shape, "float32")}
        ops = [Op(0, "reduce", {"x": ["g"]}, {"out": ["h"]},
                  {"ring_id": 12, "root_id": 1, "reduce_type": 0})]
        return ProgramSnapshot(ops, vars_, feeds=["g"])

    ok = shape_check.check_snapshot(snap([4, 3]), 0, "test", {}, {0})
    assert all(r.verdict == Verdict.EQUIVALENT for r in ok), [r.message for r in ok]
    wrong = shape_check.check_snapshot(snap([3, 4]), 0, "test", {}, {0})
    assert any(r.verdict != Verdict.EQUIVALENT and "h" in r.message for r in wrong), \
        [r.message for r in wrong]


# -- dead values -----------------------------------------------------------------
def _grad_program(read_after):
    vars_ = {"w": Var("w", [2], "float32", is_parameter=True, persistable=True),
             "g": Var("g", [2], "float32"), "x": Var("x", [2], "float32", is_data=True)}
    ops = [Op(0, "scale", {"X": ["x"]}, {"Out": ["g"]}, {"scale": 2.0}),
           Op(1, "reduce", {"x": ["g"]}, {"out": ["g"]}, {"ring_id": 12, "root_id": 1})]
    if read_after:
        ops.append(Op(2, "sgd", {"Param": ["w"], "Grad": ["g"], "LearningRate": ["x"]},
                      {"ParamOut": ["w"]}))
    return ProgramSnapshot(ops, vars_, feeds=["x"])


def test_a_declared_stale_value_is_dropped_only_when_dead():
    from verify.ir.dead_values import is_dead, unobserved

    class Declares:
        def unobserved(self, case, rank, before, after):
            return {"g": "stale on purpose", "w": "a parameter"}

    dead, live = _grad_program(False), _grad_program(True)
    assert is_dead(dead, "g") and not is_dead(live, "g")
    assert not is_dead(dead, "w"), "a parameter is never dead"
    assert unobserved(Declares(), None, 0, dead, dead) == {"g": "stale on purpose"}
    assert unobserved(Declares(), None, 0, live, live) == {}, \
        "a declared value that is still read stays compared"


# -- the sharding pass -------------------------------------------------------------
@pytest.mark.parametrize("case_name", [SGD_S1, S1, S2])
def test_real_sharding_partitions_the_optimizer_and_is_equivalent(case_name):
    app = run("sharding", case_name)
    assert app.verdict == Verdict.EQUIVALENT, why(app)
    assert app.fired_ranks == app.ranks == [0, 1]
    held = [c for c in app.checks if c.kind == "contract" and c.name == "optimizer partitioned"]
    assert sorted(c.rank for c in held) == [0, 1]
    assert "linear_0.w_0" in next(c.message for c in held if c.rank == 0)
    numeric = [c for c in app.checks if c.kind == "numeric" and c.ok]
    assert {c.rank for c in numeric} == {0, 1}
    # every parameter compared on every rank (the non-owner's after the broadcast)
    for c in numeric:
        assert PARAMS <= {t["name"] for t in c.details["tensors"]}
    proofs = [c for c in app.checks if c.kind == "value"]
    assert all(c.verdict == Verdict.EQUIVALENT for c in proofs)
    for c in proofs:
        assert PARAMS <= {p.split(" ")[0] for p in c.details["proved"]}
        dead = set(c.details.get("unobserved", {}))
        if case_name == S2:  # the grads of the parameters the rank does not own
            mine = OWNED_BY_0 if c.rank == 0 else PARAMS - OWNED_BY_0
            assert dead == {p + "@GRAD" for p in PARAMS - mine}
        else:
            assert not dead


@pytest.mark.parametrize("mutant", ["sharding_wrong_root.py", "sharding_broadcast_dropped.py"])
def test_broken_broadcasts_are_caught_on_the_parameter_and_rank(mutant):
    app = run("sharding", S1, pass_file=f"tests/mutants/{mutant}")
    assert app.verdict == Verdict.NOT_EQUIVALENT, why(app)
    contract = bad(app, "contract", "updated parameter broadcast from its owner")
    assert {c.rank for c in contract} == {0, 1}
    for c in contract:
        assert c.verdict == Verdict.CONTRACT_BROKEN
        assert c.counterexample["rank"] == c.rank and c.counterexample["var"] in PARAMS
    refuted = bad(app, "value")
    assert {c.rank for c in refuted} == {0, 1}
    for c in refuted:
        var = c.counterexample["var"]
        mine = OWNED_BY_0 if c.rank == 0 else PARAMS - OWNED_BY_0
        # dropped: a non-owner keeps the stale value of a parameter it does not
        # own; wrong root: the owner's update is overwritten too
        assert var in PARAMS and (mutant == "sharding_wrong_root.py" or var not in mine), \
            (c.rank, var)
    assert {c.rank for c in bad(app, "numeric")} == {0, 1}


# -- the dependencies pass -----------------------------------------------------------
@pytest.mark.parametrize("case_name", [SGD_S1, S1])
def test_deps_raises_notfound_op_type_after_stage_1(case_name):
    app = run("deps", case_name)
    assert app.verdict == Verdict.PASS_CRASHED, why(app)
    crashed = [c for c in app.checks if c.verdict == Verdict.PASS_CRASHED]
    assert {c.rank for c in crashed} == {0, 1}
    for c in crashed:
        tb = c.details.get("traceback", "")
        assert "is_amp_flag_sync_op" in tb and "Attribute op_type is not found" in tb, tb[-800:]


def test_deps_with_the_op_type_read_mended_is_equivalent_after_stage_1():
    app = run("deps", S1, pass_file="tests/fixed_passes/deps_op_type_mended.py")
    assert app.verdict == Verdict.EQUIVALENT, why(app)
    assert app.fired_ranks == [0, 1]
    assert all(c.ok for c in app.checks if c.kind in ("value", "numeric", "contract"))


def test_deps_after_stage_2_adds_only_ordering_ops():
    app = run("deps", S2)
    assert app.verdict == Verdict.EQUIVALENT, why(app)
    held = [c for c in app.checks if c.kind == "contract" and c.name == "dependencies only"]
    assert sorted(c.rank for c in held) == [0, 1]
    assert all("2 dependency op(s)" in c.message for c in held)


def test_deps_contract_catches_a_changed_computation_and_a_missing_dependency():
    """The contract on the real stage-2 rewrite, then on that rewrite with a
    broadcast's root changed (computation touched) and a nop removed."""
    from verify.ir.snapshot import from_programs

    adapter = passes.get("deps")
    case = cases.all_cases()[S2]
    run_ = adapter.apply_local(case, 1)
    before = from_programs(run_.original.main, run_.original.startup)
    after = from_programs(run_.rewritten.main, run_.rewritten.startup)
    assert all(c.ok for c in adapter.contract(case, 1, before, after))

    ops = list(after.ops)
    b = max(i for i, op in enumerate(ops) if op.type == "broadcast")
    ops[b] = Op(ops[b].idx, "broadcast", ops[b].inputs, ops[b].outputs,
                {**ops[b].attrs, "root": 1 - int(ops[b].attrs["root"])})
    nop = next(i for i, op in enumerate(ops) if op.type == "nop")
    site = ops[nop + 1]
    broken = [o for i, o in enumerate(ops) if i != nop]
    broken = after.with_ops([Op(i, o.type, o.inputs, o.outputs, o.attrs)
                             for i, o in enumerate(broken)])
    found = [c for c in adapter.contract(case, 1, before, broken) if not c.ok]
    changed = [c for c in found if c.name == "only dependencies added"]
    assert changed and changed[0].counterexample["op_type"] == "broadcast" \
        and changed[0].counterexample["var"] == ops[b].inputs["x"][0]
    missing = [c for c in found if c.name == "dependency before each site"]
    assert missing and missing[0].counterexample["op_type"] == site.type \
        and missing[0].counterexample["var"] in site.reads()


def test_pattern_matchers_follow_the_documented_patterns():
    """Sharding: a DP program with an optimizer; deps: a sharded one (the
    broadcasts after the optimizer), not the unsharded program."""
    from verify.ir.snapshot import from_programs

    case = cases.all_cases()[S1]
    plain = case.build(0)
    snap = from_programs(plain.main, plain.startup)
    assert passes.get("sharding").pattern_present(snap)
    assert not passes.get("deps").pattern_present(snap)
    sharded = passes.get("deps").build_original(case, 0)
    assert passes.get("deps").pattern_present(from_programs(sharded.main, sharded.startup))
    tp = cases.all_cases()["engine_mlp_tp2_sgd"]
    assert not passes.get("sharding").handles(tp) and passes.get("sharding").handles(case)


def test_grad_clip_cannot_be_planned_in_legacy_mode():
    """Why no clip case: the Engine sets the clip's _async_add_n, so the
    global norm is built with paddle.stack(...).sum(), which 3.3.1's legacy
    mode rejects (the sum is the PIR op)."""
    from cases import engine_planned as ep

    with pytest.raises(RuntimeError) as err:
        ep.planned_dir({"parallel": "dp", "post": False, "act": "relu",
                        "optimizer": "sgd", "grad_clip": 1.0, "stage": 1})
    assert "_static_clip" in str(err.value) and "sum(): argument" in str(err.value), \
        str(err.value)[-1500:]


_NOP_PROBE = r'''
import os, sys
os.environ["FLAGS_enable_pir_api"] = "0"
os.environ["FLAGS_enable_pir_in_executor"] = sys.argv[1]
import numpy as np
import paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    blk = main.global_block()
    a = paddle.static.data("a", [2, 3], "float32")
    b = paddle.static.data("b", [4], "float32")
    c = blk.create_var(name="c", shape=[4], dtype="float32")
    blk.append_op(type="scale", inputs={"X": [b]}, outputs={"Out": [c]}, attrs={"scale": 2.0})
    blk.append_op(type="nop", inputs={"X": [a]}, outputs={"Out": [c]})  # what the deps pass adds
    d = blk.create_var(name="d", shape=[4], dtype="float32")
    blk.append_op(type="scale", inputs={"X": [c]}, outputs={"Out": [d]}, attrs={"scale": 1.0})
exe = paddle.static.Executor(paddle.CPUPlace())
try:
    out = exe.run(main, feed={"a": np.ones((2, 3), "float32"),
                              "b": np.arange(4, dtype="float32")}, fetch_list=["d"])[0]
    print("RESULT", out.tolist())
except Exception as exc:
    print("RAISED", str(exc).strip().splitlines()[-3:])
'''


def test_nop_is_a_no_op_for_the_legacy_executor_only():
    """Why engine_shard_dp2_adamw_s2 is gloo-unfaithful (NOP_UNFAITHFUL)."""
    import subprocess
    import sys

    outs = {}
    for flag in ("0", "1"):
        p = subprocess.run([sys.executable, "-c", _NOP_PROBE, flag], capture_output=True,
                           text=True, timeout=120)
        outs[flag] = next((ln for ln in p.stdout.splitlines()
                           if ln.startswith(("RESULT", "RAISED"))), p.stderr[-500:])
    assert outs["0"] == "RESULT [0.0, 2.0, 4.0, 6.0]", outs
    assert outs["1"] != outs["0"], outs


def test_stage_2_reproducer_passes_and_a_mutants_fails(tmp_path):
    """The reproducer leaves out the non-owners' stale grads (dead) and still
    compares every parameter: exit 0 for the real pass, 1 for the mutant."""
    import subprocess
    import sys

    from verify.repro import reproducer as repro

    case = cases.all_cases()[S2]
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("PADDLE_", "VERIFY_", "FLAGS_"))}
    codes = {}
    for name, pass_file in (("real", None), ("mutant", "tests/mutants/sharding_broadcast_dropped.py")):
        loaded = load_pass_file(os.path.join(ROOT, pass_file)) if pass_file else None
        try:
            path = repro.write(passes.get("sharding"), case, str(tmp_path / f"{name}.py"),
                               pass_file=os.path.join(ROOT, pass_file) if pass_file else None)
        finally:
            if loaded is not None:
                loaded.restore()
        p = subprocess.run([sys.executable, "-I", str(path)], cwd=str(tmp_path), env=env,
                           capture_output=True, text=True, timeout=600)
        codes[name] = (p.returncode, p.stdout)
    assert codes["real"][0] == 0, codes["real"][1][-1500:]
    out = codes["mutant"][1]
    assert codes["mutant"][0] == 1 and "DEFECT" in out and any(p in out for p in PARAMS), \
        codes["mutant"]


def test_stage_2_overlap_reads_out_of_its_own_reduce_and_the_mended_pass_is_equivalent():
    app = run("sharding", "engine_shard_dp2_adamw_s2_overlap")
    assert app.verdict == Verdict.PASS_CRASHED, why(app)
    for c in (c for c in app.checks if c.verdict == Verdict.PASS_CRASHED):
        tb = c.details.get("traceback", "")
        assert "_overlap_grad_comm" in tb and "Output Out cannot be found in operator reduce" in tb
    mended = run("sharding", "engine_shard_dp2_adamw_s2_overlap",
                 pass_file="tests/fixed_passes/sharding_reduce_out_mended.py")
    assert mended.verdict == Verdict.EQUIVALENT, why(mended)
    assert mended.fired_ranks == [0, 1]
    assert {c.rank for c in mended.checks if c.kind == "value" and c.ok} == {0, 1}


def test_stage_2_fused_broadcasts_without_overlap_raise_attribute_error():
    app = run("sharding", "engine_shard_dp2_adamw_s2_fuse")
    assert app.verdict == Verdict.PASS_CRASHED, why(app)
    tbs = [c.details.get("traceback", "") for c in app.checks
           if c.verdict == Verdict.PASS_CRASHED]
    assert tbs and all("param_comm_group_stream_pairs" in tb for tb in tbs)
