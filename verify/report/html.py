"""``index.html``: the report as one self-contained page (no network, works from file://).

The page shows the run's header, a pass x case verdict matrix (filterable with
plain JS: a text box, one checkbox per verdict, "unexpected only"; the same
filters can be given in the query string, ``index.html?q=col_&v=NOT_EQUIVALENT,
PASS_CRASHED&unexpected=1``), and one collapsible section per application with
its checks, counterexamples in words, numeric error tables, the pass's
traceback, the op-level diff per rank and the command that reproduces it.

Everything is rendered server-side; the JS only filters, counts and opens the
section a matrix cell links to, so the page is complete without JS.  All text
from the report goes through ``html.escape``.
"""
from __future__ import annotations

import html
import os
import re
import shlex

from verify.verdicts import SHOWN as VERDICTS

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(value) -> str:
    """Escaped text of ``value`` (None is empty)."""
    if value is None:
        return ""
    return html.escape(_CONTROL.sub("\ufffd", str(value)), quote=True)


def fmt(value) -> str:
    """A short, readable rendering of a report value (numbers to 6 digits)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    return "" if value is None else str(value)


def _reproducer(app: dict, verdict) -> str:
    if verdict in (None, "EQUIVALENT"):
        return ""
    link = ""
    if app.get("reproducer"):  # written beside the report by python -m verify run
        link = (f' <a href="{esc(app["reproducer"])}">{esc(app["reproducer"])}</a>'
                f' <span class="dim">(run: python {esc(app["reproducer"])})</span>')
    return ('<div><span class="dim">reproducer (one file, needs only Paddle; exit 1 while '
            f'the defect is present)</span>{link} <code class="repro">'
            f'{esc(reproducer_command(app))}</code></div>')


def repro_command(app: dict) -> str:
    """The command that reproduces this one application."""
    cmd = (f"python -m verify run --pass {shlex.quote(str(app.get('pass', '')))} "
           f"--case {shlex.quote(str(app.get('case', '')))}")
    source = app.get("source") or "installed"
    if source != "installed":
        cmd += f" --pass-file {shlex.quote(str(source))}"
    if app.get("case_file"):
        cmd += f" --case-file {shlex.quote(str(app['case_file']))}"
    return cmd


def reproducer_command(app: dict) -> str:
    """The command that writes this application's self-contained reproducer
    (``python -m verify repro``; the script needs only Paddle)."""
    cmd = (f"python -m verify repro --pass {shlex.quote(str(app.get('pass', '')))} "
           f"--case {shlex.quote(str(app.get('case', '')))}")
    source = app.get("source") or "installed"
    if source != "installed":
        cmd += f" --pass-file {shlex.quote(str(source))}"
    if app.get("case_file"):
        cmd += f" --case-file {shlex.quote(str(app['case_file']))}"
    return cmd


def _op(cex: dict) -> str:
    where = f"op {cex['op_index']}"
    if cex.get("op_type"):
        where += f" ({cex['op_type']})"
    if cex.get("program") == "startup":
        where = "startup " + where
    return where


def describe_counterexample(check: dict) -> tuple[str, str | None]:
    """(one plain sentence, optional long text) for a check's counterexample."""
    cex = dict(check.get("counterexample") or {})
    if not cex:
        return "", None
    used = set()

    def take(*keys):
        used.update(keys)
        return [cex.get(k) for k in keys]

    rank = cex.get("rank", check.get("rank"))
    used.add("rank")
    on_rank = f" on rank {rank}" if rank is not None else ""
    dims = cex.get("dims") or {}
    used.add("dims")
    with_dims = ("with " + ", ".join(f"{k}={fmt(v)}" for k, v in sorted(dims.items())) + ", "
                 if dims else "")
    long_text = None

    if "error" in cex and "tensor" not in cex:
        (error,) = take("error")
        first = str(error).strip().splitlines()[0] if str(error).strip() else "an error"
        text = f"the rewritten program fails to run where the original runs: {first}"
        long_text = str(error)
    elif "tensor" in cex:
        backend, tensor, step, index, orig, rew, err, tol = take(
            "backend", "tensor", "step", "index", "original", "rewritten", "abs_err", "tol")
        text = (f"{backend + ' run' if backend else 'run'}{on_rank}: tensor {tensor} at step "
                f"{fmt(step)}, index {fmt(index)}: original {fmt(orig)}, rewritten {fmt(rew)}, "
                f"abs err {fmt(err)}" + (f" > tol {fmt(tol)}" if tol is not None else ""))
    elif isinstance(cex.get("first"), dict) and isinstance(cex.get("second"), dict):
        a, b, var = take("first", "second", "var")

        def part(o):
            return f"op {o.get('op_index')} ({o.get('op_type')}) on stream {o.get('stream')!s}"

        text = (f"stream race{on_rank}: {part(a)} and {part(b)} both touch {var} and "
                f"nothing orders them; a schedule the executor allows: op {a.get('op_index')} "
                f"runs from t={fmt(a.get('start'))} to t={fmt(a.get('end'))}, op "
                f"{b.get('op_index')} from t={fmt(b.get('start'))} to t={fmt(b.get('end'))}, "
                "so they overlap")
    elif "op_index" in cex:
        take("op_index", "op_type", "program")
        head = f"{with_dims}{_op(cex)}{on_rank}"
        if "declared" in cex and "inferred" in cex:
            var, declared, inferred = take("var", "declared", "inferred")
            text = (f"{head}: output {var} is declared {fmt(declared)} but the op makes "
                    f"{fmt(inferred)}")
        elif "target" in cex and "expected" in cex:
            var, src, target, expected, rule = take("var", "input", "target", "expected", "rule")
            text = (f"{head}: reshapes {var} from {fmt(src)} to {fmt(target)}, but the "
                    f"matmul's {rule or 'FoldInitDims'} needs {fmt(expected)}")
        elif "writes_seen_rewritten" in cex:
            var, n_rew, n_orig = take("var", "writes_seen_rewritten", "writes_seen_original")
            text = (f"{head} reads {var} after {fmt(n_rew)} write(s) in the rewritten program "
                    f"but after {fmt(n_orig)} in the original, so it sees another value")
        elif "rule" in cex:
            (rule,) = take("rule")
            text = f"{head}: {rule}"
        elif check.get("kind") == "dataflow" and "var" in cex:
            (var,) = take("var")
            text = f"{head} reads {var} before anything writes it"
        else:
            text = head
        if isinstance(cex.get("inputs"), dict):
            (inputs,) = take("inputs")
            text += "; inputs: " + ", ".join(
                f"{k} {fmt(v[0] if isinstance(v, list) and len(v) == 1 else v)}"
                for k, v in inputs.items())
        if "planned_for_op" in cex:
            (planned,) = take("planned_for_op")
            text += (f" (in the ops the pass will build for op {planned}, "
                     "found before the pass runs)")
    else:
        text = f"{with_dims}{on_rank.strip() or 'all ranks'}"
    rest = [f"{k} = {fmt(v)}" for k, v in cex.items() if k not in used]
    if rest:
        text += ("; " if text else "") + "; ".join(rest)
    return text, long_text


def _badge(verdict, extra="") -> str:
    v = esc(verdict)
    return f'<span class="badge v-{v}{extra}">{v}</span>'


def _anchor_ids(apps) -> list:
    ids, seen = [], {}
    for a in apps:
        base = "app-" + re.sub(r"[^A-Za-z0-9_-]+", "-", f"{a.get('pass')}--{a.get('case')}")
        n = seen.get(base, 0) + 1
        seen[base] = n
        ids.append(base if n == 1 else f"{base}-{n}")
    return ids


def _unexpected(app) -> bool:
    if "as_expected" in app:
        return not app["as_expected"]
    return app.get("verdict") != app.get("expected")


def short_message(app: dict, check: dict) -> str:
    """A check's message without the pass/case/rank the section already shows."""
    msg = str(check.get("message") or "")
    p, c, r = app.get("pass"), app.get("case"), check.get("rank")
    if r is None:
        return msg
    for prefix in (f"{p} on {c} rank {r}: ", f"{p} on case {c} rank {r}: "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    if p and msg.startswith(f"{p} "):
        msg = msg[len(p) + 1:]
    for inner in (f" on case {c} rank {r}", f" on {c} rank {r}", f" of {c} rank {r}"):
        if inner in msg:
            return msg.replace(inner, "", 1)
    return str(check.get("message") or "")


def _first_finding(app) -> dict | None:
    bad = [c for c in app.get("checks") or [] if c.get("verdict") != "EQUIVALENT"]
    same = [c for c in bad if c.get("verdict") == app.get("verdict")]
    return (same or bad or [None])[0]


def _header(report: dict) -> str:
    env = report.get("environment") or {}
    summ = report.get("summary") or {}
    paddle = esc(env.get("paddle", "?"))
    if env.get("paddle_commit"):
        paddle += f' <span class="dim">({esc(str(env["paddle_commit"])[:10])}'
        paddle += ", CUDA)" if env.get("paddle_cuda") else ", CPU)"
        paddle += "</span>"
    meta = [("Paddle", paddle), ("z3", esc(env.get("z3", "?"))),
            ("numpy", esc(env.get("numpy", "?"))), ("python", esc(env.get("python", "?"))),
            ("seed", esc(report.get("seed"))), ("backend", esc(report.get("backend"))),
            ("pass source", esc(report.get("source", "installed"))),
            ("created", esc(report.get("created"))), ("platform", esc(env.get("platform", "")))]
    items = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in meta)
    by = summ.get("by_status") or summ.get("by_verdict") or {}
    chips = " ".join(f'{_badge(v)} <b>{esc(n)}</b>' for v, n in
                     sorted(by.items(), key=lambda kv: VERDICTS.index(kv[0])
                            if kv[0] in VERDICTS else 99))
    unexpected = summ.get("unexpected", 0)
    unexp_cls = "bad" if unexpected else "good"
    return f"""
<header>
 <h1>Pass equivalence report <span class="dim">{esc(report.get('schema', ''))}</span></h1>
 <dl class="meta">{items}</dl>
 <div class="cmd"><span class="dim">command</span> <code>{esc(report.get('command'))}</code></div>
 <div class="summary">
  <span><b>{esc(summ.get('total', 0))}</b> applications</span>
  <span class="good"><b>{esc(summ.get('as_expected', 0))}</b> as expected</span>
  <span class="{unexp_cls}"><b id="unexpected-total">{esc(unexpected)}</b> unexpected</span>
  <span class="chips">{chips}</span>
 </div>
</header>"""


def _alerts(report: dict) -> str:
    out = []
    errors = report.get("errors") or []
    unfinished = report.get("unfinished") or []
    if errors:
        out.append('<section class="alert" id="errors"><h2>Errors ('
                   f'{len(errors)})</h2><ul>' +
                   "".join(f"<li><pre>{esc(e)}</pre></li>" for e in errors) + "</ul></section>")
    if unfinished:
        out.append('<section class="alert" id="unfinished"><h2>Tests that did not finish ('
                   f'{len(unfinished)})</h2><p>These ran but left no result (a crashed '
                   "worker or an interrupted test); their applications are missing below."
                   "</p><ul>" +
                   "".join(f"<li><code>{esc(u)}</code></li>" for u in unfinished) +
                   "</ul></section>")
    return "\n".join(out)


def _controls(report: dict) -> str:
    present = {a.get("status") or a.get("verdict") for a in report.get("applications") or []}
    order = VERDICTS + sorted(v for v in present if v not in VERDICTS)
    boxes = "".join(
        f'<label class="vbox v-{esc(v)}"><input type="checkbox" class="vfilter" '
        f'value="{esc(v)}" checked> {esc(v)}</label>' for v in order)
    total = len(report.get("applications") or [])
    return f"""
<div class="controls" id="controls">
 <input type="search" id="filter-text" placeholder="filter by pass, case or verdict" autocomplete="off">
 {boxes}
 <label class="vbox"><input type="checkbox" id="only-unexpected"> unexpected only</label>
 <span class="count">showing <b id="shown-count">{total}</b> of {total} applications</span>
</div>"""


def _matrix(apps, ids) -> str:
    passes, cases, cells = [], [], {}
    for a, aid in zip(apps, ids):
        p, c = a.get("pass"), a.get("case")
        if p not in passes:
            passes.append(p)
        if c not in cases:
            cases.append(c)
        cells.setdefault((p, c), []).append((a, aid))
    head = "".join(f'<th class="passcol">{esc(p)}</th>' for p in passes)
    rows = []
    for c in cases:
        tds = []
        ranks = ""
        for p in passes:
            entries = cells.get((p, c), [])
            if not entries:
                tds.append('<td class="cell empty">&ndash;</td>')
                continue
            for a, _ in entries:
                ranks = ranks or (f'<span class="dim"> &middot; {len(a.get("ranks") or [])} '
                                  "ranks</span>")
            links = []
            for a, aid in entries:
                v = a.get("status") or a.get("verdict")
                un = _unexpected(a)
                title = f"{p} on {c}: {v} (expected {a.get('expected')})"
                mark = (f'<span class="unexp-mark">&#9888; unexpected &middot; expected '
                        f'{esc(a.get("expected"))}</span>' if un else "")
                links.append(
                    f'<a class="cell-link app-ref v-{esc(v)}{" unexpected" if un else ""}" '
                    f'href="#{aid}" data-pass="{esc(p)}" data-case="{esc(c)}" '
                    f'data-verdict="{esc(v)}" data-unexpected="{1 if un else 0}" '
                    f'title="{esc(title)}">{esc(v)}{mark}</a>')
            tds.append(f'<td class="cell">{"".join(links)}</td>')
        rows.append(f'<tr class="mrow"><th class="casecol">{esc(c)}{ranks}</th>'
                    f'{"".join(tds)}</tr>')
    return (f'<table class="matrix" id="matrix"><thead><tr><th class="casecol">case \\ pass'
            f'</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _checks_table(app, checks) -> str:
    rows = []
    for c in checks:
        v = c.get("verdict")
        rank = "all" if c.get("rank") is None else c.get("rank")
        rows.append(f'<tr class="{"" if v == "EQUIVALENT" else "notok"}">'
                    f"<td>{esc(c.get('kind'))}</td><td>{esc(c.get('name'))}</td>"
                    f"<td>{esc(rank)}</td><td>{_badge(v)}</td>"
                    f'<td class="msg">{esc(short_message(app, c))}</td></tr>')
    return ('<table class="checks"><thead><tr><th>kind</th><th>name</th><th>rank</th>'
            f'<th>verdict</th><th>message</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


_RANK = "\x00RANK\x00"


def _ranks_phrase(ranks) -> str:
    ranks = sorted(set(ranks), key=str)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _counterexamples(checks) -> str:
    """Counterexamples in words; the same finding on several ranks is one line."""
    groups = {}
    for c in checks:
        cex = c.get("counterexample")
        if not cex:
            continue
        rank = cex.get("rank", c.get("rank"))
        if rank is not None:
            c = dict(c, counterexample=dict(cex, rank=_RANK))
        text, long_text = describe_counterexample(c)
        key = (c.get("verdict"), c.get("kind"), c.get("name"), text, long_text)
        groups.setdefault(key, []).append(rank)
    items = []
    for (verdict, kind, name, text, long_text), ranks in groups.items():
        known = [r for r in ranks if r is not None]
        text = text.replace(f"rank {_RANK}", _ranks_phrase(known) if known else "all ranks")
        extra = (f'<details class="inner"><summary>full text</summary><pre>{esc(long_text)}'
                 "</pre></details>" if long_text else "")
        items.append(f'<li>{_badge(verdict)} <span class="dim">{esc(kind)}/{esc(name)}</span> '
                     f"{esc(text)}{extra}</li>")
    if not items:
        return ""
    return f'<h4>Counterexamples</h4><ul class="cex">{"".join(items)}</ul>'


def _numeric_tables(checks) -> str:
    out = []
    for c in checks:
        if c.get("kind") != "numeric":
            continue
        tensors = (c.get("details") or {}).get("tensors")
        if not tensors:
            continue
        bad = [t for t in tensors if not t.get("ok", True)]
        has_note = any(t.get("note") for t in tensors)
        rows = []
        for t in tensors:
            rows.append(
                f'<tr class="{"notok" if not t.get("ok", True) else ""}">'
                f"<td>{esc(t.get('name'))}</td><td>{esc(t.get('step'))}</td>"
                f"<td class='num'>{esc(fmt(t.get('max_abs')))}</td>"
                f"<td class='num'>{esc(fmt(t.get('max_rel')))}</td>"
                f"<td>{esc(fmt(t.get('worst_index')))}</td>"
                f"<td class='num'>{esc(fmt(t.get('tol')))}</td>"
                f"<td>{esc(fmt(t.get('bitwise')))}</td>"
                + (f"<td>{esc(t.get('note'))}</td>" if has_note else "") + "</tr>")
        rank = "all ranks" if c.get("rank") is None else f"rank {c.get('rank')}"
        status = (f'<span class="bad">{len(bad)} of {len(tensors)} differ</span>' if bad
                  else f"{len(tensors)} agree")
        out.append(
            f'<details class="inner"{" open" if bad else ""}><summary>{esc(c.get("name"))}, '
            f"{esc(rank)}: {status}</summary>"
            '<table class="numeric"><thead><tr><th>tensor</th><th>step</th><th>max abs</th>'
            "<th>max rel</th><th>worst index</th><th>tol</th><th>bitwise</th>"
            + ("<th>note</th>" if has_note else "") +
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></details>')
    if not out:
        return ""
    return "<h4>Numeric errors</h4>" + "".join(out)


def _tracebacks(app) -> str:
    """Each distinct traceback once, with the ranks that raised it."""
    groups = {}
    for c in app.get("checks") or []:
        tb = (c.get("details") or {}).get("traceback")
        if tb:
            what = "the pass raised" if c.get("kind") == "pass" else \
                f"{c.get('kind')}/{c.get('name')}"
            groups.setdefault((what, str(tb)), []).append(c.get("rank"))
    out = []
    for (what, tb), ranks in groups.items():
        known = [r for r in ranks if r is not None]
        where = f" on {_ranks_phrase(known)}" if known else ""
        out.append(f'<details class="inner tb" open><summary>Traceback: {esc(what)}'
                   f'{esc(where)}</summary><pre>{esc(tb)}</pre></details>')
    return "".join(out)


def _diff_html(diff: str) -> str:
    lines = []
    for ln in diff.splitlines():
        if ln.startswith("+++") or ln.startswith("---"):
            cls = "dh"
        elif ln.startswith("@@"):
            cls = "dhunk"
        elif ln.startswith("+"):
            cls = "dadd"
        elif ln.startswith("-"):
            cls = "ddel"
        else:
            cls = "dctx"
        lines.append(f'<span class="{cls}">{esc(ln) or " "}</span>')
    return "".join(lines)  # each line is a block; newlines in <pre> would double them


def _diffs(app) -> str:
    """The op-level diff of every rank; ranks with the very same diff share one block."""
    groups = {}
    for o in app.get("rank_outcomes") or []:
        if o.get("build_error"):
            key = ("build", o["build_error"])
        else:
            ops = (f"{o.get('ops_before')} \u2192 {o.get('ops_after')} ops"
                   if "ops_before" in o else "")
            state = "fired" if o.get("fired") else "unchanged"
            if o.get("error"):
                state = "pass raised" + (", program partly rewritten" if o.get("fired") else "")
            key = ("diff", o.get("diff") or "", ops, state)
        groups.setdefault(key, []).append(o.get("rank"))
    out = []
    for key, ranks in groups.items():
        who = _ranks_phrase([r for r in ranks if r is not None])
        if key[0] == "build":
            out.append(f'<details class="inner"><summary>{esc(who)}: the case did not '
                       f"build</summary><pre>{esc(key[1])}</pre></details>")
            continue
        _, diff, ops, state = key
        what = esc(", ".join(x for x in (ops, state) if x))
        if not diff.strip():
            out.append(f'<div class="nodiff">{esc(who)}: {what} <span class="dim">&middot; '
                       "no op-level change</span></div>")
            continue
        is_open = " open" if len(diff.splitlines()) <= 80 else ""
        out.append(f'<details class="inner"{is_open}><summary>{esc(who)}: {what}</summary>'
                   f'<pre class="diff">{_diff_html(diff)}</pre></details>')
    if not out:
        return ""
    return "<h4>Op-level diff per rank</h4>" + "".join(out)


def _applied_html(app) -> str:
    """What the application really ran, per pass (``applied``): a pass
    file's path and sha256, or the installed Paddle's version and commit."""
    rows = []
    for r in app.get("applied") or []:
        if r.get("source") == "file":
            what = f'<code>{esc(r.get("path"))}</code> sha256 <code>{esc(r.get("sha256"))}</code>'
        elif r.get("source") == "installed":
            what = (f'installed Paddle {esc(r.get("paddle"))} commit '
                    f'<code>{esc(r.get("commit"))}</code>'
                    + (f' ({esc(r["native"])})' if r.get("native") else ""))
        else:
            what = f'<code>{esc(r.get("module"))}.{esc(r.get("class"))}</code>'
        rows.append(f'<div><span class="dim">pass applied</span> <code>{esc(r.get("pass"))}'
                    f'</code>: {what}</div>')
    if not rows and (app.get("source") or "installed") != "installed":
        rows.append(f'<div><span class="dim">pass source</span> '
                    f'<code>{esc(app.get("source"))}</code></div>')
    return "".join(rows)


def _section(app, aid) -> str:
    v = app.get("status") or app.get("verdict")
    un = _unexpected(app)
    checks = app.get("checks") or []
    first = _first_finding(app)
    oneline = ""
    if first is not None and v not in ("EQUIVALENT", "LEFT_ALONE"):
        msg = short_message(app, first)
        oneline = (f'<span class="oneline">{esc(msg[:240])}'
                   f'{"&hellip;" if len(msg) > 240 else ""}</span>')
    ranks = ", ".join(str(r) for r in app.get("ranks") or [])
    fired = [str(o.get("rank")) for o in app.get("rank_outcomes") or [] if o.get("fired")]
    n_bad = sum(1 for c in checks if c.get("verdict") != "EQUIVALENT")
    mark = '<span class="unexp-mark">&#9888; unexpected</span>' if un else ""
    fires = app.get("expected_fires")
    fires_txt = "" if fires is None else (" (the pass must fire)" if fires
                                          else " (the pass must leave it alone)")
    src = _applied_html(app) + "".join(
        f'<div><span class="dim">note</span> {esc(n)}</div>' for n in app.get("notes") or [])
    if app.get("case_file"):
        src += (f'<div><span class="dim">case file</span> '
                f'<code>{esc(app["case_file"])}</code></div>')
    seconds = app.get("seconds")
    secs = f"{seconds:.2f} s" if isinstance(seconds, (int, float)) else ""
    attrs = (f'class="app{" unexpected" if un else ""}" id="{aid}" '
             f'data-pass="{esc(app.get("pass"))}" data-case="{esc(app.get("case"))}" '
             f'data-verdict="{esc(v)}" data-unexpected="{1 if un else 0}"'
             + (" open" if un else ""))
    facts = " &middot; ".join([
        f"ranks {esc(ranks)}", f"fired on {esc(', '.join(fired) or 'none')}",
        f"{len(checks)} checks" + (f", {n_bad} not EQUIVALENT" if n_bad else ""), esc(secs)])
    outcome = ('<b class="bad">differs from the expectation</b>' if un
               else '<span class="good">as expected</span>')
    return f"""
<details {attrs}>
 <summary>{_badge(v)} <b>{esc(app.get('case'))}</b> <span class="dim">&middot; {facts}</span> {mark}{oneline}</summary>
 <div class="body">
  <div class="expect">
   <div><span class="dim">expected</span> {_badge(app.get('expected'))}{esc(fires_txt)} &nbsp;
    <span class="dim">actual</span> {_badge(v)} {outcome}</div>
   <div><span class="dim">why expected:</span> {esc(app.get('expected_reason'))}</div>
   {src}
   <div><span class="dim">reproduce</span> <code class="repro">{esc(repro_command(app))}</code></div>
   {_reproducer(app, v)}
  </div>
  {_counterexamples(checks)}
  {_tracebacks(app)}
  <h4>Checks</h4>
  {_checks_table(app, checks)}
  {_numeric_tables(checks)}
  {_diffs(app)}
 </div>
</details>"""


def _sections(apps, ids) -> str:
    groups = {}
    for a, aid in zip(apps, ids):
        groups.setdefault(a.get("pass"), []).append((a, aid))
    out = []
    for p, items in groups.items():
        out.append(f'<div class="passgroup"><h2 class="passhead">{esc(p)} <span class="dim">'
                   f"({len(items)} applications)</span></h2>")
        out.extend(_section(a, aid) for a, aid in items)
        out.append("</div>")
    return "\n".join(out)


_CSS = """
:root{--eq:#d9f2df;--eq-t:#14532d;--ne:#fcd9d6;--ne-t:#8b1a10;--pc:#f3d6f5;--pc-t:#6b1670;
--na:#fdebc8;--na-t:#7a4b00;--in:#e6e7ea;--in-t:#3f434a;--line:#d6d8dc;--dim:#6b7078}
*{box-sizing:border-box}
body{font:13.5px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
margin:0;padding:16px 22px 40px;color:#1d2025;background:#fafafb}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:22px 0 8px}
h4{font-size:13px;margin:14px 0 6px;color:#30343b}
code,pre{font:12px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;background:#f3f4f6;
padding:6px 8px;border-radius:4px;max-height:420px;overflow:auto}
.dim{color:var(--dim);font-weight:normal}.good{color:#1a6b34}.bad{color:#b3261e;font-weight:600}
header{background:#fff;border:1px solid var(--line);border-radius:6px;padding:12px 16px}
dl.meta{display:flex;flex-wrap:wrap;gap:4px 22px;margin:0 0 6px}
dl.meta div{display:flex;gap:6px}dt{color:var(--dim)}dd{margin:0;font-weight:600}
.cmd{margin:4px 0 8px}.cmd code{background:#f3f4f6;padding:1px 5px;border-radius:3px}
.summary{display:flex;flex-wrap:wrap;gap:6px 20px;align-items:center;font-size:14px}
.chips b{margin-right:8px}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font:600 11px/18px ui-monospace,
"DejaVu Sans Mono",monospace;letter-spacing:.2px;white-space:nowrap}
.v-EQUIVALENT{background:var(--eq);color:var(--eq-t)}
.v-LEFT_ALONE{background:#eef3ee;color:#567a56;font-style:italic}
.v-CONTRACT_BROKEN{background:#fde2cc;color:#8a3b00}
.v-NOT_EQUIVALENT{background:var(--ne);color:var(--ne-t)}
.v-PASS_CRASHED{background:var(--pc);color:var(--pc-t)}
.v-NOT_APPLIED{background:var(--na);color:var(--na-t)}
.v-INCONCLUSIVE{background:var(--in);color:var(--in-t)}
.alert{background:#fff1f0;border:2px solid #d93025;border-radius:6px;padding:6px 14px;margin:12px 0}
.alert h2{color:#b3261e;margin:6px 0}.alert ul{margin:4px 0;padding-left:18px}
.controls{position:sticky;top:0;z-index:5;min-height:44px;background:#fafafbee;padding:10px 0 8px;
display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center;border-bottom:1px solid var(--line)}
#filter-text{width:230px;padding:4px 8px;border:1px solid #b9bcc2;border-radius:4px;font:inherit}
.vbox{padding:1px 7px 1px 3px;border-radius:4px;font:600 11px/20px ui-monospace,"DejaVu Sans Mono",
monospace;cursor:pointer;user-select:none;border:1px solid #0000}
.vbox input{vertical-align:-2px;margin:0 3px 0 2px}
.count{margin-left:auto;color:var(--dim);white-space:nowrap}
table{border-collapse:collapse;background:#fff}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top}
thead th{background:#f0f1f3;font-weight:600}
table.matrix{margin-top:10px}
table.matrix th.casecol{font:12px ui-monospace,"DejaVu Sans Mono",monospace;white-space:nowrap;
background:#fff}
table.matrix thead th{position:sticky;top:var(--controls-h,46px);z-index:2;font:600 12px ui-monospace,
"DejaVu Sans Mono",monospace}
table.matrix thead th.casecol{background:#f0f1f3}
td.cell{padding:0;min-width:220px}td.cell.empty{text-align:center;color:#aaa;padding:3px}
a.cell-link{display:block;padding:3px 8px;text-decoration:none;font:600 11.5px/18px ui-monospace,
"DejaVu Sans Mono",monospace}
a.cell-link:hover{outline:2px solid #3b6fd8;outline-offset:-2px}
a.cell-link.unexpected{box-shadow:inset 0 0 0 3px #d93025}
.unexp-mark{display:inline-block;margin-left:8px;color:#fff;background:#d93025;border-radius:3px;
padding:0 5px;font:600 10.5px/16px system-ui,sans-serif}
.filtered{display:none!important}a.cell-link.filtered{display:block!important;opacity:.12}
details.app{scroll-margin-top:calc(var(--controls-h,46px) + 8px);background:#fff;border:1px solid var(--line);border-radius:5px;margin:5px 0}
details.app.unexpected{border:2px solid #d93025}
details.app>summary{cursor:pointer;padding:5px 10px;list-style-position:outside;margin-left:14px}
details.app[open]>summary{border-bottom:1px solid var(--line);background:#f7f8f9}
details.app:target{outline:3px solid #3b6fd8}
.oneline{display:block;color:#4a4f57;font-size:12.5px;margin:2px 0 0;overflow:hidden;text-overflow:ellipsis}
.body{padding:6px 14px 12px}
.expect{display:grid;gap:3px}
code.repro{background:#1f2329;color:#e8eaed;padding:2px 7px;border-radius:3px;user-select:all}
details.inner{margin:4px 0}details.inner>summary{cursor:pointer;color:#30343b}
details.tb>summary{color:var(--pc-t);font-weight:600}
ul.cex{margin:4px 0;padding-left:18px}ul.cex li{margin:3px 0}
table.checks,table.numeric{width:100%;font-size:12.5px}
table.checks td:nth-child(-n+4){white-space:nowrap}
td.msg{word-break:break-word}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.numeric td{font:12px ui-monospace,"DejaVu Sans Mono",monospace}
tr.notok td{background:#fff4f3}
pre.diff{background:#fbfbfc;border:1px solid var(--line);max-height:640px}
.nodiff{margin:4px 0 4px 14px}
.dadd{background:#dcf5e1;color:#0d4a1f;display:block}
.ddel{background:#fde2e0;color:#7d160d;display:block}
.dhunk{color:#3b5bb5;display:block}.dh{color:var(--dim);display:block;font-weight:600}
.dctx{display:block;color:#444}
footer{margin-top:24px;color:var(--dim);font-size:12px}
"""

_JS = """
(function () {
  var text = document.getElementById('filter-text');
  var boxes = Array.prototype.slice.call(document.querySelectorAll('input.vfilter'));
  var onlyUnexpected = document.getElementById('only-unexpected');
  var cells = Array.prototype.slice.call(document.querySelectorAll('a.app-ref'));
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.mrow'));
  var apps = Array.prototype.slice.call(document.querySelectorAll('details.app'));
  var groups = Array.prototype.slice.call(document.querySelectorAll('div.passgroup'));
  var count = document.getElementById('shown-count');

  function keep(el, q, verdicts) {
    var v = el.getAttribute('data-verdict');
    if (verdicts.indexOf(v) < 0) return false;
    if (onlyUnexpected.checked && el.getAttribute('data-unexpected') !== '1') return false;
    if (!q) return true;
    var hay = (el.getAttribute('data-pass') + ' ' + el.getAttribute('data-case') + ' ' + v)
      .toLowerCase();
    return q.split(/\\s+/).every(function (w) { return hay.indexOf(w) >= 0; });
  }

  function apply() {
    var q = text.value.trim().toLowerCase();
    var verdicts = boxes.filter(function (b) { return b.checked; })
      .map(function (b) { return b.value; });
    cells.forEach(function (c) { c.classList.toggle('filtered', !keep(c, q, verdicts)); });
    rows.forEach(function (r) {
      r.classList.toggle('filtered', !r.querySelector('a.app-ref:not(.filtered)'));
    });
    var shown = 0;
    apps.forEach(function (a) {
      var k = keep(a, q, verdicts);
      a.classList.toggle('filtered', !k);
      if (k) shown += 1;
    });
    groups.forEach(function (g) {
      g.classList.toggle('filtered', !g.querySelector('details.app:not(.filtered)'));
    });
    count.textContent = String(shown);
  }

  function measure() {
    var h = document.getElementById('controls').offsetHeight;
    document.documentElement.style.setProperty('--controls-h', h + 'px');
  }

  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (el && el.tagName === 'DETAILS') {
      el.open = true;
      el.classList.remove('filtered');
      var g = el.closest('div.passgroup');
      if (g) g.classList.remove('filtered');
      el.scrollIntoView();
    }
  }

  var params = new URLSearchParams(location.search);
  if (params.get('q')) text.value = params.get('q');
  if (params.get('v')) {
    var wanted = params.get('v').split(',');
    boxes.forEach(function (b) { b.checked = wanted.indexOf(b.value) >= 0; });
  }
  if (params.get('unexpected') === '1') onlyUnexpected.checked = true;

  text.addEventListener('input', apply);
  boxes.forEach(function (b) { b.addEventListener('change', apply); });
  onlyUnexpected.addEventListener('change', apply);
  window.addEventListener('hashchange', openTarget);
  window.addEventListener('resize', measure);
  measure();
  apply();
  openTarget();
  document.body.dataset.ready = '1';
})();
"""


def render_html(report: dict) -> str:
    """The page for ``report`` (a report.json dict) as a string."""
    apps = list(report.get("applications") or [])
    ids = _anchor_ids(apps)
    summ = report.get("summary") or {}
    title = (f"Pass equivalence: {summ.get('total', len(apps))} applications, "
             f"{summ.get('unexpected', 0)} unexpected")
    body = [_header(report), _alerts(report), _controls(report),
            _matrix(apps, ids) if apps else '<p class="dim">No applications in this report.</p>',
            _sections(apps, ids),
            f'<footer>Generated from report.json ({esc(report.get("schema", ""))}); '
            "rerun one application with the command in its section.</footer>"]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{_CSS}</style>
</head>
<body>
{''.join(body)}
<script>{_JS}</script>
</body>
</html>
"""


def write_html(report: dict, directory: str) -> str:
    """Write ``index.html`` for ``report`` into ``directory``; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "index.html")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render_html(report))
    os.replace(tmp, path)
    return path
