"""The pass under review is the pass judged: a ``--pass-file`` is applied on
every path or refused, and each application records what it really ran
(passes/sources.py).

Generated from the pass registry (``passes.adapters()``): for every adapter
a pass file whose passes do nothing (tests/noop_pass_file.py) must turn a
firing application into NOT_APPLIED, with isolation on and off; an adapter
whose pass cannot be replaced from Python (a C++ pass) refuses the file with
exit 2."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
import noop_pass_file  # noqa: E402
from conftest import cli_in_process  # noqa: E402
from verify.ir.pass_files import load_pass_file  # noqa: E402
from verify.engine import isolation  # noqa: E402
from verify.engine.application import run_application  # noqa: E402
from verify.report.html import render_html  # noqa: E402
from verify.report.write import build_report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = json.load(open(os.path.join(ROOT, "verify", "baseline.json")))["entries"]
ADAPTERS = sorted(passes.adapters().values(), key=lambda a: a.short)


def _firing_case(adapter) -> str:
    """One case where the baseline says the pass fires (the first by name)."""
    names = sorted(k.split("::", 1)[1] for k, v in BASELINE.items()
                   if k.startswith(adapter.name + "::") and v["fires"])
    assert names, f"no firing case of {adapter.name} in the baseline"
    return names[0]


def _sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "verify", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("isolated", [True, False], ids=["isolation", "in-process"])
@pytest.mark.parametrize("adapter", [a for a in ADAPTERS if a.tested_passes()],
                         ids=lambda a: a.short)
def test_a_pass_file_that_does_nothing_is_not_applied(adapter, isolated, tmp_path):
    path = noop_pass_file.write(tmp_path / f"noop_{adapter.short}.py", adapter.tested_passes())
    case = cases.all_cases()[_firing_case(adapter)]
    before = isolation.settings()
    isolation.configure(enabled=isolated)
    loaded = load_pass_file(path)
    try:
        app = run_application(adapter, case, source=loaded.path)
    finally:
        loaded.restore()
        isolation.configure(**before)
    assert app.verdict.value == "NOT_APPLIED", \
        [(c.name, c.rank, c.verdict.value, c.message[:200]) for c in app.checks if not c.ok]
    # the record names the file, by path and content, for every pass under test
    files = [r for r in app.applied if r["source"] == "file"]
    assert files and {r["pass"] for r in files} <= set(adapter.tested_passes())
    assert all(r["path"] == os.path.abspath(path) and r["sha256"] == _sha(path)
               for r in files)
    assert not [r for r in app.applied
                if r["pass"] in adapter.tested_passes() and r["source"] != "file"], app.applied
    assert app.source == os.path.abspath(path)


@pytest.mark.parametrize("adapter", [a for a in ADAPTERS if a.native_passes()],
                         ids=lambda a: a.short)
def test_a_pass_file_for_a_cpp_pass_is_refused(adapter, tmp_path):
    """A Python file registering the C++ pass's name would be accepted and
    never run: exit 2, one line saying why."""
    name = adapter.native_passes()[0]
    path = tmp_path / "cpp_named.py"
    path.write_text("from .pass_base import PassBase, register_pass\n\n\n"
                    f"@register_pass({name!r})\nclass Mine(PassBase):\n"
                    "    def _check_self(self):\n        return True\n\n"
                    "    def _check_conflict(self, other):\n        return True\n\n"
                    "    def _apply_single_impl(self, main, startup, context):\n"
                    "        pass\n")
    for extra in ([], ["--pass", adapter.short]):  # in process: the refusal's words
        code, out, err = cli_in_process("run", "--pass-file", str(path), *extra,
                                        "--report-dir", str(tmp_path / "r"))
        assert code == 2, out + err
        lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "C++" in lines[0] and "build of Paddle" in lines[0], err


def test_a_pass_file_no_selected_adapter_applies_is_refused(tmp_path):
    path = noop_pass_file.write(tmp_path / "noop_overlap.py",
                                passes.get("overlap").tested_passes())
    code, out, err = cli_in_process("run", "--pass", "promotion", "--pass-file", str(path),
                                    "--report-dir", str(tmp_path / "r"))
    assert code == 2 and "none of the selected adapters (promotion)" in err, out + err


def test_vpp_split_pass_file_is_applied_by_the_isolation_worker(tmp_path):
    """The issue's case: the VPP split's worker looked the file up under the
    adapter's name and applied the installed pass.  Through the command
    line (isolation on): NOT_APPLIED, exit 1, the file's sha256 recorded
    and shown on the HTML page."""
    adapter = passes.get("vpp_split")
    path = noop_pass_file.write(tmp_path / "noop_vpp.py", adapter.tested_passes())
    case = _firing_case(adapter)
    code, out, err = _cli("run", "--pass-file", path, "--case", case, "--backend", "none",
                          "--report-dir", str(tmp_path / "r"))
    assert code == 1, out + err
    app = json.load(open(tmp_path / "r" / "report.json"))["applications"][0]
    assert app["verdict"] == "NOT_APPLIED"
    assert app["applied"] == [{"pass": "pipeline_scheduler_VPP", "source": "file",
                               "path": path, "sha256": _sha(path)}]
    page = open(tmp_path / "r" / "index.html").read()
    assert _sha(path) in page


def test_installed_passes_are_recorded_with_paddles_version_and_commit():
    import paddle

    adapter, case = passes.get("deps"), cases.all_cases()[_firing_case(passes.get("deps"))]
    app = run_application(adapter, case)
    want = {"source": "installed", "paddle": paddle.version.full_version,
            "commit": paddle.version.commit}
    assert {r["pass"] for r in app.applied} == {"auto_parallel_sharding",
                                                "auto_parallel_supplement_explicit_dependencies"}
    assert all({k: r[k] for k in want} == want for r in app.applied), app.applied
    assert app.source == "installed"
    page = render_html(build_report([app]))
    assert paddle.version.commit in page


def test_a_native_pass_is_recorded_as_installed_cpp():
    adapter = passes.get("rs_fuse")
    app = run_application(adapter, cases.all_cases()[_firing_case(adapter)])
    assert app.applied and all(r["source"] == "installed" and "C++" in r["native"]
                               for r in app.applied), app.applied
