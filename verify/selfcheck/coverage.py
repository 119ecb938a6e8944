"""``python -m verify coverage [--program-dir DIR] [--case GLOB] [--case-file F]``:
which op types of the chosen programs the checks can read.

For every op type in the chosen cases' programs (every rank, main and
startup) it prints whether the shape check has a rule for it
(``verify/checks/shape_rules.py``) and whether the value proof has a row
(``verify/value/semantics.py``, the collectives of ``verify/ir/collectives.py``,
the random fills of a startup program), and then, per case, which checks
would stop and at which op: the shape check stops (INCONCLUSIVE) at the
first main-program op without a rule, the value proof at the first startup
or main op without a row.  The numeric runs execute Paddle's own kernels
and need no row: they are not listed.  A present rule or row may still
refuse an op at run time (attrs or shapes it does not model, e.g. reduced
shapes that do not line up): the run's INCONCLUSIVE message names those.

Exit codes: 0 no check would stop on any chosen program; 1 some check would
stop (the table says where); 2 bad input (unknown case glob, unreadable case
file or program dir), one line on stderr.

A tool (the top layer, beside the vocabulary audit): it builds the cases
(``cases``) and snapshots them as the engine does (``verify.ir.rank_snapshot``);
it checks nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

SHAPE, VALUE = "shape check", "value proof"


@dataclass
class OpType:
    """One op type over all chosen programs."""

    name: str
    shape_rule: bool
    value_row: bool
    count: int = 0
    cases: set = field(default_factory=set)


@dataclass
class Stop:
    """Where a check stops on one case: the first op it has nothing for."""

    case: str
    check: str
    rank: int
    program: str
    op_index: int
    op_type: str


def has_shape_rule(op_type: str) -> bool:
    from verify.checks.shape_rules import RULES

    return op_type in RULES


def has_value_row(op_type: str, startup: bool = False) -> bool:
    """Whether the value proof's executor gives ``op_type`` meaning
    (``verify/value/symbolic.py``: collectives apart, random fills of the
    startup program as fresh symbols, then the row table)."""
    from verify.ir.collectives import COLLECTIVES, POINT_TO_POINT
    from verify.value.semantics import RANDOM_INIT, ROWS

    if startup and op_type in RANDOM_INIT:
        return True
    return op_type in ROWS or op_type in COLLECTIVES or op_type in POINT_TO_POINT or \
        op_type == "c_identity"


def scan(chosen, unbuilt: list | None = None) -> tuple[dict, list]:
    """``({op type: OpType}, [Stop])`` over every rank of ``chosen`` cases.
    A case whose programs cannot be built (a plan Paddle's planner crashed
    on) has no op to scan: ``(case, rank, reason)`` is appended to
    ``unbuilt`` (said, never skipped silently), else the error propagates."""
    from verify.ir.rank_snapshot import snapshot_of
    from verify.verdicts import error_line

    types, stops = {}, []
    for case in chosen:
        for rank in case.ranks:
            try:
                rp = case.build(rank)
            except Exception as exc:
                if unbuilt is None:
                    raise
                unbuilt.append((case.name, rank, error_line(str(exc)) if str(exc)
                                else type(exc).__name__))
                break
            snap = snapshot_of(rp, case, rank, "original")
            first = {}
            for program, ops in (("startup", snap.startup_ops), ("main", snap.ops)):
                for op in ops:
                    startup = program == "startup"
                    t = types.get(op.type)
                    if t is None:
                        t = types[op.type] = OpType(op.type, has_shape_rule(op.type),
                                                    has_value_row(op.type, startup))
                    elif startup and not t.value_row:  # a random fill in a startup
                        t.value_row = has_value_row(op.type, True)
                    t.count += 1
                    t.cases.add(case.name)
                    if not startup and SHAPE not in first and not has_shape_rule(op.type):
                        first[SHAPE] = Stop(case.name, SHAPE, rank, program, op.idx, op.type)
                    if VALUE not in first and not has_value_row(op.type, startup):
                        first[VALUE] = Stop(case.name, VALUE, rank, program, op.idx, op.type)
            for check in (SHAPE, VALUE):
                if check in first and not any(s.case == case.name and s.check == check
                                              for s in stops):
                    stops.append(first[check])
    return types, stops


def render(types: dict, stops: list, out=sys.stdout) -> None:
    def mark(ok):
        return "present" if ok else "MISSING"

    width = max([len(n) for n in types] + [7])
    print(f"{'op type':{width}s}  {'shape rule':10s}  {'value row':9s}  ops  cases", file=out)
    for name in sorted(types):
        t = types[name]
        print(f"{name:{width}s}  {mark(t.shape_rule):10s}  {mark(t.value_row):9s}  "
              f"{t.count:3d}  {len(t.cases)}", file=out)
    missing_shape = sorted(n for n, t in types.items() if not t.shape_rule)
    missing_value = sorted(n for n, t in types.items() if not t.value_row)
    print(f"\n{len(types)} op types; no shape rule: {len(missing_shape)}; "
          f"no value row: {len(missing_value)}", file=out)
    if not stops:
        print("no check would stop on these programs", file=out)
        return
    print("checks that would stop (INCONCLUSIVE) for a missing rule or row:", file=out)
    for s in stops:
        print(f"  case {s.case}: the {s.check} stops at rank {s.rank} {s.program} op "
              f"{s.op_index} ({s.op_type})", file=out)


def _parser():
    p = argparse.ArgumentParser(prog="python -m verify coverage",
                                description="op types of the chosen programs with their "
                                "shape rule and value row, and which checks would stop")
    p.add_argument("--case", dest="cases", action="append", default=[], metavar="GLOB",
                   help="case name glob (repeatable; default all)")
    p.add_argument("--case-file", dest="case_files", action="append", default=[],
                   metavar="PATH", help="a case file whose cases join the built-in ones")
    p.add_argument("--program-dir", dest="program_dirs", action="append", default=[],
                   metavar="DIR", help="a program dir as one more case (repeatable)")
    return p


class _Usage(Exception):
    pass


def choose(args) -> list:
    """The cases named by the args (as ``verify run`` chooses them)."""
    import cases
    from cases.case_files import CaseFileError, load_case_files
    from verify.engine.input_probe import InputError, probe_file

    try:
        paths = args.case_files + args.program_dirs
        for p in paths:  # user code: first loaded in a worker (input_probe.py)
            if os.path.isfile(p) and p.endswith(".py"):
                probe_file("case", p)
        extra = load_case_files(paths) if paths else []
        if args.program_dirs and not args.cases and not args.case_files:
            return extra
        return cases.select(args.cases, extra=extra)
    except (CaseFileError, InputError, KeyError) as exc:
        raise _Usage(exc.args[0] if exc.args else str(exc)) from None


def main(argv=None, out=sys.stdout) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, bad flags 2
        return int(exc.code or 0)
    from cases import unavailable_families

    for fam, why in unavailable_families().items():
        print(f"note: case family {fam} unavailable: {why}", file=sys.stderr)
    try:
        chosen = choose(args)
    except _Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unbuilt = []
    types, stops = scan(chosen, unbuilt)
    render(types, stops, out)
    for name, rank, why in unbuilt:
        print(f"case {name}: not scanned, rank {rank}'s programs could not be built: {why}",
              file=out)
    return 1 if stops else 0


if __name__ == "__main__":
    sys.exit(main())
