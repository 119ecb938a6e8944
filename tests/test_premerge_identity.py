"""Issue 35, points 1, 2, 7, 10 (words) and the planner's selection: findings
compared by identity (NEW where the verdict is unchanged, CHANGED CAUSE,
GONE), FIXED only where the pass still fires, unavailable families skipped
with one line, progress lines, the reproducer's header, and the planner
family selected for a change to a pass its stages apply (or a module that
no longer imports)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import premerge_checkout as co  # noqa: E402

from verify.engine import baseline  # noqa: E402
from verify.premerge import affected  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GM = "paddle/distributed/passes/auto_parallel_gradient_merge.py"
GM_MOD = "paddle.distributed.passes.auto_parallel_gradient_merge"


def _check(kind, name, rank, verdict, message, cx=None, details=None, advisory=False):
    return {"kind": kind, "name": name, "rank": rank, "verdict": verdict, "message": message,
            "counterexample": cx, "details": details or {}, "advisory": advisory}


WINDOW = _check("dataflow", "reaching definitions", 0, "NOT_EQUIVALENT",
                "p on c rank 0: op 15 (scale) reads linear_0.x_id@GRAD and sees another write")
CAST = _check("dataflow", "reaching definitions", 0, "NOT_EQUIVALENT",
              "p on c rank 0: op 12 (cast) reads linear_0.x_id@GRAD and sees another write")
VALUE = _check("value", "value proof", 0, "NOT_EQUIVALENT", "p on c rank 0: REFUTED",
               cx={"rank": 0, "var": "linear_0.x_id@GRAD@scaled"})
NUMERIC = _check("numeric", "simulated", 0, "NOT_EQUIVALENT", "p on c: loss differs",
                 cx={"rank": 0, "var": "loss"})
NOT_RUN = _check("numeric", "simulated", None, "INCONCLUSIVE", "not run (no numeric backend)")
CRASH = _check("pass", "pass ran", 0, "PASS_CRASHED",
               "p raised on case c rank 0: ValueError: (InvalidArgument) shape = [-4, 8]")
UNBOUND = _check("pass", "pass ran", 0, "PASS_CRASHED",
                 "p raised on case c rank 0: UnboundLocalError: local variable 'x'")


def _app(verdict, checks, fired=(True, True)):
    return {"verdict": verdict, "checks": checks,
            "rank_outcomes": [{"rank": r, "fired": f} for r, f in enumerate(fired)]}


def _entry(verdict, checks, fires=True):
    return {"verdict": verdict, "fires": fires,
            "findings": baseline.identities(_app(verdict, checks))}


# ---------------------------------------------------------------- identities
def test_identity_is_op_type_and_variable_never_the_op_index():
    a = baseline.identity(WINDOW)
    assert a == {"check": "dataflow/reaching definitions", "stage": "", "rank": 0,
                 "verdict": "NOT_EQUIVALENT", "op": "scale", "var": "linear_0.x_id@GRAD"}
    moved = dict(WINDOW, message=WINDOW["message"].replace("op 15", "op 17"))
    assert baseline.identity(moved) == a  # an inserted op shifts indices, not identity
    assert baseline.identity(CRASH)["error"] == "ValueError"
    pir = _check("contract", "after gradient_merge", 1, "CONTRACT_BROKEN",
                 "stage: op 66 (pd_op.set_value_with_tensor_): output %63 dim 0",
                 cx={"op_type": "pd_op.set_value_with_tensor_", "var": "%63",
                     "declared": [16, 8], "inferred": [8, 8]},
                 details={"stage": "gradient_merge"})
    i = baseline.identity(pir)
    assert i["stage"] == "gradient_merge" and i["op"] == "pd_op.set_value_with_tensor_"
    assert i["var"] == ""  # a PIR value number is a position, not a name
    # advisory and INCONCLUSIVE checks are not findings
    assert baseline.identities(_app("NOT_EQUIVALENT", [WINDOW, NOT_RUN,
                                                       dict(CAST, advisory=True)])) == [a]


def test_new_finding_on_a_case_that_already_has_one_is_new():
    """Masking: the verdict is unchanged, a finding was added."""
    entry = _entry("NOT_EQUIVALENT", [WINDOW])
    got = baseline.compare(entry, _app("NOT_EQUIVALENT", [WINDOW, VALUE]))
    assert got["label"] == "NEW", got
    assert got["new"] == [baseline.identity(VALUE)] and got["gone"] == []
    assert baseline.compare(entry, _app("NOT_EQUIVALENT", [WINDOW]))["label"] == "unchanged"


def test_changed_cause_and_gone():
    # the same check now fails on a cast instead of the window
    assert baseline.compare(_entry("NOT_EQUIVALENT", [WINDOW]),
                            _app("NOT_EQUIVALENT", [CAST]))["label"] == "CHANGED CAUSE"
    # a crash of another kind
    assert baseline.compare(_entry("PASS_CRASHED", [CRASH]),
                            _app("PASS_CRASHED", [UNBOUND]))["label"] == "CHANGED CAUSE"
    # one of two findings went away
    proved = _check("value", "value proof", 0, "EQUIVALENT", "proved")
    got = baseline.compare(_entry("NOT_EQUIVALENT", [WINDOW, VALUE]),
                           _app("NOT_EQUIVALENT", [WINDOW, proved]))
    assert got["label"] == "GONE" and got["gone"] == [baseline.identity(VALUE)]


def test_a_check_that_did_not_run_neither_keeps_nor_loses_its_findings():
    """The baseline's numeric findings (default backend) are not GONE in a
    run without a numeric backend."""
    entry = _entry("NOT_EQUIVALENT", [WINDOW, NUMERIC])
    got = baseline.compare(entry, _app("NOT_EQUIVALENT", [WINDOW, NOT_RUN]))
    assert got["label"] == "unchanged", got


def test_fixed_only_where_the_pass_still_fires():
    entry = _entry("PASS_CRASHED", [CRASH], fires=True)
    ok = _check("value", "value proof", 0, "EQUIVALENT", "proved")
    assert baseline.compare(entry, _app("EQUIVALENT", [ok]))["label"] == "FIXED"
    stopped = _app("EQUIVALENT", [ok], fired=(False, False))
    assert baseline.compare(entry, stopped)["label"] == "NEW"
    # an entry without recorded findings: the same rule on verdicts
    plain = {"verdict": "PASS_CRASHED", "fires": True}
    assert baseline.compare(plain, stopped)["label"] == "NEW"
    assert baseline.compare(plain, _app("EQUIVALENT", [ok]))["label"] == "FIXED"
    # premerge: the summary says NOT_APPLIED, not FIXED
    from verify.premerge.summary import Outcome, Review, render

    o = Outcome("p", "p", "c", "PASS_CRASHED", "EQUIVALENT",
                label=baseline.compare(plain, stopped)["label"])
    r = Review("co", "0" * 40, "HEAD~1", "rerun", [], [], [], {"p": ["m"]}, outcomes=[o])
    assert r.exit_code() == 1 and "**FIXED**" not in render(r)


def test_one_vocabulary_in_run_gate_and_premerge():
    from verify.premerge import summary

    for base, now in [("EQUIVALENT", "EQUIVALENT"), ("EQUIVALENT", "NOT_EQUIVALENT"),
                      ("PASS_CRASHED", "EQUIVALENT"), ("PASS_CRASHED", "NOT_APPLIED"),
                      ("NOT_EQUIVALENT", "INCONCLUSIVE")]:
        word = baseline.classify(base, now)
        assert word in baseline.LABELS and summary.classify(base, now) == word
    gate = (ROOT / "verify" / "test_gate.py").read_text()
    assert "baseline.compare(" in gate and "as baseline" not in gate


def test_run_compares_by_identity(monkeypatch):
    """``verify run``'s exit and words: a new identity on an unchanged verdict."""
    from verify import cli

    entry = _entry("NOT_EQUIVALENT", [WINDOW])
    monkeypatch.setattr(baseline, "load", lambda path=None: {"entries": {"p::c": entry}})

    class App:
        pass_name, case_name = "p", "c"

    app = App()
    rep = {"applications": [dict(_app("NOT_EQUIVALENT", [WINDOW, VALUE]), **{
        "pass": "p", "case": "c", "expected": "NOT_EQUIVALENT", "expected_fires": True,
        "case_file": ""})]}
    cli._compare_with_baseline([app], rep)
    assert app.baseline_label == "NEW"
    assert rep["applications"][0]["baseline"]["new"] == [baseline.identity(VALUE)]


def test_baseline_from_report_records_identities_and_check_ignores_them(tmp_path,
                                                                        monkeypatch):
    from verify import cli
    from verify.report import findings

    path, md = tmp_path / "baseline.json", tmp_path / "findings.md"
    data = baseline.current(baseline.load())
    k = "allreduce_matmul_grad_overlapping::col_window_reads_xgrad"
    data["entries"][k].pop("findings", None)
    path.write_text(baseline.render(data))
    md.write_text(findings.render(data))
    monkeypatch.setattr(baseline, "PATH", str(path))
    monkeypatch.setattr(findings, "PATH", str(md))
    report = {"applications": [dict(_app("NOT_EQUIVALENT", [WINDOW, VALUE]), **{
        "pass": "allreduce_matmul_grad_overlapping", "case": "col_window_reads_xgrad"})]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    args = cli._parser().parse_args(["baseline", "--from-report",
                                     str(tmp_path / "report.json")])
    assert cli.cmd_baseline(args, out=open(os.devnull, "w")) == 0
    got = json.loads(path.read_text())["entries"][k]["findings"]
    assert got == baseline.identities(report["applications"][0])
    # --check compares what the cases declare: the recorded findings are kept
    import argparse
    assert cli.cmd_baseline(argparse.Namespace(check=True, from_report=[]),
                            out=open(os.devnull, "w")) == 0
    # deterministic: the same report writes the same file
    before = path.read_text()
    assert cli.cmd_baseline(args, out=open(os.devnull, "w")) == 0
    assert path.read_text() == before


def test_the_baseline_records_identities_from_a_run():
    entries = baseline.load()["entries"]
    recorded = {k: e for k, e in entries.items() if "findings" in e}
    assert recorded, "no finding identities recorded: python -m verify baseline --from-report"
    for k, e in recorded.items():
        assert (e["verdict"] == "EQUIVALENT") == (e["findings"] == []) or \
            e["verdict"] in ("INCONCLUSIVE",), k


# ------------------------------------------------------------ selection
@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    return {"VERIFY_PREMERGE_CACHE": str(tmp_path_factory.mktemp("premerge-cache"))}


def _installed(rel):
    return Path(affected.installed_root(), rel).read_text()


def test_a_pass_the_planner_applies_selects_the_planner_family(cache_env):
    """By what the planner's applications ran (verify/executed_files.json):
    the gradient-merge scale and a 1F1B scheduler method select the planner
    applications that ran them, and not the others (the summed merge does
    not scale; the pipeline cases merge their micro-batches' gradients)."""
    got = affected.affected({GM_MOD: _installed(GM).replace(
        "optimizer_op, 1.0 / k_steps)", "optimizer_op, 1.0)")},
        cache_dir=cache_env["VERIFY_PREMERGE_CACHE"])
    assert "planner" in got.passes and GM_MOD in got.planner, got
    assert got.how["planner::planner_tp2_gm"] == "executed"
    assert got.how["planner::planner_pp2_1f1b"] == "executed"
    assert not {"planner_dp2_gm_sum", "planner_tp2"} & set(got.cases["planner"])
    rel = "paddle/distributed/passes/pipeline_scheduler_pass/pipeline_1f1b.py"
    text = _installed(rel)
    assert "def _create_job_list_in_pir(self):\n" in text
    got = affected.affected({affected.module_of(rel): text.replace(
        "def _create_job_list_in_pir(self):\n",
        "def _create_job_list_in_pir(self):\n        assert True\n", 1)},
        cache_dir=cache_env["VERIFY_PREMERGE_CACHE"])
    assert got.how["planner::planner_pp2_1f1b"] == "executed", got.how
    assert "planner_tp2_gm" not in got.cases["planner"]


@pytest.mark.parametrize("how", ["syntax", "deleted"])
def test_a_pass_module_that_no_longer_imports_is_selected(cache_env, how):
    if how == "syntax":
        got = affected.affected({GM_MOD: _installed(GM) + "\ndef broken(:\n"},
                                cache_dir=cache_env["VERIFY_PREMERGE_CACHE"])
    else:
        got = affected.affected({}, deleted=[GM_MOD],
                                cache_dir=cache_env["VERIFY_PREMERGE_CACHE"])
    assert GM_MOD in got.passes.get("auto_parallel_gradient_merge_pass", []), got
    assert "auto_parallel_gradient_merge_pass" not in got.unmapped
    assert "planner" in got.passes


# ------------------------------------------------------------ end to end
def premerge(args, env_extra, timeout=600):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([p for p in [env_extra.get("PYTHONPATH_FIRST"),
                                                     str(ROOT), os.environ.get("PYTHONPATH")]
                                         if p])
    return subprocess.run([sys.executable, "-m", "verify", "premerge", *args], cwd=str(ROOT),
                          env=env, capture_output=True, text=True, timeout=timeout)


def _no_models(tmp_path) -> str:
    """A site dir that makes the zoo unavailable: a paddleformers of another
    version than the pinned one shadows the installed one."""
    site = tmp_path / "no_models"
    (site / "paddleformers").mkdir(parents=True)
    (site / "paddleformers" / "__init__.py").write_text("")
    info = site / "paddleformers-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: paddleformers\n"
                                   "Version: 0.0.1\n")
    return str(site)


def test_unavailable_family_is_skipped_with_one_line_and_progress_is_printed(
        tmp_path, cache_env):
    repo = co.make(tmp_path / "paddle")
    co.mend_fold(repo)
    out = tmp_path / "out"
    env = dict(cache_env, PYTHONPATH_FIRST=_no_models(tmp_path))
    p = premerge([repo, "--out", str(out), "--pass", "vpp_split", "--case", "pir_mm_3d",
                  "--case", "zoo_llama_tp2", "--backend", "none", "--no-vocabulary"], env)
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads((out / "premerge.json").read_text())
    assert data["errors"] == [], data["errors"]
    assert [s["family"] for s in data["skipped"]] == ["zoo"]
    assert [a["case"] for a in data["applications"]] == ["pir_mm_3d"]
    skipped = [ln for ln in p.stdout.splitlines() if "skipped family zoo" in ln]
    assert skipped and "paddleformers" in skipped[0]
    # progress: one line per pass and one per application
    assert any(ln.startswith("premerge: vpp_split (") for ln in p.stdout.splitlines())
    assert any(ln.startswith("  [1/1] ") and "pir_mm_3d" in ln
               for ln in p.stdout.splitlines()), p.stdout
    assert "unchanged: vpp_split on pir_mm_3d" in p.stdout
    assert "**errors**" not in (out / "summary.md").read_text()


def test_changed_crash_is_a_changed_cause_not_unchanged(tmp_path, cache_env):
    """The overlap's crash on a dynamic batch, made another exception by the
    change: the verdict (PASS_CRASHED) is the baseline's, its cause is not."""
    k = "allreduce_matmul_grad_overlapping::col_3d_dynamic_batch"
    assert "findings" in baseline.load()["entries"][k], "record identities first"
    repo = co.make(tmp_path / "paddle")
    co.edit(repo, co.PASS_UTILS, co.FOLD_331,
            "new_x_dims = [x_dims[0] * x_dims[1], *list(x_dims[2:])]\n"
            "    if x_dims[0] < 0:\n"
            "        raise KeyError('mutant: a dynamic batch')", 1)
    co.commit(repo, "pass_utils: the legacy fold raises another error")
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out), "--pass", "overlap", "--case",
                  "col_3d_dynamic_batch", "--backend", "none", "--no-vocabulary",
                  "--no-cache"], cache_env)
    assert p.returncode == 1, p.stdout + p.stderr
    [a] = json.loads((out / "premerge.json").read_text())["applications"]
    assert (a["kind"], a["verdict"], a["baseline"]) == ("CHANGED CAUSE", "PASS_CRASHED",
                                                        "PASS_CRASHED"), a
    assert {i.get("error") for i in a["new"]} == {"KeyError"}
    assert "CHANGED CAUSE: allreduce_matmul_grad_overlapping on col_3d_dynamic_batch" \
        in p.stdout
    assert "**CHANGED CAUSE** `col_3d_dynamic_batch`" in (out / "summary.md").read_text()


def test_a_pass_module_that_does_not_compile_is_new(tmp_path, cache_env):
    repo = co.make(tmp_path / "paddle", files=(co.PASS_UTILS, GM))
    co.edit(repo, GM, "import paddle", "import paddle\ndef broken(:\n    pass", 1)
    co.commit(repo, "gradient merge: a syntax error")
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out), "--pass", "auto_parallel_gradient_merge_pass",
                  "--case", "pir_gm_sgd_avg_k2", "--backend", "none", "--no-vocabulary",
                  "--no-cache"], cache_env)
    assert p.returncode == 1, p.stdout + p.stderr
    data = json.loads((out / "premerge.json").read_text())
    assert [(a["case"], a["kind"]) for a in data["applications"]] == [
        ("pir_gm_sgd_avg_k2", "NEW")], data
    assert "auto_parallel_gradient_merge_pass" not in data["not_selected"]


def test_reproducer_header_states_the_verdict_found(tmp_path):
    """A run's reproducer of a finding its pass file makes (the overlap with
    its stream dropped: CONTRACT_BROKEN on a case whose baseline is
    EQUIVALENT) states the verdict found, the baseline's apart (it printed
    the baseline's verdict as the one found)."""
    import base64
    import re
    import zlib

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    r = subprocess.run([sys.executable, "-m", "verify", "run", "--case", "col_3d_static",
                        "--pass-file", str(ROOT / "tests" / "mutants" /
                                           "overlap_stream_dropped.py"),
                        "--backend", "none", "--quiet", "--report-dir", str(tmp_path / "r")],
                       cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    [app] = rep["applications"]
    assert app["baseline"]["label"] == "NEW", app["baseline"]
    text = (tmp_path / "r" / app["reproducer"]).read_text()
    blob = re.search(r'PAYLOAD = json.loads\(zlib.decompress\(base64.b64decode\("""\n(.*?)\n"""',
                     text, re.S).group(1)
    payload = json.loads(zlib.decompress(base64.b64decode(blob.replace("\n", ""))))
    assert (payload["found"], payload["expected"]) == (app["verdict"], "EQUIVALENT")
    assert app["verdict"] != "EQUIVALENT"
    assert "the suite found: " in text and "PAYLOAD.get('found')" in text


def test_a_gradient_merge_change_is_caught_by_the_planner_family(tmp_path, cache_env):
    """The merged gradient left unaveraged in the gradient-merge pass module
    (``tests/planner_mutant_edits.py``: gm_no_avg_scale): premerge selects the
    planner family (its stages apply the pass through ``new_pass``), whose
    merged plan runs against the serial micro-steps: NEW on planner_tp2_gm
    (it said "no new finding": the planner was never selected for passes/)."""
    import planner_mutant_edits as edits

    rel, old, new = edits.EDITS["gm_no_avg_scale"]
    repo = co.make(tmp_path / "paddle", files=(co.PASS_UTILS, "paddle/" + rel))
    co.edit(repo, "paddle/" + rel, old, new, 1)
    co.commit(repo, "gradient merge: the merged gradient is not averaged")
    out = tmp_path / "out"
    p = premerge([repo, "--out", str(out), "--pass", "planner", "--case", "planner_tp2_gm",
                  "--backend", "simulated", "--no-vocabulary", "--no-cache"], cache_env,
                 timeout=900)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads((out / "premerge.json").read_text())
    assert [(a["case"], a["kind"]) for a in data["applications"]] == [
        ("planner_tp2_gm", "NEW")], data["applications"]
    assert "paddle.distributed.passes.auto_parallel_gradient_merge" in data["planner"]


def test_the_models_group_decides_which_families_premerge_skips(tmp_path):
    """premerge asks the runs' environment which case families it can build:
    with ``paddleformers`` (the ``models`` group) nothing is unavailable and
    the zoo's cases are run; without it (a shadowing paddleformers of another
    version) the zoo is named with why, and its case names are known so they
    can be skipped with one line."""
    from verify.premerge import run

    def env(*first):
        return dict(os.environ, PYTHONPATH=os.pathsep.join(
            [*first, str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))

    assert run._unavailable_cases(env()) == {}
    got = run._unavailable_cases(env(_no_models(tmp_path)))
    assert set(got) == {"zoo"} and "paddleformers" in got["zoo"][0]
    assert "zoo_llama_tp2" in got["zoo"][1]


def test_the_planner_family_skips_the_zoo_without_models(tmp_path, cache_env):
    """``pip install -e .`` without the ``models`` group: a change that
    selects the planner's zoo cases skips them with one line per pass,
    never an error (their runs exited 2 and the summary said "errors")."""
    repo = co.make(tmp_path / "paddle")
    co.mend_fold(repo)
    out = tmp_path / "out"
    env = dict(cache_env, PYTHONPATH_FIRST=_no_models(tmp_path))
    p = premerge([repo, "--out", str(out), "--pass", "planner", "--case", "zoo_llama_tp2*",
                  "--backend", "none", "--no-vocabulary"], env)
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads((out / "premerge.json").read_text())
    assert data["errors"] == [] and data["applications"] == [], data
    assert [(s["pass"], s["family"]) for s in data["skipped"]] == [("planner", "zoo")]
    assert "skipped family zoo for planner: 3 case(s) not run" in p.stdout, p.stdout
    assert "**errors**" not in (out / "summary.md").read_text()
