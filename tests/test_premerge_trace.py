"""premerge's selection by what ran: the executed-source recorder
(``verify/premerge/trace.py``) in every process, the units a change touches,
and the selection of applications from the table (``verify/executed_files.json``),
with the import graph for what the table does not know."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from verify.premerge import affected, executed, overlay, trace  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GM = "paddle/distributed/passes/auto_parallel_gradient_merge.py"
GM_MOD = "paddle.distributed.passes.auto_parallel_gradient_merge"
# a line of _append_scale_op_after_comm (the merged gradient's 1/k scale)
GM_OLD = "        _insert_scale_op_after(target_value, optimizer_op, 1.0 / k_steps)\n"
GM_NEW = "        _insert_scale_op_after(target_value, optimizer_op, 1.0)\n"


def _installed(rel):
    return Path(affected.installed_root(), rel).read_text()


# ------------------------------------------------------------ the recorder
def test_the_recorder_keeps_the_paddle_functions_every_process_ran(tmp_path):
    """A stand-in ``paddle`` package (first on the path, so the recorder's
    prefix is its): the functions a process, its thread and its child ran
    are recorded by qualified name (a nested function as its enclosing one,
    a method as ``Class.method``), the module body as ``<module>``; a
    function nobody called is not; code outside ``paddle/`` is not."""
    site = tmp_path / "site"
    (site / "paddle").mkdir(parents=True)
    (site / "paddle" / "__init__.py").write_text("")
    (site / "paddle" / "a.py").write_text(textwrap.dedent('''
        def called():
            return [x for x in range(2)]

        def never():
            return 0

        def in_thread():
            def inner():
                return 1
            return inner()

        class C:
            def m(self):
                return 2
        '''))
    (site / "other.py").write_text("def f():\n    return 0\n")
    script = textwrap.dedent('''
        import subprocess, sys, threading
        import other, paddle.a as a
        other.f()
        a.called()
        t = threading.Thread(target=a.in_thread); t.start(); t.join()
        subprocess.run([sys.executable, "-c", "import paddle.a as a; a.C().m()"], check=True)
        ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([overlay.BOOT_DIR, str(site)]))
    env[trace.ENV] = str(tmp_path / "trace")
    env.pop(overlay.ENV, None)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = trace.collect(str(tmp_path / "trace"))
    assert got == {"paddle/__init__.py": ["<module>"],
                   "paddle/a.py": ["<module>", "C", "C.m", "called", "in_thread"]}, got
    assert len(os.listdir(tmp_path / "trace")) == 2  # the process and its child


# ------------------------------------------------------------ changed units
def test_changed_units_are_the_functions_whose_code_changed():
    old = textwrap.dedent('''
        X = 1

        def f():
            return 1

        class C:
            def m(self):
                return 2
        ''')
    assert trace.changed_units(old, old.replace("return 1", "return 3")) == {"f"}
    assert trace.changed_units(old, old.replace("return 2", "return 3")) == {"C.m"}
    assert trace.changed_units(old, old.replace("X = 1", "X = 2")) == {"<module>"}
    assert trace.changed_units(old, "# a comment\n\n" + old) == set()  # lines moved
    assert trace.changed_units(old, old + "\ndef g(:\n") == {trace.ALL}
    assert trace.changed_units(old, None) == {trace.ALL}  # deleted
    # a new function: its own unit, and the module body that now binds it
    assert trace.changed_units(old, old + "\ndef g():\n    return 0\n") == {"g", "<module>"}


def test_the_table_round_trips(tmp_path):
    table = tmp_path / "t.json"
    executed.merge({"p::a": ({"paddle/x.py": ["<module>", "f"]}, {"backend": None})},
                   table, "3.3.1")
    executed.merge({"p::b": ({"paddle/y.py": ["g"]}, {"backend": None})}, table, "3.3.1")
    assert executed.load(table, "3.3.1") == {"p::a": {"paddle/x.py": {"<module>", "f"}},
                                            "p::b": {"paddle/y.py": {"g"}}}
    assert executed.load(table, "3.0.0") == {}  # recorded on another Paddle: not used


# ------------------------------------------------------------ selection
@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("premerge-index"))


def _fake_adapters():
    # "rec": recorded applications only; "graph": unrecorded, rooted at the module
    return {"rec": affected.AdapterInfo("rec", "rec", "passes.rec"),
            "graph": affected.AdapterInfo("graph", "graph", "passes.graph",
                                          paddle_modules=(GM_MOD,))}


_TABLE = {"rec::ran_scale": {GM: {"<module>", "_append_scale_op_after_comm"}},
          "rec::imported_only": {GM: {"<module>", "GradientMergePass"}},
          "rec::never": {"paddle/distributed/passes/pass_utils.py": {"<module>"}}}
_PAIRS = {"rec": ["ran_scale", "imported_only", "never"], "graph": ["unrecorded"]}


def test_an_application_is_selected_when_it_ran_the_changed_function(index_dir):
    """The 1/k scale dropped from ``_append_scale_op_after_comm``: the
    application that ran that function is selected, the ones that only
    imported the module or never did are not; an application without a
    record is selected by the import graph."""
    got = affected.affected({GM_MOD: _installed(GM).replace(GM_OLD, GM_NEW)},
                            cache_dir=index_dir, adapters=_fake_adapters(),
                            executed=_TABLE, pairs=_PAIRS)
    assert got.cases == {"rec": {"ran_scale": [GM_MOD]}, "graph": {"unrecorded": [GM_MOD]}}
    assert got.how == {"rec::ran_scale": "executed", "graph::unrecorded": "import graph"}
    assert got.trace_broken == {}
    # a change to no unit (a comment) selects no recorded application
    got = affected.affected({GM_MOD: "# reviewed\n" + _installed(GM)}, cache_dir=index_dir,
                            adapters=_fake_adapters(), executed=_TABLE, pairs=_PAIRS)
    assert "rec" not in got.cases


_RAISES = "\nfrom paddle.distributed.passes.pass_utils import no_such_helper\n"


@pytest.mark.parametrize("how", ["syntax", "deleted", "raises"])
def test_a_module_that_no_longer_imports_breaks_every_application_that_ran_it(
        index_dir, how):
    changed = {GM_MOD: _installed(GM) + {"syntax": "\ndef broken(:\n", "raises": _RAISES,
                                         "deleted": ""}[how]} if how != "deleted" else {}
    got = affected.affected(changed, deleted=[GM_MOD] if how == "deleted" else [],
                            cache_dir=index_dir, adapters=_fake_adapters(),
                            executed=_TABLE, pairs=_PAIRS,
                            unimportable={GM_MOD: "ImportError: ..."} if how == "raises" else {})
    assert got.trace_broken == {"rec::ran_scale": [GM_MOD], "rec::imported_only": [GM_MOD]}
    assert set(got.cases["rec"]) == {"ran_scale", "imported_only"}


def test_a_module_that_compiles_and_raises_on_import_is_found(tmp_path):
    """premerge asks a child process with the overlay which changed modules
    fail to import although they compile (a name the change removed)."""
    from verify.premerge import run

    manifest = overlay.write(str(tmp_path / "ov"), {GM: _installed(GM) + _RAISES},
                             affected.installed_root())
    got = run._unimportable([GM_MOD, "paddle.distributed.passes.pass_utils"],
                            run._run_env(manifest, {}))
    assert list(got) == [GM_MOD] and "ImportError" in got[GM_MOD], got
    assert "no_such_helper" in got[GM_MOD]


def test_a_new_file_falls_back_to_the_import_graph(index_dir):
    new = "paddle.distributed.passes.brand_new_helper"
    changed = {GM_MOD: _installed(GM) + "\nfrom . import brand_new_helper\n",
               new: "def helper():\n    return 1\n"}
    got = affected.affected(changed, cache_dir=index_dir, adapters=_fake_adapters(),
                            executed=_TABLE, pairs=_PAIRS)
    assert new in got.cases["graph"]["unrecorded"]
    # the recorded applications ran the module body, which the new import changed
    assert set(got.cases["rec"]) == {"ran_scale", "imported_only"}


def test_the_recorded_planner_family_is_selected_by_a_gradient_merge_change(index_dir):
    """On the committed table: the planner's gradient-merge application ran
    the changed function (premerge never selected the planner for passes/);
    a planner application without gradient merge did not."""
    table = executed.load(paddle_version=json.loads(
        (ROOT / "verify" / "baseline.json").read_text())["paddle"])
    if "planner::planner_tp2_gm" not in table:
        pytest.fail("no record of planner::planner_tp2_gm: python -m verify premerge-trace "
                    "--pass planner --case planner_tp2_gm")
    got = affected.affected({GM_MOD: _installed(GM).replace(GM_OLD, GM_NEW)},
                            cache_dir=index_dir)
    assert got.how.get("planner::planner_tp2_gm") == "executed", got.how
    assert "planner" in got.planner_adapters
    assert "planner::planner_tp2" in table and "planner_tp2" not in got.cases["planner"]


# ------------------------------------------------------------ recording what is missing
def test_the_trace_help_says_how_to_record_the_unrecorded(capsys):
    with pytest.raises(SystemExit) as e:
        executed.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--unrecorded" in out and "python -m verify premerge-trace --unrecorded" in out
    assert "fresh, empty cache" in out and "--pass planner --case 'zoo_*'" in out


def test_unrecorded_selects_the_applications_the_table_lacks():
    entries = {"planner::zoo_a": {}, "planner::planner_tp2": {}, "promo::row_1": {},
               "promo::row_2": {}}
    recorded = {"planner::planner_tp2": {"x.py": {"f"}}, "promo::row_2": {}}
    assert executed.select(entries, only_unrecorded=True, recorded=recorded) == \
        ["planner::zoo_a", "promo::row_1"]
    assert executed.select(entries, ["promo"], only_unrecorded=True, recorded=recorded) == \
        ["promo::row_1"]
    assert executed.select(entries, cases=["row_*"]) == ["promo::row_1", "promo::row_2"]


def test_premerge_output_names_the_import_graph_fallback_in_one_line():
    from verify.premerge.run import _machine
    from verify.premerge.summary import Review, render

    apps = [f"planner::zoo_{i}" for i in range(8)] + ["promo::row_1"]
    r = Review("co", "0" * 40, "HEAD~1", "rerun", [], [], [], {}, fallback=apps)
    lines = [ln for ln in render(r).splitlines() if "import graph, no recorded run" in ln]
    assert len(lines) == 1
    assert "9 application(s)" in lines[0] and "`planner` (8: zoo_0" in lines[0]
    assert "and 2 more" in lines[0] and "`promo` (1: row_1)" in lines[0]
    assert "premerge-trace --unrecorded" in lines[0]
    assert _machine(r)["import_graph_fallback"] == apps
    none = Review("co", "0" * 40, "HEAD~1", "rerun", [], [], [], {})
    assert "import graph, no recorded run" not in render(none)
