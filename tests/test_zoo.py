"""The model zoo (``cases/zoo.py``) and ``python -m verify coverage``.

The zoo needs the optional ``models`` group (paddleformers); without it the
family is absent and says so.  The tests that build its cases need the
plans (made once, cached; a cold plan takes 1.5-4.5 minutes per model on 2
cores): they build two, ``zoo.TEST_PLANNED`` (the DP2 x TP2 LLaMA, and the
same with its decoder recomputed; the others are benchmarks/bench_zoo.py's),
and are skipped, with the reason, where paddleformers is missing.
"""
from __future__ import annotations

import io

import pytest

import cases
from cases import zoo
from verify.selfcheck import coverage

needs_models = pytest.mark.skipif(bool(zoo.UNAVAILABLE), reason=f"zoo: {zoo.UNAVAILABLE}")


def test_without_paddleformers_the_family_is_absent_and_says_so(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "paddleformers" else real(name, *a))
    why = zoo.unavailable()
    assert why and "paddleformers" in why and "pip install -e '.[models]'" in why
    monkeypatch.setattr(zoo, "UNAVAILABLE", why)
    monkeypatch.setattr(zoo, "CASES", [])
    assert cases.unavailable_families() == {"zoo": why}
    assert not [c for c in cases.all_cases().values() if c.family == "zoo"]
    # the baseline still states the zoo's entries (it must not depend on the env)
    assert {c.name for c in zoo.DECLARED} <= set(cases.all_cases(declared=True))
    from verify.cli import cmd_list

    out = io.StringIO()
    cmd_list(out=out)
    assert f"unavailable family zoo: {why}" in out.getvalue()


def test_the_pin_is_read_from_the_one_workaround_file():
    assert zoo.pinned() == "1.2.0"
    text = (zoo.MODELS / "paddleformers_cpu.py").read_text()
    assert "fuse_rms_norm" in text and "not_to_static" in text


def test_coverage_rejects_bad_input():
    assert coverage.main(["--case", "no_such_case_*"], out=io.StringIO()) == 2
    assert coverage.main(["--program-dir", "/nonexistent/dir"], out=io.StringIO()) == 2


def test_coverage_of_a_covered_case_is_clean_and_a_missing_row_stops(monkeypatch):
    out = io.StringIO()
    assert coverage.main(["--case", "rs_own_chunk"], out=out) == 0
    assert "no check would stop" in out.getvalue()
    from verify.value import semantics

    monkeypatch.delitem(semantics.ROWS, "pd_op.split_with_num")
    out = io.StringIO()
    assert coverage.main(["--case", "rs_own_chunk"], out=out) == 1
    text = out.getvalue()
    assert "pd_op.split_with_num" in text and "MISSING" in text
    assert "the value proof stops at rank 0 main op" in text and "(pd_op.split_with_num)" in text
    assert "the shape check stops" not in text


def test_coverage_names_the_first_op_without_a_shape_rule(monkeypatch):
    from verify.checks import shape_rules

    monkeypatch.delitem(shape_rules.RULES, "builtin.slice")
    types, stops = coverage.scan(cases.select(["rs_own_chunk"]))
    assert not types["builtin.slice"].shape_rule and types["builtin.slice"].value_row
    shape = [s for s in stops if s.check == coverage.SHAPE]
    assert len(shape) == 1 and shape[0].op_type == "builtin.slice" and shape[0].program == "main"


def test_an_unchanged_application_is_proved_by_identity_a_changed_one_is_not():
    from verify.engine.application import _identical
    from verify.ir.snapshot import Op, ProgramSnapshot, Var

    def snap(attr):
        s = ProgramSnapshot(ops=[Op(0, "pd_op.scale", {"x": ["a"]}, {"out": ["b"]},
                                    {"scale": attr})], vars={
            "a": Var("a", [2], "float32"), "b": Var("b", [2], "float32")})
        s.feeds = ["a"]
        return s
    assert _identical(snap(2.0), snap(2.0))
    assert not _identical(snap(2.0), snap(3.0))
    other = snap(2.0)
    other.vars["b"] = Var("b", [3], "float32")  # a declaration the pass changed
    assert not _identical(snap(2.0), other)


def _sample():
    return cases.all_cases()[zoo.TEST_SAMPLE]


@needs_models
def test_the_sampled_zoo_case_is_covered_by_rules_and_rows():
    """No check stops at a missing rule or row on any rank of the zoo case
    the tests plan (every zoo case: benchmarks/bench_zoo.py prints the stops)."""
    types, stops = coverage.scan([_sample()])
    assert not stops, stops
    assert {"pd_op.embedding", "pd_op.cross_entropy_with_softmax", "pd_op.rsqrt",
            "pd_op.silu"} <= set(types)


@needs_models
def test_every_cpu_plannable_family_is_covered_by_rules_and_rows(request):
    """``verify coverage`` on every paddleformers family that plans on CPU
    (``zoo.COVERAGE_SAMPLE``: LLaMA, Phi-3, Gemma 3, ERNIE 4.5, each at TP2
    and DP2 x TP2): every op type of every rank has its shape rule and value
    row, no check stops, every case built.  Eight cold plans cost 12-36 min
    on 2 cores, so the gate's default scans the one zoo model its tests plan
    (``zoo.TEST_SAMPLE``) and ``--zoo all`` (and ``python -m verify coverage
    --case 'zoo_*'``) all eight."""
    every = request.config.getoption("verify_zoo", default="sample") == "all"
    chosen = [cases.all_cases()[n] for n in (zoo.COVERAGE_SAMPLE if every else
                                             (zoo.TEST_SAMPLE,))]
    unbuilt = []
    types, stops = coverage.scan(chosen, unbuilt)
    assert not unbuilt, unbuilt
    missing = sorted(n for n, t in types.items() if not (t.shape_rule and t.value_row))
    assert not missing and not stops, (missing, stops)
    assert {c.name for c in chosen} == set().union(*(t.cases for t in types.values()))
    if every:  # ERNIE 4.5's rotary was scanned
        assert {"pd_op.repeat_interleave", "pd_op.strided_slice_grad", "pd_op.flatten",
                "pd_op.stack_grad"} <= set(types)


def test_the_tests_plan_two_zoo_models_and_say_why_they_leave_the_others():
    assert zoo.TEST_SAMPLE in {c.name for c in zoo.DECLARED}
    assert set(zoo.TEST_PLANNED) <= {c.name for c in zoo.DECLARED}
    left = [c for c in zoo.DECLARED if zoo.left_to_the_benchmark(c)]
    assert len(left) == len(zoo.DECLARED) - len(zoo.TEST_PLANNED)
    for c in left:
        why = zoo.left_to_the_benchmark(c)
        assert c.name in why and "--zoo all" in why and "bench_zoo.py" in why
    assert zoo.left_to_the_benchmark(cases.all_cases()["rs_own_chunk"]) is None


@needs_models
def test_the_planned_llama_shape_checks_on_every_rank():
    from verify.checks.shape_check import check_snapshot
    from verify.ir.rank_snapshot import snapshot_of

    case = _sample()
    for rank in case.ranks:
        snap = snapshot_of(case.build(rank), case, rank, "original")
        (res,) = check_snapshot(snap, rank, "original")
        assert res.verdict.value == "EQUIVALENT", res.message


@needs_models
def test_the_planner_on_a_planned_llama_holds_stage_by_stage():
    """The planner family on a real model (the sampled DP2 x TP2 LLaMA,
    ``zoo.TEST_SAMPLE``, the one zoo model the tests plan): every stage recorded at plan time and
    checked on every rank, and the serial run related to each rank's (the
    relation's runs are memoized in the plan dir after the first)."""
    from passes.planner import ADAPTER
    from verify.engine.application import run_application

    case = _sample()
    assert case.name == "zoo_llama_dp2_tp2" and ADAPTER.handles(case)
    app = run_application(ADAPTER, case, numeric=lambda *a: [])
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok][:3]
    stages = {(c.name, c.rank) for c in app.checks if c.name.startswith("after ")}
    assert {(f"after {s}", r) for s in ("serial", "partition", "reshard", "remove",
                                        "dist2dense", "remove_comm")
            for r in case.ranks} <= stages
    rel = [c for c in app.checks if c.name == "planner relation"]
    assert sorted(c.rank for c in rel) == case.ranks and all(c.ok for c in rel)
    # the loss (paddleformers' sum / count, the backward's seed) is compared too
    assert all("loss" in c.details["values"] for c in rel), [c.message for c in rel]


# -- the realistic configuration: DP2 x TP2 with the decoder recomputed ---------
def _recompute_stage(case, rank):
    """``(record, serial snapshot, recompute-stage snapshot)`` of ``rank``."""
    import json

    from passes.planner import _snap

    folder = zoo.planner_dir(case)
    rec = json.loads((folder / f"rank{rank}" / "planner.json").read_text())
    by = {s["stage"]: s for s in rec["stages"]}
    return rec, _snap(folder, rank, by["serial"]["snapshot"]), \
        _snap(folder, rank, by["recompute"]["snapshot"])


@needs_models
def test_the_recomputed_llama_records_its_stage_and_holds_the_recompute_contract():
    """paddleformers' recompute switch and ``strategy.recompute`` make
    Paddle's ``auto_parallel_recompute_pir`` fire on the planned LLaMA
    (``zoo.TEST_RECOMPUTE``): the stage ``recompute`` is recorded between
    the serial program (no clone) and partition on every rank, and the
    recompute adapter (the planner's checks, the relation, the pass's
    contract) holds on every rank."""
    from passes.auto_parallel_recompute_pir import ADAPTER
    from verify.engine.application import run_application

    case = cases.all_cases()[zoo.TEST_RECOMPUTE]
    assert ADAPTER.handles(case) and case.expectation(ADAPTER.name).fires
    for r in case.ranks:
        rec, serial, after = _recompute_stage(case, r)
        names = [s["stage"] for s in rec["stages"]]
        assert names[:3] == ["serial", "recompute", "partition"], names
        assert not any("bwd_recompute_id" in op.attrs for op in serial.ops)
        assert any("bwd_recompute_id" in op.attrs for op in after.ops)
    app = run_application(ADAPTER, case, numeric=lambda *a: [])
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok][:3]
    assert {(c.name, c.rank) for c in app.checks if c.name.startswith("after ")} >= {
        ("after recompute", r) for r in case.ranks}
    for name in ("planner relation", "reads the recomputed value", "activations released",
                 "dropout seeds", "outside the segments"):
        got = [c for c in app.checks if c.name == name]
        assert sorted(c.rank for c in got) == case.ranks and all(c.ok for c in got), \
            (name, [c.message for c in got if not c.ok])


@needs_models
def test_the_recomputed_llama_with_a_backward_kept_on_an_activation_is_caught():
    """The twin: the same stage program with one backward read of a clone
    put back on the forward activation it recomputes (the memory the pass
    exists to save, kept) is CONTRACT_BROKEN, naming the op and the value."""
    import copy

    from passes.auto_parallel_recompute_pir import ADAPTER, BACKWARD, _definers, _role, \
        pair_ops

    case = cases.all_cases()[zoo.TEST_RECOMPUTE]
    _, before, after = _recompute_stage(case, 0)
    origin, clones = pair_ops(before, after)
    defs = _definers(after)
    broken = copy.deepcopy(after)
    for j, op in enumerate(after.ops):
        if j in clones or _role(op) != BACKWARD:
            continue
        hit = [(slot, k, n) for slot, names in op.inputs.items() for k, n in enumerate(names)
               if n in defs and defs[n][0] in clones]
        for slot, k, n in hit:
            c, out_slot, pos = defs[n]
            fwd = next(i for i, o in enumerate(origin) if o == origin[c] and i not in clones)
            activation = after.ops[fwd].outputs[out_slot][pos]
            broken.ops[j].inputs[slot][k] = activation
            break
        if hit:
            break
    got = {c.name: c for c in ADAPTER.contract(case, 0, before, after)}
    assert got["activations released"].ok
    got = {c.name: c for c in ADAPTER.contract(case, 0, before, broken)}
    bad = got["activations released"]
    assert bad.verdict.value == "CONTRACT_BROKEN", bad.message
    assert bad.counterexample["op_index"] == j and bad.counterexample["value"] == activation
    assert bad.counterexample["stage"] == "recompute" and "not recomputed" in bad.message
