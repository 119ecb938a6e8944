"""The planner's static checks (stage checks, serial program, parameter
shapes) memoized in the user's cache, never in the plan dir
(``passes/planner.py``, ``_static_memo``):
a hit gives the same results, any changed byte of a snapshot misses (and a
mutant stage program is caught), the off switch works, and the key covers
every module the static checks run."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import cases
from cases.program_dirs import load_program_dir
from passes.planner import planner_dir, static_checks, static_sources


@pytest.fixture
def plan(tmp_path, monkeypatch):
    """A private copy of planner_tp2's plan dir, its memos in a private dir."""
    src = planner_dir(cases.all_cases()["planner_tp2"])
    d = tmp_path / "plan"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("stage-checks", ".cache-entry"))
    monkeypatch.setenv("VERIFY_PLANNER_RUN_MEMO", str(tmp_path / "memos"))
    return d


def _memos(d):
    return d.parent / "memos" / "stage-checks"


def _static(d):
    case = load_program_dir(str(d))
    recs = {r: json.loads((d / f"rank{r}" / "planner.json").read_text()) for r in case.ranks}
    outcomes, notes = [], []
    checks = static_checks(case, d, recs, outcomes, notes)
    return checks, outcomes, notes


def _dicts(checks):
    return [(c.to_dict(), c.advisory) for c in checks]


def _stage_file(d, rank, stage):
    rec = json.loads((d / f"rank{rank}" / "planner.json").read_text())
    return d / f"rank{rank}" / next(s["snapshot"] for s in rec["stages"] if s["stage"] == stage)


def test_a_second_application_hits_the_memo_with_the_same_results(plan):
    first, outs1, notes1 = _static(plan)
    second, outs2, notes2 = _static(plan)
    assert not any("stage checks: memoized" in n for n in notes1)
    key = next(p.stem for p in _memos(plan).glob("*.pkl"))
    assert len(key) == 64 and not (plan / "stage-checks").exists()
    assert notes2 == [f"planner stage checks: memoized for these stage records, snapshots "
                      f"and check modules (key {key})"]
    assert _dicts(first) == _dicts(second)
    assert [c.counterexample for c in first] == [c.counterexample for c in second]
    assert [(r, a.to_dict(), b.to_dict(), e) for r, a, b, e in outs1] == \
        [(r, a.to_dict(), b.to_dict(), e) for r, a, b, e in outs2]
    assert {c.name for c in first} >= {"after partition", "serial program", "parameter shapes"}


def test_one_changed_byte_misses_and_a_mutant_stage_is_caught(plan):
    base, _, _ = _static(plan)
    f = _stage_file(plan, 1, "reshard")
    raw = f.read_bytes()
    i = raw.index(b", ")  # one byte of JSON whitespace: the same program
    f.write_bytes(raw[:i + 1] + b"\n" + raw[i + 2:])
    again, _, notes = _static(plan)
    assert not any("stage checks: memoized" in n for n in notes)  # reran
    assert len(list(_memos(plan).glob("*.pkl"))) == 2
    assert [(c.name, c.rank, c.verdict) for c in again] == \
        [(c.name, c.rank, c.verdict) for c in base]
    # a mutant remove stage on rank 1: an op reads a value nothing defines
    f = _stage_file(plan, 1, "remove")
    snap = json.loads(f.read_text())
    op = next(o for o in snap["ops"] if any(o["inputs"].values()))
    slot = next(s for s, v in op["inputs"].items() if v)
    op["inputs"][slot] = ["never_defined_value"] + op["inputs"][slot][1:]
    f.write_text(json.dumps(snap))
    got, _, notes = _static(plan)
    assert not any("stage checks: memoized" in n for n in notes)
    bad = [c for c in got if not c.ok and not c.advisory]
    assert bad and bad[0].name == "after remove" and bad[0].rank == 1, \
        [c.message for c in got if not c.ok]
    assert "never_defined_value" in bad[0].message + json.dumps(bad[0].counterexample,
                                                                default=str)


def test_the_off_switch_turns_the_memo_off(plan, monkeypatch):
    monkeypatch.setenv("VERIFY_PLANNER_RUN_MEMO", "0")
    _static(plan)
    _, _, notes = _static(plan)
    assert not (plan / "stage-checks").exists() and not _memos(plan).exists()
    assert not any("stage checks: memoized" in n for n in notes)


def test_the_key_covers_every_module_the_static_checks_run(plan, monkeypatch):
    """Every project file whose code runs while the static checks compute
    (memo off) is in ``static_sources()``: a change in a check misses."""
    monkeypatch.setenv("VERIFY_PLANNER_RUN_MEMO", "0")
    root = Path(planner_dir.__code__.co_filename).resolve().parent.parent
    case = load_program_dir(str(plan))
    recs = {r: json.loads((plan / f"rank{r}" / "planner.json").read_text()) for r in case.ranks}
    ran = set()

    def tracer(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code.co_filename)

    sys.setprofile(tracer)
    try:
        static_checks(case, plan, recs, [], [])
    finally:
        sys.setprofile(None)
    ours = {str(Path(f).resolve().relative_to(root)) for f in ran
            if Path(f).is_absolute() and Path(f).resolve().is_relative_to(root)}
    # the project's own modules (a venv inside the checkout, as CI's, is not)
    ours = {f for f in ours if f.split("/")[0] in ("verify", "passes", "cases")}
    # the case's attributes the checks read (name, ranks, symbols) are in the key by value
    ours.discard("cases/base.py")
    assert "verify/checks/shape_check.py" in ours and "verify/checks/def_use.py" in ours
    assert ours <= set(static_sources()), sorted(ours - set(static_sources()))


def test_the_import_names_memo_follows_each_files_bytes(tmp_path):
    """``static_sources`` finds the modules by a memo of each file's import
    names keyed by its path and bytes: a file that now imports another
    module is parsed anew (a stale entry of the old bytes is never used)."""
    from passes import planner

    root = tmp_path
    (root / "verify").mkdir()
    for n in ("a", "b", "c"):
        (root / "verify" / f"{n}.py").write_text("")
    a = root / "verify" / "a.py"
    a.write_text("from verify import b\n")
    table, used = {}, set()
    assert planner._imported(root, a, table, used) == [root / "verify" / "b.py"]
    assert len(table) == 1 and used == set(table)
    assert planner._imported(root, a, table, set()) == [root / "verify" / "b.py"]  # a hit
    a.write_text("from . import c\n")
    assert planner._imported(root, a, table, set()) == [root / "verify" / "c.py"]
    assert len(table) == 2
