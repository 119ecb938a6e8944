"""Bad input on the command line and in program dirs (issue 33): every one is
one line on stderr and exit 2, never a traceback, a hang or a wrong verdict;
concurrent runs never share a report directory.

* numeric options: finite and in range (argparse ``type=`` functions,
  ``verify/cli.py``);
* program dirs: every JSON file validated before use
  (``verify/plan/schema.py``);
* ``--paddle-file`` that does not compile or import;
* report directories: unique by default, locked when given
  (``verify/report/write.py`` DirLock), for ``run`` and ``premerge``;
* premerge on a change holding a non-UTF-8 Python file.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import built_once, cli_in_process

import verify.cli as _cli  # noqa: E402,F401  imported here, not first under capsys (its
# cmd_list binds the sys.stdout of its import as a default)

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "mutants" / "faults"


def verify(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "verify", *map(str, args)], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=timeout, **kw)


def one_error_line(err: str, *needles) -> bool:
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("error: ") and \
        all(n in lines[0] for n in needles)


# ------------------------------------------------------------ numeric options
@pytest.mark.parametrize("argv,needle", [
    (["run", "--timeout", "nan"], "--timeout: 'nan' is not a finite number"),
    (["run", "--timeout", "inf"], "--timeout: 'inf' is not a finite number"),
    (["run", "--timeout", "0"], "--timeout: 0 is out of range"),
    (["run", "--timeout", "-3"], "--timeout: -3 is out of range"),
    (["run", "--memory", "-1"], "--memory: -1 is out of range"),
    (["run", "--memory", "1e3"], "--memory: '1e3' is not an integer"),
    (["run", "--seed", "-5"], "--seed: -5 is out of range"),
    (["run", "--seed", str(2 ** 32)], "--seed: 4294967296 is out of range"),
    (["run", "--z3-rlimit", "0"], "--z3-rlimit: 0 is out of range"),
    (["run", "--z3-rlimit-total", "-1"], "--z3-rlimit-total: -1 is out of range"),
    (["run", "--value-work-units", "1.5"], "--value-work-units: '1.5' is not an integer"),
    (["run", "--value-stored-monomials", "0"], "--value-stored-monomials: 0 is out of range"),
    (["run", "--value-relation-inputs", "0"], "--value-relation-inputs: 0 is out of range"),
    (["repro", "--pass", "overlap", "--case", "x", "--seed", "-1"], "--seed: -1 is out"),
    (["plan", "m.py", "--out", "o", "--ranks", "0"], "--ranks: 0 is out of range"),
])
def test_numeric_options_are_finite_and_in_range(argv, needle, capsys):
    from verify import cli

    with pytest.raises(SystemExit) as exc:
        cli._parser().parse_args(argv)
    assert exc.value.code == 2
    assert one_error_line(capsys.readouterr().err, "argument " + needle)


def test_premerge_seed_out_of_range(capsys, tmp_path):
    from verify.premerge.run import main

    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path), "--seed", "-5"])
    assert exc.value.code == 2
    assert one_error_line(capsys.readouterr().err, "argument --seed: -5 is out of range")


def test_timeout_nan_through_the_real_command_is_one_line():
    """Once a hang: a NaN limit turned the limit off."""
    p = verify("run", "--pass", "overlap", "--case", "col_3d_static", "--backend", "none",
               "--timeout", "nan", timeout=120)
    assert p.returncode == 2 and one_error_line(p.stderr, "--timeout", "finite"), p.stderr


# ------------------------------------------------------------ program dirs
@pytest.fixture(scope="module")
def legacy_dir(tmp_path_factory):
    def plan(path):  # the same build as tests/test_program_dir.py's (shared)
        p = verify("plan", ROOT / "examples" / "tiny_mlp.py", "--ranks", "2",
                   "--out", path / "tiny", timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr

    return built_once(tmp_path_factory, "plan-tiny_mlp", plan) / "tiny"


@pytest.fixture(scope="module")
def pir_dir(tmp_path_factory):
    def plan(path):  # the same build as tests/test_pir_plan.py's (shared: one name, one dir)
        p = verify("plan", ROOT / "examples" / "tiny_mlp_pir.py", "--ir", "pir", "--ranks",
                   "2", "--out", path / "tiny_pir", timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr

    return built_once(tmp_path_factory, "plan-tiny_mlp_pir", plan) / "tiny_pir"


def _edited(src: Path, tmp_path: Path, name: str, edit) -> Path:
    """A copy of the program dir ``src`` whose file ``name`` is ``edit(data)``
    (or what ``edit`` returns, when it returns something)."""
    out = tmp_path / "dir"
    shutil.copytree(src, out)
    path = out / name
    data = json.loads(path.read_text())
    got = edit(data)
    path.write_text(json.dumps(data if got is None else got))
    return out


def _set(**kw):
    return lambda d: d.update(kw)


def _drop(key):
    def edit(d):
        d.pop(key)
    return edit


PLAN_EDITS = {
    "mesh with -1": (_set(mesh=[0, -1]), "plan.json: mesh: mesh[1] is -1"),
    "mesh of strings": (_set(mesh=["0", "1"]), "plan.json: mesh: mesh[0] must be a rank"),
    "mesh of floats": (_set(mesh=[0.0, 1.0]), "plan.json: mesh: mesh[0] must be a rank"),
    "mesh empty": (_set(mesh=[]), "plan.json: mesh: must not be empty"),
    "mesh missing": (_drop("mesh"), "plan.json: mesh: is missing"),
    "mesh ragged": (_set(mesh=[[0, 1], [2]]), "plan.json: mesh: mesh is not rectangular"),
    "mesh repeats a rank": (_set(mesh=[0, 0]), "plan.json: mesh: holds rank(s) [0]"),
    "rings as a list": (_set(rings=[[0, 1]]), "plan.json: rings: must be an object"),
    "rings off the mesh": (_set(rings={"12": [[0, 5]]}),
                           "plan.json: rings['12'][0]: names rank 5, not in the mesh"),
    "ring id not an int": (_set(rings={"x": [[0, 1]]}), "plan.json: rings: key 'x'"),
    "symbols as a string": (_set(symbols="B"), "plan.json: symbols: must be an object"),
    "symbols of ints": (_set(symbols={"x": [1, None]}), "plan.json: symbols['x']"),
    "sharded_params a string": (_set(sharded_params="w"), "plan.json: sharded_params"),
    "enable_sp a string": (_set(enable_sp="yes"), "plan.json: enable_sp"),
    "plan a list": (lambda d: [], "plan.json: (top level): must be an object"),
    "plan version newer": (_set(version=99), "plan.json: version: 99 is newer"),
    "expect verdict unknown": (_set(expect={"overlap": {"verdict": "FINE"}}),
                               "plan.json: expect['overlap'].verdict"),
}


@pytest.mark.parametrize("what", sorted(PLAN_EDITS))
def test_bad_plan_json_is_one_line_naming_the_field(legacy_dir, tmp_path, what):
    edit, needle = PLAN_EDITS[what]
    bad = _edited(legacy_dir, tmp_path, "plan.json", edit)
    code, _, err = cli_in_process("run", "--program-dir", bad, "--backend", "none",
                                  "--report-dir", tmp_path / "r")
    assert code == 2 and one_error_line(err, needle), err


META_EDITS = {
    "version newer": (_set(version=99), "rank1/meta.json: version: 99 is newer"),
    "version a string": (_set(version="3"), "rank1/meta.json: version: must be an integer"),
    "rank of another dir": (_set(rank=0), "rank1/meta.json: rank: is 0"),
    "world_size wrong": (_set(world_size=4), "rank1/meta.json: world_size: is 4"),
    "feeds a dict": (_set(feeds={}), "rank1/meta.json: feeds: must be a list"),
    "feed shape of strings": (lambda d: d["feeds"][0].update(shape=["B", 4]) and None,
                              "rank1/meta.json: feeds[0].shape: must be an integer"),
    "process ids off the mesh": (lambda d: d["mesh"].update(process_ids=[0, 7]),
                                 "rank1/meta.json: mesh.process_ids: names rank 7"),
}


@pytest.mark.parametrize("what", sorted(META_EDITS))
def test_bad_meta_json_is_one_line_naming_the_field(legacy_dir, tmp_path, what):
    edit, needle = META_EDITS[what]
    bad = _edited(legacy_dir, tmp_path, "rank1/meta.json", edit)
    code, _, err = cli_in_process("list", "--program-dir", bad)
    assert code == 2 and one_error_line(err, needle), err


@pytest.mark.parametrize("name,edit,needle", [
    ("rank1/meta.json", _set(version=99), "rank1/meta.json: version: 99 is newer"),
    ("rank1/meta.json", _drop("counter"), "rank1/meta.json: counter: must be an integer"),
    ("rank0/names.json", lambda d: {"a": 1}, "rank0/names.json: (top level): must be a list"),
    ("rank0/planner.json", _set(gradient_merge={"k_steps": 0, "avg": True}),
     "rank0/planner.json: gradient_merge.k_steps: must be >= 1"),
    ("rank0/planner.json", _set(version=99), "rank0/planner.json: version: 99 is newer"),
    ("rank0/planner.json", _set(eager_gradients={"with_grad": [3], "error": None}),
     "rank0/planner.json: eager_gradients.with_grad[0]: must be a non-empty string"),
    ("plan.json", _set(mesh=[0, -1]), "plan.json: mesh: mesh[1] is -1"),
])
def test_bad_pir_dir_files_are_one_line(pir_dir, tmp_path, name, edit, needle):
    """A PIR dir's meta.json of a newer version was accepted; mesh [0, -1]
    was judged (the planner NOT_EQUIVALENT)."""
    bad = _edited(pir_dir, tmp_path, name, edit)
    code, _, err = cli_in_process("list", "--program-dir", bad)
    assert code == 2 and one_error_line(err, needle), err


def test_a_bad_plan_json_through_the_real_command(legacy_dir, pir_dir, tmp_path):
    from cases.program_dirs import load_program_dir

    assert load_program_dir(str(legacy_dir)).ranks == [0, 1]  # valid dirs still load
    assert load_program_dir(str(pir_dir)).ranks == [0, 1]
    bad = _edited(legacy_dir, tmp_path, "plan.json", _set(rings=[[0, 1]]))
    p = verify("run", "--program-dir", bad, "--backend", "none", "--report-dir",
               tmp_path / "r", timeout=300)
    assert p.returncode == 2 and one_error_line(p.stderr, "plan.json: rings:"), p.stderr


# ------------------------------------------------------------ --paddle-file
@pytest.mark.parametrize("text,needle", [
    ('raise RuntimeError("boom at import")\n', "does not import: RuntimeError: boom at import"),
    ("def f(:\n", "does not compile: SyntaxError"),
])
def test_paddle_file_that_does_not_import_is_one_line(tmp_path, text, needle):
    """Once a traceback at ``import paddle`` (the module is one Paddle imports)."""
    f = tmp_path / "paddle" / "distributed" / "passes" / "pass_utils.py"
    f.parent.mkdir(parents=True)
    f.write_text(text)
    p = verify("run", "--paddle-file", f, "--pass", "overlap", "--case", "col_3d_static",
               "--backend", "none", "--report-dir", tmp_path / "r", timeout=300)
    assert p.returncode == 2 and one_error_line(p.stderr, f"--paddle-file {f}", needle), \
        p.stderr[-3000:]


# ------------------------------------------------------------ report directories
def test_second_run_on_the_same_report_dir_exits_2(tmp_path):
    """The first run holds the dir (its pass loops until stopped); the
    second is refused at once instead of both writing one report."""
    out = tmp_path / "rep"
    first = subprocess.Popen(
        [sys.executable, "-m", "verify", "run", "--pass", "overlap", "--case",
         "col_3d_static", "--pass-file", str(FAULTS / "loops.py"), "--backend", "none",
         "--timeout", "120", "--report-dir", str(out)], cwd=str(ROOT),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FAULT_STARTED": str(tmp_path / "started")})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (tmp_path / "started").exists():
            time.sleep(0.2)  # the first run is applying its pass: it holds the dir
        assert (tmp_path / "started").exists(), "the first run did not start"
        second = verify("run", "--pass", "overlap", "--case", "col_3d_static", "--backend",
                        "none", "--report-dir", out, timeout=300)
        assert second.returncode == 2, second.stdout + second.stderr
        assert one_error_line(second.stderr, str(out), "in use by another run",
                              f"pid {first.pid}"), second.stderr
        assert first.poll() is None  # untouched
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 143
    assert json.loads((out / "report.json").read_text())["interrupted"] == "SIGTERM"


def test_runs_started_in_the_same_second_get_their_own_dirs(tmp_path, monkeypatch):
    """Once both wrote reports/run-<second>: one report lost, both exit 0."""
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: fmt.replace(
        "%Y%m%d-%H%M%S", "20261205-010203"))  # the clock stopped: one second
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # two whole runs, default dirs: two reports
        code, out, err = cli_in_process("run", "--pass", "overlap", "--case", "col_3d_static",
                                        "--backend", "none", "--no-isolation", "--quiet")
        assert code == 0, out + err
    runs = sorted((tmp_path / "reports").glob("run-20261205-010203*"))
    assert len(runs) == 2 and all((r / "report.json").is_file() for r in runs), runs
    # subset runs: reports/last moves, reports/latest (the last full run) does not
    assert os.readlink(tmp_path / "reports" / "last") in {r.name for r in runs}
    assert not os.path.lexists(tmp_path / "reports" / "latest")

    from verify.report.write import DirLock, run_dir_name

    names = {run_dir_name("run", str(tmp_path)) for _ in range(20)}
    assert len(names) == 20
    assert all(os.path.basename(n).startswith(f"run-20261205-010203-{os.getpid()}-")
               for n in names)
    # and the same explicit dir twice: the second lock is refused
    with DirLock(str(tmp_path / "d")):
        code, _, err = cli_in_process("run", "--pass", "overlap", "--case", "col_3d_static",
                                      "--backend", "none", "--report-dir", tmp_path / "d")
    assert code == 2 and one_error_line(err, "in use by another run"), err


def test_latest_is_switched_atomically(tmp_path, monkeypatch):
    """``latest`` is never missing: the new link is made under a temporary
    name while the old one stands, then renamed over it."""
    from verify.report.write import point_latest

    real, present = os.symlink, []

    def symlink(src, dst, *a, **kw):
        present.append(os.path.lexists(tmp_path / "latest"))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "symlink", symlink)
    for name in ("run-a", "run-b", "run-c"):
        (tmp_path / name).mkdir()
        point_latest(str(tmp_path / name))
        assert os.readlink(tmp_path / "latest") == name
    assert present == [False, True, True]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "run-a", "run-b", "run-c"]


def _premerge(args, tmp_path):
    env = dict(os.environ, VERIFY_PREMERGE_CACHE=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [
        os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-m", "verify", "premerge", *map(str, args)],
                          cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300)


def _launch_checkout(tmp_path):
    """A checkout whose change reaches no pass under test (nothing runs)."""
    import premerge_checkout as co

    launch = "paddle/distributed/launch/main.py"
    repo = co.make(tmp_path / "paddle", files=(co.PASS_UTILS, launch))
    co.edit(repo, launch, "def launch(", "def launch(  # edited\n", 1)
    co.commit(repo, "launch: a comment")
    return repo


def test_second_premerge_on_the_same_out_exits_2(tmp_path):
    from verify.report.write import DirLock

    repo = _launch_checkout(tmp_path)
    out = tmp_path / "out"
    with DirLock(str(out), "premerge run (--out)"):  # a first premerge holds it
        p = _premerge([repo, "--out", out], tmp_path)
    assert p.returncode == 2 and one_error_line(p.stderr, str(out), "in use"), p.stderr
    assert not (out / "summary.md").exists()
    p = _premerge([repo, "--out", out], tmp_path)  # free again
    assert p.returncode == 0, p.stdout + p.stderr


def test_premerge_lists_a_non_utf8_file_as_not_checked(tmp_path):
    repo = _launch_checkout(tmp_path)
    rel = "python/paddle/distributed/launch/latin.py"
    Path(repo, rel).write_bytes(b"# caf\xe9 au lait\nX = 1\n")  # latin-1, untracked
    out = tmp_path / "out"
    p = _premerge([repo, "--out", out], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert f"not checked: {rel}: not UTF-8 text" in p.stdout, p.stdout
    data = json.loads((out / "premerge.json").read_text())
    assert "not UTF-8" in data["unreadable"][rel]
    assert rel not in [path for _, path in data["python"]]
    summary = (out / "summary.md").read_text()
    assert "### Not checked (cannot be read as Python source)" in summary and rel in summary
