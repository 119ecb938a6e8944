"""The q/k/v and gate/up fusion, ``fuse_attention_ffn_qkv_pass``
(3.3.1's ``auto_parallel/static/pir_pass.py``), where Paddle's planner
applies it.

``Engine._parallel_pir`` runs it first, on the forward program, when the
environment flag ``FLAGS_enable_fused_ffn_qkv_pass`` is set: q/k/v
projections (matmul, add, reshape, three times) become one matmul of a new
parameter, a reshape to head groups and a split; a gate/up pair into
swiglu becomes one matmul and a one-input swiglu.  The new parameters are
filled outside the programs from the dygraph ones (``fuse_param_func``), so
the planner's own serial program (taken after the pass) is already fused and
does not judge the fusion.

The reference is a second plan: the same model planned with the flag off
(``params["reference"]``, as for ``auto_parallel_c_embedding_pass``).  How
each fused parameter was made from the unfused ones is recorded in the
planning process (``examples/fused_ffn_qkv_of.py`` writes ``fusion.json``
into the rank's folder: its parts and, read from the values, which of their
columns each fused column holds).  The relation then gives each rank the
fused parameter its record makes of the reference's serial parameters and
compares its gradient and update with the same fusion of the serial ones
(``verify/numeric/fused_params.py``; the numeric relation of
``verify/numeric/planner_runs.py`` and the value proof of
``verify/value/relation.py`` read the records from the relation table's
``"fused"``).  A fusion whose layout does not match what the fused program
reads (k's columns where the split hands out q) makes the ranks' values
differ from the flag-off serial program's: refuted.

The contract, both ways, on each rank's final program:

* fires where the pattern is present (the reference's serial program has
  two or more matmuls of parameters reading one input, as the pass's
  q/k/v and gate/up patterns do, and the rank's fusion record is not
  empty): every record is a column permutation of its parts (else its
  fused column is named); no op of the rank reads a part; every fused
  parameter is read by an op of the rank;
* changes nothing where absent (no record): no parameter of the plan is
  not the reference's, and each rank's program is the reference's, op for
  op (types in order).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from verify.verdicts import CheckResult, Verdict

from .auto_parallel_c_embedding_pass import (_finals, _records, _serial_snapshot,
                                             reference_dir, serial_links)
from .planner import PlannerAdapter, planner_dir

CHECK = "fused_ffn_qkv"
RECORD = "fusion.json"  # examples/fused_ffn_qkv_of.RECORD


class FusedFfnQkvAdapter(PlannerAdapter):
    name = "fuse_attention_ffn_qkv_pass"
    short = "fused_ffn_qkv"
    planner_family = True  # declared here: verify premerge reads class bodies (ast)
    paddle_modules = ("paddle.distributed.auto_parallel.static.pir_pass",)
    repro_blocker = ("applied by Paddle's planner in the planning process (an environment "
                     "flag); the reference is a second plan with the flag off, the fused "
                     "parameters made outside the programs")

    def handles(self, case) -> bool:
        """Planner cases whose model turns the flag on and that name the plan
        with it off (``params["reference"]``)."""
        if getattr(case, "ir", "legacy") != "pir":
            return False
        params = getattr(case, "params", None) or {}
        return bool(params.get("planner") or params.get("dir")) and \
            bool(params.get("reference")) and \
            self.name in (params.get("strategy_passes") or ())

    def pattern_present(self, snap) -> bool:
        """Two matmuls of parameters reading one input (:func:`shared_matmuls`)."""
        return bool(shared_matmuls(snap))

    def whole_application(self, case, numeric: bool) -> dict:
        """The planner's stage checks on the plan with the flag on, its ranks
        related to the serial program of the plan with it off through the
        recorded fusion, and the contract on every rank."""
        from .auto_parallel_c_embedding_pass import crash_in_pass
        from .planner import relation_proof, relation_run, static_checks

        checks, outcomes, notes = [], [], []
        try:
            ref = reference_dir(case)
            try:
                folder = planner_dir(case)
            except RuntimeError as exc:
                crashed = crash_in_pass(self.name, case, exc)
                if crashed is None:
                    raise
                checks.append(crashed)
                return {"checks": checks, "outcomes": outcomes, "notes": notes}
            records = _records(folder, case.ranks)
            fusion = {r: fusion_record(folder, r) for r in case.ranks}
        except Exception as exc:
            from verify.verdicts import failure_line

            checks.append(CheckResult(
                "case", "build", None, Verdict.INCONCLUSIVE,
                f"{self.name} on {case.name}: the plans could not be read: "
                f"{failure_line(exc)}"))
            return {"checks": checks, "outcomes": outcomes, "notes": notes}
        checks += static_checks(case, folder, records, [], notes)
        if any(c.verdict == Verdict.PASS_CRASHED for c in checks):
            notes.append("relation not run: a planner stage raised")
            return {"checks": checks, "outcomes": outcomes, "notes": notes}
        befores, afters = _finals(ref, case.ranks), _finals(folder, case.ranks)
        for r in case.ranks:
            outcomes.append((r, befores[r], afters[r], None))
        notes.append(f"reference: the serial program of {ref.name} (the model planned with "
                     "the flag off); the ranks: the plan with it on, each fused parameter "
                     "made of the reference's parameters by its recorded layout")
        broken = [rec for recs in fusion.values() for rec in recs if "blocks" not in rec]
        r0 = case.ranks[0]
        if any(fusion[r] != fusion[r0] for r in case.ranks):
            notes.append("the ranks recorded different fusions: the relation uses rank "
                         f"{r0}'s")
        if not broken:
            with tempfile.TemporaryDirectory(prefix="fused-ffn-qkv-") as tmp:
                both = composite_dir(folder, ref, case.ranks, Path(tmp) / "plan", fusion[r0])
                both_records = _records(both, case.ranks)
                checks += relation_proof(case, both, both_records, notes)
                if numeric:
                    checks += relation_run(case, both, both_records, notes)
                else:
                    checks.append(CheckResult(
                        "numeric", "planner relation", None, Verdict.INCONCLUSIVE,
                        f"{self.name} on {case.name}: the ranks-to-reference relation was "
                        "not run (no numeric backend)"))
        else:
            notes.append("relation not run: a fused parameter is no permutation of its parts")
        checks += contract_checks(self.name, case, ref, fusion, befores, afters)
        return {"checks": checks, "outcomes": outcomes, "notes": notes}


ADAPTER = FusedFfnQkvAdapter()


def fusion_record(folder: Path, rank) -> list:
    """The rank's recorded fusion (``examples/fused_ffn_qkv_of.py``); a plan
    without one (its model did not record) raises: nothing relates its fused
    parameters."""
    path = Path(folder) / f"rank{rank}" / RECORD
    if not path.is_file():
        raise FileNotFoundError(f"rank {rank} recorded no fusion ({path.name}): plan the model "
                                "through examples/fused_ffn_qkv_of.with_fusion")
    return json.loads(path.read_text())


def composite_dir(folder: Path, ref: Path, ranks, out: Path, fusion: list) -> Path:
    """A program dir ``out`` for the planner's relation: the ranks of
    ``folder`` (the plan with the flag on) and, as the serial program,
    ``ref``'s (the plan with it off), its relation table carrying the
    fusion records (``"fused"``); the ranks' links to serial values mapped
    through the alignment of the two serial programs (:func:`serial_links`
    of the c_embedding adapter), between values of one shape only."""
    shutil.copytree(folder, out, ignore=shutil.ignore_patterns("stages", "coverage.json"))
    r0 = ranks[0]
    ref0 = json.loads((ref / f"rank{r0}" / "planner.json").read_text())
    ref_serial = _serial_snapshot(ref, r0)
    serial_rel = dict(ref0.get("serial_relation") or {})
    if ref0.get("serial_relation"):
        serial_rel["fused"] = fusion
    for r in ranks:
        p = out / f"rank{r}" / "planner.json"
        rec = json.loads(p.read_text())
        rec["serial_relation"] = serial_rel if ref0.get("serial_relation") else None
        rec["serial_error"] = ref0.get("serial_error")
        rec["stages"] = []
        on = _serial_snapshot(folder, r)
        link, _ = serial_links(on, ref_serial)
        # the fused ops align with the first of the ops they replace (same types):
        # a link is kept only between values of one shape, so the fused matmul's
        # result (q|k|v columns) is no stand-in for q's
        link = {n: m for n, m in link.items()
                if on.shape(n) is not None and on.shape(n) == ref_serial.shape(m)}
        for op in rec.get("final_ops", []):
            ser = op.get("serial")
            if ser:
                mapped = [link.get(n) if n else None for n in ser]
                op["serial"] = mapped if any(mapped) else None
            op["serial_op"] = None
        p.write_text(json.dumps(rec, sort_keys=True))
        shutil.copyfile(ref / f"rank{r0}" / "serial.json", out / f"rank{r}" / "serial.json")
    return out


# -- the contract ---------------------------------------------------------------
def shared_matmuls(snap) -> list:
    """``[[parameter, ...]]``: per input value, the parameters two or more
    ``pd_op.matmul`` ops multiply it by (the shape of the pass's q/k/v and
    gate/up patterns, without its op-order conditions)."""
    params = {n for n, v in snap.vars.items() if v.is_parameter or v.persistable}
    by_input = {}
    for op in snap.ops:
        if op.type != "pd_op.matmul":
            continue
        x, y = (op.inputs.get("x") or [None])[0], (op.inputs.get("y") or [None])[0]
        if y in params:
            by_input.setdefault(x, []).append(y)
    return [ws for ws in by_input.values() if len(ws) >= 2]


def _reads(snap, name) -> list:
    return [(i, op) for i, op in enumerate(snap.ops)
            if any(name in vs for vs in op.inputs.values())]


def rank_contract(pass_name, case_name, rank, snap, records) -> list:
    """The contract where the pattern is present, on one rank's final program."""
    where = f"{pass_name} on {case_name} rank {rank}"
    broken = []
    for rec in records:
        if "blocks" not in rec:
            cex = rec.get("counterexample") or {}
            broken.append(CheckResult(
                "contract", CHECK, rank, Verdict.CONTRACT_BROKEN,
                f"{where}: fused parameter {rec['name']} is no permutation of its parts "
                f"{rec['parts']}: {rec.get('error')}",
                counterexample={"rank": rank, "value": rec["name"], "var": rec["name"],
                                **cex}))
            continue
        for part in rec["parts"]:
            for i, op in _reads(snap, part)[:1]:
                broken.append(CheckResult(
                    "contract", CHECK, rank, Verdict.CONTRACT_BROKEN,
                    f"{where}: op {i} ({op.type}) reads {part}, fused into {rec['name']}",
                    counterexample={"rank": rank, "op_index": i, "op_type": op.type,
                                    "value": part, "var": part, "fused": rec["name"]}))
        if not _reads(snap, rec["name"]):
            broken.append(CheckResult(
                "contract", CHECK, rank, Verdict.NOT_APPLIED,
                f"{where}: no op reads the fused parameter {rec['name']}",
                counterexample={"rank": rank, "value": rec["name"], "var": rec["name"]}))
    if broken:
        return broken
    return [CheckResult(
        "contract", CHECK, rank, Verdict.EQUIVALENT,
        f"{where}: {len(records)} fused parameter(s), each a column permutation of its "
        "parts (recorded from the values), read in place of them")]


def contract_checks(pass_name, case, ref, fusion, befores, afters) -> list:
    ref_serial = _serial_snapshot(ref, case.ranks[0])
    present = bool(shared_matmuls(ref_serial))
    out = []
    for r in case.ranks:
        where = f"{pass_name} on {case.name} rank {r}"
        snap = afters[r]
        if fusion[r]:
            out += rank_contract(pass_name, case.name, r, snap, fusion[r])
            if not present:
                out.append(CheckResult(
                    "contract", "left alone", r, Verdict.CONTRACT_BROKEN,
                    f"{where}: the reference multiplies no input by two parameters, yet "
                    f"{len(fusion[r])} parameter(s) were fused ({fusion[r][0]['name']} first)",
                    counterexample={"rank": r, "value": fusion[r][0]["name"],
                                    "var": fusion[r][0]["name"]}))
            continue
        mine, theirs = [op.type for op in snap.ops], [op.type for op in befores[r].ops]
        if present:
            out.append(CheckResult(
                "contract", CHECK, r, Verdict.NOT_APPLIED,
                f"{where}: the reference multiplies one input by the parameters "
                f"{shared_matmuls(ref_serial)[0]} and nothing was fused",
                counterexample={"rank": r, "value": shared_matmuls(ref_serial)[0][0]}))
        elif mine != theirs:
            i = next((k for k, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                     min(len(mine), len(theirs)))
            out.append(CheckResult(
                "contract", "left alone", r, Verdict.CONTRACT_BROKEN,
                f"{where}: nothing fused, yet the program differs from the plan with the "
                f"flag off at op {i} ({mine[i] if i < len(mine) else 'end'})",
                counterexample={"rank": r, "op_index": i}))
        else:
            out.append(CheckResult(
                "contract", "left alone", r, Verdict.EQUIVALENT,
                f"{where}: no input multiplied by two parameters; nothing fused, the "
                f"program is the plan with the flag off, op for op ({len(mine)} ops)"))
    return out
