"""``python -m verify repro``: one self-contained reproducer per application.

Every finding of the baseline gets a reproducer that, run in a fresh
interpreter with only Paddle (``python -I`` from an empty directory, no
PYTHONPATH), exits 1 on today's Paddle; an EQUIVALENT application's exits 0.
The default run checks a stratified sample of the findings (``SAMPLE``: every
reproducer kind, pass, finding class and case family); ``--sweep all`` every one.
"""
import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from verify.ir import legacy_ir  # noqa: F401

import cases  # noqa: E402
import passes  # noqa: E402
from verify.engine import baseline  # noqa: E402
from verify.repro import reproducer as repro

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDINGS = sorted((k.split("::")[0], k.split("::")[1], e["verdict"])
                  for k, e in baseline.load()["entries"].items()
                  # a finding is a defect to reproduce; INCONCLUSIVE is none (a proof
                  # over budget, say: the reproducer's runs then agree, exit 0)
                  if e["verdict"] not in ("EQUIVALENT", "INCONCLUSIVE")
                  # an adapter may say why no standalone script can reproduce it
                  and not getattr(passes.get(k.split("::")[0]), "repro_blocker", "")
                  # and a case (the zoo's planned models; absent where its optional
                  # dependencies are): cases/zoo.py says why
                  and not (cases.all_cases(declared=True)[k.split("::")[1]].params
                           .get("repro_blocker")))


# The reproducer's kinds, as ``repro.script`` dispatches: the legacy template,
# and for PIR cases the adapter's own kind (``repro_kind``) or the PIR script.
KINDS = ("legacy", "pir", "pir_ranks", "micro_steps")


def repro_kind(pass_name, case_name) -> str:
    """Which kind of reproducer ``repro.write`` makes for this application."""
    from verify.repro.pir_script import kind

    case = cases.all_cases(declared=True)[case_name]
    if getattr(case, "ir", "legacy") != "pir":
        return "legacy"
    return kind(passes.get(pass_name), case)  # the adapter's own, multi-rank, or "pir"


def _stratum(finding):
    """What a finding's reproducer exercises: its kind, the pass (its attrs,
    preceding passes, apply source) and the finding class (the evidence it
    must print)."""
    pass_name, case_name, verdict = finding
    return repro_kind(pass_name, case_name), pass_name, verdict


def _family(finding):
    return cases.all_cases(declared=True)[finding[1]].family


def _sample(findings):
    """A deterministic stratified sample: one finding per (kind, pass,
    finding class), preferring a case family not yet covered, then one more
    per family still uncovered (case families build their programs
    differently: hand-built, engine-planned, planner-planned).  Within a
    stratum the pick is by a hash of the application's name (stable, not
    by name order)."""
    def order(f):
        return hashlib.sha256(f"{f[0]}::{f[1]}".encode()).hexdigest()

    strata = {}
    for f in sorted(findings, key=order):
        strata.setdefault(_stratum(f), []).append(f)
    picked, families = [], set()
    for key in sorted(strata):
        members = strata[key]
        f = next((m for m in members if _family(m) not in families), members[0])
        picked.append(f)
        families.add(_family(f))
    for f in sorted(findings, key=order):
        if _family(f) not in families:
            picked.append(f)
            families.add(_family(f))
    return sorted(picked)


SAMPLE = _sample(FINDINGS)


def pytest_generate_tests(metafunc):
    """Every finding's reproducer under ``--sweep all``; by default the
    stratified sample, the others reported skipped naming the flag."""
    if "finding" not in metafunc.fixturenames:
        return
    every = metafunc.config.getoption("sweep", default="sample") == "all"
    sampled = set(SAMPLE)
    metafunc.parametrize("finding", [
        pytest.param(f, id=f"{f[0].split('_')[-1]}-{f[1]}", marks=() if every or f in sampled
                     else pytest.mark.skip(reason=(
                         "sampled out: the default run covers every reproducer kind, pass, "
                         "finding class and case family (test_the_sample_covers_every_"
                         "kind_pass_and_finding_class); `--sweep all` runs every finding's "
                         "reproducer")))
        for f in FINDINGS])


def _run_isolated(path, cwd):
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("PADDLE_", "VERIFY_", "FLAGS_"))}
    p = subprocess.run([sys.executable, "-I", str(path)], cwd=str(cwd), env=env,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def _write(tmp_path, pass_name, case_name):
    adapter = passes.get(pass_name)
    return repro.write(adapter, cases.all_cases()[case_name],
                       str(tmp_path / f"{adapter.short}_{case_name}.py"))


def test_the_baseline_has_findings():
    assert len(FINDINGS) >= 10


def test_the_sample_covers_every_kind_pass_and_finding_class():
    """The default sample stands for the whole sweep: every reproducer kind
    the findings need, every (kind, pass, finding class) and every case
    family with a finding has a member in it."""
    assert {_stratum(f) for f in SAMPLE} == {_stratum(f) for f in FINDINGS}
    assert {_family(f) for f in SAMPLE} == {_family(f) for f in FINDINGS}
    kinds = {_stratum(f)[0] for f in FINDINGS}
    assert kinds <= set(KINDS) and len(kinds) == len(KINDS), kinds
    assert {v for _, _, v in SAMPLE} == {"PASS_CRASHED", "NOT_APPLIED", "NOT_EQUIVALENT",
                                         "CONTRACT_BROKEN"}
    assert set(SAMPLE) <= set(FINDINGS) and len(SAMPLE) < len(FINDINGS)


def test_repro_kind_is_the_kind_script_writes():
    """``repro_kind`` mirrors ``repro.script``'s dispatch (a drift would make
    the sample stratify on the wrong thing)."""
    from verify.repro import pir_script

    assert set(pir_script._KINDS) | {"legacy", "pir"} == set(KINDS)
    for pass_name, case_name, _ in SAMPLE:
        kind = repro_kind(pass_name, case_name)
        got = getattr(passes.get(pass_name), "repro_kind", None)
        case = cases.all_cases()[case_name]
        if kind in pir_script._KINDS:  # the adapter's own, or the lock-step one
            assert got == kind or (got is None and kind == "pir_ranks" and
                                   len(case.ranks) > 1)
        elif kind == "pir":
            assert got is None and case.ir == "pir" and len(case.ranks) == 1
        else:
            assert case.ir == "legacy"


def test_finding_reproducer_exits_1(finding, tmp_path):
    pass_name, case_name, verdict = finding
    path = _write(tmp_path, pass_name, case_name)
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    code, out, err = _run_isolated(path, run_dir)
    assert code == 1, f"{path}: exit {code}\n{out}\n{err[-3000:]}"
    assert "DEFECT" in out
    evidence = {"PASS_CRASHED": "Traceback", "NOT_APPLIED": "did nothing",
                "NOT_EQUIVALENT": "NOT_EQUIVALENT",
                "CONTRACT_BROKEN": "CONTRACT_BROKEN"}[verdict]
    assert evidence in out, out


def test_equivalent_reproducer_exits_0(tmp_path):
    path = _write(tmp_path, "allreduce_matmul_grad_overlapping", "col_3d_static")
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    code, out, err = _run_isolated(path, run_dir)
    assert code == 0, f"exit {code}\n{out}\n{err[-3000:]}"
    assert "no defect" in out


def test_reproducer_imports_nothing_of_the_suite(tmp_path):
    path = _write(tmp_path, "allreduce_matmul_grad_overlapping", "col_3d_static")
    text = open(path).read()
    for mod in ("verify", "cases", "passes"):
        assert f"import {mod}" not in text and f"from {mod}" not in text


def test_embedded_pass_file_decides(tmp_path):
    """A mended pass file embedded in the reproducer of a crash: exit 0."""
    mended = os.path.join(ROOT, "tests", "fixed_passes", "overlap_fold_mended.py")
    out = tmp_path / "r.py"
    p = subprocess.run([sys.executable, "-m", "verify", "repro", "--pass", "overlap",
                        "--case", "col_3d_dynamic_batch", "--pass-file", mended,
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    code, stdout, err = _run_isolated(out, tmp_path)
    assert code == 0, stdout + err
    assert "pass source embedded from" in stdout and "no defect" in stdout


@pytest.mark.parametrize("args,needle", [
    (["--pass", "nope", "--case", "col_3d_static"], "unknown pass 'nope'"),
    (["--pass", "overlap", "--case", "nope"], "unknown case 'nope'"),
    (["--pass", "overlap", "--case", "col_3d_static", "--pass-file", "/no/such.py"],
     "does not exist"),
])
def test_repro_bad_input_is_one_line_and_exit_2(args, needle):
    p = subprocess.run([sys.executable, "-m", "verify", "repro", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], p.stderr


def test_html_report_links_each_findings_reproducer():
    from verify.report.html import render_html

    app = {"pass": "allreduce_matmul_grad_overlapping", "case": "col_2d", "ranks": [0, 1],
           "source": "installed", "verdict": "PASS_CRASHED", "expected": "PASS_CRASHED",
           "expected_fires": True, "expected_reason": "r", "as_expected": True,
           "seconds": 0.1, "checks": [], "rank_outcomes": []}
    ok = dict(app, case="col_3d_static", verdict="EQUIVALENT", expected="EQUIVALENT")
    from verify.report import write as report_mod

    page = render_html(report_mod.build_report([app, ok]))
    assert "python -m verify repro --pass allreduce_matmul_grad_overlapping --case col_2d" \
        in page
    assert "verify repro --pass allreduce_matmul_grad_overlapping --case col_3d_static" \
        not in page
    json.dumps(app)


def test_reproducer_of_a_case_file_case(tmp_path):
    example = os.path.join(ROOT, "examples", "my_cases.py")
    out = tmp_path / "r.py"
    p = subprocess.run([sys.executable, "-m", "verify", "repro", "--pass", "promotion",
                        "--case", "my_row_parallel", "--case-file", example,
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    code, stdout, err = _run_isolated(out, tmp_path)
    assert code == 0 and "no defect" in stdout, stdout + err


def test_run_writes_and_links_each_findings_reproducer(tmp_path):
    p = subprocess.run([sys.executable, "-m", "verify", "run", "--pass", "overlap",
                        "--case", "col_2d", "--case", "col_3d_static", "--backend", "none",
                        "--report-dir", str(tmp_path / "r")], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.load(open(tmp_path / "r" / "report.json"))
    got = {a["case"]: a.get("reproducer") for a in rep["applications"]}
    assert got == {"col_2d": "repro/repro_overlap_col_2d.py", "col_3d_static": None}
    assert 'href="repro/repro_overlap_col_2d.py"' in open(tmp_path / "r" / "index.html").read()
    code, out, err = _run_isolated(tmp_path / "r" / got["col_2d"], tmp_path)
    assert code == 1 and "PASS_CRASHED" in out, out + err


# -- contract-only findings (values kept, contract broken) -------------------------
STREAM_DROPPED = os.path.join(ROOT, "tests", "mutants", "overlap_stream_dropped.py")
INSERT_MOVED = os.path.join(ROOT, "tests", "mutants", "overlap_wrong_insert_index.py")


@pytest.mark.parametrize("mutant,evidence", [
    (STREAM_DROPPED, "rank 0 op 10 (c_allreduce_sum of linear_0.x_id@GRAD) runs on "
                     "stream 'default'"),
    (INSERT_MOVED, "rank 1 op 12 (matmul_v2 of linear_0.w_0@GRAD@reshape.out) runs before "
                   "op 13 (c_allreduce_sum of linear_0.x_id@GRAD)"),
])
def test_contract_only_finding_reproducer_prints_its_evidence_and_exits_1(
        tmp_path, mutant, evidence):
    """The pass mutant keeps every value (its run alone would say 'no
    defect'); the reproducer re-evaluates the recorded contract finding on
    the program the embedded pass builds and exits 1 with rank, op and var."""
    adapter, case = passes.get("overlap"), cases.all_cases()["col_3d_static"]
    path = repro.write(adapter, case, str(tmp_path / "r.py"), mutant)
    code, out, err = _run_isolated(path, tmp_path)
    assert code == 1, out + err[-3000:]
    assert "DEFECT (CONTRACT_BROKEN)" in out and evidence in out, out
    # the values are kept: the runs agree, the contract decides
    assert "is equal within rounding, but the contract finding(s) above hold" in out


def test_the_same_contract_finding_with_the_real_pass_exits_0(tmp_path):
    """The stream-dropped mutant's contract findings, embedded with the
    installed (faithful) pass: the claim no longer holds on the program the
    pass builds, so the reproducer goes on to the runs and exits 0."""
    adapter, case = passes.get("overlap"), cases.all_cases()["col_3d_static"]
    checks = repro._contract_checks(adapter, case, STREAM_DROPPED)
    claims = [c for c in checks if c["verdict"] == "CONTRACT_BROKEN"]
    assert {c["rank"] for c in claims} == {0, 1}
    path = repro.write(adapter, case, str(tmp_path / "r.py"), None, checks=checks)
    code, out, err = _run_isolated(path, tmp_path)
    assert code == 0, out + err[-3000:]
    assert "not present now: rank 0 op 10 (c_allreduce_sum of linear_0.x_id@GRAD) runs on " \
        "stream 'auto_parallel_mp' now" in out
    assert "no defect" in out


def test_claims_are_chosen_by_what_the_counterexample_records():
    base = {"kind": "shape", "name": "declared shapes", "rank": 1,
            "verdict": "CONTRACT_BROKEN", "message": "m"}
    stale = repro._claim({**base, "counterexample": {
        "rank": 1, "op_index": 4, "op_type": "reshape2", "var": "v", "declared": [8, 3],
        "inferred": [6, 4]}})
    assert stale["kind"] == "declared_shape" and stale["broken"] == [8, 3]
    cast = repro._claim({**base, "counterexample": {
        "rank": 1, "op_index": 2, "op_type": "cast", "rule": "cast dtype", "var": "c"}})
    assert cast["kind"] == "cast_dtype"
    other = repro._claim({**base, "counterexample": {"rank": 1, "before": 1, "after": 2}})
    assert other["kind"] == "program" and other["rank"] == 1


BROADCAST_DELETED = os.path.join(ROOT, "tests", "mutants", "promotion_dp_broadcast_deleted.py")


def test_a_contract_finding_without_an_op_level_claim_is_judged_by_the_program(tmp_path):
    """The DP-broadcast mutant's contract finding (a startup broadcast lost)
    has no op-level claim kind: the reproducer reports it while the pass
    builds the very program the contract check rejected (its fingerprint),
    and does not once the pass builds another (the installed pass)."""
    adapter, case = passes.get("promotion"), cases.all_cases()["row_dp_mp_o0_sgd"]
    checks = repro._contract_checks(adapter, case, BROADCAST_DELETED)
    path = repro.write(adapter, case, str(tmp_path / "bad.py"), BROADCAST_DELETED,
                       checks=checks)
    code, out, err = _run_isolated(path, tmp_path)
    assert code == 1, out + err[-3000:]
    assert "DEFECT (CONTRACT_BROKEN)" in out
    assert "rank 2: the pass builds the same program the suite's contract/DP broadcast " \
        "of bias kept check rejected" in out, out
    # the same reproducer with the pass mended (the installed one embedded)
    good = tmp_path / "good.py"
    good.write_text(_with_installed_pass(open(path).read()))
    code, out, err = _run_isolated(good, tmp_path)
    assert code == 0 and "no defect" in out, out + err[-3000:]
    assert "rank 2: the rewritten program differs from the rejected one" in out


def _with_installed_pass(text):
    """A reproducer's text with its embedded pass source dropped (the
    ``PASS_SOURCE = '...'`` line of verify/repro/embedded.py's loader)."""
    lines = text.splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("PASS_SOURCE = ")]
    assert len(at) == 1, "the reproducer embeds no pass source"
    lines[at[0]] = "PASS_SOURCE = ''\n"
    return "".join(lines)


# -- a changed initialisation (issue 19): each side's own startup decides ----------
INIT_WIDENED = {
    # legacy: the promotion, then the first uniform_random widened to [-50, 50]
    "legacy": ("promotion", "row_mp_o0_sgd_tp2",
               os.path.join(ROOT, "tests", "mutants", "promotion_init_widened.py"),
               "rank 0's rewritten startup program initialises parameter linear_0.w_0 "
               "differently: startup op 0 (uniform_random): max 0.5 -> 50.0, min -0.5 -> -50.0"),
    # PIR micro-steps: the gradient merge, then its first pd_op.uniform widened
    "micro_steps": ("grad_merge", "pir_gm_sgd_sum_k2",
                    os.path.join(ROOT, "tests", "gm_mutants", "gradient_merge_init_widened.py"),
                    "rank 0's rewritten startup program initialises parameter w differently: "
                    "startup op 5 (pd_op.uniform): max@value 0.7071067690849304 -> 50.0, "
                    "min@value -0.7071067690849304 -> -50.0"),
}


@pytest.mark.parametrize("kind", sorted(INIT_WIDENED))
def test_a_changed_initialisation_reproduces_and_names_rank_parameter_and_op(tmp_path, kind):
    """A pass that only widens a startup initialisation: the reproducer runs
    each side's own startup initialisation (drawn as the suite draws it), so
    the difference reproduces (exit 1) and the change is named; the faithful
    (installed) pass's reproducer of the same case reports no difference
    (exit 0).  No contract claims are embedded (``checks=[]``): the values
    alone must decide."""
    pass_name, case_name, pass_file, named = INIT_WIDENED[kind]
    adapter, case = passes.get(pass_name), cases.all_cases()[case_name]
    paths = {which: repro.write(adapter, case, str(tmp_path / f"{which}.py"), source,
                                checks=[])
             for which, source in (("widened", pass_file), ("faithful", None))}
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(paths, pool.map(lambda p: _run_isolated(p, tmp_path), paths.values())))
    code, out, err = done["widened"]
    assert code == 1, f"exit {code}\n{out}\n{err[-3000:]}"
    assert "NOT_EQUIVALENT" in out and "DEFECT" in out and named in out, out
    code, out, err = done["faithful"]
    assert code == 0 and "no defect" in out, f"exit {code}\n{out}\n{err[-3000:]}"
    assert "initialises parameter" not in out
    for path in paths.values():
        text = open(path).read()
        for mod in ("verify", "cases", "passes"):
            assert f"import {mod}" not in text and f"from {mod}" not in text
