"""Programs validated as the backends would run them (issue 35 item 5,
``verify/checks/collective_validity.py``): a broadcast's ``root`` is an index
in its ring's group (Paddle's comm rank), so ``root=2`` on ring ``[2, 3]`` is
rejected by gloo/NCCL and must not be read as global rank 2; every
persistable the main program reads is initialised by the startup.  Each
broken program sits beside the correct one."""
from __future__ import annotations

import copy

import pytest

import cases
import passes
from verify.checks import CheckContext, run_static_checks
from verify.engine.application import run_application
from verify.engine.isolation import run_pass
from verify.ir.rank_snapshot import snapshot_of
from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value.semantics import Unsupported
from verify.value.symbolic import Store, execute
from verify.verdicts import Verdict

CASE = "row_dp_mp_o0_sgd"  # ring 0: TP groups [[0, 1], [2, 3]]; startup broadcasts


def _bad(app, name=None):
    return [c for c in app.checks if not c.ok and not c.advisory
            and (name is None or c.name == name)]


def _root_global(main, startup, snap, rank):
    """Rank 2's startup broadcast of the bias on TP ring 0 ([2, 3]) gets
    root 2: the root's global rank, not its index (0) in the group."""
    from verify.selfcheck.program_mutants import Mutation

    for op in startup.global_block().ops:
        if op.type == "broadcast" and op.attr("ring_id") == 0:
            op._set_attr("root", 2)
            return Mutation("global root", f"root 2 on ring 0 for {op.input('x')[0]}")
    raise AssertionError("no broadcast on ring 0 in rank 2's startup")


def test_root_as_a_global_rank_outside_the_group_is_caught():
    app = run_application(passes.get("overlap"), cases.all_cases()[CASE],
                          mutator=(2, _root_global))
    found = _bad(app, "collective root")
    assert found, [(c.kind, c.name, c.rank, c.message[:200]) for c in _bad(app)]
    c = found[0]
    assert c.verdict == Verdict.NOT_EQUIVALENT and c.rank == 2
    cex = c.counterexample
    assert (cex["rank"], cex["program"], cex["op_type"], cex["var"]) == \
        (2, "startup", "broadcast", "linear_0.b_0")
    assert isinstance(cex["op_index"], int)
    assert "root 2" in c.message and "[2, 3]" in c.message
    assert app.verdict == Verdict.NOT_EQUIVALENT
    # the value proof refuses it rather than reading rank 2
    assert not any(v.kind == "value" and v.ok and v.rank == 2 for v in app.checks)


def test_value_proof_of_a_built_case_refuses_root_2_on_ring_2_3():
    """The issue's program: ranks 2 and 3 broadcast on TP ring 0 ([2, 3])
    with root 2 (a global rank id).  Read as a global rank it was "proved"
    equal to root 0; the backend rejects it: not proved (refused)."""
    from verify.value import prove_application

    case = cases.all_cases()[CASE]
    befores, afters, watched = {}, {}, {}
    for r in case.ranks:
        run = run_pass(passes.get("overlap"), case, r)
        befores[r] = snapshot_of(run.original, case, r, "original")
        afters[r] = snapshot_of(run.rewritten, case, r, "rewritten")
        watched[r] = list(run.original.fetches) + [run.original.loss]
    for r in (2, 3):
        a = copy.deepcopy(afters[r])
        hits = [o for o in a.startup_ops if o.type == "broadcast" and o.attrs["ring_id"] == 0]
        assert hits
        for o in hits:
            o.attrs["root"] = 2
        afters[r] = a
        ctx = CheckContext("t", case.name, r, befores[r], a, rings=dict(case.rings))
        bad = [c for c in run_static_checks(ctx) if not c.ok and not c.advisory]
        assert [c.name for c in bad] == ["collective root"] * len(hits), \
            [c.message for c in bad]
    res = prove_application("t", case.ranks, case.rings, befores, afters, watched,
                            feed_key=lambda rank, name: f"dp{case.dp_index(rank)}")
    assert not all(c.verdict == Verdict.EQUIVALENT for c in res), [c.message for c in res]
    assert any("root 2" in c.message for c in res if c.verdict != Verdict.EQUIVALENT)


def test_faithful_program_passes_the_check():
    app = run_application(passes.get("overlap"), cases.all_cases()[CASE])
    ok = [c for c in app.checks if c.name == "backend validity"]
    assert sorted(c.rank for c in ok) == [0, 1, 2, 3]
    assert all(c.verdict == Verdict.EQUIVALENT for c in ok)
    assert not [c for c in app.checks if c.name.startswith(("collective ", "startup init"))
                and not c.advisory]
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in _bad(app)]


def _snap(root):
    vars_ = {"p": Var("p", [2], "float32"), "q": Var("q", [2], "float32")}
    ops = [Op(0, "broadcast", {"x": ["p"]}, {"out": ["q"]}, {"root": root, "ring_id": 7})]
    return ProgramSnapshot(ops, vars_)


def test_value_proof_refuses_a_root_outside_the_group():
    store = Store()
    envs, _ = execute({2: _snap(1), 3: _snap(1)}, {7: [[2, 3]]}, store)
    assert store.render(envs[2]["q"].arr.reshape(-1)[0].i) == "p@r3[0]"
    with pytest.raises(Unsupported, match="root 2"):
        execute({2: _snap(2), 3: _snap(2)}, {7: [[2, 3]]}, Store())


@pytest.mark.parametrize("edit,name,var", [
    ({"root": 2}, "collective root", "p"),
    ({"ring_id": 9}, "collective ring", "p"),
])
def test_snapshot_violations_name_rank_op_and_var(edit, name, var):
    good = _snap(1)
    bad = _snap(1)
    bad.ops[0].attrs.update(edit)
    ctx = CheckContext("t", "c", 3, good, bad, rings={7: [[2, 3]]})
    res = [c for c in run_static_checks(ctx) if c.name == name]
    assert res and res[0].verdict == Verdict.NOT_EQUIVALENT and not res[0].advisory
    assert res[0].counterexample == {"rank": 3, "program": "main", "op_index": 0,
                                     "op_type": "broadcast", "var": var}
    # the same violation already in the original is the input's, not the pass's
    twin = _snap(1)
    twin.ops[0].attrs.update(edit)
    inherited = [c for c in run_static_checks(CheckContext("t", "c", 3, twin, bad,
                                                           rings={7: [[2, 3]]}))
                 if c.name == name]
    assert inherited and all(c.advisory for c in inherited)


def test_collective_dtype_mismatch_is_caught():
    bad = _snap(0)
    bad.vars["q"] = Var("q", [2], "float16")
    res = [c for c in run_static_checks(CheckContext("t", "c", 2, _snap(0), bad,
                                                     rings={7: [[2, 3]]}))
           if c.name == "collective dtype"]
    assert res and res[0].counterexample["var"] == "q"


def test_send_to_itself_is_caught():
    s = ProgramSnapshot([Op(0, "pd_op.send_v2", {"x": ["p"]}, {}, {"peer": 0, "ring_id": 5})],
                        {"p": Var("p", [2], "float32")})
    good = ProgramSnapshot([Op(0, "pd_op.send_v2", {"x": ["p"]}, {}, {"peer": 1, "ring_id": 5})],
                           {"p": Var("p", [2], "float32")})
    ctx = CheckContext("t", "c", 0, good, s, rings={5: [[0, 1]]})
    res = [c for c in run_static_checks(ctx) if c.name == "collective peer"]
    assert res and res[0].counterexample["op_type"] == "pd_op.send_v2"
    assert not [c for c in run_static_checks(CheckContext("t", "c", 0, good, good,
                                                          rings={5: [[0, 1]]}))
                if c.name == "collective peer"]


def _pir_snapshots():
    case = cases.all_cases()["pir_mm_3d"]
    adapter = next(a for a in passes.adapters().values()
                   if a.name == "fuse_allreduce_split_to_reducescatter_pass")
    run = run_pass(adapter, case, 0)
    return case, snapshot_of(run.original, case, 0, "original"), \
        snapshot_of(run.rewritten, case, 0, "rewritten")


def test_pir_startup_missing_a_parameter_init_is_caught():
    case, before, after = _pir_snapshots()
    ctx = CheckContext("t", case.name, 0, before, after, rings=dict(case.rings))
    assert all(c.ok for c in run_static_checks(ctx) if c.kind == "dataflow")
    dropped = after.with_ops(list(after.ops))
    dropped.startup_ops = [o for o in after.startup_ops
                           if not (o.type == "builtin.set_parameter"
                                   and o.outputs.get("parameter") == ["w0"])]
    assert len(dropped.startup_ops) == len(after.startup_ops) - 1
    res = [c for c in run_static_checks(CheckContext("t", case.name, 0, before, dropped,
                                                     rings=dict(case.rings)))
           if not c.ok and not c.advisory]
    init = [c for c in res if c.name == "startup init"]
    assert init, [(c.name, c.message) for c in res]
    assert init[0].verdict == Verdict.NOT_EQUIVALENT
    cex = init[0].counterexample
    assert (cex["rank"], cex["program"], cex["op_type"], cex["var"]) == \
        (0, "main", "builtin.parameter", "w0")


def _shrink_init(main, startup, snap, rank):
    """Rank 1's startup draws linear_0.w_0 at [4, 3]: the main reads [4, 6]."""
    from verify.selfcheck.program_mutants import Mutation

    for op in startup.global_block().ops:
        if op.type == "uniform_random" and op.output("Out")[0] == "linear_0.w_0":
            op._set_attr("shape", [4, 3])
            return Mutation("shape", "linear_0.w_0 drawn at [4, 3]")
    raise AssertionError("no init of linear_0.w_0")


def test_startup_init_at_another_shape_is_caught():
    app = run_application(passes.get("promotion"), cases.all_cases()[CASE],
                          mutator=(1, _shrink_init), value=False)
    init = _bad(app, "startup init")
    assert init, [(c.name, c.message[:200]) for c in _bad(app)]
    cex = init[0].counterexample
    assert (cex["rank"], cex["program"], cex["op_type"], cex["var"]) == \
        (1, "startup", "uniform_random", "linear_0.w_0")
