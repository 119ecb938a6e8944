"""Gate: the matcher-vocabulary audit of every pass the suite knows
(``verify/selfcheck/vocabulary.py``), one test per pass: green when its findings are
exactly the reviewed ones in ``verify/vocabulary_baseline.json``, red on a new
finding (a matcher now reads a name no op defines or the planner never emits)
and on one that went away.  With ``--pass-file`` the file's pass is audited
from that file.  Select with ``-k vocabulary``; the adapters' passes also
carry their marker (``-m sp_opt``).
"""
from __future__ import annotations

import pytest

from verify.ir import legacy_ir  # noqa: F401

import passes  # noqa: E402
from verify.selfcheck import vocabulary  # noqa: E402

_TARGETS = vocabulary.known_passes()
_SHORT = {a.name: a.short for a in passes.adapters().values()}


@pytest.fixture(scope="module")
def planned():
    try:
        return vocabulary.planned_vocabulary()
    except Exception as exc:  # pragma: no cover - no planner on this host
        pytest.skip(f"Engine-planned programs unavailable: {exc}")


@pytest.mark.parametrize("pass_name", [
    pytest.param(n, id=n, marks=[getattr(pytest.mark, _SHORT[n])] if n in _SHORT else [])
    for n in _TARGETS])
def test_vocabulary(pass_name, planned, request):
    path, fn, pkg = _TARGETS[pass_name]
    loaded = getattr(request.config, "_verify_pass_file", None)
    if loaded is not None and pass_name in loaded.registered:
        path, fn = loaded.path, None
    findings = vocabulary.audit(pass_name, path, fn, pkg, planned)
    new, gone = vocabulary.compare(findings, vocabulary.load_baseline(), {pass_name})
    lines = []
    for f in new:
        r = f.check_result()
        lines.append(f"NEW FINDING [{r.verdict.value}] {r.message}\n"
                     f"    counterexample: {r.counterexample}")
    lines += [f"FIXED (update verify/vocabulary_baseline.json): {k}" for k in gone]
    assert not lines, "\n".join(lines) + \
        f"\nreproduce: python -m verify vocabulary --pass {pass_name}"
