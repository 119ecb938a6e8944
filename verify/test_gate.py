"""The pre-merge gate: one test per application (pass x case x backend), all
its checks inside it.  A test passes when the verdict equals the baseline
(``verify/baseline.json``); it fails on a new finding and on a finding that
went away, saying which, with the counterexamples.

The tests are generated from the pass registry and the cases: adding a pass
is adding its adapter module, nothing here.  Test ids read
``test_pass[promotion-row_mp_o1_sgd_tp2-both]``; select with ``-m <short
name>`` (``-m overlap``, ``-m promotion``: markers registered per adapter),
``-k`` on case names.
"""
from __future__ import annotations

import pytest

from verify.ir import legacy_ir  # noqa: F401

import cases  # noqa: E402
import passes  # noqa: E402
from cases import zoo  # noqa: E402
from verify.engine import baseline  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.conftest import write_fragment  # noqa: E402

_BASELINE = baseline.load()


def _explain(app, entry, cmp) -> str:
    lines = [f"{cmp['label']}: {app.pass_name} on {app.case_name} is {app.verdict.value}, "
             f"baseline {entry['verdict']} ({entry['reason']})"]
    lines += [f"  new: {baseline.describe(i)}" for i in cmp["new"][:6]]
    lines += [f"  gone: {baseline.describe(i)}" for i in cmp["gone"][:6]]
    lines += [
             f"reproduce: python -m verify run --pass {app.pass_name} --case {app.case_name}"
             + (f" --case-file {app.case_file}" if app.case_file else "")]
    worst = [c for c in app.checks if not c.ok]
    worst.sort(key=lambda c: c.counterexample is None)  # counterexamples first
    for c in worst[:12]:
        lines.append(f"  [{c.kind}/{c.name} rank {c.rank}] {c.verdict.value}: {c.message}")
        if c.counterexample:
            lines.append(f"      counterexample: {c.counterexample}")
    return "\n".join(lines)


def pytest_generate_tests(metafunc):
    if "application" not in metafunc.fixturenames:
        return
    backend = metafunc.config.getoption("--backend")
    every_zoo_case = metafunc.config.getoption("verify_zoo", default="sample") == "all"

    def marks(adapter, case):
        out = [getattr(pytest.mark, adapter.short)]
        why = None if every_zoo_case else zoo.left_to_the_benchmark(case)
        return out + [pytest.mark.skip(reason=why)] if why else out

    metafunc.parametrize("application", [
        pytest.param((adapter.short, name), id=f"{adapter.short}-{name}-{backend}",
                     marks=marks(adapter, case))
        for adapter in passes.adapters().values()
        for name, case in list(cases.all_cases().items()) +
        [(c.name, c) for c in _file_cases(metafunc.config)]
        if adapter.handles(case)] + [  # a pass meets only cases of its own IR
        # a family whose optional dependencies are missing is a skipped test
        # saying so, never an absence
        pytest.param(None, id=f"unavailable-{fam}",
                     marks=pytest.mark.skip(reason=f"family {fam} is unavailable here: {why}"))
        for fam, why in cases.unavailable_families().items()])


def _file_cases(config) -> list:
    """Cases of ``--case-file`` files (verify/conftest.py loads them)."""
    return getattr(config, "_verify_case_files", None) or []


def _check(short, case_name, request):
    from verify.engine.matrix_runner import pick_backend
    from verify.report.write import DEFAULT_SEED

    adapter = passes.get(short)
    mine = {c.name: c for c in _file_cases(request.config)}
    case = mine.get(case_name) or cases.all_cases()[case_name]
    if case.name in mine:  # a case file's case: its own Expect is its baseline
        e = case.expectation(adapter.name)
        entry = {"fires": e.fires, "verdict": e.verdict,
                 "reason": e.reason or f"stated in {case.source_file}"}
    else:
        entry = _BASELINE["entries"].get(baseline.key(adapter.name, case.name))
    assert entry is not None, (f"no baseline entry for {adapter.name} on {case.name}: "
                               "run `python -m verify baseline` and review the diff")
    loaded = getattr(request.config, "_verify_pass_file", None)
    source = loaded.path if loaded and set(loaded.registered) & set(
        adapter.python_passes()) else "installed"  # app.applied says what ran
    source = getattr(request.config, "_verify_overlay_label", "") or source
    seed = request.config.getoption("--seed")
    _, numeric = pick_backend(request.config.getoption("--backend"),
                              DEFAULT_SEED if seed is None else seed)
    from verify.numeric import run_memo
    from verify.conftest import run_memo_dir

    # a legacy run byte-identical to one already run in this gate run (the
    # case's originals under another pass, an unchanged rewrite) is reused,
    # by every worker of the run; the checks say which (verify/numeric/run_memo.py)
    with run_memo.session(run_memo_dir(request.config)):
        app = run_application(adapter, case, source=source, numeric=numeric)
    write_fragment(request.config, request.node.nodeid, app.to_dict())
    # by finding identity where the baseline records them: a new finding on a
    # case that already has one is NEW, a replaced one CHANGED CAUSE
    cmp = baseline.compare(entry, app.to_dict(with_programs=False))
    assert cmp["label"] == baseline.UNCHANGED, _explain(app, entry, cmp)


def test_pass(application, request):
    """One application: the pass on the case, every check, against the baseline."""
    short, case_name = application
    _check(short, case_name, request)
