"""The pass judged is the pass under review, on every path.

A small wrong edit of an installed pass (tests/wrong_pass_files.py: one
token changed, values differ, shapes agree) is given as a ``--pass-file`` or
as a ``--paddle-file`` overlay; every path that applies a pass must judge the
program the edited code builds, so each must say NOT_EQUIVALENT (and record
the file by sha256) where the installed pass is EQUIVALENT on the same case.
A path that silently applied the installed pass instead would report
EQUIVALENT and fail here.  A path that cannot load the code under review
must refuse with an error naming it (``test_..._is_refused``).

Reproducers (every kind: legacy, PIR one-rank, PIR multi-rank) embed the
pass under review: written from the wrong pass file, deleted before the
script runs in a fresh interpreter with only Paddle (``python -I``, empty
directory, no PYTHONPATH), they exit 1 with NOT_EQUIVALENT; written for the
installed pass, 0.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
import wrong_pass_files  # noqa: E402
from verify.engine import isolation  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.engine.matrix_runner import pick_backend  # noqa: E402
from verify.ir.pass_files import load_pass_file  # noqa: E402
from verify.repro import reproducer as repro  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = json.load(open(os.path.join(ROOT, "verify", "baseline.json")))["entries"]
PASS_UTILS = "paddle.distributed.passes.pass_utils"  # where the VPP split's helper lives


def _sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _run_isolated(path, cwd):
    """The script in a fresh interpreter with only Paddle: -I, no PYTHONPATH,
    none of the suite's environment."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("PADDLE_", "VERIFY_", "FLAGS_"))}
    os.makedirs(cwd, exist_ok=True)
    p = subprocess.run([sys.executable, "-I", str(path)], cwd=str(cwd), env=env,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def _suite(*args, cwd=ROOT):
    """``python <args>`` from the project root with a clean overlay env."""
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_PADDLE_OVERLAY"}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, *args], cwd=str(cwd), env=env,
                       capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout, p.stderr


def _pass_utils_edit(tmp_path) -> str:
    """``MODULE=PATH`` of pass_utils.py with the VPP split's dW operands swapped
    (the same edit as the pass file, as a change to Paddle's tree would make it)."""
    import inspect

    from paddle.distributed.passes import pass_utils

    text = wrong_pass_files._edit(inspect.getsource(pass_utils),
                                  "paddle._C_ops.matmul(new_x, new_out_grad, True, False)",
                                  "paddle._C_ops.matmul(new_out_grad, new_x, True, False)")
    path = tmp_path / "pass_utils.py"
    path.write_text(text)
    return f"{PASS_UTILS}={path}"


# -- reproducers of every kind embed the pass under review ----------------------
REPRO_CASES = [  # (kind, pass, case where the installed pass is EQUIVALENT and fires)
    ("pir", "vpp_split", "pir_mm_3d", wrong_pass_files.vpp_dw_operands_swapped),
    ("pir_ranks", "vpp_split", "rs_sp_bias", wrong_pass_files.vpp_dw_operands_swapped),
    ("legacy", "overlap", "col_3d_static", wrong_pass_files.overlap_removes_the_writer_of_dy),
]


@pytest.mark.parametrize("kind,short,case_name,edit", REPRO_CASES,
                         ids=[k for k, *_ in REPRO_CASES])
def test_a_reproducer_applies_the_embedded_pass_file(kind, short, case_name, edit, tmp_path):
    """The wrong file's reproducer exits 1 (NOT_EQUIVALENT), the installed
    pass's 0 (for the legacy kind that half is
    tests/test_repro.py::test_equivalent_reproducer_exits_0, the same
    application).  The PIR one-rank case also checks the embedded text
    against its sha256: the script edited after it was written exits 2."""
    from verify.repro.pir_script import kind as pir_kind

    adapter, case = passes.get(short), cases.all_cases()[case_name]
    entry = BASELINE[f"{adapter.name}::{case_name}"]
    assert entry["verdict"] == "EQUIVALENT" and entry["fires"], entry
    assert (pir_kind(adapter, case) if case.ir == "pir" else "legacy") == kind
    wrong = edit(tmp_path / f"wrong_{short}.py")
    sha = _sha(wrong)
    scripts = [repro.write(adapter, case, str(tmp_path / "bad.py"), wrong)]
    if kind != "legacy":
        scripts.append(repro.write(adapter, case, str(tmp_path / "good.py")))
    if kind == "pir":
        lines = open(scripts[0]).read().splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if ln.startswith("PASS_SOURCE = "))
        lines[at] = lines[at].replace("True, False", "False, False", 1)
        (tmp_path / "edited.py").write_text("".join(lines))
        scripts.append(str(tmp_path / "edited.py"))
    os.remove(wrong)  # the script carries it; nothing reads the file any more
    with ThreadPoolExecutor(len(scripts)) as pool:
        got = list(pool.map(lambda p: _run_isolated(p, tmp_path / "empty"), scripts))
    code, out, err = got[0]
    assert code == 1, f"exit {code}\n{out}\n{err[-3000:]}"
    assert "NOT_EQUIVALENT" in out and "DEFECT" in out, out
    assert f"pass source embedded from {wrong} (sha256 {sha})" in out, out
    if kind != "legacy":
        code, out, err = got[1]
        assert code == 0 and "no defect" in out, f"exit {code}\n{out}\n{err[-3000:]}"
        assert "installed Paddle" in out
    if kind == "pir":
        code, out, err = got[2]
        assert code == 2 and "sha256 differs" in out, out + err[-2000:]


# -- every path that applies a pass judges the pass under review ---------------
def _judged_by_file(app, path):
    """The application judged the wrong file's program: not EQUIVALENT, the
    value proof and the numeric run each refute it, and every lookup of the
    pass under test resolved to the file (path and sha256)."""
    by = {(c.kind, c.name): c for c in app.checks}
    assert app.verdict.value == "NOT_EQUIVALENT", \
        [(c.name, c.rank, c.verdict.value, c.message[:160]) for c in app.checks]
    assert by[("value", "value proof")].verdict.value == "NOT_EQUIVALENT"
    assert [c for c in app.checks if c.kind == "numeric" and
            c.verdict.value == "NOT_EQUIVALENT"], "no numeric run judged the file's program"
    tested = set(passes.get("vpp_split").tested_passes())
    records = [r for r in app.applied if r["pass"] in tested]
    assert records and all(r["source"] == "file" and r["path"] == os.path.abspath(path)
                           and r["sha256"] == _sha(path) for r in records), app.applied


@pytest.mark.parametrize("isolated", [True, False], ids=["isolation-worker", "in-process"])
def test_an_application_judges_the_pass_file(isolated, tmp_path):
    """The isolation worker (pass files re-loaded there) and the in-process
    application, each with the value proof and the simulated numeric run."""
    wrong = wrong_pass_files.vpp_dw_operands_swapped(tmp_path / "wrong_vpp.py")
    before = isolation.settings()
    isolation.configure(enabled=isolated)
    loaded = load_pass_file(wrong)
    try:
        _, numeric = pick_backend("simulated")
        app = run_application(passes.get("vpp_split"), cases.all_cases()["pir_mm_3d"],
                              source=loaded.path, numeric=numeric)
    finally:
        loaded.restore()
        isolation.configure(**before)
    _judged_by_file(app, wrong)


def test_a_run_and_its_reproducer_judge_the_pass_file(tmp_path):
    """``python -m verify run --pass-file`` (isolation workers; the numeric
    runs are test_an_application_judges_the_pass_file's): NOT_EQUIVALENT, the file recorded; the reproducer the run
    writes for the finding embeds the file (the VPP split's file registers
    ``pipeline_scheduler_VPP``, not the adapter's name) and exits 1."""
    wrong = wrong_pass_files.vpp_dw_operands_swapped(tmp_path / "wrong_vpp.py")
    code, out, err = _suite("-m", "verify", "run", "--pass", "vpp_split", "--case",
                            "pir_mm_3d", "--pass-file", wrong, "--backend", "none",
                            "--report-dir", str(tmp_path / "r"))
    assert code == 1, out + err[-3000:]
    app = json.load(open(tmp_path / "r" / "report.json"))["applications"][0]
    assert app["verdict"] == "NOT_EQUIVALENT"
    assert app["applied"] == [{"pass": "pipeline_scheduler_VPP", "source": "file",
                               "path": wrong, "sha256": _sha(wrong)}]
    os.remove(wrong)
    code, out, err = _run_isolated(tmp_path / "r" / app["reproducer"], tmp_path / "empty")
    assert code == 1 and "NOT_EQUIVALENT" in out, out + err[-3000:]


def test_a_paddle_file_run_and_its_reproducer_judge_the_overlay(tmp_path):
    """``python -m verify run --paddle-file``: the isolation workers load the
    overlay at start (the application judges the edited pass_utils.py), and
    so does the run's own process, which writes the reproducer: it embeds
    the overlay's text and exits 1 with no overlay on disk or in the env.
    (In-process application under an overlay: the gate test below.)"""
    spec = _pass_utils_edit(tmp_path)
    code, out, err = _suite("-m", "verify", "run", "--pass", "vpp_split", "--case",
                            "pir_mm_3d", "--paddle-file", spec,
                            "--backend", "none", "--report-dir", str(tmp_path / "r"))
    assert code == 1, out + err[-3000:]
    rep = json.load(open(tmp_path / "r" / "report.json"))
    app = rep["applications"][0]
    assert app["verdict"] == "NOT_EQUIVALENT", app["checks"]
    assert app["source"].startswith("paddle-file: " + PASS_UTILS), app["source"]
    os.remove(spec.split("=", 1)[1])
    path = tmp_path / "r" / app["reproducer"]
    code, out, err = _run_isolated(path, tmp_path / "empty")
    assert code == 1 and "NOT_EQUIVALENT" in out, out + err[-3000:]
    assert f"Paddle sources under review, embedded: {PASS_UTILS}" in out, out


def test_the_gate_under_xdist_judges_pass_file_and_overlay(tmp_path):
    """The pytest gate under xdist (``-n 1``: a worker process, applying in
    it, ``--no-isolation``, so the worker itself must have loaded the
    overlay at start): a ``--pass-file`` (the overlap pass's
    wrong edit) and a ``--paddle-file`` (pass_utils.py's) at once; the
    workers apply each: neither application is EQUIVALENT, and the report
    records the file by sha256 / the overlay as its source."""
    overlap = wrong_pass_files.overlap_removes_the_writer_of_dy(tmp_path / "wrong_overlap.py")
    spec = _pass_utils_edit(tmp_path)
    code, out, err = _suite(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "verify/test_gate.py", "-n", "1",
        "-k", "(vpp_split and pir_mm_3d-) or (overlap and col_3d_static-)",
        "--pass-file", overlap, "--paddle-file", spec, "--backend", "none", "--no-isolation",
        "--report-dir", str(tmp_path / "g"))
    assert code == 1, out[-3000:] + err[-3000:]  # both differ from the baseline
    apps = {a["pass"]: a for a in
            json.load(open(tmp_path / "g" / "report.json"))["applications"]}
    vpp, ovl = apps["_pir_split_matmul_grad_to_matmul"], apps["allreduce_matmul_grad_overlapping"]
    assert vpp["verdict"] == "NOT_EQUIVALENT", vpp["checks"]
    assert vpp["source"].startswith("paddle-file: " + PASS_UTILS)
    assert ovl["verdict"] != "EQUIVALENT"
    assert {r["source"] for r in ovl["applied"] if r["pass"] == ovl["pass"]} == {"file"}
    assert {r["sha256"] for r in ovl["applied"] if r["pass"] == ovl["pass"]} == {_sha(overlap)}


def test_in_process_work_under_an_overlay_not_loaded_here_is_refused(tmp_path, monkeypatch):
    """``cli.main`` called in a process that imported the installed Paddle
    first cannot load a --paddle-file overlay: with --no-isolation (the
    passes would be applied here) it refuses, exit 2, one line naming the
    pass; a job falling back to this process is refused naming pass, case
    and rank."""
    from verify import cli
    from verify.ir.paddle_overlay import ENV, OverlayError

    # export() sets both: recorded here so that teardown puts them back (a
    # delenv of an unset var records nothing, and the overlay then leaked
    # into every later test of this xdist worker)
    monkeypatch.setenv(ENV, "")
    monkeypatch.delenv(ENV)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    spec = _pass_utils_edit(tmp_path)
    import io

    err = io.StringIO()
    from contextlib import redirect_stderr

    with redirect_stderr(err):
        code = cli.main(["run", "--pass", "vpp_split", "--case", "pir_mm_3d",
                         "--paddle-file", spec, "--no-isolation", "--backend", "none",
                         "--report-dir", str(tmp_path / "r")])
    assert code == 2, err.getvalue()
    assert "vpp_split would be applied in this process" in err.getvalue()
    before = isolation.settings()
    isolation.configure(enabled=False)
    try:
        with pytest.raises(OverlayError, match="_pir_split_matmul_grad_to_matmul on case "
                                               "pir_mm_3d rank 0"):
            isolation.run_pass(passes.get("vpp_split"), cases.all_cases()["pir_mm_3d"], 0)
    finally:
        isolation.configure(**before)
