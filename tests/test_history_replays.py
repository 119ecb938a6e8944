"""Paddle's public history replayed through ``python -m verify premerge``
(``tests/history_edits.py``): for each real upstream change, a git checkout
whose last commit goes from one side of the change to the other, the module
as the edit makes it from the installed 3.3.1 text; premerge must label the
buggy side NEW and the fixed side FIXED or unchanged, case by case.

Every replay's buggy side runs in the gate (each a single case, seconds to
a minute).  The fixed side of a replay 3.3.1 already holds is the installed
text overlaid on itself: premerge selects by the functions that differ from
the installed Paddle (none there), so it runs nothing; the gate runs one of
them as a sample; ``VERIFY_HISTORY_ALL=1`` runs every side of every replay.
A replay premerge does not label yet (``gate_gap``) is a strict xfail: the
day the gate gives the label, it fails and the mark goes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import history_edits as he  # noqa: E402
import premerge_checkout as co  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ALL = os.environ.get("VERIFY_HISTORY_ALL") == "1"


def _sides():
    """(replay, side) pairs the run covers: every buggy side; the fixed side
    where it is not the installed text, or (one sample) where it is."""
    out, sampled = [], False
    for r in he.REPLAYS:
        out.append(pytest.param(r, "buggy", id=f"{r.name}-buggy"))
        installed_side = r.installed == "fixed"
        gate = not installed_side or not sampled
        sampled = sampled or installed_side
        marks = () if gate or ALL else (pytest.mark.skip(
            reason="the installed text overlaid on itself; VERIFY_HISTORY_ALL=1 runs it"),)
        if r.gate_gap:  # strict: the day premerge gives the label, this fails
            gap = pytest.mark.xfail(strict=True, reason="gate gap: " + r.gate_gap)
            if "buggy" in r.gap_sides:
                out[-1] = pytest.param(r, "buggy", id=f"{r.name}-buggy", marks=(gap,))
            if "fixed" in r.gap_sides:
                marks = marks + (gap,)
        out.append(pytest.param(r, "fixed", id=f"{r.name}-fixed", marks=marks))
    return out


def checkout(root: Path, replay: he.Replay, side: str) -> str:
    """A git checkout whose base commit holds the other side of the change and
    whose HEAD holds ``side`` (premerge's default base is HEAD~1)."""
    texts = he.sides(replay)
    other = "fixed" if side == "buggy" else "buggy"
    path = root / "python" / replay.rel
    path.parent.mkdir(parents=True)
    path.write_text(texts[other])
    co.git(root, "init", "-q", "-b", "main")
    co.git(root, "add", "-A")
    co.git(root, "commit", "-q", "-m", f"{replay.name}: {other} side")
    path.write_text(texts[side])
    co.git(root, "commit", "-q", "-am", f"{replay.name}: {side} side ({replay.upstream})")
    return str(root)


def test_every_edit_applies_to_the_installed_paddle():
    """Each replay's edits match the installed 3.3.1 text as written (a
    Paddle whose text moved fails here, naming the replay), change it, and
    name the upstream pull request."""
    for r in he.REPLAYS:
        texts = he.sides(r)
        assert texts["buggy"] != texts["fixed"], r.name
        assert r.upstream.startswith("https://github.com/PaddlePaddle/Paddle/pull/"), r.name
        assert r.installed in ("fixed", "buggy") and r.why and r.where, r.name
        assert set(r.expect_buggy) == set(r.expect_fixed) == set(r.cases), r.name
    assert len(he.REPLAYS) >= 6


@pytest.mark.parametrize("replay,side", _sides())
def test_premerge_labels_each_side_of_an_upstream_change(tmp_path, replay, side):
    repo = checkout(tmp_path / "paddle", replay, side)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "verify", "premerge", repo, "--out", str(out),
            "--backend", replay.backend, "--no-vocabulary", "--no-cache"]
    for p in replay.passes:
        args += ["--pass", p]
    for c in replay.cases:
        args += ["--case", c]
    env = dict(os.environ, VERIFY_PREMERGE_CACHE=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [
        os.environ.get("PYTHONPATH")] if p])
    p = subprocess.run(args, cwd=str(ROOT), env=env, capture_output=True, text=True,
                       timeout=900)
    expect = replay.expect_buggy if side == "buggy" else replay.expect_fixed
    if he.sides(replay)[side] == he.installed_text(replay):
        # HEAD is the installed text the baseline was made on: no function any
        # application ran differs from it, so nothing is selected or can change
        expect = {}
    assert p.returncode == (1 if "NEW" in expect.values() else 0), p.stdout[-3000:] + \
        p.stderr[-3000:]
    apps = json.loads((out / "premerge.json").read_text())["applications"]
    got = {a["case"]: a["kind"] for a in apps}
    assert got == expect, (replay.name, side, replay.upstream,
                           [(a["case"], a["kind"], a["verdict"], a.get("baseline"))
                            for a in apps])
    for a in apps:  # a NEW label carries its evidence
        assert a["kind"] != "NEW" or a["evidence"], a
    if side == "buggy" and replay.new_checks:  # found by the check the change is about
        found = {n["check"] for a in apps for n in a["new"]}
        assert set(replay.new_checks) <= found, (replay.name, sorted(found))


def _run_overlap(tmp_path, tag, paddle_files=()):
    """``verify run`` of the overlap pass on the Engine-planned
    engine_mlp_tp2_sgd, in a private plan cache; its verdict."""
    rep = tmp_path / f"rep-{tag}"
    args = [sys.executable, "-m", "verify", "run", "--pass", "overlap", "--case",
            "engine_mlp_tp2_sgd", "--backend", "none", "--quiet", "--report-dir", str(rep)]
    for f in paddle_files:
        args += ["--paddle-file", str(f)]
    env = dict(os.environ, PADDLE_PASS_VERIFY_CACHE=str(tmp_path / "plans"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [
        os.environ.get("PYTHONPATH")] if p])
    p = subprocess.run(args, cwd=str(ROOT), env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    [app] = json.loads((rep / "report.json").read_text())["applications"]
    return app["verdict"]


def test_a_planner_module_overlay_plans_the_engine_cases_apart(tmp_path):
    """PR 72126's other side as a ``--paddle-file`` (dist_matmul.py emitting
    dX's sum as c_allreduce_sum): the Engine plans the case again under the
    overlay and the overlap pass fires on it (EQUIVALENT); the installed
    Paddle's run that follows, in the same plan cache, plans its own program
    again (NOT_APPLIED, the baseline's).  The Engine-planned cases' cache key
    held no overlay: both runs read whichever plan came first."""
    replay = he.BY_NAME["dist_matmul_dx_all_reduce_spelling"]
    changed = tmp_path / "overlay" / Path(replay.file).name
    changed.parent.mkdir()
    changed.write_text(he.sides(replay)["fixed"])
    assert _run_overlap(tmp_path, "overlay", [changed]) == "EQUIVALENT"
    assert _run_overlap(tmp_path, "installed") == "NOT_APPLIED"
