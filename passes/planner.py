"""Paddle's PIR planner itself, checked: the serial program against every
rank's program, stage by stage (``Engine._parallel_pir``, 3.3.1).

Not one pass: the application is the planner's run on a case planned by
Paddle (a PIR program dir with the stage records ``verify/plan/stages.py``
writes: ``rank<R>/planner.json``, ``rank<R>/stages/``, ``rank<R>/serial.json``).
Its checks:

* per stage and rank, named ``after <stage>`` (serial, partition, reshard,
  remove, dist2dense, remove_comm): a stage that raised is PASS_CRASHED with
  its traceback and the stages after it are INCONCLUSIVE "not run"; else the
  shape check and the def-use check of ``verify/checks`` on that stage's
  program against the one before (verify-each). A shape check that cannot
  decide (an op without a shape rule) is reported, advisory: the relation
  below decides the values;
* ``serial program``: every rank planned from the same serial program;
* ``parameter shapes``: each rank's parameter (local shape, dtype) is the
  slice its placement names of the serial parameter;
* ``job stream order`` (a pipeline's ranks): the job list the scheduler made
  on the streams PIR's executor runs each op on, no two jobs' ops touching
  one buffer from two streams unordered (``verify/checks/job_streams.py``);
* ``planner relation`` (numeric, ``verify/numeric/planner_runs.py``): the
  serial program on one process against the ranks' final programs in lock
  step, K steps, the loss, every gradient and every updated parameter
  related through placements; a difference names the rank, value, step,
  index and the stage whose op it first comes from.

* ``planner relation proof`` (value, ``verify/value/relation.py``): the same
  relation proved for ALL parameters, states and feeds related by placements,
  at the real shapes (so for every step): the serial program on global
  symbols, each rank on its pieces of them; a refutation is replayed through
  the real kernels and names the rank, the value and the stage.  Where it
  cannot decide (over its budget, an op without a row) it is INCONCLUSIVE and
  advisory: the numeric relation decides and the application is "witnessed,
  not proved".
"""
from __future__ import annotations

import functools
import importlib
import json
import time
from pathlib import Path

from verify.verdicts import CheckResult, Verdict, combine
from verify.numeric.run_spec import RANKS_FAILURE

from .base import PirPassAdapter

STEPS = 3
# optimizer steps of a plan made with gradient merge: the second catches an
# accumulator not zeroed after the update
MERGED_STEPS = 2


def planner_dir(case):
    """The program dir holding ``case``'s planner records, planning it if its
    case plans lazily (``params["planner"] = "module:function"``), else
    ``params["dir"]``; None when the case has none."""
    params = getattr(case, "params", None) or {}
    if params.get("planner"):
        mod, fn = params["planner"].split(":")
        return Path(getattr(importlib.import_module(mod), fn)(case))
    if params.get("dir"):
        return Path(params["dir"])
    return None


class PlannerAdapter(PirPassAdapter):
    name = "planner"
    short = "planner"
    planner_family = True  # verify premerge runs it when planning code changed
    repro_blocker = ("not one pass but Paddle's planner run in the planning process; "
                     "the program dir holds every stage's program and the serial program")

    def handles(self, case) -> bool:
        if getattr(case, "ir", "legacy") != "pir":
            return False
        params = getattr(case, "params", None) or {}
        if params.get("planner"):
            return True
        d = params.get("dir")  # a program dir (or a family's) with the planner's records
        return bool(d) and any((Path(d) / f"rank{r}" / "planner.json").is_file()
                               for r in case.ranks)

    def attrs(self, case, rp) -> dict:
        return {}

    def pattern_present(self, snap) -> bool:
        return True  # every planned program is the planner's work

    # -- the application ---------------------------------------------------
    def tested_passes(self) -> tuple:
        """None from Paddle's pass registry: the planner's code (Paddle's
        planning modules) is replaced with ``--paddle-file``, not a pass file."""
        return ()

    def whole_application(self, case, numeric: bool) -> dict:
        """Every check of the planner on ``case`` at once (the engine makes the
        Application of it): ``{"checks", "outcomes": [(rank, serial snapshot,
        final snapshot, error)], "notes"}``; ``numeric``: run the relation."""
        checks, outcomes, notes = [], [], []
        try:
            folder = planner_dir(case)
            records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
                       for r in case.ranks}
        except Exception as exc:
            import traceback

            checks.append(CheckResult(
                "case", "build", None, Verdict.INCONCLUSIVE,
                f"case {case.name}: the planner's records could not be read: "
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}",
                details={"traceback": traceback.format_exc()}))
            return {"checks": checks, "outcomes": outcomes, "notes": notes}
        stale = stale_records(case, folder, records)
        if stale:  # never reused: its loss may be unrecorded (and so compared nowhere)
            checks.append(stale)
            return {"checks": checks, "outcomes": outcomes, "notes": notes}
        checks += static_checks(case, folder, records, outcomes, notes)
        if self.name == PlannerAdapter.name:
            # the serial program's own finding: a strategy pass's application
            # (recompute, AMP, c_embedding; subclasses) relates its stage to it
            # and does not inherit it
            checks += lost_gradients(case, folder, records)
        crashed = any(c.verdict == Verdict.PASS_CRASHED for c in checks)
        merge = None if crashed else merged_plan(case, records)
        if merge:  # the proof of the job schedule (a pipeline's: not modelled)
            checks += merged_proof(case, folder, records, notes, merge)
        elif not crashed:
            checks += relation_proof(case, folder, records, notes)
        if numeric and not crashed:
            checks += relation_run(case, folder, records, notes, merge=merge)
            if merge and all(records[r].get("pipeline") for r in case.ranks):
                checks += job_plan_checks(case, folder, records, notes, merge, checks)
        elif numeric:
            notes.append("planner relation not run: a planner stage raised")
        else:  # nothing else decides the values
            checks.append(CheckResult(
                "numeric", "planner relation", None, Verdict.INCONCLUSIVE,
                f"planner on {case.name}: the serial-to-ranks relation was not run "
                "(no numeric backend)"))
        return {"checks": checks, "outcomes": outcomes, "notes": notes}


JOB_PLAN_CHECK = "job plan relation"


def amp_roundings(folder, rank, record, serial_rel, notes) -> dict:
    """``{serial value name: (low dtype, R)}`` for a plan whose serial program
    computes in a low dtype (the PIR Engine's AMP): the loss, each gradient
    and each updated parameter with the roundings its term passes through
    (``pir_amp_rounding.own_rounding_depths``); ``{}`` for a float32 plan."""
    from verify.value.pir_amp_rounding import low_dtype, own_rounding_depths

    serial = next((st for st in record.get("stages", []) if st.get("stage") == "serial"
                   and st.get("snapshot")), None)
    if serial is None:
        return {}
    snap = _snap(folder, rank, serial["snapshot"])
    low = low_dtype(snap)
    if low is None:
        return {}
    out = {}
    for (kind, p), r in own_rounding_depths(snap).items():
        name = serial_rel.get("loss") if kind == "loss" else \
            (serial_rel["params"].get(p) or {}).get(kind)
        if name:
            out[name] = (low, r)
    notes.append(f"planner relation: the serial program computes in {low} (AMP): the "
                 "loss, gradients and parameters compared within the rounding tolerance "
                 "of verify/numeric/amp_runs.py for 2 R roundings (both sides; R: "
                 f"{min(r for _, r in out.values()) if out else 0} to "
                 f"{max(r for _, r in out.values()) if out else 0})")
    return out


def job_plan_checks(case, folder, records, notes, merge, earlier) -> list:
    """A pipeline's ranks run as the job lists its scheduler made, against
    the serial micro-steps (``relation_run(jobs=True)``).  Where the whole
    rank programs relate (``earlier``'s planner relation on that rank) but a
    job list does not, the ``pipeline_scheduler`` stage made the difference:
    the counterexample says so."""
    out = relation_run(case, folder, records, notes, merge=merge, jobs=True)
    where = f"planner on {case.name}"
    for c in out:  # the planner relation's comparison (or failure), of the job lists
        c.name = JOB_PLAN_CHECK
        c.message = c.message.replace(f"{where}: ", f"{where} (the scheduler's job lists): ",
                                      1)
    whole = {c.rank: c.verdict for c in earlier
             if c.kind == "numeric" and c.name == "planner relation"}
    holds = bool(whole) and all(v == Verdict.EQUIVALENT for v in whole.values())
    for c in out:
        # the job lists cannot run (a schedule that cannot complete, a job that
        # raises) while the serial program runs
        if c.details.get("schedule_failure") or c.details.get("no_longer_runs"):
            if holds:
                c.counterexample["stage"] = "pipeline_scheduler"
                c.message += ("; the ranks' whole programs run and relate, so the "
                              "pipeline_scheduler stage's job lists made the difference")
            else:  # the whole programs do not relate either: not the scheduler's own
                c.verdict, c.advisory = Verdict.INCONCLUSIVE, True
            continue
        if c.verdict == Verdict.NOT_EQUIVALENT and whole.get(c.rank) == Verdict.EQUIVALENT:
            c.counterexample = {**(c.counterexample or {}), "stage": "pipeline_scheduler"}
            c.message += ("; the rank's whole program relates, so the pipeline_scheduler "
                          "stage's split made the difference")
    return out


def merged_plan(case, records):
    """``(rank, {"k_steps", "avg"}, pipeline record or None)`` when ``case``
    was planned with gradient merge (the records' ``gradient_merge``; a
    pipeline turns it on), else None."""
    for r in case.ranks:
        gm = records[r].get("gradient_merge")
        if gm:
            return r, gm, records[r].get("pipeline")
    return None


def merged_proof(case, folder, records, notes, merge) -> list:
    """The relation proof of a merged plan.  A merged rank program runs as
    Paddle's job schedule, ``[forward, backward] * k_steps + [optimize]`` by
    op role: ``verify/value/merged_relation.py`` proves that schedule against
    the serial program's micro-steps.  A pipeline's ranks run the job lists
    its scheduler made (sends and recvs between jobs): ``job_list_proof``
    proves those; records that name no job lists leave it INCONCLUSIVE,
    advisory (nothing to model; the numeric relation decides)."""
    from verify.value.relation import NAME

    r, gm, pipeline = merge
    if not pipeline:
        return relation_proof(case, folder, records, notes, gm=gm)
    if all((records[q].get("pipeline") or {}).get("jobs") for q in case.ranks):
        return job_list_proof(case, folder, records, notes, gm)
    schedule = (f"the job list its pipeline scheduler made ({pipeline['pass']})"
                if pipeline else
                f"the job schedule [forward, backward] * {gm['k_steps']} + [optimize]")
    why = (f"planner on {case.name}: planned with gradient merge (k_steps {gm['k_steps']}, "
           f"avg {gm['avg']}; rank {r}'s records): each rank's program runs as {schedule}, "
           "whose job lists the records do not name; not proved (the numeric relation "
           "drives that schedule)")
    return [CheckResult("value", NAME, None, Verdict.INCONCLUSIVE, why, advisory=True,
                        details={"not_proved": True, "gradient_merge": gm})]


def job_list_proof(case, folder, records, notes, gm) -> list:
    """The relation proof of a pipeline plan: every rank's job list against the
    serial micro-steps (``verify/value/job_list_relation.py``), one result per
    rank.  A refuted rank whose whole program's merged schedule is proved
    (``merged_relation``, on the pre-split programs) blames the
    ``pipeline_scheduler`` stage, as the numeric job-plan relation does (the
    whole programs' proof is run only then: it decides nothing else)."""
    jobs = relation_proof(case, folder, records, notes, gm=gm, job_lists=True)
    if not any(c.verdict == Verdict.NOT_EQUIVALENT for c in jobs):
        return jobs
    whole = relation_proof(case, folder, records, notes, gm=gm)
    holds = {c.rank for c in whole if c.verdict == Verdict.EQUIVALENT}
    for c in jobs:
        if c.verdict == Verdict.NOT_EQUIVALENT and c.rank in holds:
            c.counterexample = {**(c.counterexample or {}), "stage": "pipeline_scheduler"}
            c.message += ("; the rank's whole program's merged schedule is proved, so the "
                          "pipeline_scheduler stage's job lists made the difference")
    return jobs


def _job_list_inputs(folder, records, ranks, rank_rels) -> dict:
    """What ``prove_job_list_relation`` takes of each rank's job plan:
    ``jobs``, ``job_snaps``, ``handed``, ``persistables``, ``maps`` by rank."""
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs, import_programs
    from verify.numeric.job_plan_runs import watch_map
    from verify.plan.stages import read_job

    out = {"jobs": {}, "job_snaps": {}, "handed": {}, "persistables": {}, "maps": {}}
    for r in ranks:
        pipe = records[r]["pipeline"]
        programs = {t: read_job(folder / f"rank{r}", f) for t, f in pipe["programs"].items()}
        out["jobs"][r] = [(str(t), int(m)) for t, m in pipe["jobs"]]
        snaps, handed, pers = {}, {}, set()
        for t, exported in programs.items():
            with paddle.pir_utils.IrGuard():
                main, startup, names = import_programs(exported)
                kwargs = main.global_block().kwargs()
                handed[t] = {n for n, v in kwargs.items() if not v.persistable}
                pers |= {n for n, v in kwargs.items() if v.persistable}
                snaps[t] = from_pir_programs(main, startup, names)
        out["job_snaps"][r], out["handed"][r], out["persistables"][r] = snaps, handed, pers
        rel = rank_rels[r]
        out["maps"][r] = watch_map(_exported_rank(folder, r), programs, rel.get("loss"),
                                   [p["param"] for p in rel["params"].values()])
    return out


def stale_records(case, folder, records):
    """An INCONCLUSIVE ``planner records`` check when a rank's records were
    written by a planning process older than ``PLANNER_RECORDS_SINCE`` (they
    name the loss only when it was a 0-D mean: a relation on them may compare
    no loss), else None.  The plan caches are keyed by the planning modules'
    source, so a cached plan never gets here: a user's program dir does."""
    from verify.plan.program_format import PLANNER_RECORDS_SINCE

    for r in case.ranks:
        version = records[r].get("version", 2)  # version 2 records held no version
        if not isinstance(version, int) or version < PLANNER_RECORDS_SINCE:
            return CheckResult(
                "case", "planner records", r, Verdict.INCONCLUSIVE,
                f"case {case.name} rank {r}: planner records of program-dir format version "
                f"{version}, older than {PLANNER_RECORDS_SINCE} (they name the loss only when "
                "it is a 0-D mean, so the relation may compare no loss): not reused; re-plan "
                f"with python -m verify plan MODEL --ir pir --out {folder}",
                counterexample={"rank": r, "version": version})
    return None


def static_checks(case, folder, records, outcomes, notes) -> list:
    """The stage checks, the serial program check and the parameter shapes
    (none runs a program), memoized in the user's cache (``_static_memo``): a hit
    gives the same results and ``outcomes`` without parsing a snapshot."""
    from verify.checks import shape_check

    memo = _static_memo(case, folder, records)
    got = memo.load_with_outcomes()
    if got is not None:
        checks, outs = got
        outcomes += outs
        notes.append(f"planner stage checks: memoized for these stage records, snapshots "
                     f"and check modules (key {memo.path.stem})")
        return checks
    unknown = shape_check.UNKNOWN_ANSWERS[0]
    outs = []
    checks = stage_checks(case, folder, records, outs)
    checks += serial_checks(case, folder, records)
    checks += shape_relation_checks(case, folder, records)
    checks += coverage_check(case, folder, records)
    checks += job_stream_checks(case, folder, records)
    outcomes += outs
    # a Z3 "unknown" may be its wall-clock timeout's: never kept
    if shape_check.UNKNOWN_ANSWERS[0] == unknown:
        memo.store_with_outcomes(checks, outs)
    return checks


def job_stream_checks(case, folder, records) -> list:
    """Each pipeline rank's job list on the streams PIR's executor runs its
    ops on (``verify/checks/job_streams.py``): the job programs as the
    scheduler made them (``jobs/<type>.json``), one result per rank with a
    job plan; none for a case without a pipeline."""
    import paddle

    from verify.checks import job_streams
    from verify.ir.pir_snapshot import from_pir_programs, import_programs
    from verify.plan.stages import read_job

    out = []
    for r in case.ranks:
        pipe = records[r].get("pipeline")
        if not pipe:
            continue
        where = f"planner stage pipeline_scheduler on case {case.name} rank {r}"
        try:
            snaps = {}
            with paddle.pir_utils.IrGuard():
                for kind, fname in pipe["programs"].items():
                    main, _, names = import_programs(read_job(folder / f"rank{r}", fname))
                    snaps[kind] = from_pir_programs(main, None, names)
        except Exception as exc:
            out.append(CheckResult(
                job_streams.KIND, job_streams.NAME, r, Verdict.INCONCLUSIVE,
                f"{where}: its job programs could not be read: {type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"))
            continue
        for c in job_streams.run_job_list([tuple(j) for j in pipe["jobs"]], snaps, where, r):
            if c.counterexample is not None:
                c.counterexample["stage"] = "pipeline_scheduler"
            out.append(c)
    return out


class LazySnapshot:
    """One outcome program of the static memo (with every other outcome of
    the application: one entry, read and checked with the memo's hit)."""

    def __init__(self, box, rank, which):
        self._box, self._key = box, (rank, which)

    def _load(self):
        if self._box.get("data") is None:
            from verify.cache_files import MISS, read_entry

            got = read_entry(self._box["path"], self._box["key"], _unpickle,
                             lambda v: isinstance(v, dict))
            if got is MISS:
                raise RuntimeError(f"the planner's memoized stage programs "
                                   f"({self._box['path']}) changed since they were checked")
            self._box["data"] = got
        return self._box["data"][self._key]

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_box", "_key"):
            raise AttributeError(name)
        return getattr(self._load(), name)

    def __reduce__(self):  # pickled as the program itself
        return (_same, (self._load(),))


def _same(x):
    return x


def _unpickle(data):
    """A memo's payload, only ever read from the user's cache after its key
    and digest were checked (``verify/cache_files.py``): never from a
    program dir (a pickle there could run anything)."""
    from verify.cache_files import unpickle

    return unpickle(data)


def final_program(folder, rank, record):
    """Rank ``rank``'s last recorded stage snapshot (plain), or None: where
    the first-divergence locator reads the in-place writes and keyword block
    arguments from (``verify/numeric/divergence.aligned`` checks it is the
    final program ``final_ops`` records, op for op)."""
    done = [st for st in record.get("stages", []) if st.get("snapshot")]
    if not done:
        return None
    try:
        return _snap(folder, rank, done[-1]["snapshot"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _snap(folder, rank, rel):
    from verify.ir.snapshot import ProgramSnapshot

    return ProgramSnapshot.from_json((folder / f"rank{rank}" / rel).read_text())


def stage_checks(case, folder, records, outcomes) -> list:
    """One result per stage and rank (see the module docstring); appends
    ``(rank, serial snapshot, final snapshot, error)`` to ``outcomes``."""
    from verify.checks import CheckContext, def_use, shape_check
    from verify.verdicts import error_line

    import hashlib

    out = []
    same = {}  # (previous, this stage's program bytes) -> a rank where it held
    # a rank whose planning raised made no record of the rings it would have
    # made (a p2p ring of a pipeline): the others' rings are then unknown
    complete = not any(st.get("error") for r in case.ranks for st in records[r]["stages"])
    for r in case.ranks:
        rec = records[r]
        prev, first, last = None, None, None
        prev_key = b""
        inherited = set()
        for st in rec["stages"]:
            name = f"after {st['stage']}"
            if st.get("error"):
                out.append(CheckResult(
                    "pass", name, r, Verdict.PASS_CRASHED,
                    f"planner stage {st['stage']} raised on case {case.name} rank {r}: "
                    f"{error_line(st['error'])}",
                    details={"stage": st["stage"], "traceback": st["error"]}))
                continue
            if not st.get("snapshot") and st.get("lost"):  # verify/plan/crash_records.py
                out.append(CheckResult(
                    "contract", name, r, Verdict.INCONCLUSIVE,
                    f"stage {st['stage']} on case {case.name} rank {r}: ran, but its program "
                    "was lost with the planning process, killed in a later stage",
                    advisory=True, details={"stage": st["stage"], "lost": True}))
                continue
            if not st.get("snapshot"):
                out.append(CheckResult(
                    "contract", name, r, Verdict.INCONCLUSIVE,
                    f"stage {st['stage']} on case {case.name} rank {r}: its program could not "
                    f"be read ({st.get('snapshot_error')})"))
                continue
            snap = _snap(folder, r, st["snapshot"])
            first = first or snap
            last = snap
            key = (prev_key, hashlib.sha256((folder / f"rank{r}" / st["snapshot"])
                                            .read_bytes()).digest())
            prev_key = key[1]
            if key in same:  # before partition every rank's program is the same
                x, tail, seen = same[key]
                out.append(CheckResult(
                    "contract", name, r, Verdict.EQUIVALENT,
                    f"planner stage {st['stage']} on case {case.name} rank {r}: the same "
                    f"program as rank {x}'s (and after the same one), checked there: {tail}",
                    details={"stage": st["stage"], "ops": len(snap.ops), "same_as": x}))
                inherited = seen
                prev = snap
                continue
            ctx = CheckContext(pass_name=f"planner stage {st['stage']}", case_name=case.name,
                               rank=r, before=prev or snap, after=snap,
                               symbols=dict(case.symbols))
            checks = shape_check.run(ctx) + def_use.run(ctx)
            for c in checks:  # a shape check without a rule cannot decide; values do
                if c.verdict == Verdict.INCONCLUSIVE and c.kind == "shape":
                    c.advisory = True
            seen = {_key(c) for c in checks if not c.ok}
            own = [c for c in checks if c.ok or _key(c) not in inherited]
            inherited = seen
            bad = [c for c in own if not c.ok and not c.advisory]
            notes = [c.message for c in checks if c.advisory]
            verdict = combine([c for c in own if not c.advisory]) if any(
                not c.advisory for c in own) else Verdict.EQUIVALENT
            msg = (f"planner stage {st['stage']} on case {case.name} rank {r} "
                   f"({len(snap.ops)} ops, {st.get('shapes', 'global')} shapes): ")
            tail = "def-use holds" + (", shapes hold" if not notes else
                                      f"; shapes (advisory): {notes[0]}")
            msg += bad[0].message if bad else tail
            if verdict == Verdict.EQUIVALENT:
                same[key] = (r, tail, seen)
            out.append(CheckResult("contract", name, r, verdict, msg,
                                   counterexample=bad[0].counterexample if bad else None,
                                   details={"stage": st["stage"], "ops": len(snap.ops),
                                            "checks": [c.to_dict() for c in checks]}))
            prev = snap
        for stage in rec.get("not_run", []):
            out.append(CheckResult(
                "contract", f"after {stage}", r, Verdict.INCONCLUSIVE,
                f"planner stage {stage} not run on case {case.name} rank {r}: an earlier "
                "stage raised", details={"stage": stage, "ran": False}))
        error = next((s["error"] for s in rec["stages"] if s.get("error")), None)
        if first is not None and last is not first and error is None:
            out += backend_validity(case, folder, r, rec.get("relation"), complete)
        if first is not None:
            outcomes.append((r, first, last, error))
    return out


def backend_validity(case, folder, rank, relation=None, rings_known=True) -> list:
    """The rank's programs as its process runs them (main and startup, as
    exported: ``verify/plan/pir_rank.py``) checked as the backend reads them
    (``verify/checks/collective_validity.py``): rings, roots and peers against
    the rings the planner made (``plan.json``), one dtype per collective, and a
    startup that initialises what the main program reads (a state the
    startup writes whole, e.g. a sharded optimizer's moment, at the piece
    the rank's relation table places it, as the runs take it:
    ``verify/numeric/startup_pieces.py``).  The serial program's own defects
    are inherited (advisory).  ``rings_known`` False (another rank's planning
    raised): dtypes and the startup only."""
    import paddle

    from verify.checks import CheckContext, collective_validity
    from verify.ir.pir_snapshot import from_pir_programs
    from verify.plan.pir_rank import load_rank
    from verify.plan.stages import read_serial

    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()} if rings_known else None
    where = f"planner on case {case.name} rank {rank}"
    try:
        main, startup, names, _ = load_rank(folder / f"rank{rank}")
        smain, sstartup, snames = read_serial(folder / f"rank{rank}")
        with paddle.pir_utils.IrGuard():
            final = from_pir_programs(main, startup, names)
            serial = from_pir_programs(smain, sstartup, snames)
        placed = {n: f["placement"] for n, f in ((relation or {}).get("feeds") or {}).items()
                  if f.get("persistable") and f.get("placement") is not None}
        if placed:
            final.meta = {**(final.meta or {}),
                          "placements": {**placed, **((final.meta or {}).get("placements")
                                                      or {})}}
    except Exception as exc:
        from verify.verdicts import failure_line

        return [CheckResult("dataflow", "backend validity", rank, Verdict.INCONCLUSIVE,
                            f"{where}: the rank's programs could not be read: "
                            f"{failure_line(exc)}")]
    ctx = CheckContext(pass_name="planner (the rank's programs as run)", case_name=case.name,
                       rank=rank, before=serial, after=final, symbols=dict(case.symbols),
                       rings=rings)
    return collective_validity.run(ctx)


def _key(check) -> str:
    return json.dumps([check.kind, check.name, check.counterexample], sort_keys=True,
                      default=str)


def serial_checks(case, folder, records) -> list:
    """Every rank planned from one serial program (op types in order)."""
    seqs = {}
    for r in case.ranks:
        st = next((s for s in records[r]["stages"] if s["stage"] == "serial"
                   and s.get("snapshot")), None)
        if st is not None:
            seqs[r] = [op.type for op in _snap(folder, r, st["snapshot"]).ops]
    if len(seqs) < len(case.ranks):
        return [CheckResult("contract", "serial program", None, Verdict.INCONCLUSIVE,
                            f"case {case.name}: the serial program of rank(s) "
                            f"{sorted(set(case.ranks) - set(seqs))} was not recorded")]
    r0 = case.ranks[0]
    for r, seq in seqs.items():
        if seq != seqs[r0]:
            i = next((k for k, (a, b) in enumerate(zip(seq, seqs[r0])) if a != b),
                     min(len(seq), len(seqs[r0])))
            return [CheckResult("contract", "serial program", r, Verdict.CONTRACT_BROKEN,
                                f"case {case.name}: rank {r} planned from another serial "
                                f"program than rank {r0} (op {i})",
                                counterexample={"rank": r, "op_index": i})]
    return [CheckResult("contract", "serial program", None, Verdict.EQUIVALENT,
                        f"case {case.name}: every rank planned from the same serial program "
                        f"({len(seqs[r0])} ops)")]


# Paddle's planner drops the ops of the meshes a rank is not in at one stage
# (RemovePasses.apply_all: remove_other_rank_op_pass; verify/plan/stages.py)
PRUNES_OTHER_RANKS = "remove"


def foreign_values(rel: dict, rank: int) -> list:
    """``[(name, placement)]`` of the parameters and persistable states of a
    rank's final program placed on a mesh without ``rank``: the rank holds
    a value it has no piece of (an op of another rank was kept)."""
    out = []
    for table in ("parameters", "feeds"):
        for name, v in sorted(rel.get(table, {}).items()):
            pl = v.get("placement")
            if table == "feeds" and not v.get("persistable"):
                continue
            if pl and rank not in [int(i) for i in pl["process_ids"]]:
                out.append((name, pl))
    return out


def _stage_holding(folder, rank, rec, name) -> str:
    """The stage to blame for ``name`` surviving on ``rank``: the pruning
    stage when its program still holds ``name``, else the first later stage
    whose program holds it (one that brought it back)."""
    done = [st for st in rec["stages"] if st.get("snapshot")]
    names = [st["stage"] for st in done]
    start = names.index(PRUNES_OTHER_RANKS) if PRUNES_OTHER_RANKS in names else 0
    for st in done[start:]:
        if name in _snap(folder, rank, st["snapshot"]).vars:
            return st["stage"]
    return names[start] if names else PRUNES_OTHER_RANKS


def shape_relation_checks(case, folder, records) -> list:
    """Each rank's parameters: local shape and dtype are the slice of the
    serial parameter its placement names."""
    import numpy as np

    from verify.numeric.placements import PlacementError, describe, local_piece

    out = []
    for r in case.ranks:
        rec = records[r]
        serial, rel = rec.get("serial_relation"), rec.get("relation")
        if not serial or not rel:
            continue
        kept = foreign_values(rel, r)
        if kept:
            name, placement = kept[0]
            stage = _stage_holding(folder, r, rec, name)
            out.append(CheckResult(
                "shape", "parameter shapes", r, Verdict.NOT_EQUIVALENT,
                f"case {case.name} rank {r}: {name} is placed on the mesh "
                f"{list(placement['process_ids'])} only, yet rank {r}'s program holds it: "
                f"an op of another rank survived stage {stage} (the stage that prunes other "
                f"ranks' ops); the rank has no piece of it to relate"
                + (f" ({len(kept) - 1} more such value(s))" if len(kept) > 1 else ""),
                counterexample={"rank": r, "value": name, "stage": stage,
                                "placement": describe(placement),
                                "mesh": list(placement["process_ids"])}))
            continue
        bad = None
        for pname, p in rel["parameters"].items():
            sp = serial["parameters"].get(pname)
            if sp is None:
                bad = bad or (pname, "not a parameter of the serial program", None)
                continue
            try:
                want = list(local_piece(np.empty(sp["shape"], dtype=np.int8),
                                        p["placement"], r).shape)
            except PlacementError as exc:
                bad = bad or (pname, str(exc), p["placement"])
                continue
            if want != list(p["shape"]) or sp["dtype"] != p["dtype"]:
                bad = bad or (pname, f"local {p['shape']} {p['dtype']}, the serial "
                              f"{sp['shape']} {sp['dtype']} sliced by "
                              f"{describe(p['placement'])} is {want}", p["placement"])
        if bad:
            out.append(CheckResult("shape", "parameter shapes", r, Verdict.NOT_EQUIVALENT,
                                   f"case {case.name} rank {r}: parameter {bad[0]}: {bad[1]}",
                                   counterexample={"rank": r, "value": bad[0],
                                                   "placement": describe(bad[2])}))
        else:
            out.append(CheckResult("shape", "parameter shapes", r, Verdict.EQUIVALENT,
                                   f"case {case.name} rank {r}: {len(rel['parameters'])} "
                                   "parameters are the slices their placements name"))
    return out


def lost_gradients(case, folder, records) -> list:
    """Every parameter an eager step gives a gradient is updated by the
    serial program (``verify/checks/lost_gradients.py``; rank 0's eager step:
    each rank builds the same model); the serial stage's snapshot, read only
    when one is lost, says where the backward stops."""
    from verify.checks.lost_gradients import lost_gradient_check

    r0 = case.ranks[0]
    where = f"planner on {case.name}"
    eager, serial = records[r0].get("eager_gradients"), records[r0].get("serial_relation")
    got = lost_gradient_check(where, eager, serial)
    st = next((s for s in records[r0]["stages"] if s["stage"] == "serial"
               and s.get("snapshot")), None)
    if st is not None and any(c.verdict == Verdict.CONTRACT_BROKEN for c in got):
        got = lost_gradient_check(where, eager, serial,
                                  list(_snap(folder, r0, st["snapshot"]).ops))
    return got


def coverage_check(case, folder, records) -> list:
    """Every value the relation compares is tiled by the ranks' pieces
    (``verify/checks/placement_coverage.py``); a value not tiled names the stage after
    which its pieces were gone (``_gone_after``)."""
    from verify.checks.placement_coverage import NAME, coverage_checks

    where = f"planner on {case.name}"
    serial_rel = records[case.ranks[0]].get("serial_relation")
    rank_rels = {r: records[r].get("relation") for r in case.ranks}
    if not serial_rel or any(v is None for v in rank_rels.values()):
        return [CheckResult("contract", NAME, None, Verdict.INCONCLUSIVE,
                            f"{where}: the serial program or a rank's relation table was "
                            "not recorded")]
    return coverage_checks(where, serial_rel, rank_rels, list(case.ranks),
                           lambda key, ranks: _gone_after(folder, records, key,
                                                          ranks or list(case.ranks)))


def _holds(snap, kind, name) -> bool:
    """Whether a stage's program holds the value ``(kind, name)``: a
    parameter, state or feed by its name; an update or gradient as an op
    reading ``param`` (the parameter or a slice of it) and ``grad``."""
    if kind in ("parameter", "state", "feed"):
        return name in snap.vars or any(name in v for op in snap.ops
                                        for v in list(op.inputs.values()) +
                                        list(op.outputs.values()))
    if kind in ("update", "gradient"):
        slices = {name}
        for op in snap.ops:
            if op.type == "pd_op.slice" and (op.inputs.get("input") or [None])[0] in slices:
                slices.update(op.outputs.get("out") or [])
            if op.inputs.get("grad") and (op.inputs.get("param") or [None])[0] in slices:
                return True
        return False
    return True  # the loss has no name that lasts across stages


def _gone_after(folder, records, key, ranks) -> str:
    """The first stage after which none of ``ranks`` holds the value ``key``
    (by its stage programs), or, when every stage holds it, the placements'
    stage: they are read from the dist program the last dist stage leaves."""
    kind, name = key
    stages = [st["stage"] for st in records[ranks[0]]["stages"] if st.get("snapshot")]
    for stage in stages[1:]:
        held = False
        for r in ranks:
            st = next((s for s in records[r]["stages"] if s["stage"] == stage
                       and s.get("snapshot")), None)
            if st is not None and _holds(_snap(folder, r, st["snapshot"]), kind, name):
                held = True
                break
        if not held:
            return stage
    if kind == "loss":
        return "unknown (the loss has no name that lasts across stages)"
    return f"{PRUNES_OTHER_RANKS} (the placements are read from the dist program it leaves)"


def _exported_rank(folder, r):
    from verify.plan.pir_rank import rank_data

    return rank_data(folder / f"rank{r}")[0]


def relation_run(case, folder, records, notes, seed: int = 0, steps: int = STEPS,
                 merge=None, jobs: bool = False) -> list:
    """The numeric relation (``verify/numeric/planner_runs.py``), in an
    isolation worker when isolation is on (``verify/numeric/offload.py``).
    ``merge`` (:func:`merged_plan`): a plan made with gradient merge, its ranks
    driven as Paddle's job schedule against the serial micro-steps
    (``verify/numeric/merged_relation.py``), for ``MERGED_STEPS`` optimizer steps.
    ``jobs``: a pipeline's ranks run as the job lists its scheduler made
    (``verify/numeric/job_plan_runs.py``) instead of whole."""
    where = f"planner on {case.name}"
    if merge:
        steps = MERGED_STEPS
    r0 = case.ranks[0]
    serial_rel = records[r0].get("serial_relation")
    rank_rels = {r: records[r].get("relation") for r in case.ranks}
    if not serial_rel or any(v is None for v in rank_rels.values()):
        return [CheckResult("numeric", "planner relation", None, Verdict.INCONCLUSIVE,
                            f"{where}: the serial program or a rank's relation table was "
                            f"not recorded ({records[r0].get('serial_error') or 'no record'})")]
    foreign = {r: foreign_values(rank_rels[r], r) for r in case.ranks}
    held = [(r, kept[0][0]) for r, kept in foreign.items() if kept]
    if held:  # no piece of the serial value to give the rank, nor to compare
        return [CheckResult("numeric", "planner relation", None, Verdict.INCONCLUSIVE,
                            f"{where}: not run: rank {held[0][0]} holds {held[0][1]}, placed "
                            "on a mesh without it (see parameter shapes)")]
    # the comparison's results, memoized like the runs they compare (keyed by the
    # same inputs and the comparing modules): a hit reads neither the runs'
    # arrays (15-26 MB for a real model) nor the programs
    results = _run_memo(folder, case.ranks, seed, steps, SOURCES + COMPARE_SOURCES,
                        "job-plan-results" if jobs else "relation-results",
                        json.dumps(case.name))
    out = results.load()
    if out is not None:
        notes.append(f"planner relation: seed {seed}, {steps} steps; the comparison of the "
                     f"memoized runs was memoized too ({results.path.name}: same programs, "
                     "seed, steps and comparing modules)")
        return out
    out = _relation_run(case, folder, records, notes, seed, steps, where, serial_rel,
                        rank_rels, merge, jobs)
    if not any("traceback" in c.details for c in out):  # a run that failed is never kept
        results.store(out)
    return out


def _relation_run(case, folder, records, notes, seed, steps, where, serial_rel,
                  rank_rels, merge=None, jobs=False) -> list:
    from verify.numeric import offload, planner_runs

    k = int(merge[1]["k_steps"]) if merge else 1  # micro-batches per optimizer step

    r0 = case.ranks[0]
    final_ops = {r: records[r].get("final_ops", []) for r in case.ranks}
    # the rings the planner made (a changed reshard function may make others)
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    try:
        memo = _run_memo(folder, case.ranks, seed, steps, sub="job-plan-runs") if jobs \
            else _run_memo(folder, case.ranks, seed, steps)
        got = memo.load()
        if got is None:  # the programs are read only to run them
            sparams, sfeeds, rinputs = planner_runs.relation_inputs(serial_rel, rank_rels,
                                                                    seed, steps * k)
            swatch, rwatch = planner_runs.watched(serial_rel, rank_rels, final_ops)
            sdata = json.loads((folder / f"rank{r0}" / "serial.json").read_text())
            sdata["main"] = sdata["main"].encode()
            sdata["startup"] = sdata["startup"].encode()
            ranks = {r: {"exported": _exported_rank(folder, r), "params": rinputs[r][0],
                         "feeds": rinputs[r][1], "watch": rwatch[r]} for r in case.ranks}
            states = {}  # placements of the states the startups write (lr, moments)
            for r in case.ranks:
                for n, f in rank_rels[r]["feeds"].items():
                    if f["persistable"]:
                        states.setdefault(n, f["placement"])
            args = {"serial": {**sdata, "params": sparams, "feeds": sfeeds, "watch": swatch},
                    "ranks": ranks, "rings": rings, "state_placements": states,
                    "where": f"{where}: ranks", "seed": seed,
                    "state_shapes": {r: {n: f["shape"] for n, f in rank_rels[r]["feeds"]
                                         .items() if f["persistable"]} for r in case.ranks}}
            if jobs:
                from verify.plan.stages import read_job

                for r in case.ranks:
                    pipe = records[r]["pipeline"]
                    ranks[r].update(
                        jobs=pipe["jobs"], whole=ranks[r].pop("exported"),
                        programs={t: read_job(folder / f"rank{r}", f)
                                  for t, f in pipe["programs"].items()},
                        loss=rank_rels[r].get("loss"),
                        param_names=[p["param"] for p in rank_rels[r]["params"].values()])
                    ranks[r].pop("watch")
                args.update(k=k, avg=bool(merge[1]["avg"]), cycles=steps,
                            grads=[p["grad"] for p in serial_rel["params"].values()],
                            loss=serial_rel.get("loss"),
                            params=[p["param"] for p in serial_rel["params"].values()])
                fn = ("verify.numeric.job_plan_runs", "run_job_plan_relation")
            elif merge:
                args.update(k=k, avg=bool(merge[1]["avg"]), cycles=steps,
                            grads=[p["grad"] for p in serial_rel["params"].values()],
                            loss=serial_rel.get("loss"),
                            rank_losses={r: rank_rels[r].get("loss") for r in case.ranks},
                            params=[p["param"] for p in serial_rel["params"].values()],
                            rank_params={r: [p["param"] for p in rank_rels[r]["params"].values()]
                                         for r in case.ranks})
                fn = ("verify.numeric.merged_relation", "run_merged_relation")
            else:
                args["steps"] = steps
                fn = ("verify.numeric.planner_runs", "run_relation")
            # one budget for the serial run and one per rank: the job runs them all
            got = offload.run_call(*fn, args, where, budgets=1 + len(case.ranks))
            if not _ranks_failed(got):  # a failure is run again (it may be the environment's)
                memo.store(got)
        else:
            notes.append(f"planner relation: the executor runs of these programs, seed and "
                         f"steps were memoized ({memo.path.name}); the comparison ran")
        serial_out, rank_outs = got
        if _ranks_failed(got):
            return [no_longer_runs(where, rank_outs[RANKS_FAILURE], folder, seed)]
        from verify.numeric.job_plan_runs import SCHEDULE_FAILURE

        if jobs and isinstance(rank_outs, dict) and SCHEDULE_FAILURE in rank_outs:
            fail = rank_outs[SCHEDULE_FAILURE]
            return [CheckResult(
                "numeric", JOB_PLAN_CHECK, fail["rank"], Verdict.NOT_EQUIVALENT,
                f"{where}: the ranks cannot run the job lists the scheduler made to their "
                f"end: {fail['error'].splitlines()[0]}",
                counterexample={"rank": fail["rank"], "error": fail["error"][:2000]},
                details={"schedule_failure": True, "seed": seed})]
    except Exception as exc:
        import traceback

        from verify.verdicts import failure_line

        tb = getattr(exc, "traceback", None) or traceback.format_exc()
        return [CheckResult("numeric", "planner relation", None, Verdict.INCONCLUSIVE,
                            f"{where}: the runs did not complete: {failure_line(exc)}",
                            details={"traceback": tb})]
    if jobs:
        kinds = sorted({t for r in case.ranks for t, _ in records[r]["pipeline"]["jobs"]})
        notes.append(f"job plan relation: seed {seed}, {steps} optimizer steps of {k} "
                     "micro-batches; each rank's job list as the pipeline scheduler made it "
                     f"({', '.join(kinds)} jobs, a scope per micro-batch), sends and recvs "
                     "matched across the ranks, against the serial micro-steps")
    elif merge:
        notes.append(f"planner relation: seed {seed}, {steps} optimizer steps of {k} "
                     "micro-steps; the serial program's micro-steps (gradients merged) on one "
                     "process, the ranks' job schedule [forward, backward] * "
                     f"{k} + [optimize] in lock step (PIR executor, simulated collectives)")
    else:
        notes.append(f"planner relation: seed {seed}, {steps} steps; serial program on one "
                     "process, ranks in lock step (PIR executor, simulated collectives)")
    roundings = amp_roundings(folder, r0, records[r0], serial_rel, notes)
    out = planner_runs.compare_runs(where, serial_rel, rank_rels, final_ops, serial_out,
                                    rank_outs, steps, micro_steps=k if merge else 0,
                                    roundings=roundings,
                                    programs={r: functools.partial(final_program, folder, r,
                                                                   records[r])
                                              for r in case.ranks})
    for c in out:  # every startup (serial and ranks) ran seeded by it
        c.details["seed"] = seed
    return out


def _ranks_failed(got) -> bool:
    """Whether a relation run's answer says its serial side ran and its
    ranks' side failed (``verify/numeric/run_spec.RANKS_FAILURE``)."""
    return isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], dict) \
        and RANKS_FAILURE in got[1]


def no_longer_runs(where, fail, folder, seed) -> CheckResult:
    """The check of a relation run whose serial program ran and whose ranks
    failed (``fail``: ``run_spec.ranks_failure``): the rewrite is what no
    longer runs, NOT_EQUIVALENT naming the rank, the phase and the error
    (with what the rank's programs lack when the error names a missing
    variable); INCONCLUSIVE when the failure is the checker's own
    environment (``verdicts.environment_cause``)."""
    from verify.verdicts import environment_cause, error_line, failure_line

    error, rank, phase = fail["error"], fail.get("rank"), fail["phase"]
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    first = first[len(where) + 2:] if first.startswith(where + ": ") else first
    if environment_cause(error):
        exc = RuntimeError(error)
        return CheckResult("numeric", "planner relation", rank, Verdict.INCONCLUSIVE,
                           f"{where}: the runs did not complete: {failure_line(exc)}",
                           details={"traceback": error, "phase": phase})
    lacks = _missing_var_note(folder, rank, error)
    return CheckResult(
        "numeric", "planner relation", rank, Verdict.NOT_EQUIVALENT,
        f"{where}: the rewritten program no longer runs: rank {rank}, {phase}: {first}"
        f"{lacks}; the serial program runs", counterexample={
            "rank": rank, "phase": phase, "error": error_line(error), "seed": seed,
            "first_line": first},
        details={"traceback": error, "phase": phase, "no_longer_runs": True})


def _missing_var_note(folder, rank, error) -> str:
    """`` (X: a parameter of rank R's main program that its startup program
    does not initialise)`` when ``error`` says a variable is not found and
    the rank's programs show why; else ''."""
    import re

    m = re.search(r"Cannot find (\S+?)\.? in scope", error)
    if m is None or rank is None:
        return ""
    name = m.group(1)
    try:
        import paddle

        from verify.ir.pir_snapshot import import_programs

        with paddle.pir_utils.IrGuard():
            main, startup, _ = import_programs(_exported_rank(folder, rank))
        reads = {op.attrs()["parameter_name"] for op in main.global_block().ops
                 if op.name() == "builtin.parameter"}
        made = {op.attrs()["parameter_name"] for op in startup.global_block().ops
                if op.name() == "builtin.set_parameter"}
    except Exception:  # noqa: BLE001 (a note, never a reason to lose the finding)
        return ""
    if name in reads and name not in made:
        return (f" ({name}: a parameter rank {rank}'s main program reads and its startup "
                "program does not initialise)")
    return ""


def _relation_snapshots(folder, ranks, r0):
    """``(serial snapshot, {rank: final snapshot})``: the serial program made
    executable (``serial.json``) and each rank's final program, named as the
    relation tables name their values."""
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs
    from verify.plan.pir_rank import load_rank
    from verify.plan.stages import read_serial

    main, startup, names = read_serial(folder / f"rank{r0}")
    with paddle.pir_utils.IrGuard():
        serial = from_pir_programs(main, startup, names)
    snaps = {}
    for r in ranks:
        main, startup, names, _ = load_rank(folder / f"rank{r}")
        with paddle.pir_utils.IrGuard():
            snaps[r] = from_pir_programs(main, startup, names)
    return serial, snaps


def relation_proof(case, folder, records, notes, gm=None, job_lists=False) -> list:
    """The value proof of the relation (``verify/value/relation.py``; with
    ``gm``, the records' gradient merge ``{"k_steps", "avg"}``, of the merged
    schedule: ``verify/value/merged_relation.py``; with ``job_lists`` too, of
    the pipeline's job lists: ``verify/value/job_list_relation.py``): one
    result per rank.  Not deciding where it cannot decide (INCONCLUSIVE is
    advisory: the numeric relation decides, the application is then
    "witnessed, not proved"); a proof or a replayed refutation decides."""
    from verify.value.relation import NAME, compositional_limit, input_elements, \
        input_limit, prove_relation

    where = f"planner on {case.name}"
    r0 = case.ranks[0]
    serial_rel = records[r0].get("serial_relation")
    rank_rels = {r: records[r].get("relation") for r in case.ranks}
    if not serial_rel or any(v is None for v in rank_rels.values()):
        out = [CheckResult("value", NAME, None, Verdict.INCONCLUSIVE,
                           f"{where}: the serial program or a rank's relation table was "
                           "not recorded", details={"not_proved": True})]
    elif any(foreign_values(rank_rels[r], r) for r in case.ranks):
        out = [CheckResult("value", NAME, None, Verdict.INCONCLUSIVE,
                           f"{where}: not run: a rank holds a value placed on a mesh "
                           "without it (see parameter shapes)", details={"not_proved": True})]
    else:
        from verify.value.proof import budget_settings

        # keyed by the budget in force too (a --value-work-units run answers anew)
        memo = _run_memo(folder, case.ranks, 0, 1, PROOF_SOURCES, "relation-proofs",
                         json.dumps([budget_settings(), case.name] + ([gm] if gm else []) +
                                    ([[records[q]["pipeline"]["jobs"] for q in case.ranks]]
                                     if job_lists else []), sort_keys=True))
        out = memo.load()
        if out is not None:
            notes.append(f"planner relation proof: memoized for these programs and proof "
                         f"modules ({memo.path.name})")
            return _advisory(out)
        try:
            # decided before loading (above input_limit() the proof runs by segments)
            if input_elements(serial_rel) > max(input_limit(), compositional_limit()):
                serial, snaps = None, {r: None for r in case.ranks}
            else:
                serial, snaps = _relation_snapshots(folder, case.ranks, r0)
        except Exception as exc:
            from verify.verdicts import failure_line

            out = [CheckResult("value", NAME, None, Verdict.INCONCLUSIVE,
                               f"{where}: the programs could not be read for the proof: "
                               f"{failure_line(exc)}",
                               details={"not_proved": True})]
        else:
            rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
                     .get("rings", {}).items()}
            final_ops = {r: records[r].get("final_ops", []) for r in case.ranks}
            if job_lists:
                from verify.value.job_list_relation import prove_job_list_relation

                try:
                    inputs = _job_list_inputs(folder, records, case.ranks, rank_rels)
                except Exception as exc:  # a job plan the proof cannot read: not decided
                    from verify.verdicts import failure_line

                    return [CheckResult("value", NAME, None, Verdict.INCONCLUSIVE,
                                        f"{where}: the job plans could not be read for the "
                                        f"proof: {failure_line(exc)}",
                                        details={"not_proved": True}, advisory=True)]
                out = prove_job_list_relation(
                    where, serial, snaps, serial_rel, rank_rels, rings, int(gm["k_steps"]),
                    bool(gm["avg"]), **inputs,
                    scheduler=records[r0]["pipeline"].get("pass", "the pipeline scheduler"))
            elif gm:
                from verify.value.merged_relation import prove_merged_relation

                out = prove_merged_relation(where, serial, snaps, serial_rel, rank_rels,
                                            final_ops, rings, int(gm["k_steps"]),
                                            bool(gm["avg"]))
            else:
                out = prove_relation(where, serial, snaps, serial_rel, rank_rels, final_ops,
                                     rings)
            # an over-budget answer too (the budget is deterministic and in the key);
            # never the hang guard's, which depends on the machine
            if not any(c.details.get("hang_guard") for c in out):
                memo.store(out)
    return _advisory(out)


def _advisory(out) -> list:
    for c in out:
        if c.verdict == Verdict.INCONCLUSIVE:
            c.advisory = True  # never counted as a proof; the numeric relation decides
    return out


# what decides the comparison of the runs (beyond SOURCES): its results are memoized
COMPARE_SOURCES = ("verify/numeric/compare.py", "verify/numeric/divergence.py",
                   "verify/verdicts.py", "passes/planner.py", "verify/numeric/amp_runs.py",
                   "verify/value/pir_amp_rounding.py", "verify/value/amp_rounding.py")
SOURCES = ("verify/numeric/planner_runs.py", "verify/numeric/pir_ranks.py",
           "verify/numeric/merged_relation.py", "verify/numeric/pir_segments.py",
           "verify/numeric/pir_runner.py",
           "verify/numeric/simulated_ranks.py", "verify/numeric/inputs.py",
           "verify/numeric/job_plan_runs.py",
           "verify/numeric/placements.py", "verify/ir/pir_snapshot.py",
           "verify/numeric/run_spec.py",
           # what an op without a CPU kernel runs as (c_identity as assign)
           "verify/numeric/pir_execution.py",
           # the serial program's float64 run (the tolerance's measured floor)
           "verify/numeric/float64_reference.py")
# what decides the relation's value proof: the proof's modules, the op table
PROOF_SOURCES = ("verify/value/relation.py", "verify/value/segments.py",
                 "verify/value/merged_relation.py",
                 "verify/value/job_list_relation.py", "verify/numeric/job_plan_runs.py",
                 "verify/value/linear_form.py",
                 "verify/value/paired_form.py",
                 "verify/value/expand.py",
                 "verify/value/proof.py",
                 "verify/value/symbolic.py", "verify/value/semantics.py",
                 "verify/value/kernels.py", "verify/value/rational.py",
                 "verify/numeric/placements.py", "verify/numeric/divergence.py",
                 "verify/ir/pir_snapshot.py", "verify/ir/snapshot.py",
                 # what an optimizer reads after an in-place write (merged_relation)
                 "verify/ir/inplace.py",
                 "verify/verdicts.py")  # the memo holds its CheckResults


PLAN_FILES = ("main.json", "startup.json", "names.json", "planner.json", "serial.json",
              "meta.json")
_DIGESTS: dict = {}  # (folder, ranks, every file's stat) -> digest of their bytes


def plan_files_digest(folder, ranks) -> bytes:
    """sha256 of the bytes of every rank's program files and records and of
    ``plan.json``: what the relation's memos are keyed by.  Hashed once per
    process for files whose (mtime, size, inode) did not change since (the
    run memo, the results memo and the proof memo of one application share
    it; any rewrite of a file hashes its bytes anew)."""
    import hashlib

    paths = [folder / f"rank{r}" / f for r in ranks for f in PLAN_FILES] + \
        [folder / "plan.json"] + sorted(  # a pipeline's job programs
            p for r in ranks for p in (folder / f"rank{r}" / "jobs").glob("*.json"))
    stats = []
    for path in paths:
        try:
            st = path.stat()
            stats.append((str(path), st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            stats.append((str(path), None))
    key = (str(folder), tuple(ranks), tuple(stats))
    got = _DIGESTS.get(key)
    if got is None:
        h = hashlib.sha256()
        for path in paths:
            h.update(path.read_bytes() if path.is_file() else b"-")
        got = _DIGESTS[key] = h.digest()
    return got


def memo_root() -> Path | None:
    """Where the planner's memos live: the user's cache
    (``<cache>/planner-memos``; ``$PADDLE_PASS_VERIFY_CACHE``, default
    ``~/.cache/paddle-pass-verify``), never the program dir a user hands in
    (a pickle there could run anything).  ``VERIFY_PLANNER_RUN_MEMO=0`` (or
    ``off``) turns them off, ``=DIR`` keeps them in DIR."""
    import os

    from verify.cache_files import memo_dir

    if os.environ.get("VERIFY_PLANNER_RUN_MEMO", "1") in ("0", "off"):
        return None
    return memo_dir("VERIFY_PLANNER_RUN_MEMO", "planner-memos")


def _memo_valid(sub):
    """What a memo of ``sub`` must hold to be used (a wrong type is a miss)."""
    from verify.verdicts import CheckResult

    def checks(v):
        return isinstance(v, list) and all(isinstance(c, CheckResult) for c in v)
    if sub == "stage-checks":
        return lambda v: isinstance(v, tuple) and len(v) == 2 and checks(v[0]) and \
            isinstance(v[1], list) and all(isinstance(k, tuple) and len(k) == 2 for k in v[1])
    if sub.endswith("-runs"):  # (the serial run's steps, {rank: its steps})
        return lambda v: isinstance(v, tuple) and len(v) == 2 and \
            isinstance(v[0], list) and isinstance(v[1], dict)
    return checks


class _run_memo:
    """The executor runs of one relation (serial and ranks), memoized in the
    user's cache (:func:`memo_root`, one entry of ``verify/cache_files.py``
    each: the key and the payload's sha256 checked on read, any failure a
    miss that is rewritten): keyed by the full sha256 of every input that
    decides them -- the programs and records of every rank, the case's
    name, the seed, the steps, the source of the modules that run and feed
    them, Paddle's version -- so a rerun of the same programs reads the same
    arrays, and any change runs them afresh (their comparison is memoized
    apart, in ``relation-results/``).  ``VERIFY_PLANNER_RUN_MEMO=0`` turns
    it off."""

    def __init__(self, folder, ranks, seed, steps, sources=SOURCES, sub="relation-runs",
                 settings: str = ""):
        import hashlib

        import paddle

        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256(json.dumps([sub, seed, steps, paddle.__version__,
                                       paddle.version.commit, settings]).encode())
        h.update(plan_files_digest(folder, ranks))
        for src in sources:
            h.update(src.encode() + b"\0" + (root / src).read_bytes())
        self._at(sub, h.hexdigest())

    def _at(self, sub, key):
        base = memo_root()
        self.enabled = base is not None
        self.sub, self.key = sub, key
        self.path = (base if base is not None else Path(".")) / sub / f"{key}.pkl"

    def load(self):
        from verify.cache_files import MISS, read_entry

        if not self.enabled:
            return None
        got = read_entry(self.path, self.key, _unpickle, _memo_valid(self.sub))
        return None if got is MISS else got

    def store(self, got) -> None:
        self.store_at(self.path, self.key, got)

    def store_at(self, path, key, got) -> None:
        from verify.cache_files import pickled, write_entry

        if not self.enabled:
            return
        try:
            write_entry(path, key, pickled(got))
        except Exception:  # a result that does not pickle: no memo
            pass


# the modules the static checks run from: these roots and, transitively, the
# project modules they import (``static_sources``); planner.py's own imports
# are not followed (the relation's modules; hashed by their own memos)
STATIC_ROOTS = ("passes/planner.py", "verify/checks/__init__.py", "verify/checks/def_use.py",
                "verify/checks/shape_check.py", "verify/ir/snapshot.py",
                "verify/numeric/placements.py", "verify/plan/stages.py", "verify/verdicts.py",
                "verify/checks/placement_coverage.py", "verify/checks/collective_validity.py",
                "verify/plan/pir_rank.py", "verify/ir/pir_snapshot.py",
                "verify/checks/job_streams.py",
                # the loader of the project's modules runs on every import they make
                "verify/bytecode.py")


def _module_file(root, dotted):
    base = root.joinpath(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imported(root, path, table=None, used=None):
    """The project files ``path`` imports (any import statement, at any depth).
    ``table``: the dotted names each file's bytes import, by digest (the
    disk memo of ``static_sources``)."""
    data = path.read_bytes()
    names = None
    if table is not None:
        import hashlib

        key = hashlib.sha256(str(path.relative_to(root)).encode() + b"\0" + data).hexdigest()
        names = table.get(key)
        if used is not None:
            used.add(key)
    if names is None:
        names = _import_names(root, path, data)
        if table is not None:
            table[key] = names
    return [f for f in (_module_file(root, n) for n in names if n) if f]


def _import_names(root, path, data: bytes) -> list:
    """The dotted names ``path``'s import statements may load (a parse)."""
    import ast

    rel = path.relative_to(root).with_suffix("")
    pkg = list(rel.parts[:-1])  # the package a relative import starts from
    out = []
    for node in ast.walk(ast.parse(data.decode())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(pkg[:len(pkg) - node.level + 1] if node.level else [])
            mod = ".".join(x for x in (base, node.module or "") if x)
            out += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return out


def _imports_table_path():
    import os

    base = os.environ.get("PADDLE_PASS_VERIFY_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "paddle-pass-verify") / \
        "static-imports.json"


@functools.lru_cache(maxsize=None)  # the list (parsing 0.5 s); the key hashes their bytes
def static_sources() -> tuple:
    """Repo-relative paths of every module the static checks' results come from."""
    root = Path(__file__).resolve().parent.parent
    # each file's import names by the digest of its path and bytes, on disk
    # (parsing them all took ~1 CPU s per process): a changed file is parsed anew
    # (one entry of verify/cache_files.py: key and digest checked, a damaged
    # or ill-typed table is a miss, parsed anew and rewritten)
    from verify.cache_files import MISS, read_entry, write_entry

    store = _imports_table_path()
    table = read_entry(store, "static-imports/1", json.loads, lambda t: isinstance(t, dict) and all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v)
        for k, v in t.items()))
    rewrite = table is MISS
    table = {} if rewrite else table
    known, used = len(table), set()
    seen, todo = set(), [root / r for r in STATIC_ROOTS]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if f.name != "planner.py" or f.parent.name != "passes":
            todo += _imported(root, f, table, used)
    if len(table) > 4096:  # old files' entries: keep this tree's only
        table = {k: v for k, v in table.items() if k in used}
    if len(table) != known or rewrite:  # written whole, then renamed
        write_entry(store, "static-imports/1", json.dumps(table).encode())
    return tuple(sorted(str(f.relative_to(root)) for f in seen))


class _static_memo(_run_memo):
    """The static checks' results (``static_checks``), memoized in the
    user's cache (:func:`memo_root`): keyed by the full sha256 of the bytes
    of every record, stage snapshot and rank program file they read
    (hashed, never parsed), the case's name, ranks and symbols, the source of
    every module in ``static_sources()`` and Paddle's version.  Nothing in
    them depends on the machine (no timing; a Z3 unknown is never stored).
    ``VERIFY_PLANNER_RUN_MEMO=0`` turns it off."""

    def __init__(self, case, folder, records):
        import hashlib

        import paddle

        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256(json.dumps(
            ["static", paddle.__version__, paddle.version.commit, case.name, list(case.ranks),
             sorted((str(k), str(v)) for k, v in dict(case.symbols).items())]).encode())
        for r in case.ranks:
            h.update(f"rank{r}".encode())
            h.update((folder / f"rank{r}" / "planner.json").read_bytes())
            for st in records[r]["stages"]:
                path = folder / f"rank{r}" / st["snapshot"] if st.get("snapshot") else None
                h.update(path.read_bytes() if path and path.is_file() else b"-")
        # the programs each rank runs and the rings (the backend validity reads them)
        h.update(plan_files_digest(folder, case.ranks))
        for src in static_sources():
            h.update(src.encode())
            h.update((root / src).read_bytes())
        self._at("stage-checks", h.hexdigest())
        self.outcomes_path = self.path.with_suffix(".outcomes")  # not *.pkl
        self.outcomes_key = self.key + ":outcomes"

    def load_with_outcomes(self):
        """``(checks, outcomes)`` on a hit, the outcomes' programs
        :class:`LazySnapshot` (their own entry, read and checked now: a
        damaged or ill-typed one is a miss)."""
        from verify.cache_files import MISS, read_entry

        from verify.ir.snapshot import ProgramSnapshot

        got = self.load()
        if got is None:
            return None
        checks, keys = got
        # read now, so a damaged or ill-typed entry is a miss, not a later error
        data = read_entry(self.outcomes_path, self.outcomes_key, _unpickle, lambda v: (
            isinstance(v, dict) and all(isinstance(x, ProgramSnapshot) for x in v.values())
            and all((r, k) in v for r, _ in keys for k in (0, 1))))
        if data is MISS:
            return None
        box = {"path": str(self.outcomes_path), "key": self.outcomes_key, "data": data}
        return checks, [(r, LazySnapshot(box, r, 0), LazySnapshot(box, r, 1), err)
                        for r, err in keys]

    def store_with_outcomes(self, checks, outs) -> None:
        """The outcomes' programs in their own file first (a hit needs both)."""
        self.store_at(self.outcomes_path, self.outcomes_key,
                      {(r, k): snap for r, a, b, _ in outs for k, snap in ((0, a), (1, b))})
        self.store((checks, [(r, err) for r, _, _, err in outs]))


ADAPTER = PlannerAdapter()
