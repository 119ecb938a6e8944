"""``auto_parallel_c_embedding_pass`` (``passes/auto_parallel_c_embedding_pass.py``):
the model planned with ``replace_with_c_embedding`` on (fleet's hybrid group
over gloo in the planning processes) related to the same model planned with
it off, and the pass's contract.

* the case where it fires holds: each rank's ``pd_op.c_embedding`` at its
  rows (start_index 0 and 2 of a vocabulary of 4), summed over mp, and the
  ranks relate to the flag-off serial program, the value proof proving every
  watched value (the table's gradient too); the case without a lookup is
  left alone, op for op the flag-off plan;
* the plan edited so that rank 1 writes its table's gradient at rank 0's rows
  (its c_embedding_grad's start_index 0) is NOT_EQUIVALENT: the value proof
  refutes rank 1's gradient (first divergence the c_embedding_grad), rank 0
  still proved;
* the plan with the flag off fed as the pass's output: NOT_APPLIED (the
  sharded table is looked up by no c_embedding);
* a pass that gives rank 1 a start_index one row off (``--paddle-file``, a
  test-time edit of the installed pass: ``tests/planner_mutant_edits.py``) is
  NOT_EQUIVALENT, the contract naming rank 1, the op and the table;
* the planned programs with the all-reduce after the lookup removed are
  NOT_EQUIVALENT, the contract naming the rank, the op, the partial value and
  the matmul that reads it unsummed (the relation's first value off);
* a pass that raises (a test-time edit) is PASS_CRASHED naming the function;
* a table the user left replicated is rewritten all the same: CONTRACT_BROKEN
  by "left alone", the values still relating.
Plans are cached (``cases/planner_models.py``); the mutant plans apart.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

from planner_mutant_edits import write as write_mutant  # noqa: E402

CASE, ABSENT = "planner_c_embedding_tp2", "planner_c_embedding_absent"
TABLE = "embedding_0.w_0.dist"


def _case(name):
    import cases

    return cases.all_cases()[name]


def _apply(case, monkeypatch=None, overlay=None):
    from passes.auto_parallel_c_embedding_pass import ADAPTER
    from verify.engine.application import run_application

    if overlay:  # as --paddle-file does, for the planning processes started
        from verify.ir.paddle_overlay import installed_rel, installed_root, module_of
        from verify.premerge import overlay as ov

        mod, path = module_of(str(write_mutant(overlay, Path(tempfile.mkdtemp()))))
        manifest = ov.write(tempfile.mkdtemp(prefix="c-embedding-mutant-"),
                            {installed_rel(mod): Path(path).read_text()}, installed_root())
        env = ov.child_env(manifest)
        monkeypatch.setenv(ov.ENV, env[ov.ENV])
        monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    return run_application(ADAPTER, case, numeric=lambda *a: [])


def _by(app, name):
    return [c for c in app.checks if c.name == name]


def test_fires_and_relates_to_the_plan_with_the_flag_off():
    app = _apply(_case(CASE))
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    rel = _by(app, "planner relation")
    assert {c.rank for c in rel} == {0, 1} and all(c.verdict.value == "EQUIVALENT" for c in rel)
    contract = _by(app, "c_embedding")
    assert {c.rank for c in contract} == {0, 1}
    assert all(c.verdict.value == "EQUIVALENT" for c in contract)
    starts = {o.rank: [op.attrs["start_index"] for op in o.after.ops
                       if op.type == "pd_op.c_embedding"] for o in app.outcomes}
    assert starts == {0: [0], 1: [2]}
    # the reference is the other plan: a lookup of the gathered table
    assert all(any(op.type == "pd_op.embedding" for op in o.before.ops) for o in app.outcomes)


def _proofs(app):
    return {c.rank: c for c in app.checks if c.kind == "value"}


def test_every_watched_value_is_proved_the_tables_gradient_too():
    """The value proof proves every watched value on both ranks, the table's
    gradient and its update included: c_embedding_grad's selection terms are
    the serial lookup's (``semantics._c_select``), not its own."""
    app = _apply(_case(CASE))
    assert app.verdict.value == "EQUIVALENT" and app.proof == "proved", \
        [c.message for c in app.checks if c.kind == "value"]
    for rank, c in _proofs(app).items():
        assert c.verdict.value == "EQUIVALENT" and not c.details["unknown"], (rank, c.message)
        assert {f"{TABLE}@GRAD", f"{TABLE} (after the step)"} <= set(c.details["proved"])


def _grad_start_index(src: Path, dest: Path, rank: int, start: int) -> Path:
    """A copy of the plan ``src`` whose rank ``rank`` writes its table's
    gradient at ``start_index`` ``start`` (its main program's
    pd_op.c_embedding_grad edited in the serialised program; the forward
    lookup and every other rank as planned)."""
    shutil.copytree(src, dest)
    main = dest / f"rank{rank}" / "main.json"
    prog = json.loads(main.read_text())
    edited = 0
    for region in prog["program"]["regions"]:
        for block in region["blocks"]:
            for op in block["ops"]:
                if op.get("#", "").endswith(".c_embedding_grad"):
                    for attr in op["A"]:
                        if attr["N"] == "start_index":
                            attr["AT"]["D"], edited = start, edited + 1
    assert edited == 1, edited
    main.write_text(json.dumps(prog))
    return dest


def test_a_gradient_written_to_another_ranks_rows_is_refuted(tmp_path):
    """Rank 1's c_embedding_grad at start_index 0 (rank 0's rows) while its
    lookup reads rows 2 and 3: the loss and everything before the table's
    gradient still hold; the value proof refutes the gradient on rank 1
    with replayed values, its first value off the c_embedding_grad, and
    still proves rank 0 (the planned twin: the test above)."""
    from passes.planner import planner_dir

    case = _case(CASE)
    broken = _grad_start_index(planner_dir(case), tmp_path / "plan", 1, 0)
    params = {k: v for k, v in case.params.items() if k != "planner"}
    app = _apply(dataclasses.replace(case, params={**params, "dir": str(broken)}))
    assert app.verdict.value == "NOT_EQUIVALENT", [c.message for c in app.checks][:4]
    proofs = _proofs(app)
    assert proofs[0].verdict.value == "EQUIVALENT", proofs[0].message
    bad = proofs[1]
    assert bad.verdict.value == "NOT_EQUIVALENT", bad.message
    assert "loss" in bad.details["proved"] and f"{TABLE}@GRAD" in bad.details["refuted"]
    cex = bad.counterexample
    assert cex["rank"] == 1 and cex["var"] == f"{TABLE}@GRAD", cex
    assert cex["first_divergence"]["op_type"] == "pd_op.c_embedding_grad", cex
    assert cex["inputs"], cex  # values a user can feed, replayed


def test_left_alone_where_there_is_no_lookup():
    app = _apply(_case(ABSENT))
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    alone = _by(app, "left alone")
    assert {c.rank for c in alone} == {0, 1} and all(c.verdict.value == "EQUIVALENT"
                                                     for c in alone)
    assert not _by(app, "c_embedding")


def test_the_plan_with_the_flag_off_is_not_applied():
    """The contract on programs where the pass did nothing: the sharded table
    is looked up by no pd_op.c_embedding on any rank."""
    from passes import auto_parallel_c_embedding_pass as P
    from passes.planner import planner_dir

    case = _case(CASE)
    ref = P.reference_dir(case)
    recs = P._records(ref, case.ranks)
    finals = P._finals(ref, case.ranks)
    got = P.contract_checks(P.ADAPTER.name, case, ref, ref, recs, recs, finals, finals)
    assert [c.verdict.value for c in got] == ["NOT_APPLIED", "NOT_APPLIED"], got
    assert got[0].counterexample == {"rank": 0, "value": TABLE, "var": TABLE}
    assert planner_dir(case) != ref


def test_a_start_index_one_row_off_is_refuted(monkeypatch):
    app = _apply(_case(CASE), monkeypatch, overlay="c_embedding_start_off")
    assert app.verdict.value == "NOT_EQUIVALENT", [c.message for c in app.checks][:4]
    bad = [c for c in _by(app, "c_embedding") if c.verdict.value == "CONTRACT_BROKEN"]
    assert {c.rank for c in bad} == {1}, [c.message for c in bad]
    cex = bad[0].counterexample
    assert cex["op_type"] == "pd_op.c_embedding" and cex["value"] == TABLE
    assert (cex["start_index"], cex["expected"]) == (3, 2) and cex["op_index"] >= 0
    wrong = [c for c in app.checks if c.kind in ("value", "numeric")
             and c.verdict.value == "NOT_EQUIVALENT"]
    assert {c.kind for c in wrong} == {"value", "numeric"}, [c.message for c in wrong]
    for c in wrong:  # localised: the lookup's partial sum is the first value off
        first = c.counterexample["first_divergence"]
        assert c.counterexample["rank"] == c.rank in (0, 1)
        assert (first["op_type"], first["stage"]) == ("pd_op.c_embedding", "c_embedding")
        assert first["placement"]["partial"] == {"1": "SUM"} and first["value"]


def _without_all_reduce(src: Path, dest: Path) -> Path:
    """A copy of the plan ``src`` whose ranks' main programs read the
    partial lookup directly: the all-reduce after each pd_op.c_embedding
    erased, its readers re-pointed to its operand."""
    import paddle

    from verify.ir.pir_snapshot import export_programs
    from verify.plan.pir_rank import load_rank

    shutil.copytree(src, dest)
    for rank_dir in sorted(dest.glob("rank*")):
        main, startup, names, meta = load_rank(rank_dir)
        with paddle.pir_utils.IrGuard():
            ops = main.global_block().ops
            for op in ops:
                if op.name() == "pd_op.c_embedding":
                    for user in op.result(0).all_used_ops():
                        if user.name() == "pd_op.all_reduce":
                            user.result(0).replace_all_uses_with(op.result(0))
                            user.erase()
            exported = export_programs(main, startup, names)
        rec = json.loads((rank_dir / "planner.json").read_text())  # the records alike
        gone = {op["results"][0]: op["operands"][0] for op in rec["final_ops"]
                if op["type"] == "pd_op.all_reduce" and op["operands"]
                and any(o["type"] == "pd_op.c_embedding" and op["operands"][0] in o["results"]
                        for o in rec["final_ops"])}
        rec["final_ops"] = [op for op in rec["final_ops"]
                            if not (op["results"] and op["results"][0] in gone)]
        for op in rec["final_ops"]:
            op["operands"] = [gone.get(o, o) for o in op["operands"]]
        (rank_dir / "planner.json").write_text(json.dumps(rec))
        (rank_dir / "main.json").write_bytes(exported["main"])
        (rank_dir / "names.json").write_text(json.dumps(exported["names"]))
        meta["counter"] = exported["counter"]
        (rank_dir / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return dest


def test_a_lookup_not_summed_over_the_vocab_axis_is_refuted(tmp_path):
    from passes.planner import planner_dir

    case = _case(CASE)
    broken = _without_all_reduce(planner_dir(case), tmp_path / "plan")
    params = {k: v for k, v in case.params.items() if k != "planner"}
    app = _apply(dataclasses.replace(case, params={**params, "dir": str(broken)}))
    assert app.verdict.value == "NOT_EQUIVALENT", [c.message for c in app.checks][:4]
    bad = [c for c in _by(app, "c_embedding") if c.verdict.value == "CONTRACT_BROKEN"]
    assert {c.rank for c in bad} == {0, 1}, [c.message for c in bad]
    cex = bad[0].counterexample
    assert cex["op_type"] == "pd_op.c_embedding" and cex["reader_type"] == "pd_op.matmul"
    assert cex["expected_ring"] == [0, 1] and cex["value"].startswith("%")
    rel = [c for c in _by(app, "planner relation") if c.verdict.value == "NOT_EQUIVALENT"]
    assert {c.rank for c in rel} == {0, 1}, [c.message for c in app.checks]
    for c in rel:  # the first value off: the matmul reading the unsummed lookup
        first = c.counterexample["first_divergence"]
        assert first["op_type"] == "pd_op.matmul" and first["stage"] == "c_embedding"
        assert first["stage_op"]["op_type"] == "pd_op.c_embedding"



def test_the_pass_needs_fleets_hybrid_group():
    """Why the model file builds fleet's hybrid group (``examples/c_embedding_of.py``):
    without ``fleet.init`` the pass raises before it reads the program."""
    import paddle
    import pytest
    from paddle.distributed.passes import new_pass

    c_embedding = new_pass("auto_parallel_c_embedding_pass", {"concrete_program": None})
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with pytest.raises(AttributeError, match="'Fleet' object has no attribute '_hcg'"):
            c_embedding.apply([main], [startup])


def test_a_pass_that_raises_is_pass_crashed(monkeypatch):
    """The pass runs in the planning process before the recorded stages: a
    failure whose traceback runs through the pass's module is the pass's
    (PASS_CRASHED, naming the rank, the function and the error)."""
    app = _apply(_case(CASE), monkeypatch, overlay="c_embedding_raises")
    assert app.verdict.value == "PASS_CRASHED", [c.message for c in app.checks]
    bad = [c for c in app.checks if c.verdict.value == "PASS_CRASHED"]
    cex = bad[0].counterexample
    assert cex["function"] == "_replace_embedding_with_c_embedding"
    assert cex["rank"] in (0, 1) and "c_embedding mutant" in cex["error"], cex


def test_a_replicated_table_is_rewritten_all_the_same():
    """Where the user left the table replicated the pass must leave the lookup
    alone (its pattern: a table sharded on vocab); 3.3.1's pass rewrites every
    lookup and shards the table: CONTRACT_BROKEN naming the rank, the op, the
    table and both placements, while the values still relate."""
    app = _apply(_case("planner_c_embedding_replicated"))
    assert app.verdict.value == "CONTRACT_BROKEN", [c.message for c in app.checks if not c.ok]
    bad = [c for c in app.checks if not c.ok and not c.advisory]
    assert {(c.name, c.rank) for c in bad} == {("left alone", 0), ("left alone", 1)}
    cex = bad[0].counterexample
    assert (cex["op_type"], cex["value"]) == ("pd_op.c_embedding", TABLE)
    assert (cex["placement_flag_off"], cex["placement"]) == ([-1, -1], [1, -1])
    assert all(c.verdict.value == "EQUIVALENT" for c in _by(app, "planner relation"))
