"""The vocab-parallel embedding pass, ``auto_parallel_c_embedding_pass``
(3.3.1's ``auto_parallel_c_embedding.py``), where Paddle's planner applies it.

``Engine._parallel_pir`` applies it, when
``strategy.mp_optimization.replace_with_c_embedding``, to the global dist
program before the backward: every ``pd_op.embedding`` becomes a
``pd_op.c_embedding`` of the table sharded on its vocab dim over mp (rank r
of the mp axis holds rows ``r*V/mp ..``, and its op carries that
``start_index``: the lookup of an id another rank holds is 0), its result
Partial over mp, followed by a reshard to Replicate (an all-reduce).  Each
rank's program then carries its own ``start_index``, so the planner's own
serial program (taken after the pass, ``verify/plan/stages.py``) differs per
rank and is not the model.

The reference is therefore a second plan: the same model planned with the
flag off (the case's ``params["reference"]``, a model file planned like any
planner case, ``cases/planner_models.py``).  Its serial program is the model
on global tensors; each rank's final program of the plan with the flag on
is related to it through placements, by the planner's relation
(``passes/planner.py``: the numeric relation of the loss, every gradient and
every updated parameter for 3 steps, and the value proof, where the
``pd_op.c_embedding`` rows of ``verify/value/semantics.py`` give each
rank's lookup as the serial lookup's selection terms of its rows, so the
Partial sum over mp is the serial embedding).  The two plans name their
parameters and feeds alike, and their serial programs are aligned op by op
(:func:`serial_links`: the same model but for the lookup the pass wrote), so
each rank's op is compared with its model value too and a difference is
localised to the first op whose result no longer relates, blamed on the
stage ``c_embedding`` where that op is the pass's lookup.

What the pass exists for (the contract, on each rank's final program),
both ways:

* fires where its pattern is present: the reference's serial program looks
  ids up with ``pd_op.embedding`` in a parameter its plan shards on the vocab
  dim (dims_mapping[0] a mesh axis); then on every rank that table is read
  by ``pd_op.c_embedding`` only, whose ``start_index`` is the rank's
  coordinate on that axis times its rows, whose ``vocab_size`` is the
  serial table's rows, whose result is read only by a sum ``all_reduce`` over
  exactly the ranks of that axis (the others' coordinates the rank's), and
  whose grad (``pd_op.c_embedding_grad``) has the same ``start_index``;
* changes nothing where absent (no lookup, or a lookup of a table the
  reference does not shard on vocab): no ``pd_op.c_embedding`` on any rank,
  and each rank's program is the reference's, op for op (types in order).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from verify.verdicts import CheckResult, Verdict

from .planner import PlannerAdapter, planner_dir

CHECK = "c_embedding"
C_EMB, C_EMB_GRAD, EMB = "pd_op.c_embedding", "pd_op.c_embedding_grad", "pd_op.embedding"
SUM = 0  # all_reduce's reduce_type for a sum


class CEmbeddingAdapter(PlannerAdapter):
    name = "auto_parallel_c_embedding_pass"
    short = "c_embedding"
    planner_family = True  # declared here: verify premerge reads class bodies (ast)
    paddle_modules = ("paddle.distributed.passes.auto_parallel_c_embedding",)
    repro_blocker = ("applied by Paddle's planner in the planning process, before the "
                     "backward; the reference is a second plan with the flag off")

    def handles(self, case) -> bool:
        """Planner cases whose strategy turns the flag on and that name the
        plan with it off (``params["reference"]``)."""
        if getattr(case, "ir", "legacy") != "pir":
            return False
        params = getattr(case, "params", None) or {}
        return bool(params.get("planner") or params.get("dir")) and \
            bool(params.get("reference")) and \
            self.name in (params.get("strategy_passes") or ())

    def pattern_present(self, snap) -> bool:
        """A lookup (``pd_op.embedding``) in the program."""
        return any(op.type == EMB for op in snap.ops)

    def whole_application(self, case, numeric: bool) -> dict:
        """The planner's stage checks on the plan with the flag on, its ranks
        related to the serial program of the plan with it off, and the
        contract on every rank."""
        from .planner import relation_proof, relation_run, static_checks

        checks, outcomes, notes = [], [], []
        try:
            ref = reference_dir(case)
            ref_records = _records(ref, case.ranks)
            try:
                folder = planner_dir(case)
            except RuntimeError as exc:
                crashed = crash_in_pass(self.name, case, exc)
                if crashed is None:
                    raise
                checks.append(crashed)
                return {"checks": checks, "outcomes": outcomes, "notes": notes}
            records = _records(folder, case.ranks)
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
                     "the flag off); the ranks: the plan with it on")
        with tempfile.TemporaryDirectory(prefix="c-embedding-") as tmp:
            both = composite_dir(folder, ref, case.ranks, Path(tmp) / "plan")
            both_records = _records(both, case.ranks)
            checks += relation_proof(case, both, both_records, notes)
            if numeric:
                checks += relation_run(case, both, both_records, notes)
            else:  # the proof alone is advisory where it does not decide
                checks.append(CheckResult(
                    "numeric", "planner relation", None, Verdict.INCONCLUSIVE,
                    f"{self.name} on {case.name}: the ranks-to-reference relation was not "
                    "run (no numeric backend)"))
        checks += contract_checks(self.name, case, folder, ref, records, ref_records,
                                  befores, afters)
        return {"checks": checks, "outcomes": outcomes, "notes": notes}


ADAPTER = CEmbeddingAdapter()


# -- the two plans ------------------------------------------------------------
PASS_FILE = "auto_parallel_c_embedding.py"  # the pass's module in Paddle


def crash_in_pass(pass_name, case, exc):
    """PASS_CRASHED when the plan with the flag on failed, before the
    planner's recorded stages, with a Python traceback through the pass's
    own module (the plan with the flag off planned: the reference is made
    first); None for any other failure (a gloo rendezvous, a crash the
    traceback does not place in the pass: not the pass's, INCONCLUSIVE)."""
    import re

    from verify.verdicts import environment_cause, error_line

    for rank, text in sorted((getattr(exc, "stderr", None) or {}).items()):
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', text or "")
        inside = [f for f in frames if f[0].endswith("/passes/" + PASS_FILE)]
        if not inside or environment_cause(text):
            continue
        path, line, fn = inside[-1]
        said = [ln.strip() for ln in text.splitlines()
                if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
        why = said[-1][:400] if said else error_line(text)
        return CheckResult(
            "pass", "pass ran", rank, Verdict.PASS_CRASHED,
            f"{pass_name} raised on case {case.name} rank {rank} (in the planning process, "
            f"{fn} at {PASS_FILE}:{line}): {why}",
            counterexample={"rank": rank, "function": fn, "line": int(line), "error": why},
            details={"traceback": text})
    return None

def reference_dir(case) -> Path:
    """The plan of ``params["reference"]`` (``{"model", "uses"}``) on the
    case's mesh, planned and cached by the case's own planner
    (``params["planner"]``: a planner case's or a zoo case's; the other
    params, e.g. the zoo's ``ranks``, carried over)."""
    from types import SimpleNamespace

    ref = case.params["reference"]
    params = {**case.params, "model": ref["model"], "uses": list(ref.get("uses", []))}
    params.setdefault("planner", "cases.planner_models:planned_dir")
    return planner_dir(SimpleNamespace(name=f"{case.name} (reference)", params=params))


def _records(folder: Path, ranks) -> dict:
    return {r: json.loads((folder / f"rank{r}" / "planner.json").read_text()) for r in ranks}


def _finals(folder: Path, ranks) -> dict:
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs
    from verify.plan.pir_rank import load_rank

    out = {}
    for r in ranks:
        main, startup, names, _ = load_rank(folder / f"rank{r}")
        with paddle.pir_utils.IrGuard():
            out[r] = from_pir_programs(main, startup, names)
    return out


def composite_dir(folder: Path, ref: Path, ranks, out: Path) -> Path:
    """A program dir ``out`` for the planner's relation: the ranks of
    ``folder`` (the plan with the flag on) and, as the serial program,
    ``ref``'s (the plan with it off): its ``serial.json`` and serial relation
    table; the links of the ranks' ops to serial values dropped (they name
    the other plan's serial values).  Made afresh for each application (a
    few small files; the relation's memos are keyed by their bytes, so a
    rerun still hits them)."""
    shutil.copytree(folder, out, ignore=shutil.ignore_patterns("stages", "coverage.json"))
    r0 = ranks[0]
    ref0 = json.loads((ref / f"rank{r0}" / "planner.json").read_text())
    ref_serial = _serial_snapshot(ref, r0)
    ref_stage = next((st for st in ref0.get("stages", []) if st.get("stage") == "serial"
                      and st.get("snapshot")), None)
    for r in ranks:
        p = out / f"rank{r}" / "planner.json"
        rec = json.loads(p.read_text())
        rec["serial_relation"] = ref0.get("serial_relation")
        rec["serial_error"] = ref0.get("serial_error")
        # the stage snapshots are the plan's, not read here; but the reference's
        # serial stage is kept: an AMP plan's rounding tolerance is read from it
        # (planner.amp_roundings), else a bfloat16 run is held to float32's
        rec["stages"] = []
        if ref_stage is not None:
            dst = out / f"rank{r}" / ref_stage["snapshot"]
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ref / f"rank{r0}" / ref_stage["snapshot"], dst)
            rec["stages"] = [ref_stage]
        link, made = serial_links(_serial_snapshot(folder, r), ref_serial)
        for op in rec.get("final_ops", []):
            ser = op.get("serial")
            if ser:  # the other plan's serial value of the same model value, if any
                mapped = [link.get(n) if n else None for n in ser]
                op["serial"] = mapped if any(mapped) else None
                if any(n in made for n in ser if n):
                    op["origin"] = STAGE  # the lookup the pass wrote (blamed there)
            op["serial_op"] = None
        p.write_text(json.dumps(rec, sort_keys=True))
        shutil.copyfile(ref / f"rank{r0}" / "serial.json", out / f"rank{r}" / "serial.json")
    return out


STAGE = "c_embedding"
# the ops the pass writes, and the serial ops they stand for
_AS_SERIAL = {C_EMB: EMB, C_EMB_GRAD: "pd_op.embedding_grad"}


def serial_links(on, off) -> tuple:
    """``({value of on: value of off}, {values of on the pass's ops made})``:
    the serial program of the plan with the flag on (``on``, a snapshot)
    aligned op by op with the one with it off (``off``): the same model, so
    the same op types in the same order but for the pass's lookup (a
    ``pd_op.c_embedding`` where ``off`` has its ``pd_op.embedding``, each
    grad alike).  Ops in a run of equal types are paired in order and their
    results by slot; values of ops the alignment does not pair get no link
    (compared through the relation's watched values only)."""
    import difflib

    def kind(op):
        return _AS_SERIAL.get(op.type, op.type)

    a, b = [kind(op) for op in on.ops], [kind(op) for op in off.ops]
    link, made = {}, set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False) \
            .get_opcodes():
        if tag != "equal":
            continue
        for x, y in zip(on.ops[i1:i2], off.ops[j1:j2]):
            for slot, names in x.outputs.items():
                for n, m in zip(names, y.outputs.get(slot, [])):
                    if n and m:
                        link[n] = m
                        if x.type in _AS_SERIAL:
                            made.add(n)
    return link, made


# -- the contract ---------------------------------------------------------------
def _coords(placement, rank):
    mesh = np.array(placement["process_ids"]).reshape(placement["mesh_shape"])
    at = np.argwhere(mesh == rank)
    return mesh, (tuple(int(i) for i in at[0]) if len(at) else None)


def _group(mesh, coords, axis) -> list:
    idx = list(coords)
    idx[axis] = slice(None)
    return sorted(int(v) for v in np.asarray(mesh[tuple(idx)]).flatten())


def vocab_sharded(ref_serial, ref_rel) -> dict:
    """``{table parameter: mesh axis}`` of the reference's lookups whose table
    its plan shards on the vocab dim."""
    out = {}
    for op in ref_serial.ops:
        if op.type != EMB:
            continue
        w = (op.inputs.get("weight") or [None])[0]
        plc = (ref_rel.get("parameters", {}).get(w) or {}).get("placement")
        if plc and plc["dims_mapping"] and int(plc["dims_mapping"][0]) >= 0:
            out[w] = int(plc["dims_mapping"][0])
    return out


def _readers(snap, name) -> list:
    return [(i, op) for i, op in enumerate(snap.ops)
            if any(name in vs for vs in op.inputs.values())]


def rank_contract(pass_name, case_name, rank, snap, rel, rings, tables, vocab) -> list:
    """The contract on one rank's final program (see the module docstring):
    ``rel`` its relation table (placements), ``rings`` ``{ring id: [members]}``,
    ``tables`` ``{table: mesh axis}`` the reference shards on vocab,
    ``vocab`` ``{table: serial rows}``."""
    where = f"{pass_name} on {case_name} rank {rank}"
    broken = []

    def fail(what, i, op, value, **facts):
        broken.append(CheckResult(
            "contract", CHECK, rank, Verdict.CONTRACT_BROKEN,
            f"{where}: op {i} ({op.type}) on {value}: {what}",
            counterexample={"rank": rank, "op_index": i, "op_type": op.type,
                            "value": value, "var": value, **facts}))

    looked_up = set()
    for i, op in enumerate(snap.ops):
        if op.type == EMB and (op.inputs.get("weight") or [None])[0] in tables:
            w = op.inputs["weight"][0]
            fail("a lookup of a vocab-sharded table left a pd_op.embedding", i, op, w)
        if op.type not in (C_EMB, C_EMB_GRAD):
            continue
        w = (op.inputs.get("weight") or [None])[0]
        if op.type == C_EMB:
            looked_up.add(w)
        plc = (rel.get("parameters", {}).get(w) or {}).get("placement")
        if w not in tables or not plc or int(plc["dims_mapping"][0]) < 0:
            fail("its table is not a parameter sharded on the vocab dim", i, op, w)
            continue
        axis = int(plc["dims_mapping"][0])
        mesh, coords = _coords(plc, rank)
        rows = int(snap.vars[w].shape[0])
        want = coords[axis] * rows
        start = int(op.attrs.get("start_index", -1))
        if start != want:
            fail(f"start_index {start}, but rank {rank} holds rows {want}..{want + rows - 1} "
                 f"(its coordinate {coords[axis]} on mesh axis {axis}, {rows} rows each)",
                 i, op, w, start_index=start, expected=want)
        if op.type == C_EMB:
            if int(op.attrs.get("vocab_size", -1)) != vocab.get(w):
                fail(f"vocab_size {op.attrs.get('vocab_size')}, the table has {vocab.get(w)} "
                     "rows", i, op, w, vocab_size=op.attrs.get("vocab_size"),
                     expected=vocab.get(w))
            group = _group(mesh, coords, axis)
            out = op.outputs["out"][0]
            readers = _readers(snap, out)
            if not readers:
                fail("its partial lookup is read by nothing (no all-reduce over the vocab "
                     "axis)", i, op, out, expected_ring=group)
            for j, rd in readers:
                ring = rings.get(int(rd.attrs.get("ring_id", -1)), [])
                members = next((sorted(m) for m in ring if rank in m), None)
                if rd.type != "pd_op.all_reduce" or int(rd.attrs.get("reduce_type", -1)) != SUM \
                        or members != group:
                    fail(f"its partial lookup is read by op {j} ({rd.type}, ring members "
                         f"{members}), not summed over the ranks {group} of the vocab axis",
                         i, op, out, reader_index=j, reader_type=rd.type,
                         expected_ring=group, ring=members)
    for w in sorted(set(tables) - looked_up):
        if w in snap.vars:
            broken.append(CheckResult(
                "contract", CHECK, rank, Verdict.NOT_APPLIED,
                f"{where}: the table {w} is sharded on the vocab dim and no pd_op.c_embedding "
                "looks it up", counterexample={"rank": rank, "value": w, "var": w}))
    if broken:
        return broken
    return [CheckResult("contract", CHECK, rank, Verdict.EQUIVALENT,
                        f"{where}: every vocab-sharded table looked up by pd_op.c_embedding at "
                        "the rank's rows, the partial lookups summed over the vocab axis")]


def contract_checks(pass_name, case, folder, ref, records, ref_records, befores,
                    afters) -> list:
    r0 = case.ranks[0]
    ref_serial = _serial_snapshot(ref, r0)
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    out = []
    for r in case.ranks:
        tables = vocab_sharded(ref_serial, ref_records[r]["relation"])
        vocab = {w: int(p["shape"][0]) for w, p in
                 (ref_records[r0].get("serial_relation") or {}).get("parameters", {}).items()}
        snap = afters[r]
        if tables:
            out += rank_contract(pass_name, case.name, r, snap, records[r]["relation"], rings,
                                 tables, vocab)
            continue
        where = f"{pass_name} on {case.name} rank {r}"
        extra = [i for i, op in enumerate(snap.ops) if op.type in (C_EMB, C_EMB_GRAD)]
        mine, theirs = [op.type for op in snap.ops], [op.type for op in befores[r].ops]
        if extra:  # a lookup of a table the reference does not shard, rewritten
            i = extra[0]
            op = snap.ops[i]
            w = (op.inputs.get("weight") or [None])[0]
            theirs_plc = (ref_records[r]["relation"].get("parameters", {}).get(w) or {}) \
                .get("placement")
            mine_plc = (records[r]["relation"].get("parameters", {}).get(w) or {}) \
                .get("placement")
            out.append(CheckResult(
                "contract", "left alone", r, Verdict.CONTRACT_BROKEN,
                f"{where}: op {i} ({op.type}) on {w}: the table is not sharded on its vocab "
                f"dim (dims_mapping {_dm(theirs_plc)} planned with the flag off), yet the pass "
                f"rewrote its lookup and sharded it (dims_mapping {_dm(mine_plc)}, "
                f"{int(snap.vars[w].shape[0]) if w in snap.vars else '?'} rows a rank)",
                counterexample={"rank": r, "op_index": i, "op_type": op.type, "value": w,
                                "var": w,
                                "placement_flag_off": _dm(theirs_plc),
                                "placement": _dm(mine_plc)}))
        elif mine != theirs:
            i = next((k for k, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                     min(len(mine), len(theirs)))
            out.append(CheckResult(
                "contract", "left alone", r, Verdict.CONTRACT_BROKEN,
                f"{where}: no vocab-sharded lookup, yet the program differs from the plan "
                f"with the flag off at op {i} ({mine[i] if i < len(mine) else 'end'})",
                counterexample={"rank": r, "op_index": i}))
        else:
            out.append(CheckResult(
                "contract", "left alone", r, Verdict.EQUIVALENT,
                f"{where}: no vocab-sharded lookup; the program is the plan with the flag "
                f"off, op for op ({len(mine)} ops)"))
    return out


def _dm(placement):
    return list(placement["dims_mapping"]) if placement else None


def _serial_snapshot(folder, rank):
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs
    from verify.plan.stages import read_serial

    main, startup, names = read_serial(folder / f"rank{rank}")
    with paddle.pir_utils.IrGuard():
        return from_pir_programs(main, startup, names)
