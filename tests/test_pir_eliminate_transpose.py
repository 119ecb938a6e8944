"""``eliminate_transpose_by_reshape`` (``fused_passes`` ``eliminate_transpose``)
on the ``pir_transpose`` family.

The installed function replaces a dim-0/dim-1 transpose (and its grad) of a
size-1 dim by a reshape: the contract holds and the values are proved.  A
test-time edit of the installed ``pir_pass.py`` (``tests/planner_mutant_edits.py``
``eliminate_transpose_any_dims``, loaded with ``--paddle-file``) that drops the
size-1 condition rewrites the bs=2 transpose, which moves elements: caught by
the contract (fired where its pattern is absent) and refuted by the value
proof on the transpose's result, beside the bs=1 cases still equivalent.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import cases
import passes
from verify.ir.rank_snapshot import snapshot_of as _snapshot
from verify.verdicts import Verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from planner_mutant_edits import write as write_mutant  # noqa: E402


def _apply(case_name):
    adapter = passes.get("elim_transpose")
    case = cases.all_cases()[case_name]
    run = adapter.apply_local(case, 0)
    b = _snapshot(run.original, case, 0, "original")
    a = _snapshot(run.rewritten, case, 0, "rewritten")
    return adapter, b, a, run, adapter.contract(case, 0, b, a)


def test_size_one_transposes_become_reshapes():
    for name in ("pir_transpose_bs1", "pir_transpose_seq1", "pir_transpose_bs1_dynamic_seq"):
        adapter, before, after, run, results = _apply(name)
        assert run.error is None, run.error
        assert len(before.ops_of_type("pd_op.transpose")) == 1
        assert len(before.ops_of_type("pd_op.transpose_grad")) == 1
        assert not after.ops_of_type("pd_op.transpose")
        assert not after.ops_of_type("pd_op.transpose_grad")
        assert {r.verdict for r in results} == {Verdict.EQUIVALENT}, \
            [r.message for r in results]
        (ok,) = [r for r in results if r.name == "transpose replaced"]
        assert "2 transpose(s)" in ok.message


def test_transposes_that_move_elements_are_left_alone():
    for name in ("pir_transpose_bs2", "pir_transpose_perm021"):
        adapter, before, after, run, results = _apply(name)
        assert not adapter.pattern_present(before)
        assert [o.render() for o in before.ops] == [o.render() for o in after.ops]
        (left,) = results
        assert left.name == "left alone" and left.verdict == Verdict.EQUIVALENT


def test_contract_catches_a_transpose_kept_or_replaced_by_a_wrong_reshape():
    """The contract on snapshots: the original as 'rewritten' (nothing done)
    keeps both transposes; a rewrite whose reshape targets another shape is
    named with the transpose and its operand."""
    import copy

    adapter, before, after, _, _ = _apply("pir_transpose_bs1")
    case = cases.all_cases()["pir_transpose_bs1"]
    kept = adapter.contract(case, 0, before, copy.deepcopy(before))
    assert kept[0].verdict == Verdict.NOT_APPLIED
    wrong = copy.deepcopy(after)
    (t,) = before.ops_of_type("pd_op.transpose")
    src = t.inputs["x"][0]
    (r,) = [o for o in wrong.ops_of_type("pd_op.reshape") if o.inputs["x"] == [src]]
    wrong.vars[r.outputs["out"][0]].shape = [4, 8]
    bad = [c for c in adapter.contract(case, 0, before, wrong)
           if c.verdict == Verdict.CONTRACT_BROKEN]
    assert len(bad) == 1 and bad[0].counterexample["op_index"] == t.idx
    assert bad[0].counterexample["var"] == src and bad[0].counterexample["op_type"] == \
        "pd_op.transpose"


def test_size_condition_dropped_is_refuted_on_the_transposes_result(tmp_path):
    mutant = write_mutant("eliminate_transpose_any_dims", tmp_path)
    rep = tmp_path / "rep"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    p = subprocess.run([sys.executable, "-m", "verify", "run", "--pass", "elim_transpose",
                        "--case", "pir_transpose_bs1", "--case", "pir_transpose_bs2",
                        "--paddle-file", str(mutant), "--quiet", "--report-dir", str(rep)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    apps = {a["case"]: a for a in json.loads((rep / "report.json").read_text())["applications"]}
    assert apps["pir_transpose_bs1"]["verdict"] == "EQUIVALENT"
    bs2 = apps["pir_transpose_bs2"]
    assert bs2["verdict"] == "NOT_EQUIVALENT"
    checks = {(c["kind"], c["name"]): c for c in bs2["checks"]}
    assert checks[("contract", "left alone")]["verdict"] == "CONTRACT_BROKEN"
    _, before, _, _, _ = _apply("pir_transpose_bs2")
    (t,) = before.ops_of_type("pd_op.transpose")
    value = checks[("value", "value proof")]
    assert value["verdict"] == "NOT_EQUIVALENT"
    assert value["counterexample"]["var"] == t.outputs["out"][0]
    assert value["counterexample"]["shape"] == [4, 2, 8]


def test_two_dynamic_dims_make_the_pass_raise_inside_reshape():
    """A bs = 1 transpose whose operand has two more dynamic dims: the pass
    reshapes to the transpose's declared [-1, 1, -1, 8] and PIR refuses it."""
    adapter, before, after, run, _ = _apply("pir_transpose_bs1_two_dynamic")
    assert adapter.pattern_present(before)
    assert run.error_type == "ValueError"
    assert "Only one dimension value of 'shape' in ReshapeOp can be -1" in run.error
    assert "eliminate_transpose_by_reshape" in run.error
