"""Command line: ``python -m verify list|run``.

Exit codes: 0 every verdict is the expected one; 1 some verdict differs;
2 bad input (unknown pass or case, unreadable pass file, unwritable report
directory), with one clear line on stderr.
"""
from __future__ import annotations

import json
import os
import sys
import time


class UsageError(Exception):
    pass


# numeric options: argparse ``type=`` functions, so a bad value is argparse's
# one line (``error: argument --timeout: ...``) and exit 2
from verify.arguments import (ArgumentParser, count_arg, megabytes_arg,  # noqa: E402,F401
                              seconds_arg, seed_arg)


def _keep_arg(text: str) -> int:
    """--keep-reports: a whole number >= 0 (0 keeps every report folder)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative: give 0 (keep all) or more")
    return value


def _parser():
    p = ArgumentParser(prog="python -m verify",
                       description="Verify Paddle's distributed rewrite passes.")
    sub = p.add_subparsers(dest="cmd")
    lst = sub.add_parser("list", help="list passes and cases")
    lst.add_argument("--case-file", dest="case_files", action="append", default=[],
                     metavar="PATH", help="also list the cases of this case file")
    lst.add_argument("--program-dir", dest="program_dirs", action="append", default=[],
                     metavar="DIR",
                     help="a program dir (python -m verify plan, or the documented format "
                          "in verify/plan/program_format.py) as one more case (repeatable)")
    sub.add_parser("mutate", help="mutation testing of the checker (see verify/selfcheck/mutate.py)",
                   add_help=False)
    sub.add_parser("premerge", help="check a Paddle checkout's change before it merges "
                   "(see verify/premerge/run.py)", add_help=False)
    sub.add_parser("premerge-trace", help="record which Paddle code each baseline "
                   "application runs, for premerge's selection (see "
                   "verify/premerge/executed.py)", add_help=False)
    sub.add_parser("coverage", help="op types of the programs with their shape rule and "
                   "value row, and which checks would stop (see verify/selfcheck/coverage.py)",
                   add_help=False)
    sub.add_parser("vocabulary", help="audit the op types, slots and attrs each pass's "
                   "matcher reads (see verify/selfcheck/vocabulary.py)", add_help=False)
    sub.add_parser("generate", help="plan generated models with Paddle's planner and check "
                   "each, with a planner-coverage report (see verify/generate/cli.py)",
                   add_help=False)
    base = sub.add_parser("baseline", help="rewrite verify/baseline.json from the cases, "
                          "and docs/findings.md from it")
    base.add_argument("--check", action="store_true",
                      help="only check that the file is up to date with what the cases "
                      "declare (exit 1 if not); recorded finding identities are kept")
    base.add_argument("--from-report", dest="from_report", action="append", default=[],
                      metavar="REPORT_JSON",
                      help="record each finding's identity (check, stage, rank, op, "
                      "variable) from a run's report.json, for every application whose "
                      "verdict is the baseline's (repeatable)")
    rep = sub.add_parser("repro", help="write a self-contained reproducer of one "
                         "application (needs only Paddle; exit 1 while the defect is present)")
    rep.add_argument("--pass", dest="pass_name", required=True, metavar="NAME")
    rep.add_argument("--case", dest="case_name", required=True, metavar="NAME")
    rep.add_argument("--out", metavar="FILE", default=None,
                     help="where the script goes (default reports/repro/repro_<pass>_<case>.py)")
    rep.add_argument("--pass-file", metavar="PATH",
                     help="embed this pass source instead of using the installed pass")
    rep.add_argument("--paddle-file", dest="paddle_files", action="append", default=[],
                     metavar="PATH",
                     help="a changed module of Paddle's Python source, loaded in place of "
                          "the installed one and embedded in the script (repeatable)")
    rep.add_argument("--case-file", dest="case_files", action="append", default=[],
                     metavar="PATH", help="a case file the case comes from (repeatable)")
    rep.add_argument("--program-dir", dest="program_dirs", action="append", default=[],
                     metavar="DIR",
                     help="a program dir (python -m verify plan, or the documented format "
                          "in verify/plan/program_format.py) as one more case (repeatable)")
    rep.add_argument("--seed", type=seed_arg, default=None, help="seed of parameters and inputs")
    pl = sub.add_parser("plan", help="plan MODEL.py for every rank with Paddle's Engine "
                        "(CPU) and write a program dir")
    pl.add_argument("model", metavar="MODEL.py")
    pl.add_argument("--ranks", type=count_arg, required=True)
    pl.add_argument("--mesh", default=None,
                    help="DPxTP (e.g. 2x2) or a JSON list (default: 1-D TP over all ranks)")
    pl.add_argument("--out", required=True, metavar="DIR")
    pl.add_argument("--ir", choices=["legacy", "pir"], default="legacy",
                    help="legacy: the Engine (ProgramDesc); pir: dist.to_static (PIR), "
                         "see examples/tiny_mlp_pir.py")
    pl.add_argument("--strategy", default=None, metavar="FILE",
                    help="JSON settings of auto.Strategy, e.g. "
                         "{\"sp_optimization\": {\"enable\": true}}")
    run = sub.add_parser("run", help="apply passes to cases and check every application")
    run.add_argument("--pass", dest="passes", action="append", default=[],
                     metavar="NAME", help="pass name or short name (repeatable; default all)")
    run.add_argument("--case", dest="cases", action="append", default=[],
                     metavar="GLOB", help="case name glob (repeatable; default all)")
    run.add_argument("--case-file", dest="case_files", action="append", default=[],
                     metavar="PATH", help="a Python file defining CASES with the public "
                     "case API (verify/case_api.py); its cases join the built-in ones "
                     "(repeatable)")
    run.add_argument("--program-dir", dest="program_dirs", action="append", default=[],
                     metavar="DIR",
                     help="a program dir (python -m verify plan, or the documented format "
                          "in verify/plan/program_format.py) as one more case (repeatable)")
    run.add_argument("--pass-file", metavar="PATH",
                     help="load the pass from this source file instead of the installed Paddle")
    run.add_argument("--paddle-file", dest="paddle_files", action="append", default=[],
                     metavar="PATH",
                     help="a changed module of Paddle's Python source (e.g. a reshard "
                          "function), loaded in place of the installed one in every "
                          "process the run starts (the premerge overlay; repeatable)")
    run.add_argument("--report-dir", metavar="DIR", default=None,
                     help="where report.json goes (default reports/run-<time>)")
    run.add_argument("--keep-reports", type=_keep_arg, default=None, metavar="N",
                     help="after a run into the default reports/ folder, remove the "
                          "oldest run-*/pytest-* folders past the newest N (default "
                          "$VERIFY_KEEP_REPORTS, else 10; 0 keeps all)")
    run.add_argument("--backend", choices=["none", "simulated", "ranks", "both"],
                     default=None, help="numeric backend (default: the best available)")
    run.add_argument("--seed", type=seed_arg, default=None, help="seed of parameters and inputs")
    run.add_argument("--quiet", action="store_true", help="only the summary")
    run.add_argument("--timeout", type=seconds_arg, default=None, metavar="S",
                     help="wall-clock limit per pass application / numeric run, in its "
                          "worker process (default 120)")
    run.add_argument("--memory", type=megabytes_arg, default=None, metavar="MB",
                     help="memory a pass application / numeric run may add in its "
                          "worker process (default 4096; 0: no limit)")
    run.add_argument("--no-isolation", action="store_true",
                     help="apply passes in this process (a hanging or crashing pass "
                          "then stops the run)")
    # the value proof's budget: deterministic units, never seconds (docs/checks.md)
    run.add_argument("--value-work-units", type=count_arg, default=None, metavar="N",
                     help="work units the value proof's symbolic executions may spend "
                          "per application (default: verify/value/proof.py DEFAULT_BUDGET)")
    run.add_argument("--value-stored-monomials", type=count_arg, default=None, metavar="N",
                     help="monomials one symbolic execution's store may hold (its "
                          "memory, ~180 bytes each; default: DEFAULT_BUDGET)")
    run.add_argument("--value-relation-inputs", type=count_arg, default=None, metavar="N",
                     help="input elements (serial parameters, states, feeds) up to which "
                          "the planner relation proof is attempted (default 4096: the "
                          "real-model plans cost minutes cold; benchmarks/README.md)")
    run.add_argument("--z3-rlimit", type=count_arg, default=None, metavar="N",
                     help="Z3 resource limit (rlimit) of one value-proof query")
    run.add_argument("--z3-rlimit-total", type=count_arg, default=None, metavar="N",
                     help="Z3 rlimit of all value-proof queries of one application")
    return p


from .interrupt import Terminated as _Terminated  # noqa: E402  SIGTERM: like Ctrl-C, exit 143


def file_cases(paths, build: bool = False) -> list:
    """The cases of ``--case-file`` files; bad input is a UsageError.  Each
    file is imported in a worker first, and with ``build`` each builder run
    there per rank (``verify/engine/input_probe.py``)."""
    if not paths:
        return []
    from cases.case_files import CaseFileError, load_case_files
    from verify.engine import input_probe

    try:
        for p in paths:  # user code: first loaded in a worker (input_probe.py)
            if os.path.isfile(p) and p.endswith(".py"):
                input_probe.probe_file("case", p)
        found = load_case_files(paths)
    except (CaseFileError, input_probe.InputError) as exc:
        raise UsageError(str(exc)) from None
    if build:  # each builder too, per rank: one that fails leaves its case INCONCLUSIVE
        failures = input_probe.build_failures(found)
        for c in found:
            c.build_failures = failures.get(c.name, {})
    return found


def cmd_list(out=sys.stdout, case_files=()) -> int:
    import cases
    import passes

    print("passes:", file=out)
    for name, a in passes.adapters().items():
        print(f"  {name}  (short: {a.short})", file=out)
    from passes._not_checked import NOT_CHECKED

    print("not checked:", file=out)
    for name, (where, why) in NOT_CHECKED.items():
        print(f"  {name}  ({where}): {why}", file=out)
    print("cases:", file=out)
    for c in list(cases.all_cases().values()) + file_cases(case_files):
        exp = ", ".join(f"{passes.get(p).short}: "
                        f"{'fires' if e.fires else 'left alone'} -> {e.verdict}"
                        for p, e in c.expect.items())
        print(f"  {c.name:32s} {c.family:16s} ranks={c.world_size}  {exp}", file=out)
    for fam, why in cases.unavailable_families().items():
        print(f"unavailable family {fam}: {why}", file=out)
    return 0


def cmd_baseline(args, out=sys.stdout) -> int:
    from verify.engine import baseline
    from verify.report import findings

    try:
        previous = baseline.load(baseline.PATH)
    except (OSError, ValueError):
        previous = None
    data = baseline.current(previous)
    for path in getattr(args, "from_report", None) or []:
        if args.check:
            raise UsageError("--check compares what the cases declare; --from-report "
                             "records identities: use one")
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        data, recorded, skipped = baseline.from_report(data, report)
        print(f"{path}: finding identities of {recorded} application(s) recorded, "
              f"{len(skipped)} left as they were", file=out)
        for k, why in skipped:
            print(f"  {k}: {why}", file=out)
    files = {baseline.PATH: baseline.render(data), findings.PATH: findings.render(data)}
    stale = [p for p, want in files.items()
             if not os.path.exists(p) or open(p).read() != want]
    if args.check:
        for p in stale:
            print(f"{p} is stale: run python -m verify baseline", file=out)
        if not stale:
            print("baseline and findings up to date", file=out)
        return 1 if stale else 0
    for p, want in files.items():
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(want)
        print(f"wrote {p}", file=out)
    return 0


def _resolve(args):
    import cases
    import passes

    try:
        adapters = [passes.get(n) for n in args.passes] if args.passes \
            else list(passes.adapters().values())
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    try:
        extra = file_cases(args.case_files + args.program_dirs, build=True)
        if args.program_dirs and not args.cases and not args.case_files:
            chosen = extra  # a program dir alone: just its programs
        else:
            chosen = cases.select(args.cases, extra=extra)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    return adapters, chosen


def _note_unavailable() -> None:
    """One stderr line per case family left out for a missing optional dependency."""
    import cases

    for fam, why in cases.unavailable_families().items():
        print(f"note: case family {fam} unavailable: {why}", file=sys.stderr)


def _configure_value_budget(args) -> None:
    """The value proof's budget from ``--value-work-units``, ``--z3-rlimit``,
    ``--z3-rlimit-total`` (deterministic units; recorded in the report)."""
    from verify.value.proof import configure_budget

    try:
        configure_budget(work_units=getattr(args, "value_work_units", None),
                         stored_monomials=getattr(args, "value_stored_monomials", None),
                         relation_input_elements=getattr(args, "value_relation_inputs",
                                                         None),
                         z3_rlimit_per_query=getattr(args, "z3_rlimit", None),
                         z3_rlimit_per_application=getattr(args, "z3_rlimit_total", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_run(args, out=sys.stdout) -> int:
    from verify.engine import collector, isolation

    before = isolation.settings()  # a caller in this process keeps its own
    try:
        with collector.run_scope():  # the collector settled per application (see there)
            return _cmd_run(args, out)
    finally:
        isolation.configure(**before)
        lock = getattr(args, "report_lock", None)
        if lock is not None:
            lock.release()


def _lock_report_dir(report_dir: str):
    """The report directory, created and locked for the run
    (``verify/report/write.py`` DirLock): another run holding it is one
    line, exit 2, never two runs writing one report."""
    from verify.report import write as report_mod

    try:
        return report_mod.DirLock(report_dir, "run")
    except report_mod.DirectoryBusy as exc:
        raise UsageError(f"report directory {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write report directory {report_dir}: {exc}") from None


def _cmd_run(args, out) -> int:
    from verify.report import write as report_mod
    from verify.engine import isolation
    from verify.engine.matrix_runner import run_matrix

    try:  # before user code is loaded: it is loaded under these limits
        isolation.configure(enabled=False if args.no_isolation else None,
                            timeout=args.timeout, memory_mb=args.memory)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    adapters, chosen = _resolve(args)
    _note_unavailable()
    loaded = None
    source = "installed"
    if args.pass_file:
        from verify.engine.input_probe import InputError, probe_file
        from verify.ir.pass_files import PassFileError, load_pass_file

        try:
            probe_file("pass", args.pass_file)  # user code: first in a worker
            loaded = load_pass_file(args.pass_file)
        except (PassFileError, InputError) as exc:
            raise UsageError(str(exc)) from None
        source = loaded.path
        import passes
        from passes.base import pass_file_refusal

        if not args.passes:  # the adapters that apply a pass the file registers
            adapters = [a for a in adapters
                        if set(loaded.registered) & set(a.python_passes() + a.native_passes())]
        why = pass_file_refusal(loaded, adapters, passes.adapters().values())
        if why:
            loaded.restore()
            raise UsageError(why)
    if getattr(args, "paddle_files", None):
        from .ir.paddle_overlay import OverlayError, source_label
        from .premerge.paddle_files import check_imports, export

        try:
            table = export(args.paddle_files)
            check_imports(table)  # a file that does not import: one line, exit 2
        except OverlayError as exc:
            raise UsageError(str(exc)) from None
        source = source_label(table)
        _overlay_here_or_refuse(adapters, args.no_isolation)
    # a fresh default dir per run (time, pid, random); the dir locked for the
    # run (an explicit --report-dir another run holds: one line, exit 2)
    report_dir = args.report_dir or report_mod.run_dir_name("run")
    try:  # --keep-reports, else $VERIFY_KEEP_REPORTS: a bad value is bad input
        args.keep_reports = report_mod.keep_reports(getattr(args, "keep_reports", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    args.report_lock = _lock_report_dir(report_dir)  # released by cmd_run
    _configure_value_budget(args)
    seed = args.seed if args.seed is not None else report_mod.DEFAULT_SEED
    start = time.perf_counter()
    apps, interrupted = [], None
    backend = args.backend or "both"
    previous = _on_sigterm()
    try:
        _, backend = run_matrix(adapters, chosen, source=source, seed=seed,
                                backend=args.backend, out=None if args.quiet else out,
                                apps=apps)
    except BaseException as exc:  # noqa: B036
        from . import interrupt

        if isinstance(exc, _Terminated) or interrupt.received() == "SIGTERM":
            interrupted = ("SIGTERM", 143)
        elif isinstance(exc, KeyboardInterrupt) or interrupt.received():
            interrupted = ("SIGINT", 130)  # also an interrupt some code turned into an error
        else:
            raise
    finally:
        _restore_sigterm(previous)
        if interrupted is not None:  # no worker or rank process left behind
            from verify.numeric import rank_pool

            isolation.shutdown()
            rank_pool.shutdown_pools()
        if loaded is not None:
            loaded.restore()
    rep = report_mod.build_report(apps, seed=seed, backend=backend, source=source)
    _compare_with_baseline(apps, rep)
    if interrupted is None:
        _write_reproducers(rep, adapters, chosen, report_dir, loaded, seed)
    if interrupted is not None:
        done = {(a.pass_name, a.case_name) for a in apps}
        rep["interrupted"] = interrupted[0]
        rep["not_run"] = [{"pass": a.name, "case": c.name} for a in adapters for c in chosen
                          if (a.name, c.name) not in done]
        rep["errors"].append(f"interrupted by {interrupted[0]} after {len(apps)} of "
                             f"{len(adapters) * len(chosen)} applications; "
                             f"{len(rep['not_run'])} not run")
    try:
        path = report_mod.write_report(rep, report_dir)
    except OSError as exc:
        _summary(apps, "NOT WRITTEN", time.perf_counter() - start, out, rep["summary"])
        raise UsageError(f"cannot write the report to {report_dir}: "
                         f"{exc.strerror or exc}") from None
    # reports/latest: the last full run; reports/last: the last run of any kind
    full = interrupted is None and not (args.passes or args.cases or args.case_files
                                        or args.program_dirs or args.pass_file
                                        or getattr(args, "paddle_files", None))
    report_mod.point_reports(report_dir, full=full)
    if not args.report_dir:
        report_mod.prune_reports(os.path.dirname(os.path.abspath(report_dir)),
                                 args.keep_reports, report_dir)
    _summary(apps, path, time.perf_counter() - start, out, rep["summary"])
    if interrupted is not None:
        print(f"interrupted ({interrupted[0]}): {len(rep['not_run'])} applications not run",
              file=out)
        return interrupted[1]
    return 0 if all(getattr(a, "baseline_label", "unchanged") == "unchanged"
                    for a in apps) else 1


def _compare_with_baseline(apps, rep) -> None:
    """Each application against its baseline entry by finding identity
    (``verify.engine.baseline.compare``: NEW even where the verdict is the
    same, CHANGED CAUSE, GONE, FIXED only where the pass still fires): the
    report's application gets ``baseline`` (label, new and gone identities),
    the Application its ``baseline_label`` (the words the terminal prints).
    A case file's case is compared with its own Expect (its verdict)."""
    from verify.engine import baseline

    try:
        entries = baseline.load()["entries"]
    except (OSError, ValueError):
        entries = {}
    by_key = {(a.pass_name, a.case_name): a for a in apps}
    for d in rep.get("applications", []):
        a = by_key.get((d.get("pass"), d.get("case")))
        entry = None if d.get("case_file") else entries.get(baseline.key(d.get("pass"),
                                                                        d.get("case")))
        if entry is None or entry.get("verdict") != d.get("expected"):
            entry = {"verdict": d.get("expected"), "fires": d.get("expected_fires")}
        how = baseline.compare(entry, d)
        d["baseline"] = how
        if a is not None:
            a.baseline_label = how["label"]
            a.baseline_detail = how


def _overlay_here_or_refuse(adapters, no_isolation) -> None:
    """Under --paddle-file, the work this process does itself must see the
    overlay: refuse (one line naming the passes) when this process imported
    the installed Paddle first (``cli.main`` called in process; ``python -m
    verify`` loads the overlay at start) and would apply a pass here."""
    from .ir.paddle_overlay import loaded_here

    if loaded_here():
        return
    here = [a.short for a in adapters if no_isolation or not getattr(a, "isolated", True)]
    if here:
        raise UsageError(f"--paddle-file: {', '.join(here)} would be applied in this "
                         "process, which imported the installed Paddle before the overlay "
                         "(it would judge the installed modules); run `python -m verify "
                         "run ...`, which loads the overlay at start")


def _write_reproducers(rep, adapters, chosen, report_dir, loaded, seed) -> None:
    """A reproducer (``verify repro``) of every finding, under the report's
    ``repro/``; the report's application gets its relative path
    (``reproducer``), which the HTML page links."""
    from verify.repro import reproducer as repro

    by_name = {a.name: a for a in adapters}
    by_case = {c.name: c for c in chosen}
    for app in rep.get("applications", []):
        if app.get("verdict") in (None, "EQUIVALENT"):
            continue
        adapter, case = by_name.get(app.get("pass")), by_case.get(app.get("case"))
        if adapter is None or case is None:
            continue
        # a safe file name whatever the case is called, inside the report dir
        rel = os.path.join("repro", repro.file_name(adapter, case))
        try:
            from verify.safe_names import inside

            # the file under review wherever the adapter looks up a pass it
            # registers (under the adapter's name or another, e.g. the VPP split's)
            repro.write(adapter, case, inside(report_dir, rel),
                        loaded.path if loaded is not None and set(loaded.registered)
                        & set(adapter.python_passes()) else None, seed,
                        checks=app.get("checks") or [], found=app.get("verdict"))
        except Exception as exc:  # never costs the report
            app.setdefault("notes", []).append(
                f"no reproducer written: {type(exc).__name__}: {exc}")
            continue
        app["reproducer"] = rel


def cmd_plan(args, out=sys.stdout) -> int:
    from verify.plan.common import PlanError
    from verify.plan.planner import plan

    try:
        path = plan(args.model, args.ranks, args.mesh, args.out,
                    strategy_path=args.strategy, ir=args.ir)
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}\ncheck it with: python -m verify run --program-dir {path}", file=out)
    return 0


def cmd_repro(args, out=sys.stdout) -> int:
    import cases
    import passes

    from verify.repro import reproducer as repro

    try:
        adapter = passes.get(args.pass_name)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    table = {**cases.all_cases(), **{c.name: c for c in file_cases(
        args.case_files + args.program_dirs)}}
    case = table.get(args.case_name)
    if case is None:
        raise UsageError(f"unknown case {args.case_name!r}; known: {', '.join(table)}")
    if args.paddle_files:  # loaded here at start (python -m verify), embedded in the script
        from .ir.paddle_overlay import OverlayError, require_here
        from .premerge.paddle_files import check_imports, export

        try:
            check_imports(export(args.paddle_files))
            require_here(f"the reproducer of {adapter.name} on case {case.name}")
        except OverlayError as exc:
            raise UsageError(str(exc)) from None
    if args.pass_file:
        from verify.engine.input_probe import InputError, probe_file
        from verify.ir.pass_files import PassFileError, load_pass_file

        try:
            probe_file("pass", args.pass_file)  # user code: first in a worker
            loaded = load_pass_file(args.pass_file)
        except (PassFileError, InputError) as exc:
            raise UsageError(str(exc)) from None
        loaded.restore()
        from passes.base import pass_file_refusal

        why = pass_file_refusal(loaded, [adapter], passes.adapters().values())
        if why:
            raise UsageError(why)
    try:
        path = repro.write(adapter, case, args.out, args.pass_file, args.seed)
    except repro.ReproError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"wrote {path}\nrun it with: python {path}   (exit 1 while the defect is "
          "present, 0 once fixed)", file=out)
    return 0


def _on_sigterm():
    """SIGTERM raises _Terminated in the main thread while a run goes on
    (``python -m verify`` has verify/interrupt.py's handler already)."""
    import signal
    import threading

    from . import interrupt

    if threading.current_thread() is not threading.main_thread() or \
            interrupt._STATE["installed"]:
        return None

    def handler(signum, frame):
        raise _Terminated()

    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return None


def _restore_sigterm(previous) -> None:
    import signal

    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except (ValueError, OSError):
            pass


def _summary(apps, path, seconds, out, summary=None) -> None:
    from verify.report.terminal import print_summary

    # the report's summary of the same applications: summarizing them again
    # re-made every application's dict (each rank's diff: ~3 CPU s on the zoo)
    print_summary(apps, path, seconds, out, summary)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["mutate"]:
        from verify.selfcheck.mutate import main as mutate_main

        return mutate_main(argv[1:])
    if argv[:1] == ["premerge"]:
        from .premerge.run import main as premerge_main

        return premerge_main(argv[1:])
    if argv[:1] == ["premerge-trace"]:
        from .premerge.executed import main as trace_main

        return trace_main(argv[1:])
    if argv[:1] == ["coverage"]:
        from .selfcheck.coverage import main as coverage_main

        return coverage_main(argv[1:])
    if argv[:1] == ["generate"]:
        from verify.generate.cli import main as generate_main

        return generate_main(argv[1:])
    if argv[:1] == ["vocabulary"]:
        from verify.selfcheck.vocabulary import main as vocabulary_main

        return vocabulary_main(argv[1:])
    args = _parser().parse_args(argv)
    from . import interrupt

    try:
        if args.cmd == "list":
            return cmd_list(case_files=args.case_files + args.program_dirs)
        if args.cmd == "run":
            return cmd_run(args)
        if args.cmd == "repro":
            return cmd_repro(args)
        if args.cmd == "plan":
            return cmd_plan(args)
        if args.cmd == "baseline":
            return cmd_baseline(args)
        _parser().print_help()
        return 2
    except UsageError as exc:
        if interrupt.received():  # an interrupt some code turned into an error
            print(f"interrupted ({interrupt.received()})", file=sys.stderr)
            return interrupt.exit_code()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BaseException as exc:  # noqa: B036  interrupted outside a run's matrix
        if not isinstance(exc, (KeyboardInterrupt, _Terminated)) and not interrupt.received():
            raise
        name = "SIGTERM" if isinstance(exc, _Terminated) else \
            (interrupt.received() or "SIGINT")
        print(f"interrupted ({name})", file=sys.stderr)
        return 143 if name == "SIGTERM" else 130
