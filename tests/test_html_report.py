"""The report's views: index.html (verify/report/html.py) and junit.xml (verify/report/junit.py).

(a) a hand-built report through ``write_report``: the page says what the
    report says (verdicts, counterexamples in words, numeric table, traceback,
    repro commands), escapes what it shows, and junit.xml parses with one
    failure per unexpected verdict;
(b) the page in headless Chromium: its JS runs without errors (it marks
    ``body[data-ready]`` and fills the shown-count), the query-string filter and
    the #anchor opening work (read from the dumped DOM: headless Chromium
    shoots a scrolled page blank), and a screenshot of the page's top is a real
    picture.  Without Chromium the browser tests skip, or FAIL when ``CI`` is set.
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser

import pytest

from verify.report import write as report_mod
from verify.report.html import describe_counterexample, render_html, repro_command
from verify.report.junit import build_junit

OVERLAP = "allreduce_matmul_grad_overlapping"
PROMOTION = "auto_parallel_fused_linear_promotion"
PASS_FILE = "/src/Paddle/python/paddle/distributed/passes/allreduce_matmul_grad_overlapping.py"

TRACEBACK = """Traceback (most recent call last):
  File "/work/main/passes/base.py", line 50, in apply
    p.apply([rewritten.main], [rewritten.startup], PassContext())
  File "paddle/distributed/passes/auto_parallel_fused_linear_promotion.py", line 313, in can_match_pattern
    matmul_grad_input_names[1] not in forward_matmul_inputs
IndexError: list index out of range
"""

DIFF = """--- original
+++ rewritten
@@ -3,2 +3,3 @@
 reduce_mean_grad(Out@GRAD=loss@GRAD, X=linear_0.out) -> X@GRAD=linear_0.out@GRAD
-matmul_v2_grad(Out@GRAD=linear_0.out@GRAD, X=linear_0.x_id, Y=linear_0.w_0) -> X@GRAD=linear_0.x_id@GRAD
+matmul_v2(X=linear_0.out@GRAD, Y=linear_0.w_0) -> Out=linear_0.x_id@GRAD [trans_y=True]
+c_allreduce_sum(X=linear_0.x_id@GRAD) -> Out=x@GRAD @auto_parallel_mp
"""


def _tensor(name, step, max_abs=0.0, ok=True, worst=(0, 0, 0)):
    return {"name": name, "step": step, "dtype": "float32", "shape": [2, 4, 8],
            "max_abs": max_abs, "max_rel": max_abs * 3, "worst_index": list(worst),
            "reference": 0.25, "candidate": 0.25 + max_abs, "tol": 1.3191e-05,
            "bitwise": max_abs == 0.0, "ok": ok, "note": ""}


def _check(kind, name, rank, verdict, message, counterexample=None, details=None):
    return {"kind": kind, "name": name, "rank": rank, "verdict": verdict, "message": message,
            "counterexample": counterexample, "details": details or {}}


def _app(pass_name, case, verdict, expected, checks, outcomes, source="installed",
         reason="why this is expected"):
    return {"pass": pass_name, "case": case, "ranks": [o["rank"] for o in outcomes],
            "source": source, "verdict": verdict, "expected": expected,
            "expected_fires": True, "expected_reason": reason,
            "as_expected": verdict == expected, "seconds": 0.25,
            "checks": checks, "rank_outcomes": outcomes}


def _outcome(rank, fired=True, diff=DIFF, error=None):
    return {"rank": rank, "fired": fired, "error": error, "build_error": None,
            "ops_before": 8, "ops_after": 9 if fired else 8, "diff": diff if fired else ""}


def sample_report() -> dict:
    """Four applications: EQUIVALENT (as expected), NOT_EQUIVALENT with a shape
    counterexample and a numeric table (unexpected), PASS_CRASHED with a
    traceback (as expected), EQUIVALENT where a finding was expected (unexpected)."""
    equivalent = _app(OVERLAP, "col_3d_static", "EQUIVALENT", "EQUIVALENT", [
        _check("contract", "fired", 0, "EQUIVALENT", "the pass fired"),
        _check("numeric", "simulated run", 0, "EQUIVALENT",
               "simulated run of col_3d_static rank 0: 2 tensor comparisons agree",
               details={"backend": "simulated",
                        "tensors": [_tensor("linear_0.out", 0), _tensor("loss", 0, worst=())]}),
    ], [_outcome(0)])
    numeric_cex = {"rank": 0, "backend": "simulated", "tensor": "linear_0.x_id@GRAD@scaled",
                   "step": 1, "index": [0, 0, 6], "original": 0.0022804569,
                   "rewritten": 0.0085354596, "abs_err": 0.0062550027, "tol": 1.3191e-05}
    not_equivalent = _app(OVERLAP, "col_3d_dynamic_batch", "NOT_EQUIVALENT", "EQUIVALENT", [
        _check("shape", "prediction", 0, "NOT_EQUIVALENT",
               f"{OVERLAP} plan for op 5 on col_3d_dynamic_batch rank 0: op 6 (reshape2): "
               "target [-4, 8] holds -4 at position 0 when B=1 <script>alert(1)</script>",
               counterexample={"rank": 0, "op_index": 6, "op_type": "reshape2",
                               "dims": {"B": 1},
                               "rule": "target [-4, 8] holds -4 at position 0: only one -1 "
                                       "may be negative",
                               "inputs": {"X": [[1, 4, 8]]}, "planned_for_op": 5}),
        _check("numeric", "simulated run", 0, "NOT_EQUIVALENT",
               "simulated run of col_3d_dynamic_batch rank 0: 1 of 2 tensor comparisons differ",
               counterexample=numeric_cex,
               details={"backend": "simulated",
                        "tensors": [_tensor("linear_0.out", 1),
                                    _tensor("linear_0.x_id@GRAD@scaled", 1, 0.0062550027,
                                            ok=False, worst=(0, 0, 6))]}),
    ], [_outcome(0)], source=PASS_FILE)
    crashed = _app(PROMOTION, "row_mp_sp_o0_sgd_tp2", "PASS_CRASHED", "PASS_CRASHED", [
        _check("pass", "pass ran", r, "PASS_CRASHED",
               f"{PROMOTION} raised on case row_mp_sp_o0_sgd_tp2 rank {r}: "
               "IndexError: list index out of range", details={"traceback": TRACEBACK})
        for r in (0, 1)
    ], [_outcome(0, fired=False, error=TRACEBACK), _outcome(1, fired=False, error=TRACEBACK)])
    finding_gone = _app(PROMOTION, "row_mp_o0_sgd_clip_tp2", "EQUIVALENT", "NOT_EQUIVALENT", [
        _check("contract", "fired", 0, "EQUIVALENT", "the pass fired"),
    ], [_outcome(0)])
    apps = [equivalent, not_equivalent, crashed, finding_gone]
    return {"schema": report_mod.SCHEMA, "created": "2026-11-30T14:19:51+00:00",
            "command": "python -m verify run --report-dir /tmp/x",
            "environment": {"python": "3.11.7", "paddle": "3.3.1",
                            "paddle_commit": "7688495538f4d6c1893f084dd238a402e8f68ab6",
                            "paddle_cuda": False, "z3": "4.15.4", "numpy": "2.4.6",
                            "platform": "Linux"},
            "seed": report_mod.DEFAULT_SEED, "backend": "simulated", "source": "installed",
            "summary": report_mod.summarize(apps), "applications": apps, "errors": [],
            "unfinished": ["verify/test_gate.py::test_pass[overlap-col_2d-simulated]"]}


class _Balance(HTMLParser):
    """Every non-void element closed, in order."""

    VOID = {"meta", "input", "br", "hr", "img", "link", "col", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


# ---------------------------------------------------------------- (a) fast


def test_write_report_writes_page_and_junit(tmp_path):
    rep = sample_report()
    path = report_mod.write_report(rep, str(tmp_path))
    assert path == str(tmp_path / "report.json")
    page = (tmp_path / "index.html").read_text(encoding="utf-8")

    # header and summary
    for text in ("3.3.1", "4.15.4", "2.4.6", str(report_mod.DEFAULT_SEED), "simulated",
                 "python -m verify run --report-dir /tmp/x"):
        assert text in page
    # verdicts, in the matrix (linked to the sections) and in the sections
    for v in ("EQUIVALENT", "NOT_EQUIVALENT", "PASS_CRASHED"):
        assert f'data-verdict="{v}"' in page
    for app in rep["applications"]:
        anchor = f"app-{app['pass']}--{app['case']}"
        assert f'href="#{anchor}"' in page and f'id="{anchor}"' in page
    assert page.count('class="unexp-mark"') >= 2  # matrix cells and sections
    # counterexamples in words
    assert ("with B=1, op 6 (reshape2) on rank 0: target [-4, 8] holds -4 at position 0: "
            "only one -1 may be negative; inputs: X [1, 4, 8]") in page
    assert ("tensor linear_0.x_id@GRAD@scaled at step 1, index [0, 0, 6]: original "
            "0.00228046, rewritten 0.00853546, abs err 0.006255 &gt; tol 1.3191e-05") in page
    # numeric table, traceback (once, for both ranks), diff colouring
    assert "<td>linear_0.x_id@GRAD@scaled</td>" in page and "0.006255" in page
    assert page.count("IndexError: list index out of range\n</pre>") == 1
    assert "Traceback: the pass raised on ranks 0, 1" in page
    assert '<span class="dadd">+matmul_v2(' in page and '<span class="ddel">-matmul_v2_grad(' in page
    # repro commands, with --pass-file for a pass loaded from source
    assert (f"python -m verify run --pass {PROMOTION} --case row_mp_sp_o0_sgd_tp2"
            "</code>") in page
    assert (f"python -m verify run --pass {OVERLAP} --case col_3d_dynamic_batch "
            f"--pass-file {PASS_FILE}</code>") in page
    # unfinished tests are shown prominently
    assert 'id="unfinished"' in page and "test_pass[overlap-col_2d-simulated]" in page
    # escaped, self-contained, well formed
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    checker = _Balance()
    checker.feed(page)
    assert not checker.errors and checker.stack == [], (checker.errors, checker.stack)

    # junit.xml: one testcase per application (+ one per unfinished test),
    # one failure per unexpected verdict
    root = ET.parse(tmp_path / "junit.xml").getroot()
    suites = root.findall("testsuite") if root.tag == "testsuites" else [root]
    assert [s.get("name") for s in suites] == ["pass-equivalence"]
    suite = suites[0]
    cases = suite.findall("testcase")
    apps = [c for c in cases if c.get("classname") != "unfinished"]
    assert [(c.get("classname"), c.get("name")) for c in apps] == \
        [(a["pass"], a["case"]) for a in rep["applications"]]
    failed = {(c.get("classname"), c.get("name")) for c in apps if c.find("failure") is not None}
    assert failed == {(a["pass"], a["case"]) for a in rep["applications"]
                      if a["verdict"] != a["expected"]}
    assert int(suite.get("failures")) == len(failed) == 2
    for c in apps:
        assert float(c.get("time")) == pytest.approx(0.25)
        assert c.find("system-out").text.startswith("verdict: ")
    fail = next(c for c in apps if c.get("name") == "col_3d_dynamic_batch").find("failure")
    assert fail.get("message").startswith("NOT_EQUIVALENT, expected EQUIVALENT: ")
    assert "with B=1, op 6 (reshape2) on rank 0" in fail.text
    assert f"--pass-file {PASS_FILE}" in fail.text
    gone = next(c for c in apps if c.get("name") == "row_mp_o0_sgd_clip_tp2").find("failure")
    assert "the expected finding went away" in gone.get("message")
    unfinished = [c for c in cases if c.get("classname") == "unfinished"]
    assert len(unfinished) == 1 and unfinished[0].find("error") is not None
    assert int(suite.get("tests")) == len(cases) == 5


def test_errors_and_hostile_text_stay_valid(tmp_path):
    rep = sample_report()
    rep["errors"] = ["worker gw3 crashed: <b>boom</b> & \x1b[31mred\x1b[0m \x00"]
    rep["applications"][1]["checks"][0]["message"] += " \x07 ]]> </failure>"
    report_mod.write_report(copy.deepcopy(rep), str(tmp_path))
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert 'id="errors"' in page and "&lt;b&gt;boom&lt;/b&gt; &amp;" in page
    root = ET.parse(tmp_path / "junit.xml").getroot()  # still parses
    assert root.find(".//testcase[@name='errors']/error") is not None


def test_counterexamples_in_words():
    race = {"kind": "dataflow", "name": "stream order", "rank": 1,
            "counterexample": {"rank": 1, "var": "x@GRAD",
                               "first": {"op_index": 4, "op_type": "c_allreduce_sum",
                                         "stream": "auto_parallel_mp", "start": 0, "end": 2},
                               "second": {"op_index": 5, "op_type": "scale",
                                          "stream": "default", "start": 1, "end": 3}}}
    text, _ = describe_counterexample(race)
    assert text == ("stream race on rank 1: op 4 (c_allreduce_sum) on stream auto_parallel_mp "
                    "and op 5 (scale) on stream default both touch x@GRAD and nothing orders "
                    "them; a schedule the executor allows: op 4 runs from t=0 to t=2, op 5 "
                    "from t=1 to t=3, so they overlap")
    reads = {"kind": "dataflow", "name": "reaching definitions", "rank": 0,
             "counterexample": {"rank": 0, "op_index": 11, "op_type": "scale",
                                "var": "dX", "writes_seen_rewritten": 2,
                                "writes_seen_original": 1}}
    assert describe_counterexample(reads)[0] == (
        "op 11 (scale) on rank 0 reads dX after 2 write(s) in the rewritten program but "
        "after 1 in the original, so it sees another value")
    unknown = {"kind": "contract", "name": "collective count", "rank": 0,
               "counterexample": {"rank": 0, "before": 2, "after": 1}}
    assert describe_counterexample(unknown)[0] == "on rank 0; before = 2; after = 1"
    assert repro_command({"pass": "p", "case": "c", "source": "/a b/x.py"}) == \
        "python -m verify run --pass p --case c --pass-file '/a b/x.py'"


def test_empty_report_renders():
    rep = {"schema": report_mod.SCHEMA, "summary": report_mod.summarize([]),
           "applications": [], "errors": []}
    assert "No applications in this report" in render_html(rep)
    assert build_junit(rep).find("testsuite").get("tests") == "0"


# ---------------------------------------------------------------- (b) browser

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                  "--hide-scrollbars"]


def _chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found:
        return found
    msg = ("headless Chromium is needed to test index.html in a browser and is not "
           "installed: apt-get install -y chromium (Debian's package, /usr/bin/chromium)")
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def _run_chromium(binary, tmp_path, tag, *args) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{tag}"
    profile.mkdir()
    cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}"
    return proc


def _dump_dom(binary, tmp_path, tag, url, *args) -> str:
    proc = _run_chromium(binary, tmp_path, tag, "--enable-logging=stderr", "--v=0", *args,
                         "--dump-dom", url)
    console = [ln for ln in proc.stderr.splitlines()
               if "Uncaught" in ln or (":CONSOLE" in ln and "index.html" in ln)]
    assert not console, "the page logged to the console:\n" + "\n".join(console)
    assert 'data-ready="1"' in proc.stdout, "the page's script did not finish"
    return proc.stdout


def _png_info(path):
    """(width, height, number of distinct byte values in the pixel data)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.fixture
def page(tmp_path):
    binary = _chromium()
    path = tmp_path / "report"
    report_mod.write_report(sample_report(), str(path))
    return binary, path / "index.html"


def test_page_runs_in_chromium(page, tmp_path):
    binary, index = page
    url = index.as_uri()
    n = len(sample_report()["applications"])

    dom = _dump_dom(binary, tmp_path, "all", url)
    assert f'id="shown-count">{n}<' in dom
    # the filters, given in the query string: text, verdicts, unexpected only
    dom = _dump_dom(binary, tmp_path, "text", url + "?q=dynamic_batch")
    assert 'id="shown-count">1<' in dom
    dom = _dump_dom(binary, tmp_path, "verdict", url + "?v=PASS_CRASHED,NOT_EQUIVALENT")
    assert 'id="shown-count">2<' in dom
    dom = _dump_dom(binary, tmp_path, "unexpected", url + "?unexpected=1")
    assert 'id="shown-count">2<' in dom
    # a matrix link opens its (collapsed) section
    anchor = f"app-{PROMOTION}--row_mp_sp_o0_sgd_tp2"
    closed = re.search(rf'<details [^>]*id="{anchor}"[^>]*>', index.read_text()).group(0)
    assert " open" not in closed
    dom = _dump_dom(binary, tmp_path, "anchor", f"{url}#{anchor}")
    opened = re.search(rf'<details [^>]*id="{anchor}"[^>]*>', dom).group(0)
    assert " open" in opened


def test_page_screenshot(page, tmp_path):
    binary, index = page
    shot = tmp_path / "index.png"
    _run_chromium(binary, tmp_path, "shot", f"--screenshot={shot}", "--window-size=1280,2000",
                  index.as_uri())
    assert shot.is_file(), "chromium wrote no screenshot"
    width, height, distinct = _png_info(shot)
    assert (width, height) == (1280, 2000)
    assert shot.stat().st_size > 20_000, f"screenshot is only {shot.stat().st_size} bytes"
    assert distinct > 50, "the screenshot is (nearly) one colour"


# ---------------------------------------------------------------- (c) first screen

PROBE = """<script>
(function () {
  // what a reader sees: the first screen at the window's size, and where each
  // heading lands when an anchor scrolls to it (under the sticky bar or not)
  var vh = window.innerHeight, bar = document.getElementById('controls');
  var barBottom = getComputedStyle(bar).position === 'sticky' ? bar.getBoundingClientRect().height : 0;
  var seen = [];
  document.querySelectorAll('h1, h2, section[id]').forEach(function (h) {
    var r = h.getBoundingClientRect();
    if (r.top < vh && r.bottom > 0 && r.height > 0) seen.push(h.id || h.tagName);
  });
  var covered = [];
  document.querySelectorAll('h2[id]').forEach(function (h) {
    h.scrollIntoView();
    var top = h.getBoundingClientRect().top;
    var maxScroll = document.documentElement.scrollHeight - vh;
    if (top < barBottom - 1 && window.scrollY < maxScroll - 1) covered.push(h.id + '@' + top);
  });
  window.scrollTo(0, 0);
  document.body.setAttribute('data-first-screen', seen.join(' '));
  document.body.setAttribute('data-covered', covered.join(' '));
  document.body.setAttribute('data-width', String(window.innerWidth));
  var b = document.querySelector('button.load-detail');
  if (b) b.click();
})();
</script>
</body>"""


def test_first_screen_at_1000px_opens_on_what_needs_a_decision(page, tmp_path):
    """At 1000 x 800 the first screen shows the unexpected and new findings
    (``#decide``) with both unexpected applications; no heading an anchor
    scrolls to sits under the filter bar; the sidecar loads on demand."""
    binary, index = page
    probed = index.with_name("probe.html")
    probed.write_text(index.read_text(encoding="utf-8").replace("</body>", PROBE, 1),
                      encoding="utf-8")
    proc = _run_chromium(binary, tmp_path, "first", "--window-size=1000,800",
                         "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    dom = proc.stdout
    assert 'data-ready="1"' in dom
    assert 'data-width="1000"' in dom
    first = re.search(r'data-first-screen="([^"]*)"', dom).group(1).split()
    assert "decide" in first, first
    covered = re.search(r'data-covered="([^"]*)"', dom).group(1)
    assert covered == "", f"headings under the sticky filter bar: {covered}"
    # the decision section: new finding first, then the finding that went away
    section = re.search(r'<section class="decide[^"]*" id="decide">(.*?)</section>', dom,
                        re.S).group(1)
    assert section.index("col_3d_dynamic_batch") < section.index("row_mp_o0_sgd_clip_tp2")
    assert "new finding" in section and "finding went away" in section
    # the EQUIVALENT application's diff and table came from detail.js on the click
    slot = re.search(r'<div class="detail-slot"[^>]*>(.*?)</div></div>', dom, re.S)
    assert slot and 'class="diff"' in slot.group(1) and "+matmul_v2(" in slot.group(1)


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}


class _Paths(HTMLParser):
    """Each element's path from <html> as ((tag, attrs), ...), the first
    <tag>'s and every id's, and the page's CSS (a dumped DOM closes every
    non-void element, so a stack follows the nesting)."""

    def __init__(self, dom):
        super().__init__()
        self.stack, self.by_id, self.first, self.css, self._in_style = [], {}, {}, "", False
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        path = (*self.stack, (tag, dict(attrs)))  # a copy: the stack shrinks at end tags
        self.first.setdefault(tag, path)
        if path[-1][1].get("id"):
            self.by_id.setdefault(path[-1][1]["id"], path)
        if tag not in VOID:
            self.stack = list(path)
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.css += data


def _hiding_classes(css):
    """Classes the page's CSS hides outright (``.x{display:none}``)."""
    found = set()
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        if re.search(r"display:\s*none|visibility:\s*hidden", body):
            found |= {m.group(1) for sel in selectors.split(",")
                      if (m := re.fullmatch(r"\s*\.([\w-]+)\s*", sel))}
    return found


def _hidden_by(path, hiding):
    """Why the element at the end of ``path`` is not shown, or None: the
    ``hidden`` attribute, a hiding class or inline style on it or an ancestor,
    or a closed <details> around it (only its <summary> shows)."""
    for i, (tag, attrs) in enumerate(path):
        where = f"<{tag} id={attrs.get('id')!r} class={attrs.get('class')!r}>"
        if "hidden" in attrs:
            return f"{where} has the hidden attribute"
        if hiding & set((attrs.get("class") or "").split()):
            return f"{where} has a class the CSS hides"
        if re.search(r"display:\s*none|visibility:\s*hidden", attrs.get("style") or ""):
            return f"{where} is hidden by its style"
        if (tag == "details" and "open" not in attrs and i + 1 < len(path)
                and path[i + 1][0] != "summary"):
            return f"{where} is closed around it"
    return None


def test_the_dom_reader_sees_what_is_hidden():
    """The reader the anchor test relies on, on a hand-written DOM: the hidden
    attribute, a class the page's CSS hides, an inline style and a closed
    <details> hide what is inside; a <summary>, an open <details> and void
    elements (which have no end tag) do not."""
    dom = ("<html><head><style>.gone{display:none!important}a.x.gone{display:block}"
           "p,.dim{color:red}</style></head><body><img id=i><br>"
           "<div hidden><p id=a>a</p></div><div class='c gone'><p id=b>b</p></div>"
           "<div style='display: none'><p id=c>c</p></div>"
           "<details id=d><summary id=s>s</summary><p id=e>e</p></details>"
           "<details open><p id=f>f</p></details><p id=g>g</p></body></html>")
    tree = _Paths(dom)
    hiding = _hiding_classes(tree.css)
    assert hiding == {"gone"}
    hidden = {i for i in tree.by_id if _hidden_by(tree.by_id[i], hiding)}
    assert hidden == {"a", "b", "c", "e"}
    assert [t for t, _ in tree.by_id["g"]] == ["html", "body", "p"]


@pytest.mark.parametrize("anchor, target, how", [
    ("", "", "none"), ("#", "", "none"), ("#no-such-anchor", "", "none"),
    ("#decide", "decide", "scrolled"), ("#apps", "apps", "scrolled"),
    (f"#app-{PROMOTION}--row_mp_sp_o0_sgd_tp2", f"app-{PROMOTION}--row_mp_sp_o0_sgd_tp2",
     "linked")])
def test_an_anchor_url_never_shows_a_blank_screen(page, tmp_path, anchor, target, how):
    """Opened at an anchor URL the page shows its content and the element the
    anchor names, on screen: an application moved into #linked at the top, a
    heading or section scrolled to (report.js, a quarter second after load),
    and an unknown anchor leaves the page at its top.  Read from the DOM once
    the delayed jump is over (virtual time runs the timer), never from pixels:
    headless Chromium shoots a scrolled page blank, however it looks."""
    binary, index = page
    dom = _dump_dom(binary, tmp_path, "anchor", index.as_uri() + anchor,
                    "--window-size=1000,800", "--virtual-time-budget=5000")
    tree = _Paths(dom)
    hiding = _hiding_classes(tree.css)
    root = tree.first["html"][0][1]
    assert "data-jump" in root, f"{anchor}: the opening jump did not finish in 5 s of virtual time"
    # the page itself shows: its body and its title heading
    for tag in ("body", "h1"):
        why = _hidden_by(tree.first[tag], hiding)
        assert why is None, f"{anchor}: the page's <{tag}> is not shown: {why}"
    assert (root["data-jump"], root["data-jump-how"]) == (target, how), anchor
    if not target:
        assert root["data-jump-view"] == ""
        return
    assert target in tree.by_id, f"{anchor}: no element with id {target!r} in the page"
    why = _hidden_by(tree.by_id[target], hiding)
    assert why is None, f"{anchor}: #{target} is not shown: {why}"
    tag, attrs = tree.by_id[target][-1]
    assert tag != "details" or "open" in attrs, f"{anchor}: #{target} is left folded"
    if how == "linked":
        assert any(a.get("id") == "linked" for _, a in tree.by_id[target]), \
            f"{anchor}: #{target} is not inside #linked"
    # where the jump left its box: in the window (an element not rendered has no box)
    top, bottom, height = map(int, root["data-jump-view"].split())
    assert height > 0, f"{anchor}: the window has no height"
    assert bottom > top and top < height and bottom > 0, \
        f"{anchor}: #{target} is off screen after the jump (top {top}, bottom {bottom})"


def test_header_counts_link_to_their_filters(tmp_path):
    rep = sample_report()
    report_mod.write_report(rep, str(tmp_path))
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert 'href="?unexpected=1#decide"' in page
    assert 'href="?v=NOT_EQUIVALENT#matrix-head"' in page
    # the sidecar holds what the page leaves out, and comes back whole
    slim = report_mod.json.loads((tmp_path / "report.json").read_text())
    assert slim["detail_file"] == "detail.js"
    back = report_mod.merge_detail(slim, report_mod.read_detail(str(tmp_path)))
    assert back["applications"] == rep["applications"]


def test_a_new_finding_by_identity_needs_a_decision_too():
    """The same verdict as the baseline but a finding it does not record
    (the run's ``baseline`` label NEW) is listed first, as a new finding."""
    rep = sample_report()
    crashed = rep["applications"][2]
    crashed["baseline"] = {"label": "NEW", "new": [{"check": "pass/pass ran"}], "gone": []}
    page = render_html(rep)
    section = re.search(r'id="decide">(.*?)</section>', page, re.S).group(1)
    assert "row_mp_sp_o0_sgd_tp2" in section
    assert section.index("row_mp_sp_o0_sgd_tp2") < section.index("row_mp_o0_sgd_clip_tp2")
    assert "Needs a decision <span class=\"dim\">(3)" in page
