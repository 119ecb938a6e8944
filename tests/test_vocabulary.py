"""The matcher-vocabulary audit on small fake pass sources: each name no op
defines is flagged by name; a source reading only real names passes."""
from __future__ import annotations

import json
import textwrap

import pytest

from verify.ir import legacy_ir  # noqa: F401
from verify.selfcheck import vocabulary  # noqa: E402

_HEAD = '''
from .pass_base import PassBase, register_pass


@register_pass("fake_vocabulary_pass")
class FakePass(PassBase):
'''

# reads only names the installed Paddle defines
GOOD = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        block = main_program.global_block()
        for op in block.ops:
            if op.type == "all_reduce" and op.attr("reduce_type") == 0:
                x = op.input("x")[0]
                out = op.output("out")[0]
                ring = op.attr("ring_id")
            if op.type == "matmul_v2_grad" and not op.attr("trans_x"):
                dx = op.output("X@GRAD")[0]
                dout = op.input("Out@GRAD")[0]
        for i in range(1, len(block.ops)):
            if block.ops[i].type == "split":
                prev = block.ops[i - 1]
'''

# one nonexistent op type, slot, attr, and a slot read through position
BAD = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        block = main_program.global_block()
        for op in block.ops:
            if op.type == "c_allreduce_sum":
                pass
            if op.type == "all_reduce" and op.desc.attr("op_type") == 1:
                pass
            if op.type == "matmul_v2":
                y = op.input("W")[0]
        for idx in range(1, len(block.ops)):
            pre_op = block.ops[idx - 1]
            if pre_op.type == "all_reduce":
                pass
        for i in range(1, len(block.ops)):
            allreduce_op = block.ops[i - 1]
            name = allreduce_op.output("Out")[0]
'''

PIR_BAD = '''
def _pir_fake(block, i):
    op = block.ops[i]
    if op.name() == "pd_op.matmul_grad":
        assert not op.has_attr("trans_x")
        keep = op.attrs()["transpose_y"]
    if op.name() == "pd_op.c_allreduce_summ":
        pass
'''


def _write(tmp_path, text, name="fake_pass.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _keys(findings):
    return {(f.problem, f.kind, f.op_type, f.name) for f in findings}


def test_real_names_pass(tmp_path):
    assert vocabulary.audit("fake", _write(tmp_path, GOOD)) == []


def test_each_missing_name_is_flagged(tmp_path):
    got = _keys(vocabulary.audit("fake", _write(tmp_path, BAD)))
    assert ("undefined", "op_type", "", "c_allreduce_sum") in got
    assert ("undefined", "attr", "all_reduce", "op_type") in got
    assert ("undefined", "input", "matmul_v2", "W") in got
    # typed by the same position as pre_op (block.ops[i - 1]): an all_reduce
    assert ("undefined", "output", "all_reduce", "Out") in got
    assert len(got) == 4, got


def test_finding_names_the_missing_name(tmp_path):
    f = next(f for f in vocabulary.audit("fake", _write(tmp_path, BAD)) if f.name == "W")
    assert "'W'" in f.message and "matmul_v2" in f.message and "X, Y" in f.message
    r = f.check_result()
    assert r.verdict.value == "NOT_APPLIED"
    assert r.counterexample["missing"] == "W" and r.counterexample["op_type"] == "matmul_v2"
    assert f.where and f.where[0].startswith("fake_pass.py:")


def test_pir_names(tmp_path):
    path = _write(tmp_path, PIR_BAD)
    got = _keys(vocabulary.audit("fake", path, "_pir_fake"))
    assert got == {("undefined", "attr", "pd_op.matmul_grad", "trans_x"),
                   ("undefined", "op_type", "", "pd_op.c_allreduce_summ")}, got


def test_no_false_alarms_from_substrings_branches_and_markers(tmp_path):
    """``"c_" in op.type`` is not a type; an ``if op.type == "cast":`` types
    only its body; an attr Paddle's Python sets as a marker is known."""
    src = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        for op in main_program.global_block().ops:
            if "c_" in op.type or "grad" in op.type:
                continue
            if op.type == "cast":
                x = op.input("X")[0]
                continue
            if op.has_attr("dtype") and op.attr("dtype") == 5:
                pass
            if op.has_attr("master_grad_cast"):
                pass
'''
    assert vocabulary.audit("fake", _write(tmp_path, src)) == []
    assert "master_grad_cast" in vocabulary.marker_attrs()


def test_planned_programs_are_checked(tmp_path):
    """A defined collective the planner never emits is ``unplanned``."""
    src = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        for op in main_program.global_block().ops:
            if op.type in ("all_reduce", "reduce_scatter"):
                pass
'''
    planned = {"all_reduce": {"input": {"x"}, "output": {"out"}, "attr": {"ring_id"}}}
    got = _keys(vocabulary.audit("fake", _write(tmp_path, src), planned=planned))
    assert got == {("unplanned", "op_type", "", "reduce_scatter")}


def test_cli_pass_file_exit_codes(tmp_path, monkeypatch, capsys):
    """--pass-file: findings not in the baseline exit 1 and are printed with
    their names; a clean file exits 0; a missing file exits 2."""
    monkeypatch.setattr(vocabulary, "BASELINE_PATH", str(tmp_path / "none.json"))
    assert vocabulary.main(["--pass-file", _write(tmp_path, BAD), "--no-planned"]) == 1
    out = capsys.readouterr().out
    assert "NEW FINDING" in out and "c_allreduce_sum" in out and "op_type" in out
    assert vocabulary.main(["--pass-file", _write(tmp_path, GOOD, "good.py"),
                            "--no-planned"]) == 0
    assert vocabulary.main(["--pass-file", str(tmp_path / "missing.py")]) == 2


def test_baseline_suppresses_known_findings(tmp_path, monkeypatch, capsys):
    base = tmp_path / "base.json"
    monkeypatch.setattr(vocabulary, "BASELINE_PATH", str(base))
    path = _write(tmp_path, BAD)
    assert vocabulary.main(["--pass-file", path, "--no-planned", "--write-baseline"]) == 0
    assert json.loads(base.read_text())["findings"]
    assert vocabulary.main(["--pass-file", path, "--no-planned"]) == 0
    # the fix of a known finding is reported too (strict, as the gate)
    assert vocabulary.main(["--pass-file", _write(tmp_path, GOOD, "fake_pass.py"),
                            "--no-planned"]) == 1
    assert "FIXED" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["auto_parallel_sequence_parallel_optimization",
                                  "auto_parallel_sharding",
                                  "allreduce_matmul_grad_overlapping",
                                  "auto_parallel_supplement_explicit_dependencies",
                                  "fuse_all_reduce", "_pir_split_matmul_grad_to_matmul"])
def test_reported_defects_found_on_installed_paddle(name):
    """The defects reported on 3.3.1 are findings of the installed sources."""
    path, fn, pkg = vocabulary.known_passes()[name]
    got = {(f.kind, f.op_type, f.name) for f in vocabulary.audit(name, path, fn, pkg)}
    want = {"auto_parallel_sequence_parallel_optimization": ("input", "all_reduce", "X"),
            "allreduce_matmul_grad_overlapping": ("op_type", "", "c_allreduce_sum"),
            "auto_parallel_supplement_explicit_dependencies": ("attr", "all_reduce", "op_type"),
            "fuse_all_reduce": ("op_type", "", "c_allreduce_sum"),
            "auto_parallel_sharding": ("output", "all_reduce", "Out"),
            "_pir_split_matmul_grad_to_matmul": ("attr", "pd_op.matmul_grad", "trans_x")}
    assert want[name] in got, got


# the receiver's type only guessed from its name (allreduce_op -> all_reduce)
NAMED_ONLY = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        for allreduce_op in main_program.global_block().ops:
            x = allreduce_op.input("X")[0]
'''
# the same read, typed by the code: a comparison, and an op the rewrite builds
COMPARED = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        for allreduce_op in main_program.global_block().ops:
            if allreduce_op.type == "all_reduce":
                x = allreduce_op.input("X")[0]
'''
BUILT = _HEAD + '''
    def _apply_single_impl(self, main_program, startup_program, context):
        block = main_program.global_block()
        new_op = block.append_op(type="all_reduce", inputs={}, outputs={})
        x = new_op.input("X")[0]
'''


def test_a_type_guessed_from_a_variable_name_is_advisory(tmp_path, monkeypatch, capsys):
    """``allreduce_op.input("X")`` on an op nothing in the code types: the
    finding is reported as advisory and never gates (exit 0); the same read
    on an op the code compares with ``all_reduce`` or builds as one gates
    (exit 1).  (The audit took the name's guess as a fact: premerge exit 1.)"""
    monkeypatch.setattr(vocabulary, "BASELINE_PATH", str(tmp_path / "none.json"))
    [f] = vocabulary.audit("fake", _write(tmp_path, NAMED_ONLY, "named.py"))
    assert (f.kind, f.op_type, f.name, f.advisory) == ("input", "all_reduce", "X", True)
    assert vocabulary.compare([f], {"findings": {}}, {"fake"}) == ([], [])
    assert vocabulary.main(["--pass-file", str(tmp_path / "named.py"), "--no-planned",
                            "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["new"] == []
    assert data["advisory"] == [f.key.replace("fake", "fake_vocabulary_pass", 1)]
    for name, src in (("compared.py", COMPARED), ("built.py", BUILT)):
        [g] = vocabulary.audit("fake", _write(tmp_path, src, name))
        assert (g.kind, g.op_type, g.name, g.advisory) == ("input", "all_reduce", "X", False)
        assert vocabulary.main(["--pass-file", str(tmp_path / name), "--no-planned"]) == 1
        assert "NEW FINDING" in capsys.readouterr().out
