"""``python -m verify premerge`` on small git checkouts made from the
installed Paddle files (tests/premerge_checkout.py): real overlays, real
runs of the affected pass (restricted to a few cases, backend none), real
git."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import premerge_checkout as co  # noqa: E402

from verify.premerge import affected, overlay  # noqa: E402
from verify.premerge.checkout import CheckoutError, changes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    """A private result cache (the import-graph index is kept in it too)."""
    return {"VERIFY_PREMERGE_CACHE": str(tmp_path_factory.mktemp("premerge-cache"))}


def premerge(args, env_extra, timeout=600):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [
        os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-m", "verify", "premerge", *args], cwd=str(ROOT),
                          env=env, capture_output=True, text=True, timeout=timeout)


def machine(out) -> dict:
    return json.loads((Path(out) / "premerge.json").read_text())


# ------------------------------------------------------------ end to end
def test_mended_fold_lists_the_dynamic_batch_cases_fixed(tmp_path, cache_env):
    repo = co.make(tmp_path / "paddle")
    co.mend_fold(repo)
    out = tmp_path / "out"
    args = [repo, "--out", str(out), "--pass", "vpp_split", "--case", "pir_mm_3d",
            "--case", "pir_mm_3d_dynamic", "--backend", "none"]
    p = premerge(args, cache_env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "FIXED: _pir_split_matmul_grad_to_matmul on pir_mm_3d_dynamic: " \
           "PASS_CRASHED -> EQUIVALENT" in p.stdout
    summary = (out / "summary.md").read_text()
    assert "**FIXED** `pir_mm_3d_dynamic`: PASS_CRASHED -> EQUIVALENT" in summary
    assert "unchanged (1): `pir_mm_3d`" in summary
    assert "python -m verify premerge" in summary  # the rerun command
    data = machine(out)
    assert {a["case"]: a["kind"] for a in data["applications"]} == {
        "pir_mm_3d": "unchanged", "pir_mm_3d_dynamic": "FIXED"}
    assert data["vocabulary_new"] == []  # the helper's own source changed: audited
    assert not any(a["cached"] for a in data["applications"])
    # the applications whose selection fell back to the import graph: one line
    from verify.premerge import executed

    base = json.loads((ROOT / "verify" / "baseline.json").read_text())
    fallback = executed.unrecorded(base["entries"], executed.load(
        paddle_version=base.get("paddle")))
    assert data["import_graph_fallback"] == fallback
    lines = [ln for ln in summary.splitlines() if ln.startswith("Selected by the import graph")]
    assert len(lines) == (1 if fallback else 0)
    assert not fallback or f"{len(fallback)} application(s)" in lines[0]

    # warm: the same sources and cases are lookups
    p2 = premerge(args[:2] + [str(tmp_path / "out2")] + args[3:], cache_env)
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert all(a["cached"] for a in machine(tmp_path / "out2")["applications"])
    assert "**FIXED** `pir_mm_3d_dynamic`" in (tmp_path / "out2" / "summary.md").read_text()


def test_mended_fold_fixes_the_legacy_overlap_too(tmp_path, cache_env):
    repo = co.make(tmp_path / "paddle")
    co.mend_fold(repo)
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out), "--pass", "overlap", "--case",
                  "col_3d_dynamic_batch", "--backend", "none", "--no-vocabulary",
                  "--no-cache"], cache_env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [(a["case"], a["kind"], a["verdict"]) for a in machine(out)["applications"]] == \
        [("col_3d_dynamic_batch", "FIXED", "EQUIVALENT")]


def test_broken_dw_matmul_is_a_new_finding_with_a_reproducer(tmp_path, cache_env):
    repo = co.make(tmp_path / "paddle")
    co.break_dw(repo)
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out), "--pass", "vpp_split", "--case", "pir_mm_3d",
                  "--case", "pir_mm_3d_nonsquare", "--backend", "none",
                  "--no-vocabulary"], cache_env)
    assert p.returncode == 1, p.stdout + p.stderr
    apps = machine(out)["applications"]
    assert {a["case"] for a in apps if a["kind"] == "NEW"} == {"pir_mm_3d",
                                                               "pir_mm_3d_nonsquare"}
    verdicts = {a["case"]: a["verdict"] for a in apps}
    # square: refuted; non-square: the swapped product's reshape has no
    # meaning for the value proof (INCONCLUSIVE, which an EQUIVALENT
    # baseline makes NEW: the proof is lost)
    assert verdicts["pir_mm_3d"] == "NOT_EQUIVALENT", verdicts
    assert verdicts["pir_mm_3d_nonsquare"] in ("NOT_EQUIVALENT", "INCONCLUSIVE"), verdicts
    for a in apps:
        assert a["baseline"] == "EQUIVALENT" and a["evidence"], a
        assert os.path.isfile(a["reproducer"]), a
    summary = (out / "summary.md").read_text()
    assert "**NEW** `pir_mm_3d`: NOT_EQUIVALENT (baseline EQUIVALENT)" in summary
    assert "  - evidence: [" in summary and "  - reproducer: `" in summary
    # the reproducer carries the checkout's changed sources (embedded by the
    # run, verify/repro/embedded.py), standalone: exit 1 (defect present)
    from verify.repro.embedded import MARK

    script = [a["reproducer"] for a in apps if a["case"] == "pir_mm_3d"][0]
    assert MARK in Path(script).read_text()
    shutil.rmtree(out / "overlay")  # nothing on disk is read
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",
                                                            overlay.ENV)}
    r = subprocess.run([sys.executable, script], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.parametrize("typed", [True, False], ids=["typed_by_code", "typed_by_name"])
def test_vocabulary_audit_reads_the_changed_helper(tmp_path, cache_env, typed):
    """The audit runs on the overlaid source: a misspelt attr the commit
    introduces on an op the code types (``op.name() == "pd_op.matmul_grad"``)
    is a NEW vocabulary finding (exit 1); on an op only the variable's name
    types (``matmul_grad_op``) it is advisory (exit 0: it made premerge exit
    1); either way the name it replaced is gone and the application itself
    is unchanged."""
    repo = co.make(tmp_path / "paddle")
    read = 'matmul_grad_op.has_attr("trans_xx")'
    if typed:  # the same truth value at run time: the op is a matmul_grad
        read = f'(matmul_grad_op.name() == "pd_op.matmul_grad" and {read})'
    co.edit(repo, co.PASS_UTILS, 'matmul_grad_op.has_attr("trans_x")', read, 1)
    co.commit(repo, "pass_utils: misspell the guard's attr")
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out), "--pass", "vpp_split", "--case", "pir_mm_3d",
                  "--backend", "none"], cache_env)
    assert p.returncode == (1 if typed else 0), p.stdout + p.stderr
    data = machine(out)
    key = "_pir_split_matmul_grad_to_matmul::undefined::attr::pd_op.matmul_grad::"
    assert data["vocabulary_new"] == ([key + "trans_xx"] if typed else []), data
    assert data["vocabulary_advisory"] == ([] if typed else [key + "trans_xx"]), data
    assert data["vocabulary_gone"] == [key + "trans_x"], data
    assert [a["kind"] for a in data["applications"]] == ["unchanged"]
    summary = (out / "summary.md").read_text()
    if typed:
        assert f"**NEW** `{key}trans_xx`" in summary and "pass_utils.py:" in summary
    else:
        assert f"advisory (the op type is only the variable's name's guess; not gating) " \
               f"`{key}trans_xx`" in summary


def test_cpp_change_is_listed_not_checked(tmp_path, cache_env):
    repo = co.make(tmp_path / "paddle")
    co.touch_kernel(repo)
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out)], cache_env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"not checked (needs a build): {co.KERNEL}" in p.stdout
    summary = (out / "summary.md").read_text()
    assert "### Not checked (need a build)" in summary and co.KERNEL in summary
    data = machine(out)
    assert data["not_checked"] == [co.KERNEL] and data["applications"] == []
    assert data["python"] == [] and data["affected"] == {}


def test_python_change_no_pass_reaches_is_listed(tmp_path, cache_env):
    launch = "paddle/distributed/launch/main.py"
    repo = co.make(tmp_path / "paddle", files=(co.PASS_UTILS, launch))
    co.edit(repo, launch, "def launch(", "def launch(  # edited\n", 1)
    co.commit(repo, "launch: a comment")
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out)], cache_env)
    assert p.returncode == 0, p.stdout + p.stderr
    data = machine(out)
    assert data["affected"] == {} and data["applications"] == []
    assert data["unreached"] == ["paddle.distributed.launch.main"]
    assert "### Changed modules no pass under test reaches" in \
        (out / "summary.md").read_text()


@pytest.mark.parametrize("how", ["not_git", "unknown_rev", "no_paddle_tree"])
def test_bad_input_exits_2_with_one_line(tmp_path, cache_env, how):
    args = [str(tmp_path)]
    if how == "unknown_rev":
        args = [co.make(tmp_path / "paddle"), "--base", "no-such-rev"]
    elif how == "no_paddle_tree":
        (tmp_path / "x.txt").write_text("x")
        co.git(tmp_path, "init", "-q")
    p = premerge(args + ["--out", str(tmp_path / "out")], cache_env, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert {"not_git": "is not a git checkout", "unknown_rev": "unknown revision",
            "no_paddle_tree": "no python/paddle tree"}[how] in lines[0]


# ------------------------------------------------------------ the parts
def test_changes_sorts_python_native_other_and_untracked(tmp_path):
    repo = co.make(tmp_path / "paddle")
    co.edit(repo, co.PASS_UTILS, co.DW_331, co.DW_BROKEN)  # uncommitted
    new = Path(repo, "python/paddle/distributed/passes/new_pass.py")
    new.write_text("X = 1\n")  # untracked
    Path(repo, "README.md").write_text("docs\n")
    co.touch_kernel(repo)  # commits everything tracked, incl. the pass_utils edit
    ch = changes(repo, "HEAD~1")
    assert [(c.status, c.path) for c in ch.python] == [
        ("A", "python/paddle/distributed/passes/new_pass.py"),
        ("M", "python/" + co.PASS_UTILS)]
    assert [c.path for c in ch.native] == [co.KERNEL]
    assert [c.path for c in ch.other] == ["README.md"]
    assert ch.base_how == "--base HEAD~1"
    with pytest.raises(CheckoutError, match="unknown revision"):
        changes(repo, "v0.0.0-none")


def test_overlay_is_inherited_by_grandchildren_and_deletes(tmp_path):
    pkg = tmp_path / "site" / "ovprobe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("WHO = 'installed'\n")
    (pkg / "b.py").write_text("WHO = 'installed b'\n")
    manifest = overlay.write(str(tmp_path / "ov"), {"ovprobe/a.py": "WHO = 'overlay'\n"},
                             str(tmp_path / "site"), deleted=["ovprobe/b.py"])
    env = overlay.child_env(manifest)
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "site")
    code = ("import subprocess, sys; import ovprobe.a as a; print(a.WHO);"
            "subprocess.run([sys.executable, '-c', 'import ovprobe.a as a; print(a.WHO)'])\n"
            "try:\n import ovprobe.b\nexcept ModuleNotFoundError as e: print('gone', e.name)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.split("\n")[:3] == ["overlay", "overlay", "gone ovprobe.b"], \
        r.stdout + r.stderr
    # without the environment the installed module is imported: nothing was modified
    plain = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    r = subprocess.run([sys.executable, "-c", "import ovprobe.a as a; print(a.WHO)"],
                       env=plain, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "installed"


def test_overlay_refuses_a_module_imported_before_it(tmp_path):
    manifest = overlay.write(str(tmp_path / "ov"), {"json/decoder.py": "X = 1\n"},
                             str(tmp_path))
    code = (f"import json, importlib.util as u; s = u.spec_from_file_location('o', "
            f"{overlay.__file__!r}); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
            f"try:\n m.install({manifest!r})\nexcept RuntimeError as e: print(e)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env={k: v for k, v in os.environ.items()
                                        if k != overlay.ENV})
    assert "comes too late: json.decoder already imported" in r.stdout, r.stdout + r.stderr


@pytest.fixture(scope="module")
def index_dir(cache_env):
    return cache_env["VERIFY_PREMERGE_CACHE"]


def _installed(rel):
    return Path(affected.installed_root(), rel).read_text()


def test_affected_follows_imports_and_leaves_unrelated_passes(index_dir):
    utils = "paddle.distributed.passes.pass_utils"
    got = affected.affected({utils: _installed(co.PASS_UTILS)}, cache_dir=index_dir,
                            executed={})  # the import graph alone
    # overlap imports pass_utils; vpp_split is the helper; the PIR gradient
    # merge imports neither pass_utils nor a module that does
    assert utils in got.passes["allreduce_matmul_grad_overlapping"]
    assert utils in got.passes["_pir_split_matmul_grad_to_matmul"]
    assert "auto_parallel_gradient_merge_pass" not in got.passes
    assert got.pass_sources["_pir_split_matmul_grad_to_matmul"] == [utils]
    # the planner's stages apply passes that import pass_utils (gradient merge)
    assert got.planner == [utils]
    # a module no pass reaches affects none
    launch = "paddle.distributed.launch.main"
    assert affected.affected({launch: _installed("paddle/distributed/launch/main.py")},
                             cache_dir=index_dir, executed={}).passes == {}


def test_affected_reads_the_changed_text_and_the_planner(index_dir):
    # gradient merge's module, changed to import a module it did not: a
    # change to that module now reaches it (the graph is the new text's)
    gm = "paddle.distributed.passes.auto_parallel_gradient_merge"
    text = _installed("paddle/distributed/passes/auto_parallel_gradient_merge.py")
    probe = "paddle.distributed.launch.main"
    changed = {gm: text + "\nfrom paddle.distributed.launch import main as _m\n",
               probe: _installed("paddle/distributed/launch/main.py")}
    got = affected.affected(changed, cache_dir=index_dir, executed={})  # the graph alone
    assert probe in got.passes["auto_parallel_gradient_merge_pass"]
    # a reshard function is the planner family's
    rf = "paddle.distributed.auto_parallel.static.reshard_funcs.p_to_r_reshard_func"
    got = affected.affected({rf: _installed(
        "paddle/distributed/auto_parallel/static/reshard_funcs/p_to_r_reshard_func.py")},
        cache_dir=index_dir, executed={})
    assert got.planner == [rf]


def test_planner_family_hook_selects_its_adapters(index_dir):
    """An adapter declaring ``planner_family`` (or named in PLANNER_ADAPTERS)
    runs when a reshard function or planning code changed, and only then."""
    planner = affected.AdapterInfo("my_planner_family", "plan_fam", "passes.x",
                                   planner_family=True)
    plain = affected.AdapterInfo("my_other", "other", "passes.y")
    rf = "paddle.distributed.auto_parallel.static.reshard_funcs.p_to_r_reshard_func"
    text = _installed(
        "paddle/distributed/auto_parallel/static/reshard_funcs/p_to_r_reshard_func.py")
    got = affected.affected({rf: text}, cache_dir=index_dir, executed={},
                            adapters={"my_planner_family": planner, "my_other": plain})
    assert got.passes == {"my_planner_family": [rf]}
    assert got.planner_adapters == ["my_planner_family"]
    launch = "paddle.distributed.launch.main"
    got = affected.affected({launch: _installed("paddle/distributed/launch/main.py")},
                            cache_dir=index_dir, executed={},
                            adapters={"my_planner_family": planner, "my_other": plain})
    assert got.passes == {} and got.planner_adapters == []


def test_every_process_of_a_run_imports_the_overlay(tmp_path):
    """An overlaid ``paddle/distributed/__init__.py`` (imported by every
    process that imports Paddle) records each process that loads it: the
    run itself, its isolation worker (where the pass is applied) and its
    rank processes (launched through ``paddle.distributed.launch``) all do."""
    rel = "paddle/distributed/__init__.py"
    probe_dir = tmp_path / "probes"
    probe_dir.mkdir()
    text = _installed(rel) + (
        "\nimport os as _o, sys as _s\n"
        f"open(_o.path.join({str(probe_dir)!r}, str(_o.getpid())), 'w')"
        ".write(' '.join(_s.argv))\n")
    manifest = overlay.write(str(tmp_path / "ov"), {rel: text}, affected.installed_root())
    env = overlay.child_env(manifest)
    env["PYTHONPATH"] += os.pathsep + str(ROOT)
    r = subprocess.run([sys.executable, "-m", "verify", "run", "--pass", "overlap", "--case",
                        "col_3d_static", "--backend", "ranks", "--quiet", "--report-dir",
                        str(tmp_path / "rep")], cwd=str(ROOT), env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    argvs = [p.read_text() for p in probe_dir.iterdir()]
    assert any("verify" in a and "run" in a for a in argvs), argvs  # the run
    assert any("isolation" in a for a in argvs), argvs  # its isolation worker
    ranks = [a for a in argvs if "rank_worker" in a]
    assert len(ranks) >= 2, argvs  # one per rank
