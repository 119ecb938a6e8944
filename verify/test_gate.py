"""The pre-merge gate: one test per application (pass x case), every check
inside it; the test passes when the verdict equals the case's expectation."""
from __future__ import annotations

import pytest

from verify import legacy_ir  # noqa: F401

import cases  # noqa: E402
import passes  # noqa: E402
from verify.application import run_application  # noqa: E402


def _explain(app) -> str:
    lines = [f"{app.pass_name} on {app.case_name}: verdict {app.verdict.value}, "
             f"expected {app.expected.verdict} ({app.expected.reason})"]
    for c in app.checks:
        if not c.ok:
            lines.append(f"  [{c.kind}/{c.name} rank {c.rank}] {c.verdict.value}: {c.message}")
            if c.counterexample:
                lines.append(f"      counterexample: {c.counterexample}")
    return "\n".join(lines)


def _params(adapter):
    return [pytest.param(adapter.name, case.name, id=case.name,
                         marks=[getattr(pytest.mark, adapter.short)])
            for case in cases.all_cases().values()]


def _check(pass_name, case_name, request):
    adapter = passes.get(pass_name)
    case = cases.all_cases()[case_name]
    loaded = getattr(request.config, "_verify_pass_file", None)
    source = loaded.path if loaded and pass_name in loaded.registered else "installed"
    from verify.gate import pick_backend
    from verify.report import DEFAULT_SEED

    seed = request.config.getoption("--seed")
    _, numeric = pick_backend(request.config.getoption("--backend"),
                              DEFAULT_SEED if seed is None else seed)
    app = run_application(adapter, case, source=source, numeric=numeric)
    assert app.as_expected, _explain(app)


@pytest.mark.parametrize("pass_name,case_name", _params(passes.get("overlap")))
def test_overlap(pass_name, case_name, request):
    _check(pass_name, case_name, request)


@pytest.mark.parametrize("pass_name,case_name", _params(passes.get("promotion")))
def test_promotion(pass_name, case_name, request):
    _check(pass_name, case_name, request)
