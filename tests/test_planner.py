"""The planner family (``passes/planner.py``): Paddle's PIR planner checked
stage by stage and the serial program related to every rank's program.

* the placement relation itself on concrete values (Shard, Replicate,
  Partial SUM/AVG/MAX, a 2-D mesh, process ids that are not 0..n-1);
* the planner's own built-in cases hold (EQUIVALENT, each check decided);
* mutants of the planner's parts, applied as a user's changed Paddle module
  (``--paddle-file``, ``tests/planner_mutant_edits.py``), are caught NOT_EQUIVALENT
  naming the stage, the value and the rank: an s_to_r that concatenates the
  gathered pieces in reverse order, an r_to_s that keeps its neighbour's
  chunk, a p_to_r that reduces over the whole job instead of its group;
* a stage that raises is PASS_CRASHED with its traceback and the later
  stages are reported not run.

Plans are cached (``cases/planner_models.py``); a mutant plans apart (the
overlay's hash is in the cache key), once.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from verify.numeric.placements import (PlacementError, assemble_global, assembled_per_rank,
                               describe, global_shape, input_piece, local_piece)

from planner_mutant_edits import write as write_mutant  # noqa: E402


def _p(ids, shape, dm, partial=None):
    return {"process_ids": ids, "mesh_shape": shape, "dims_mapping": dm,
            "partial": partial or {}}


# -- the relation on concrete values ------------------------------------------
def test_shard_pieces_concatenate_to_the_global_value():
    g = np.arange(24.0).reshape(4, 6)
    p = _p([0, 1], [2], [-1, 0])  # Shard(1) on 2 ranks
    a, b = local_piece(g, p, 0), local_piece(g, p, 1)
    assert np.array_equal(np.concatenate([a, b], axis=1), g)
    assert describe(p) == "[Shard(1)]"
    assert np.array_equal(assemble_global({0: a, 1: b}, p), g)
    assert global_shape(a.shape, p) == [4, 6]


def test_replicate_and_mesh_ids_not_from_zero():
    g = np.arange(6.0)
    p = _p([2, 3], [2], [-1])
    assert np.array_equal(local_piece(g, p, 3), g)
    with pytest.raises(PlacementError):
        local_piece(g, p, 0)  # not in the mesh


def test_partial_reduces_along_its_axis_only():
    # DP2 x TP2, a value Partial(SUM) over the TP axis (1), Shard(0) over DP (0)
    p = _p([0, 1, 2, 3], [2, 2], [0, -1], {"1": "SUM"})
    pieces = {0: np.array([[1.0]]), 1: np.array([[2.0]]), 2: np.array([[5.0]]),
              3: np.array([[7.0]])}
    got = assembled_per_rank(pieces, p)
    assert got[0][0, 0] == got[1][0, 0] == 3.0 and got[2][0, 0] == got[3][0, 0] == 12.0
    assert np.array_equal(assemble_global(pieces, p), np.array([[3.0], [12.0]]))
    mx = _p([0, 1], [2], [-1], {"0": "MAX"})
    assert assembled_per_rank({0: np.array([1.0]), 1: np.array([4.0])}, mx)[0][0] == 4.0
    avg = _p([0, 1], [2], [], {"0": "AVG"})
    assert assembled_per_rank({0: np.array(1.0), 1: np.array(4.0)}, avg)[1] == 2.5


def test_input_pieces_of_a_partial_sum_add_up():
    p = _p([0, 1], [2], [-1], {"0": "SUM"})
    g = np.array([3.0, 4.0])
    assert np.array_equal(input_piece(g, p, 0) + input_piece(g, p, 1), g)


def test_uneven_split_is_refused():
    with pytest.raises(PlacementError):
        local_piece(np.zeros(5), _p([0, 1], [2], [0]), 0)


def test_a_state_written_coarser_than_read_gives_the_ranks_piece():
    """A startup's state at the global shape, or at the parameter's TP piece
    not yet split over dp (a sharded optimizer on DP x TP), gives the
    piece the rank's program reads: the same as slicing the global value."""
    from verify.numeric.placements import piece_from_coarser

    g = np.arange(64.0).reshape(8, 8)
    p = _p([0, 1, 2, 3], [2, 2], [0, 1])  # Shard(0) over dp, Shard(1) over mp
    for r in range(4):
        want = local_piece(g, p, r)
        assert np.array_equal(piece_from_coarser(g, [4, 4], p, r), want)
        tp_piece = local_piece(g, _p([0, 1, 2, 3], [2, 2], [-1, 1]), r)  # [8, 4]
        assert np.array_equal(piece_from_coarser(tp_piece, [4, 4], p, r), want)
        assert np.array_equal(piece_from_coarser(want, [4, 4], p, r), want)
    assert piece_from_coarser(np.zeros((3, 4)), [4, 4], p, 0) is None


def test_vector_results_are_not_watched():
    """A carried-over op's vector result (builtin.combine) cannot be fetched:
    only results with a tensor placement are related."""
    from verify.numeric.planner_runs import serial_counterparts

    plc = {"process_ids": [0, 1], "mesh_shape": [2], "dims_mapping": [-1], "partial": {}}
    ops = [{"type": "pd_op.relu", "results": ["a"], "serial": ["A"], "placements": [plc],
            "operands": [], "origin": "serial"},
           {"type": "builtin.combine", "results": ["v"], "serial": ["V"],
            "placements": [None], "operands": ["a", "a"], "origin": "serial"}]
    assert serial_counterparts(ops) == {"a": "A"}


# -- the planner on its cases ------------------------------------------------
def _apply(case_name, overlay=None, monkeypatch=None):
    import cases
    from passes.planner import ADAPTER
    from verify.engine.application import run_application

    if overlay:  # as --paddle-file does: the premerge overlay, for the processes started
        import tempfile

        from verify.ir.paddle_overlay import installed_rel, installed_root, module_of
        from verify.premerge import overlay as ov

        files = {}
        for name in overlay:  # each mutant written from the installed module
            mod, path = module_of(str(write_mutant(name, Path(tempfile.mkdtemp()))))
            files[installed_rel(mod)] = Path(path).read_text()
        manifest = ov.write(tempfile.mkdtemp(prefix="planner-mutant-"), files,
                            installed_root())
        env = ov.child_env(manifest)
        monkeypatch.setenv(ov.ENV, env[ov.ENV])
        monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    case = cases.all_cases()[case_name]
    return run_application(ADAPTER, case, numeric=lambda *a: [])


def _relation(app):
    return [c for c in app.checks if c.name == "planner relation"]


@pytest.mark.parametrize("case_name", ["planner_tp2", "planner_dp2_tp2",
                                       "planner_tp2_ids23", "planner_sub_mesh_ids23"])
def test_planner_cases_hold(case_name):
    app = _apply(case_name)
    assert app.verdict.value == "EQUIVALENT", [c.message for c in app.checks if not c.ok]
    rel = _relation(app)
    assert len(rel) == len(app.ranks) and all(c.ok for c in rel)
    stages = {c.name for c in app.checks if c.name.startswith("after ")}
    assert stages == {"after serial", "after partition", "after reshard", "after remove",
                      "after dist2dense", "after remove_comm"}


def test_gradient_merge_is_a_stage_of_its_own():
    """A plan made with gradient merge records the engine's gradient-merge
    pass as a stage between remove and dist2dense (``verify/plan/stages.py``
    wraps its ``new_pass``), so a wrong type it makes is named there: 3.3.1
    types each sharded accumulator's zeroing with the global shape
    (CONTRACT_BROKEN: a declared shape lies; the values relate)."""
    app = _apply("planner_tp2_gm")
    r0 = app.ranks[0]
    assert [c.name for c in app.checks if c.name.startswith("after ") and c.rank == r0] == [
        "after serial", "after partition", "after reshard", "after remove",
        "after gradient_merge", "after dist2dense", "after remove_comm"]
    bad = [c for c in app.checks if not c.ok and not c.advisory]
    assert app.verdict.value == "CONTRACT_BROKEN" and bad  # the types lie, the values hold
    assert {c.name for c in bad} == {"after gradient_merge"}, [c.message for c in bad]
    cex = bad[0].counterexample
    assert cex["op_type"] == "pd_op.set_value_with_tensor_" and cex["declared"] != cex["inferred"]
    # the accumulators' reads have their writer: the stage's startup program
    # (recorded from the gradient merge on) zero-fills them
    inner = [x for c in bad for x in c.details["checks"] if x["kind"] == "dataflow"]
    assert all(x["verdict"] == "EQUIVALENT" for x in inner), inner
    # later stages keep the stale types: inherited, not blamed again
    later = [c for c in app.checks if c.name in ("after dist2dense", "after remove_comm")]
    assert later and all(c.verdict.value == "EQUIVALENT" for c in later)


def _caught(app, stage):
    bad = [c for c in _relation(app) if c.verdict.value == "NOT_EQUIVALENT"]
    assert app.verdict.value == "NOT_EQUIVALENT", [c.message for c in app.checks][:4]
    assert bad, "no rank's relation failed"
    cex = bad[0].counterexample
    assert cex["rank"] == bad[0].rank and cex["value"] and cex["stage"] == stage, cex
    return cex


def test_s_to_r_gathering_in_reverse_order_is_caught(monkeypatch):
    app = _apply("planned_row_sp_pir", ["s_to_r_reversed"], monkeypatch)
    cex = _caught(app, "reshard")
    assert cex["first_divergence"]["stage_op"]["op_type"] == "pd_op.concat"


def test_r_to_s_keeping_the_wrong_chunk_is_caught(monkeypatch):
    app = _apply("planned_row_sp_pir", ["r_to_s_neighbour"], monkeypatch)
    cex = _caught(app, "reshard")
    assert cex["first_divergence"]["stage_op"]["op_type"] == "pd_op.slice"


def test_p_to_r_over_the_wrong_group_is_caught(monkeypatch):
    app = _apply("planner_dp2_tp2", ["p_to_r_world"], monkeypatch)
    cex = _caught(app, "reshard")
    assert cex["first_divergence"]["stage_op"]["op_type"].startswith("pd_op.all_reduce")


def test_a_raising_stage_is_pass_crashed_and_later_stages_not_run(monkeypatch):
    app = _apply("planner_tp2", ["p_to_r_raises"], monkeypatch)
    crashed = [c for c in app.checks if c.verdict.value == "PASS_CRASHED"]
    assert app.verdict.value == "PASS_CRASHED" and crashed
    assert all(c.name == "after reshard" and "traceback" in c.details for c in crashed)
    not_run = {c.name for c in app.checks if "not run" in c.message}
    assert {"after remove", "after dist2dense", "after remove_comm"} <= not_run


def test_a_stage_that_kills_the_process_is_pass_crashed_from_its_trace(monkeypatch):
    """A stage that aborts the planning process (SIGABRT: no Python
    exception, no records written by the process) is PASS_CRASHED at that
    stage from the trace the process left (``crash_records.py``), naming the
    signal; the stages before it ran but were lost with the process
    (advisory), the later ones not run."""
    app = _apply("planner_tp2", ["p_to_r_aborts"], monkeypatch)
    crashed = [c for c in app.checks if c.verdict.value == "PASS_CRASHED"]
    assert app.verdict.value == "PASS_CRASHED" and crashed, [c.message for c in app.checks]
    assert {c.name for c in crashed} == {"after reshard"}
    assert all("killed by SIGABRT" in c.details["traceback"] for c in crashed)
    lost = {c.name for c in app.checks if c.details.get("lost")}
    assert {"after serial", "after partition"} <= lost
    assert all(c.advisory for c in app.checks if c.details.get("lost"))
    not_run = {c.name for c in app.checks if "not run" in c.message}
    assert {"after remove", "after dist2dense", "after remove_comm"} <= not_run


def test_crash_records_without_a_trace_write_nothing(tmp_path):
    """A process that died outside every stage (no ``running.json``) gets no
    records: the build fails naming the rank instead (``plan_model``)."""
    from verify.plan.crash_records import how_it_died, write_killed

    assert not write_killed(tmp_path, -6, "boom") and not (tmp_path / "planner.json").exists()
    assert how_it_died(-6) == "killed by SIGABRT" and how_it_died(3) == "exit 3"


def test_a_version_1_program_dir_still_reads_and_has_no_planner_application(tmp_path):
    """Format version 2 adds the planner records; a version-1 PIR dir (no
    records) loads as before and the planner family does not pair with it."""
    import shutil

    import cases
    from cases.program_dirs import load_program_dir
    from passes.planner import ADAPTER, planner_dir

    src = planner_dir(cases.all_cases()["planner_tp2"])
    old = tmp_path / "v1"
    shutil.copytree(src, old)
    for f in [old / "plan.json"] + list(old.glob("rank*/meta.json")):
        data = json.loads(f.read_text())
        data["version"] = 1
        f.write_text(json.dumps(data))
    for r in (0, 1):
        for extra in ("planner.json", "serial.json"):
            (old / f"rank{r}" / extra).unlink()
        shutil.rmtree(old / f"rank{r}" / "stages")
    case = load_program_dir(str(old))
    assert case.ir == "pir" and case.ranks == [0, 1]
    assert not ADAPTER.handles(case)
    assert ADAPTER.handles(load_program_dir(str(src)))


def test_partition_reading_a_partial_operand_as_it_is_is_caught(monkeypatch):
    """A partition mutant (not one that keeps another rank's op: no case here
    has a sub-mesh): the reshard of a Partial operand is not inserted, so
    its consumer reads one rank's addend; the divergence is that consumer's
    own output (its inputs still relate), blamed on partition."""
    app = _apply("planner_tp2", ["partition_keeps_partial"], monkeypatch)
    cex = _caught(app, "partition")
    assert cex["first_divergence"]["op_type"] in ("pd_op.add", "pd_op.layer_norm_grad")


def test_the_sub_mesh_case_prunes_the_head_from_the_rank_outside_it():
    """The case the next test's mutant needs: on the mesh [2, 3] the head
    lives on the sub-mesh [2]; rank 3's remove stage drops its ops (and its
    parameters), rank 2 keeps them, and the broadcast back is simulated."""
    import cases
    from passes.planner import planner_dir

    folder = planner_dir(cases.all_cases()["planner_sub_mesh_ids23"])
    held = {}
    for r in (2, 3):
        rec = json.loads((folder / f"rank{r}" / "planner.json").read_text())
        held[r] = set(rec["relation"]["parameters"])
        params = {st["stage"]: sum(o["type"] == "builtin.parameter" for o in json.loads(
            (folder / f"rank{r}" / st["snapshot"]).read_text())["ops"]) for st in rec["stages"]}
        assert params["reshard"] == 4 and params["remove"] == (4 if r == 2 else 2), params
    assert len(held[2]) == 4 and held[3] < held[2] and len(held[3]) == 2


def test_foreign_values_are_the_state_placed_on_meshes_without_the_rank():
    from passes.planner import foreign_values

    on = lambda ids: {"process_ids": ids, "mesh_shape": [len(ids)],  # noqa: E731
                      "dims_mapping": [-1], "partial": {}}
    rel = {"parameters": {"w": {"placement": on([2, 3])}, "h": {"placement": on([2])}},
           "feeds": {"m": {"placement": on([2]), "persistable": True},
                     "x": {"placement": on([2]), "persistable": False}}}
    assert [n for n, _ in foreign_values(rel, 3)] == ["h", "m"]
    assert foreign_values(rel, 2) == []


def test_a_remove_stage_keeping_another_ranks_op_is_caught(monkeypatch):
    """Rank 3 keeps the head's ops of the sub-mesh [2] (and so holds and
    updates the head's parameters, of which its placement gives it no
    piece): NOT_EQUIVALENT on rank 3, naming the parameter and the stage
    that should have pruned it; rank 2's program is unchanged and holds."""
    app = _apply("planner_sub_mesh_ids23", ["remove_keeps_other_rank_op"], monkeypatch)
    assert app.verdict.value == "NOT_EQUIVALENT"
    bad = [c for c in app.checks if c.verdict.value == "NOT_EQUIVALENT"]
    # the parameter-shape check and the placement coverage (which also finds
    # rank 3 holding what its mesh does not place there), both on rank 3 only
    assert {c.rank for c in bad} == {3}, [c.message for c in bad]
    cex = next(c for c in bad if c.name == "parameter shapes").counterexample
    assert cex["rank"] == 3 and cex["stage"] == "remove" and cex["mesh"] == [2]
    assert cex["value"].startswith("linear_1."), cex
    assert any(c.name == "parameter shapes" and c.rank == 2 and c.ok for c in app.checks)


def test_paddle_file_names_the_installed_module_it_replaces(tmp_path):
    from verify.ir.paddle_overlay import (OverlayError, command_flags, module_of,
                                          source_label)

    mod, path = module_of(str(write_mutant("s_to_r_reversed", tmp_path)))  # by its file name
    assert mod == "paddle.distributed.auto_parallel.static.reshard_funcs.s_to_r_reshard_func"
    tree = tmp_path / "Paddle" / "python" / "paddle" / "distributed" / "auto_parallel"
    tree.mkdir(parents=True)
    (tree / "api.py").write_text("")  # as it sits in Paddle's source tree
    assert module_of(str(tree / "api.py"))[0] == "paddle.distributed.auto_parallel.api"
    with pytest.raises(OverlayError):
        module_of(str(tmp_path / "missing.py"))
    (tmp_path / "__init__.py").write_text("")
    with pytest.raises(OverlayError):  # many installed modules have that name
        module_of(str(tmp_path / "__init__.py"))
    label = source_label({mod: path})
    assert command_flags(label) == f" --paddle-file {path}"
    assert command_flags("installed") == "" and command_flags("/x/p.py") == " --pass-file /x/p.py"


# -- a plan made with gradient merge: the ranks' job schedule ----------------
def test_a_merged_plan_is_related_through_its_job_schedule():
    """The ranks of a plan made with gradient merge run as Paddle's jobs,
    ``[forward, backward] * k + [optimize]``, against the serial program's
    micro-steps with the gradients merged (their mean, ``avg``): every
    micro-step's loss, the merged gradients and the updates relate, for two
    optimizer steps (``verify/numeric/merged_relation.py``); averaged on TP2,
    summed on DP2 (each optimizer reads its accumulator as it is, all-reduced
    in the optimize job)."""
    app = _apply("planner_tp2_gm")
    rel = _relation(app) + _relation(_apply("planner_dp2_gm_sum"))
    assert len(rel) == 4 and all(c.verdict.value == "EQUIVALENT" for c in rel), \
        [c.message for c in rel]
    values = rel[0].details["values"]
    assert "loss (micro-step 1)" in values and "loss (micro-step 2)" in values
    assert "2 optimizer steps of 2 micro-steps" in rel[0].message
    # the schedule's value proof (verify/value/merged_relation.py): proved on every rank
    proofs = [c for c in app.checks if c.name == "planner relation proof"]
    assert len(proofs) == 2 and all(c.verdict.value == "EQUIVALENT" for c in proofs), \
        [c.message for c in proofs]


def test_a_merge_that_does_not_average_is_caught(monkeypatch):
    """The merge's 1/k scale left out: the optimizer reads the sum of the k
    micro-batch gradients where the strategy asks for their mean."""
    app = _apply("planner_tp2_gm", ["gm_no_avg_scale"], monkeypatch)
    cex = _caught(app, "gradient_merge")
    assert cex["step"] == 0 and cex["value"].endswith("@GRAD"), cex
    assert cex["serial"] == pytest.approx(cex["rank_piece"] / 2, rel=1e-4, abs=1e-6)
    # the proof of the merged schedule refutes it too, for the real mutant's plan
    proofs = [c for c in app.checks if c.name == "planner relation proof"]
    assert proofs and all(c.verdict.value == "NOT_EQUIVALENT" for c in proofs), \
        [c.message for c in proofs]
    assert all(c.counterexample["stage"] == "gradient_merge" for c in proofs)


def test_an_accumulator_never_zeroed_is_caught_at_the_second_update(monkeypatch):
    """Without the zeroing after the update the second optimizer step merges
    the first step's gradients again: the first step relates, the second not."""
    app = _apply("planner_tp2_gm", ["gm_never_zeroed"], monkeypatch)
    bad = [c for c in _relation(app) if c.verdict.value == "NOT_EQUIVALENT"]
    assert bad, [c.message for c in _relation(app)]
    cex = bad[0].counterexample
    assert cex["step"] == 1 and cex["value"].endswith("@GRAD"), cex
    # the proof: the accumulators are not back at zero, and the second step differs
    proofs = [c for c in app.checks if c.name == "planner relation proof"]
    assert proofs and all(c.verdict.value == "NOT_EQUIVALENT" for c in proofs), \
        [c.message for c in proofs]
    assert all(c.counterexample["value"].endswith("(step 2)") for c in proofs)


def test_a_merged_run_that_updates_before_the_optimize_job_is_caught():
    """The comparison of a merged plan's runs (``compare_runs`` with
    ``micro_steps``): a parameter must be unchanged after each micro-step's
    accumulate job (the update is deferred); one that moved after micro-step
    1 is NOT_EQUIVALENT naming that micro-step, even when the final update
    happens to agree; the faithful runs relate."""
    from verify.numeric.planner_runs import compare_runs

    rep = _p([0, 1], [2], [-1])
    serial_rel = {"loss": "L", "params": {"w": {"param": "w", "grad": "g", "shape": [3]}}}
    rank_rels = {r: {"loss": "l", "loss_placement": _p([0, 1], [2], []),
                     "params": {"w": {"param": "w", "grad": "gm", "placement": rep,
                                      "grad_placement": rep}}} for r in (0, 1)}
    w0, w1 = np.array([1.0, 2.0, 3.0], "float32"), np.array([0.5, 1.5, 2.5], "float32")
    serial = [{"L@micro0": np.float32(1), "L@micro1": np.float32(2), "g@merged": w0 - w1,
               "w": w1, "w@micro0": w0, "w@micro1": w0}]

    def rank(moved):
        return [{"l@micro0": np.float32(1), "l@micro1": np.float32(2), "gm": w0 - w1,
                 "w": w1, "w@micro0": w0 + (0.25 if moved else 0), "w@micro1": w0}]

    ok = compare_runs("t", serial_rel, rank_rels, {}, serial,
                      {0: rank(False), 1: rank(False)}, 1, micro_steps=2)
    assert [c.verdict.value for c in ok] == ["EQUIVALENT", "EQUIVALENT"], [c.message for c in ok]
    assert "w (after micro-step 2)" in ok[0].details["values"]
    bad = compare_runs("t", serial_rel, rank_rels, {}, serial,
                       {0: rank(True), 1: rank(False)}, 1, micro_steps=2)
    assert bad[0].verdict.value == "NOT_EQUIVALENT", bad[0].message
    assert bad[0].counterexample["value"] == "w (after micro-step 1)"


def test_a_merged_program_is_run_as_its_job_schedule():
    """A differential run of merged rank programs (the original against a
    pass's rewrite, ``pir_runner.run_ranks``) drives both as the Engine's
    jobs (``merge_k``), so a rewrite that moves the scale and the update into
    the backward role (an update every micro-step instead of one per k)
    differs from the original there, while running each program whole per
    step cannot tell them apart (same ops, same order)."""
    import paddle

    import cases
    from verify.ir.pir_snapshot import snapshot_rank
    from verify.numeric.pir_runner import run_ranks

    import dataclasses

    from passes.planner import planner_dir
    from verify.plan.pir_rank import rings_of

    case = cases.all_cases()["planner_tp2_gm"]
    # a planner-family case states no rings: the plan's (as a program dir's case does)
    case = dataclasses.replace(case, rings=rings_of(planner_dir(case), case.ranks))
    r0 = case.ranks[0]

    def programs(move):
        rps = {r: case.build(r) for r in case.ranks}
        if move:  # the scale and the update given the backward role (the zeroing kept)
            with paddle.pir_utils.IrGuard():
                for rp in rps.values():
                    ops = list(rp.main.global_block().ops)
                    zeroing = {o.id() for o in ops if o.name() == "pd_op.set_value_with_tensor_"}
                    for o in ops:
                        if o.name() == "pd_op.set_value_with_tensor_":
                            zeroing |= {v.get_defining_op().id() for v in o.operands_source()
                                        if v.initialized() and v.get_defining_op()}
                    for o in ops:
                        if o.op_role == 2 and o.id() not in zeroing:
                            o.op_role = 1
        return rps

    def losses(rps, merge_k):
        snaps = {r: snapshot_rank(rp) for r, rp in rps.items()}
        out = run_ranks(case, rps, snaps, {r: [rp.loss] for r, rp in rps.items()}, 0, 2,
                        "test", merge_k=merge_k)
        return [float(step[rps[r0].loss]) for step in out[r0]]

    original, rewritten = programs(False), programs(True)
    assert getattr(original[r0], "merge", None) == {"k_steps": 2, "avg": True}
    whole = losses(original, None), losses(rewritten, None)
    assert whole[0] == whole[1]  # the roles do not matter to a program run whole
    jobs = losses(original, 2), losses(rewritten, 2)
    assert jobs[0][0] != pytest.approx(jobs[1][0], rel=1e-6, abs=1e-9), jobs
