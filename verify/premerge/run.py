"""``python -m verify premerge CHECKOUT [--base REV] [--out DIR] [--no-cache]``.

Checks a Paddle source checkout's change before it merges, without building
or installing it:

1. the Python files changed under ``python/paddle/`` between the base and
   the working tree (``checkout.py``) are overlaid on the installed Paddle
   (``overlay.py``) in every process of the run: the runs below are child
   processes started with the overlay's environment, and so are theirs;
2. the affected applications (pass x case) are those whose recorded run
   executed code the change touches (``affected.py``, ``executed.py``; the
   import graph for new files and unrecorded applications); each affected
   pass runs on its affected cases (``python -m verify run``), except the
   applications whose result is cached (``cache.py``); the vocabulary audit
   runs on the affected passes whose own source changed;
3. ``DIR/summary.md`` (``summary.py``) compares every verdict with
   ``verify/baseline.json`` (the installed Paddle's) and lists changed C++
   files as not checked; ``DIR/premerge.json`` holds the same for machines,
   and each run's usual report is under ``DIR/runs/``.

Exit: 0 nothing new, 1 a new finding (or a run that failed), 2 bad input
(one line on stderr).  This process never imports Paddle: the warm path is
git, the cached import graph and the cache lookups.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from . import affected as affected_mod
from . import overlay
from .cache import Cache, cache_root, key, valid_application, valid_vocabulary
from .checkout import CheckoutError, changes
from .summary import Outcome, Review, render
from verify.engine import baseline as bl

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BASELINE = PROJECT_ROOT / "verify" / "baseline.json"


class UsageError(Exception):
    pass


def _parser():
    from verify.arguments import ArgumentParser, seed_arg  # one-line usage errors; seeds in range

    p = ArgumentParser(prog="python -m verify premerge",
                       description="Check a Paddle checkout's change before it "
                       "merges: its changed Python sources overlaid on the "
                       "installed Paddle, the affected passes on every case.")
    p.add_argument("checkout", metavar="CHECKOUT", help="a git checkout of Paddle's source")
    p.add_argument("--base", default=None, metavar="REV",
                   help="compare with this revision (default: the merge base with the "
                        "upstream branch, else HEAD~1)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where summary.md and the reports go (default reports/premerge-<time>)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the "
                   "result cache")
    p.add_argument("--pass", dest="passes", action="append", default=[], metavar="NAME",
                   help="run only these of the affected passes (name or short name)")
    p.add_argument("--case", dest="cases", action="append", default=[], metavar="GLOB",
                   help="run only the cases matching these globs")
    p.add_argument("--backend", choices=["none", "simulated", "ranks", "both"], default=None,
                   help="numeric backend of the runs (default: the run's own)")
    p.add_argument("--seed", type=seed_arg, default=None)
    p.add_argument("--no-vocabulary", action="store_true",
                   help="skip the vocabulary audit of the changed pass sources")
    return p


def _load_json(path):
    with open(path) as f:
        return json.load(f)


def _pairs(baseline: dict) -> dict:
    """``{pass: [case]}`` as the baseline pairs them (each pass with the cases
    of its IR), read without importing the suite's cases."""
    out = {}
    for k in baseline["entries"]:
        p, c = k.split("::", 1)
        out.setdefault(p, []).append(c)
    return out


def _evidence(app: dict) -> str:
    """One line: the first check that carries the application's verdict."""
    checks = [c for c in app.get("checks") or [] if c.get("verdict") == app.get("verdict")
              and not c.get("advisory")]
    checks.sort(key=lambda c: c.get("counterexample") is None)
    if not checks:
        notes = app.get("notes") or []
        return str(notes[0]).splitlines()[0][:300] if notes else ""
    c = checks[0]
    line = f"[{c.get('kind')}/{c.get('name')} rank {c.get('rank')}] " + \
        str(c.get("message", "")).splitlines()[0]
    return line[:400]


def _broken_modules(modules, texts: dict, deleted, unimportable=None) -> list:
    """Of the changed ``modules`` a pass reaches, those that cannot be
    imported: deleted, a source that does not compile, or one that raises
    on import (``unimportable``: module -> the error), one line each."""
    out = []
    for m in modules:
        if m in (unimportable or {}):
            out.append(f"{m} does not import: {unimportable[m]}")
        elif m in deleted:
            out.append(f"{m} is deleted by the change")
        elif m in texts:
            try:
                compile(texts[m], m, "exec")
            except SyntaxError as exc:
                out.append(f"{m} does not compile: SyntaxError: {exc.msg} (line {exc.lineno})")
    return out


_IMPORT_PROBE = (
    "import importlib, json, sys\n"
    "out = {}\n"
    "for m in json.loads(sys.argv[1]):\n"
    "    try:\n"
    "        importlib.import_module(m)\n"
    "    except BaseException as exc:\n"
    "        out[m] = (type(exc).__name__ + ': ' + str(exc)).splitlines()[0][:300]\n"
    "print('UNIMPORTABLE=' + json.dumps(out))\n")


def _compiles(text: str) -> bool:
    try:
        compile(text, "<changed>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _unimportable(modules, env) -> dict:
    """``{module: error}`` of the changed ``modules`` (they compile) that
    raise when imported with the overlay: a child process with the runs'
    environment (this one never imports Paddle)."""
    modules = [m for m in modules if not m.endswith("__main__")]  # would run a program
    if not modules:
        return {}
    proc = _child([sys.executable, "-c", _IMPORT_PROBE, json.dumps(sorted(modules))], env)
    for ln in proc.stdout.splitlines():
        if ln.startswith("UNIMPORTABLE="):
            try:
                got = json.loads(ln[len("UNIMPORTABLE="):])
            except ValueError:
                break
            return {m: str(v) for m, v in got.items() if m in modules}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    return {m: "the import probe failed: " + " / ".join(tail) for m in modules}


_UNAVAILABLE_PROBE = (
    "import importlib, json, cases\n"
    "out = {}\n"
    "for fam, why in cases.unavailable_families().items():\n"
    "    mod = importlib.import_module('cases.' + fam)\n"
    "    out[fam] = [why, sorted(c.name for c in getattr(mod, 'DECLARED', []))]\n"
    "print('UNAVAILABLE=' + json.dumps(out))\n")


def _unavailable_cases(env) -> dict:
    """``{family: (why, case names)}`` of the case families whose optional
    dependencies are missing where the runs happen (a child process with the
    runs' environment: this one never imports the cases)."""
    proc = _child([sys.executable, "-c", _UNAVAILABLE_PROBE], env)
    for ln in proc.stdout.splitlines():
        if ln.startswith("UNAVAILABLE="):
            try:
                return {f: (w, set(n)) for f, (w, n) in json.loads(ln[12:]).items()}
            except (ValueError, TypeError):
                break
    return {}


def _rerun_command(args, checkout: str, base: str) -> str:
    cmd = ["python", "-m", "verify", "premerge", checkout, "--base", base]
    for p in args.passes:
        cmd += ["--pass", p]
    for c in args.cases:
        cmd += ["--case", c]
    if args.backend:
        cmd += ["--backend", args.backend]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    return shlex.join(cmd)


def _run_env(manifest: str, planner_sources: dict) -> dict:
    env = overlay.child_env(manifest)
    env["PYTHONPATH"] = os.pathsep.join(
        [env["PYTHONPATH"].split(os.pathsep)[0], str(PROJECT_ROOT)] +
        env["PYTHONPATH"].split(os.pathsep)[1:])
    if planner_sources:
        # planned cases are cached per Paddle version; planned with changed
        # planner code they are other programs: plan them into their own cache
        digest = key("planner", planner_sources, "", {})[:16]
        env["PADDLE_PASS_VERIFY_CACHE"] = str(cache_root() / "premerge-planned" / digest)
    return env


_APP_LINE = re.compile(r"^\[\d+/\d+\] ")


def _run_pass(adapter, cases, out_dir: Path, env, args, progress=None) -> tuple:
    """``python -m verify run`` of one pass on ``cases`` with the overlay;
    (report dict or None, error text).  ``progress``: called with each
    application's line as the run prints it."""
    cmd = [sys.executable, "-m", "verify", "run", "--pass", adapter, "--report-dir",
           str(out_dir)]
    for c in cases:
        cmd += ["--case", c]
    if args.backend:
        cmd += ["--backend", args.backend]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    def on_line(ln):
        if progress is not None and _APP_LINE.match(ln):
            progress(ln)

    proc = _child(cmd, env, on_line)
    path = out_dir / "report.json"
    if proc.returncode not in (0, 1) or not path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return None, f"the run of {adapter} exited {proc.returncode}: " + " / ".join(tail)
    return _load_json(path), ""


def _child(cmd, env, on_line=None) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end; if this process is interrupted (Ctrl-C,
    SIGTERM), the child goes too (it ends its own workers).  ``on_line``:
    called with each line the child writes to stdout, as it comes."""
    import threading

    proc = subprocess.Popen(cmd, env=env, cwd=str(PROJECT_ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        if on_line is None:
            out, err = proc.communicate()
        else:
            errs = []
            reader = threading.Thread(target=lambda: errs.append(proc.stderr.read()),
                                      daemon=True)
            reader.start()
            lines = []
            for ln in proc.stdout:
                lines.append(ln)
                on_line(ln.rstrip("\n"))
            proc.wait()
            reader.join()
            out, err = "".join(lines), "".join(errs)
    except BaseException:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _vocabulary(names, env) -> tuple:
    """``(findings, new keys, gone keys)`` of the vocabulary audit, or an error."""
    cmd = [sys.executable, "-m", "verify", "vocabulary", "--json"]
    for n in names:
        cmd += ["--pass", n]
    proc = _child(cmd, env)
    try:
        start = proc.stdout.index("{")
        data = json.loads(proc.stdout[start:])
    except ValueError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the vocabulary audit exited {proc.returncode}: "
                           + " / ".join(tail)) from None
    return data


def premerge(args, out=sys.stdout) -> int:
    started = time.perf_counter()
    try:
        ch = changes(args.checkout, args.base)
    except CheckoutError as exc:
        raise UsageError(str(exc)) from None
    from verify.report.write import DirectoryBusy, DirLock, run_dir_name

    # a fresh default dir per run (time, pid, random); --out locked for the run:
    # a second premerge on it is one line, exit 2 (both writing lost results)
    out_dir = Path(args.out or run_dir_name("premerge")).resolve()
    try:
        args.out_lock = DirLock(str(out_dir), "premerge run (--out)")
    except DirectoryBusy as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {out_dir}: {exc.strerror or exc}") from None
    root = affected_mod.installed_root()
    files = ch.overlay_files()
    texts = {overlay.module_name(rel): t for rel, t in files.items()}
    deleted = [overlay.module_name(rel) for rel in ch.deleted()]
    manifest = overlay.write(str(out_dir / "overlay"), files, root, ch.deleted())
    cache = Cache(enabled=not args.no_cache)
    index_dir = None if args.no_cache else str(cache.dir)
    baseline = _load_json(BASELINE)
    pairs = _pairs(baseline)
    from .executed import load as load_executed
    from .executed import unrecorded

    # changed modules that compile but raise on import are as broken as
    # those that do not compile (asked once per change: cached)
    compiles = {m: t for m, t in texts.items() if _compiles(t) and
                os.path.isfile(os.path.join(root, affected_mod.module_file(m, root, texts)))}
    unimportable = {}
    if compiles:
        ik = key("imports", compiles, "", {})
        hit = cache.get(ik, lambda d: isinstance(d, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in d.items()))
        if hit is None:
            hit = _unimportable(list(compiles), _run_env(manifest, {}))
            cache.put(ik, hit)
        unimportable = hit
    recorded = load_executed(paddle_version=baseline.get("paddle"))
    aff = affected_mod.affected(texts, deleted, root=root, cache_dir=index_dir,
                                executed=recorded, pairs=pairs, unimportable=unimportable)
    adapters = affected_mod.suite_adapters()
    by_short = {a.short: a.name for a in adapters.values()}
    wanted = None
    if args.passes:
        wanted = set()
        for p in args.passes:
            name = by_short.get(p, p)
            if name not in adapters:
                raise UsageError(f"unknown pass {p!r}; known: {', '.join(adapters)}")
            wanted.add(name)
    review = Review(checkout=ch.root, base=ch.base, base_how=ch.base_how,
                    rerun=_rerun_command(args, ch.root, ch.base),
                    python_changed=[(c.status, c.path) for c in ch.python
                                    if c.path not in ch.unreadable],
                    native=[(c.status, c.path) for c in ch.native],
                    other=[(c.status, c.path) for c in ch.other],
                    unreadable=sorted(ch.unreadable.items()),
                    affected=dict(aff.passes), planner=aff.planner,
                    planner_adapters=aff.planner_adapters,
                    fallback=unrecorded(baseline.get("entries") or {}, recorded))
    for name in aff.unmapped:
        review.not_selected[name] = "no recorded run (verify/executed_files.json) and " \
            "no Python module of paddle.distributed of its own (a C++ pass or not one " \
            "Paddle pass): not selected by a Python change"
    reached = {m for mods in aff.passes.values() for m in mods} | set(aff.planner)
    review.unreached = sorted(set(aff.changed_modules) - reached)
    planner_sources = {m: texts[m] for m in aff.planner if m in texts}
    env = _run_env(manifest, planner_sources)
    options = {"backend": args.backend, "seed": args.seed}
    unavailable = None  # {family: (why, case names)}, asked once when needed

    def say(line):  # progress: one line per pass and per application
        print(line, file=out, flush=True)

    if aff.passes:
        say(f"premerge: {len(files)} changed Python file(s), {len(aff.passes)} affected "
            f"pass(es): " + ", ".join(adapters[n].short if n in adapters else n
                                      for n in sorted(aff.passes)))
    for name in sorted(aff.passes):
        if wanted is not None and name not in wanted:
            review.not_selected[name] = "affected, left out by --pass"
            review.affected.pop(name, None)
            continue
        info = adapters[name]
        cases = [c for c in aff.cases.get(name, {}) if not args.cases or
                 any(fnmatch.fnmatchcase(c, g) for g in args.cases)]
        if unavailable is None:
            unavailable = _unavailable_cases(env)
        for fam, (why, names) in sorted(unavailable.items()):
            mine = [c for c in cases if c in names]
            if mine:  # the family's optional dependencies are missing: one line
                cases = [c for c in cases if c not in names]
                review.skipped.append((name, fam, f"{len(mine)} case(s) not run: {why}"))
                say(f"premerge: {info.short}: skipped family {fam} ({len(mine)} "
                    f"case(s)): {why}")
        if not cases:
            review.not_selected[name] = "no case selected"
            continue
        # the sources each application sees: the changed modules that
        # selected it, and changed planner code (it builds the planned cases)
        keys = {c: key("application", {m: texts.get(m, "<deleted>") for m in
                                       aff.cases[name][c] + aff.planner},
                       f"{name}::{c}", options) for c in cases}
        results, todo = {}, []
        for c in cases:
            hit = cache.get(keys[c], valid_application)
            if hit is None:
                todo.append(c)
            else:
                results[c] = (hit, True)
        say(f"premerge: {info.short} ({name}): {len(cases)} application(s), "
            f"{len(cases) - len(todo)} cached, {len(todo)} to run")
        broken = _broken_modules(aff.passes[name], texts, deleted, unimportable)
        if todo:
            run_dir = out_dir / "runs" / info.short
            report, error = _run_pass(name, todo, run_dir, env, args,
                                      progress=lambda ln: say(f"  {ln}"))
            if report is None and broken:
                # the pass's own module (or one it imports) is deleted or does
                # not compile: every application that runs it is a finding
                why = "; ".join(broken)
                for c in todo:
                    results[c] = ({"verdict": "PASS_CRASHED", "evidence": why,
                                   "identities": [{"check": "pass/pass ran", "stage": "",
                                                   "rank": None, "verdict": "PASS_CRASHED",
                                                   "op": "", "var": "",
                                                   "error": "ImportError"}],
                                   "fired": None, "decided": ["pass/pass ran"]}, False)
            elif report is None:
                review.errors.append(error)
            else:
                review.reports.append(str(run_dir.relative_to(out_dir)))
                for app in report.get("applications", []):
                    if app.get("case") not in keys:
                        continue
                    rec = {"verdict": app.get("verdict"), "evidence": _evidence(app),
                           "identities": bl.identities(app), "fired": bl.fired(app),
                           "decided": bl.decided(app)}
                    rel = app.get("reproducer")
                    if rel:
                        rec["reproducer_name"] = os.path.basename(rel)
                        rec["reproducer_text"] = _read_text(run_dir / rel)
                    cache.put(keys[app["case"]], rec)
                    results[app["case"]] = (rec, False)
                for c in todo:
                    if c not in results:
                        review.errors.append(f"{name} on {c}: no result in {run_dir}")
        for c in cases:
            if c not in results:
                continue
            rec, cached = results[c]
            entry = baseline["entries"].get(f"{name}::{c}", {})
            cmp = bl.compare(entry, rec) if entry else {"label": "NEW", "new": [],
                                                        "gone": []}
            o = Outcome(name, info.short, c, entry.get("verdict", "?"), rec["verdict"],
                        rec.get("evidence", ""), cached=cached, label=cmp["label"],
                        new_ids=cmp["new"], gone_ids=cmp["gone"])
            ran_broken = _broken_modules(aff.trace_broken.get(f"{name}::{c}", []), texts,
                                         deleted, unimportable)
            if ran_broken and o.kind != "NEW":
                # its recorded run executed a module that no longer imports:
                # whatever the verdict (a caught ImportError may just skip
                # the work), the application is not the one the baseline judged
                o.label = "NEW"
                o.evidence = "; ".join(ran_broken) + " (the baseline's run executed it)" + \
                    (f"; {o.evidence}" if o.evidence else "")
            elif broken and o.now == "INCONCLUSIVE" and o.kind != "NEW":
                # a run that could not judge because a module it runs no
                # longer imports: the change broke it (not "not proved")
                o.label = "NEW"
                o.evidence = "; ".join(broken) + (f" ({o.evidence})" if o.evidence else "")
            if o.kind == "NEW" and o.now == "EQUIVALENT":
                # the finding went away because the pass stopped firing where
                # the baseline says it fires: the pass no longer does its job
                o.now = "NOT_APPLIED"
                o.evidence = o.evidence or "the pass no longer fires where the baseline " \
                    "says it does (no rank changed)"
            say(f"  {o.kind}: {info.short} on {c}: {o.now} (baseline {o.baseline})"
                + (" [cached]" if cached else ""))
            if o.kind != "unchanged" and rec.get("reproducer_text"):
                try:
                    o.reproducer = write_reproducer(out_dir, rec, f"repro_{info.short}_{c}.py",
                                                    manifest)
                except ValueError as exc:  # out_dir/repro links out of --out
                    review.errors.append(f"{name} on {c}: no reproducer written: {exc}")
            review.outcomes.append(o)
    # how each application that ran was selected (by its record or the graph)
    review.selected_by = {f"{o.pass_name}::{o.case}": aff.how.get(f"{o.pass_name}::{o.case}", "")
                          for o in review.outcomes}
    if not args.no_vocabulary:
        _audit_vocabulary(review, aff, wanted, texts, env, cache)
    review.seconds = time.perf_counter() - started
    review.cache = ("cache off" if args.no_cache else
                    f"cache: {cache.hits} hit(s), {cache.misses} miss(es)")
    text = render(review)
    (out_dir / "summary.md").write_text(text)
    (out_dir / "premerge.json").write_text(json.dumps(_machine(review), indent=1) + "\n")
    for o in review.new():
        print(f"{o.kind}: {o.pass_name} on {o.case}: {o.baseline} -> {o.now}"
              + (f"  ({o.evidence})" if o.evidence else ""), file=out)
    for o in review.outcomes:
        if o.kind in ("FIXED", "GONE"):
            print(f"{o.kind}: {o.pass_name} on {o.case}: {o.baseline} -> {o.now}", file=out)
    for p, fam, why in review.skipped:
        print(f"skipped family {fam} for {p}: {why}", file=out)
    for p, k, msg, _ in review.vocabulary_new:
        print(f"NEW (vocabulary): {k}: {msg}", file=out)
    for p, k, msg, _ in review.vocabulary_advisory:
        print(f"advisory (vocabulary, not gating): {k}: {msg}", file=out)
    for s, p in review.native:
        print(f"not checked (needs a build): {p}", file=out)
    for p, why in review.unreadable:
        print(f"not checked: {p}: {why}", file=out)
    for e in review.errors:
        print(f"error: {e}", file=out)
    print(f"{len(review.outcomes)} applications of {len(review.affected)} affected "
          f"pass(es), {len(review.new())} new; {review.cache}; "
          f"{review.seconds:.1f} s; summary: {out_dir / 'summary.md'}", file=out)
    return review.exit_code()


_OVERLAY_MARK = "# --- verify premerge: run with the checkout's changed Paddle sources ---"


def write_reproducer(out_dir: Path, rec: dict, default_name: str, manifest: str) -> str:
    """Write a result's reproducer (``rec``: a cache entry or a run's) into
    ``out_dir/repro/``; its name is input (a cache entry's ``reproducer_name``):
    one safe path component (``verify/safe_names.py``), the file inside
    ``out_dir`` (else ``UnsafePath``, a ValueError).  Returns the path."""
    from verify.safe_names import component, inside

    path = Path(inside(out_dir, "repro", component(rec.get("reproducer_name")
                                                   or default_name)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_with_overlay_text(rec["reproducer_text"], manifest))
    return str(path)


def _read_text(path: Path) -> str:
    """A run's reproducer, as text (the overlay preamble is added on write)."""
    try:
        return path.read_text()
    except OSError:
        return ""


def _with_overlay_text(text: str, manifest: str) -> str:
    """``text`` with the overlay preamble inserted before its first statement
    that is not the docstring or a ``__future__`` import, so the standalone
    reproducer runs the checkout's sources too."""
    from verify.repro.embedded import MARK as EMBEDDED, after_header

    if not text or _OVERLAY_MARK in text or EMBEDDED in text:
        return text  # the run embedded the overlay's sources itself

    return after_header(text, overlay.preamble(manifest))


def _audit_vocabulary(review, aff, wanted, texts, env, cache) -> None:
    """The vocabulary audit of every affected pass whose source it reads (the
    pass module and, one level deep, the Paddle helpers it calls: a changed
    helper changes what the pass reads)."""
    names = [n for n in aff.audited if wanted is None or n in wanted]
    if not names:
        return
    sources = {m: texts.get(m, "<deleted>") for n in names for m in aff.passes[n]}
    k = key("vocabulary", sources, ",".join(names), {})
    data = cache.get(k, valid_vocabulary)
    if data is None:
        try:
            data = _vocabulary(names, env)
        except RuntimeError as exc:
            review.vocabulary_error = str(exc)
            return
        cache.put(k, data)
    by_key = {f["key"]: f for f in data.get("findings", [])}
    for kk in data.get("new", []):
        f = by_key.get(kk, {})
        review.vocabulary_new.append((f.get("pass_name", ""), kk, f.get("message", ""),
                                      ", ".join(f.get("where", []))))
    review.vocabulary_gone = [(kk.split("::")[0], kk) for kk in data.get("gone", [])]
    for kk in data.get("advisory", []):  # typed by a variable's name: not gating
        f = by_key.get(kk, {})
        review.vocabulary_advisory.append((f.get("pass_name", ""), kk, f.get("message", ""),
                                           ", ".join(f.get("where", []))))


def _machine(r: Review) -> dict:
    return {"schema": "premerge/1", "checkout": r.checkout, "base": r.base,
            "base_how": r.base_how, "exit": r.exit_code(), "affected": r.affected,
            "applications": [{"pass": o.pass_name, "case": o.case, "baseline": o.baseline,
                              "verdict": o.now, "kind": o.kind, "evidence": o.evidence,
                              "new": o.new_ids, "gone": o.gone_ids,
                              "reproducer": o.reproducer, "cached": o.cached}
                             for o in r.outcomes],
            "skipped": [{"pass": p, "family": f, "why": w} for p, f, w in r.skipped],
            "vocabulary_new": [k for _, k, _, _ in r.vocabulary_new],
            "vocabulary_gone": [k for _, k in r.vocabulary_gone],
            "vocabulary_advisory": [k for _, k, _, _ in r.vocabulary_advisory],
            "not_checked": [p for _, p in r.native], "python": r.python_changed,
            "unreadable": dict(r.unreadable),
            "not_selected": r.not_selected, "planner": r.planner, "errors": r.errors,
            "unreached": r.unreached, "selected_by": r.selected_by,
            "import_graph_fallback": r.fallback,
            "seconds": round(r.seconds, 2), "cache": r.cache}


def main(argv=None) -> int:
    import signal
    import threading

    args = _parser().parse_args(argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum, frame):  # unwinds through _child, which ends the run
            raise SystemExit(143)

        previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return premerge(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if getattr(args, "out_lock", None) is not None:
            args.out_lock.release()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
