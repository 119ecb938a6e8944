"""Names and paths from input cannot become code, leave the report dir, read
outside a program dir, hang a reader, or drive the terminal (issue 33,
points 3, 4 and 9).

* a case name enters a reproducer only as a literal (``verify/repro/``): the
  script's AST with a hostile name equals its AST with a plain one, every
  string constant aside; before, ``\"\"\"`` closed the docstring and ``python -I``
  ran what followed;
* every file name derived from input goes through ``verify/safe_names.py``'s
  ``component``: reproducers land inside the report dir (``verify run``) and
  ``--out`` (premerge, whose cache entries name them);
* every path a program dir names is a regular file inside it
  (``verify/plan/dir_files.py``): ``planner.json`` naming ``/etc/passwd``,
  ``../x``, a symlink out or a FIFO is one line and exit 2, before any
  application runs (it was a traceback and a lost report, or a hang);
* the premerge overlay never copies a symlink's target;
* a case name's ESC/OSC sequences are escaped on the terminal.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from verify.ir import legacy_ir  # noqa: F401  (legacy IR before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from verify.safe_names import component, inside, printable, UnsafePath  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HOSTILE = [
    '"""', "'''", 'x"""+__import__("os").system("id")+"""',
    "x'''+__import__('os').system('id')+'''", "a\nimport os; os.system('id')\n#",
    "\x1b]0;x\x07", "../../x", "/abs", "a/b", "a\\b\\..\\..\\c", "..", ".", "",
    "__TITLE__", "__PAYLOAD__", "__PASS_LOADER__", "__INIT_SOURCE__",
    "\u00e9t\u00e9-\u65e5\u672c-\u202e-\U0001f600", "~", "x~0123", "a" * 300,
]

# one finding of each reproducer kind (tests/test_repro.py: KINDS)
KIND_APPS = [("allreduce_matmul_grad_overlapping", "col_2d"),  # legacy template
             ("_pir_split_matmul_grad_to_matmul", "pir_gm_adam_avg_k2"),  # pir
             ("fuse_allreduce_split_to_reducescatter_pass", "rs_axis1"),  # pir_ranks
             ("auto_parallel_gradient_merge_pass", "pir_gm_adam_avg_k2")]  # micro_steps


# -- the sanitiser -----------------------------------------------------------
def test_component_is_one_safe_readable_injective_path_component(tmp_path):
    names = HOSTILE + ["col_2d", "repro_overlap_col_2d.py", "tiny_mlp@run1", "a_b", "a/b "]
    got = [component(n) for n in names]
    assert len(set(got)) == len(set(names))  # distinct names stay distinct
    for n, c in zip(names, got):
        assert c and "/" not in c and "\\" not in c and "\0" not in c and c not in (".", "..")
        assert not c.startswith(".") and c.isprintable() and c.isascii() and len(c) < 200
        assert os.path.dirname(os.path.join(str(tmp_path), c)) == str(tmp_path)
    # already safe: kept as it is (readable); else readable text + digest
    assert component("col_2d") == "col_2d"
    assert component("repro_overlap_col_2d.py") == "repro_overlap_col_2d.py"
    assert component("a/b").startswith("a_b~")
    # a name shaped like another's sanitised form does not collide with it
    assert component(component("a/b")) != component("a/b")


def test_inside_refuses_a_path_out_of_its_root(tmp_path):
    assert inside(tmp_path, "repro", "x.py") == str(tmp_path / "repro" / "x.py")
    for rel in ("../x", "/etc/passwd", "a/../../x"):
        with pytest.raises(UnsafePath):
            inside(tmp_path, rel)
    os.symlink("/tmp", tmp_path / "out")
    with pytest.raises(UnsafePath):
        inside(tmp_path, "out", "x.py")


def test_printable_escapes_control_and_bidi_characters():
    assert printable("col_2d") == "col_2d"
    assert printable("a\x1b]0;x\x07b\nc\u202e") == "a\\x1b]0;x\\x07b\\nc\\u202e"
    assert printable("a\nb", keep="\n") == "a\nb"
    assert "\u00e9" in printable("\u00e9t\u00e9")  # readable unicode kept


# -- reproducers: names only as literals ---------------------------------------
def _shape(tree) -> str:
    """The AST with every string constant blanked: what code the script runs."""
    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node):
            if isinstance(node.value, (str, bytes)):
                return ast.copy_location(ast.Constant(value=""), node)
            return node

    import copy

    return ast.dump(Blank().visit(copy.deepcopy(tree)), include_attributes=False)


@pytest.fixture(scope="module")
def scripts():
    """{(pass, case): (script with a plain name, [(hostile name, script)])}."""
    from verify.repro import reproducer as repro

    out = {}
    for pass_name, case_name in KIND_APPS:
        adapter, case = passes.get(pass_name), cases.all_cases()[case_name]
        plain = repro.script(adapter, dataclasses.replace(case, name="plain_name"))
        out[(pass_name, case_name)] = (plain, [
            (h, repro.script(adapter, dataclasses.replace(case, name=h)))
            for h in HOSTILE if h])
    return out


@pytest.mark.parametrize("app", KIND_APPS, ids=lambda a: a[0])
def test_a_hostile_case_name_is_only_ever_a_literal_in_the_reproducer(scripts, app):
    plain, hostile = scripts[app]
    want = _shape(ast.parse(plain))
    for name, text in hostile:
        tree = ast.parse(text)  # a name closing a docstring would not parse, or run code
        assert _shape(tree) == want, f"the name {name!r} changed the script's code"
        doc = ast.get_docstring(tree)
        assert doc is not None and "plain_name" not in ast.get_docstring(ast.parse(plain))
        # the name is there, as a constant (TITLE), never as text of the docstring
        consts = [n.value for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert any(name in c for c in consts if c != doc)


def test_reproducer_file_names_stay_one_component():
    from verify.repro import reproducer as repro

    adapter, case = passes.get("overlap"), cases.all_cases()["col_2d"]
    names = set()
    for h in HOSTILE:
        fn = repro.file_name(adapter, dataclasses.replace(case, name=h))
        assert os.path.basename(fn) == fn and fn.endswith(".py") and fn not in (".", "..")
        names.add(fn)
    assert len(names) == len(HOSTILE)
    assert repro.file_name(adapter, case) == "repro_overlap_col_2d.py"  # unchanged


# Case files whose cases are called like attacks: no whitespace (the case-file
# loader refuses it), so ``"""+call+"""`` is how a name closed the docstring.
INJECT = 'hostile"""+__import__("os").system("echo$IFS-PWNED-")+"""\x1b]0;x\x07'
ESCAPE = "hostile/../../../escaped"


def test_run_with_hostile_case_names_writes_inside_the_report_dir(tmp_path):
    with open(os.path.join(ROOT, "examples", "my_cases.py")) as f:
        text = f.read()
    assert 'name="my_column_parallel"' in text
    text = text.replace('name="my_column_parallel"', f"name={INJECT!r}")
    text += ("\nimport dataclasses as _dc\n"
             f"CASES.append(_dc.replace(CASES[0], name={ESCAPE!r}))\n")
    case_file = tmp_path / "cases_dir" / "evil_cases.py"
    case_file.parent.mkdir()
    case_file.write_text(text)
    report = tmp_path / "a" / "b" / "report"
    p = subprocess.run([sys.executable, "-m", "verify", "run", "--case-file", str(case_file),
                        "--case", "hostile*", "--pass", "overlap", "--backend", "none",
                        # a finding (the stream dropped: CONTRACT_BROKEN), so a reproducer
                        "--pass-file", os.path.join(ROOT, "tests", "mutants",
                                                    "overlap_stream_dropped.py"),
                        "--report-dir", str(report)], cwd=ROOT, capture_output=True,
                       text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode in (0, 1), p.stdout[-3000:] + p.stderr[-3000:]
    # the terminal got the name with its control characters escaped
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout, p.stdout
    assert "\\x1b]0;x\\x07" in p.stdout
    rep = json.load(open(report / "report.json"))
    apps = {a["case"]: a for a in rep["applications"]}
    assert set(apps) == {INJECT, ESCAPE}
    paths = {}
    for name, app in apps.items():
        assert app["verdict"] != "EQUIVALENT" and app.get("reproducer"), app.get("notes")
        path = os.path.realpath(os.path.join(report, app["reproducer"]))
        assert os.path.dirname(path) == str(report / "repro") and os.path.isfile(path)
        ast.parse(open(path).read())
        paths[name] = path
    # nothing written outside the report dir (a name held ../../../escaped)
    outside = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
               if not os.path.join(d, f).startswith((str(report) + os.sep,
                                                      str(case_file.parent) + os.sep))]
    assert outside == [], outside
    # running the reproducer isolated runs no code of the name
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("PADDLE_", "VERIFY_", "FLAGS_"))}
    r = subprocess.run([sys.executable, "-I", paths[INJECT]], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=600)
    assert "-PWNED-" not in (r.stdout + r.stderr).splitlines()  # echo's line
    assert r.returncode in (0, 1) and "\x1b" not in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "\\x1b]0;x\\x07" in r.stdout


# -- premerge: reproducer names from a cache entry, the overlay's files ------------
def test_premerge_reproducer_name_from_the_cache_stays_inside_out(tmp_path):
    from verify.premerge.run import write_reproducer

    out = tmp_path / "out"
    out.mkdir()
    manifest = str(tmp_path / "no-manifest.json")
    for name in ("../../escaped.py", "/tmp/abs_escaped.py", "a/b.py", "..", "", "\x1b]0;x\x07"):
        rec = {"reproducer_name": name, "reproducer_text": "print('hi')\n"}
        got = write_reproducer(out, rec, "repro_x_y.py", manifest)
        assert os.path.dirname(os.path.realpath(got)) == str((out / "repro").resolve())
    assert not (tmp_path / "escaped.py").exists() and not os.path.exists("/tmp/abs_escaped.py")
    assert sorted(os.listdir(tmp_path)) == ["out"]
    os.rename(out / "repro", out / "repro.old")
    os.symlink(str(tmp_path), out / "repro")  # a repro folder linking out of --out
    with pytest.raises(UnsafePath):
        write_reproducer(out, {"reproducer_name": "x.py", "reproducer_text": "1\n"},
                         "d.py", manifest)


def test_premerge_overlay_ignores_an_untracked_symlink(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        import premerge_checkout as pc
    finally:
        sys.path.pop(0)
    from verify.premerge.checkout import changes

    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 'outside the checkout'\n")
    repo = pc.make(tmp_path / "paddle")
    pkg = os.path.join(repo, "python", "paddle", "distributed")
    os.symlink(str(secret), os.path.join(pkg, "evil_link.py"))  # untracked symlink out
    os.symlink("/etc/passwd", os.path.join(pkg, "passwd_link.py"))
    os.mkfifo(os.path.join(pkg, "fifo_mod.py"))
    with open(os.path.join(pkg, "fine_new.py"), "w") as f:  # an untracked regular file
        f.write("X = 1\n")
    ch = changes(repo, "HEAD")
    overlaid = {c.path for c in ch.python}
    assert overlaid == {"python/paddle/distributed/fine_new.py"}
    files = ch.overlay_files()
    assert files == {"paddle/distributed/fine_new.py": "X = 1\n"}
    assert not any("outside the checkout" in t or "root:" in t for t in files.values())
    assert {"python/paddle/distributed/evil_link.py",
            "python/paddle/distributed/passwd_link.py"} <= {c.path for c in ch.other}


# -- program dirs: every path read is a regular file inside -------------------------
@pytest.fixture(scope="module")
def pir_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("pir") / "tiny"
    p = subprocess.run([sys.executable, "-m", "verify", "plan", "examples/tiny_mlp_pir.py",
                        "--ir", "pir", "--ranks", "2", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _spoil(src, dst, how):
    shutil.copytree(src, dst, symlinks=True)
    rec_path = dst / "rank0" / "planner.json"
    rec = json.loads(rec_path.read_text())
    i = next(i for i, st in enumerate(rec["stages"]) if st.get("snapshot"))
    snap = dst / "rank0" / rec["stages"][i]["snapshot"]
    if how == "absolute":
        rec["stages"][i]["snapshot"] = "/etc/passwd"
    elif how == "dotdot":
        rec["stages"][i]["snapshot"] = "../x"
    elif how == "symlink_out":
        snap.unlink()
        os.symlink("/etc/passwd", snap)
    elif how == "fifo":
        snap.unlink()
        os.mkfifo(snap)
    elif how == "plan_fifo":
        (dst / "plan.json").unlink()
        os.mkfifo(dst / "plan.json")
    rec_path.write_text(json.dumps(rec))
    return snap


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink_out", "fifo", "plan_fifo"])
def test_a_bad_path_in_a_program_dir_is_one_line_and_exit_2(pir_dir, tmp_path, how):
    bad = tmp_path / "dir"
    _spoil(pir_dir, bad, how)
    report = tmp_path / "report"
    try:
        p = subprocess.run([sys.executable, "-m", "verify", "run", "--program-dir", str(bad),
                            "--backend", "none", "--report-dir", str(report)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{how}: verify run hung on the program dir")
    assert p.returncode == 2, (how, p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert ("plan.json" if how == "plan_fifo" else "rank0/") in errors[0], errors[0]
    assert "root:" not in p.stdout + p.stderr  # /etc/passwd was not read out


def test_a_stage_file_that_does_not_read_costs_no_finished_application(pir_dir, tmp_path):
    """A regular file inside the dir whose content is not a stage program
    (here /etc/passwd's kind of text): the planner application is
    INCONCLUSIVE saying why, the others are judged, the report is written."""
    bad = tmp_path / "dir"
    snap = _spoil(pir_dir, bad, "none")
    snap.write_text("root:x:0:0:root:/root:/bin/sh\n")
    report = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "verify", "run", "--program-dir", str(bad),
                        "--backend", "none", "--report-dir", str(report)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    apps = {a["pass"]: a for a in json.load(open(report / "report.json"))["applications"]}
    assert apps["planner"]["verdict"] == "INCONCLUSIVE"
    msg = apps["planner"]["checks"][0]["message"]
    assert "could not be judged" in msg and "JSONDecodeError" in msg, msg
    assert len(apps) > 1 and all(a["verdict"] != "INCONCLUSIVE"
                                 for n, a in apps.items() if n != "planner")


def test_a_good_program_dir_still_loads(pir_dir):
    from cases.program_dirs import load_program_dir

    case = load_program_dir(str(pir_dir))
    assert case.ir == "pir" and list(case.ranks) == [0, 1]


# -- the terminal ----------------------------------------------------------------
def test_escape_sequences_in_a_case_name_reach_no_terminal_raw():
    """The per-application line, the progress bar and the summary print a case
    name's ESC/OSC/BEL escaped, piped and on a terminal (where the only
    escape sequences left are the console's own colours and cursor moves)."""
    import io

    from cases.base import Case
    from verify.engine.matrix_runner import run_matrix
    from verify.report.terminal import print_summary

    def boom(case, rank):
        raise RuntimeError(f"builder of {case.name} broke")

    name = "evil\x1b]0;owned\x07\x1b[2J\u202e"
    bad = Case(name=name, family="test", summary="raises", mesh=[0, 1], builder=boom,
               expect={})

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for out in (io.StringIO(), Terminal()):
        apps, _ = run_matrix([passes.get("overlap")], [bad], backend="none", out=out)
        print_summary(apps, "/x/report.json", 1.0, out)
        text = out.getvalue()
        own = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text) if out.isatty() else text
        assert "\x1b]" not in text and "\x07" not in text and "\u202e" not in text
        assert "\x1b" not in own  # on a terminal: only the console's own CSI sequences
        assert "evil\\x1b]0;owned\\x07\\x1b[2J\\u202e" in text
