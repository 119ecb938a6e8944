"""The PIR Engine's AMP (``strategy.amp``), where Paddle's planner applies it.

Not a registered pass: ``Engine._prepare_program`` (3.3.1, PIR mode) builds
the model's program inside ``paddle.amp.auto_cast(enable, custom lists,
level, dtype, use_promote)`` -- the ops PIR's AMP lists name get
``pd_op.cast`` s around them -- and ``Engine._parallel_pir`` wraps the
optimizer in ``OptimizerWithMixedPrecision`` (a ``GradScaler`` for float16
only) before the backward.  So the serial program the planning process
records (``verify/plan/stages.py``, stage ``serial``) already holds the AMP
rewrite; the planner application (``passes/planner.py``) relates every rank
to it.  This adapter judges the rewrite itself, against a second plan of
the same model with AMP off (the case's ``params["amp_reference"]`` model
file, same mesh):

* ``fired`` / ``left alone`` (contract, per rank): a white-list op in the
  float32 program and nothing rewritten is NOT_APPLIED; no white-list op and
  an op added or typed low is CONTRACT_BROKEN (``amp_rewrites``);
* ``pir amp rounding`` (value, per rank, ``verify/value/pir_amp_rounding.py``):
  the AMP serial program equals the float32 one with ``round_<dtype>``
  exactly where PIR's AMP lists put casts (a cast missing, moved, to
  another dtype, or a value scaled is refuted at its op and value);
* ``pir amp rounding run`` (numeric, ``verify/numeric/pir_amp_runs.py``):
  one step of both serial programs with Paddle's own kernels, the loss,
  gradients and updated parameters within the dtype-derived rounding
  tolerance (run once: every rank plans from one serial program, which the
  planner application's ``serial program`` check states).

Case params: ``amp_reference`` (model file), ``amp_dtype``, ``amp_level``,
``amp_black`` (the user's ``strategy.amp.custom_black_list``: the lists are
Paddle's ``_update_list`` of them, as ``auto_cast`` makes them).
On a CPU build the AMP plan needs ``examples/amp_of.py``'s GPU AMP state
(``auto_cast`` is a no-op on a CPU place): docs/passes.md.
"""
from __future__ import annotations

import dataclasses

from verify.verdicts import CheckResult, Verdict

from .planner import PlannerAdapter, _snap, planner_dir

SERIAL = "serial"


class PirAmpAdapter(PlannerAdapter):
    name = "pir_amp"
    short = "pir_amp"
    planner_family = True  # declared here: verify premerge reads class bodies (ast)
    paddle_modules = ("paddle.amp.auto_cast", "paddle.amp.amp_lists",
                      "paddle.static.amp.decorator")
    repro_blocker = ("applied by Paddle's Engine while it builds the serial program "
                     "(auto_cast); the program dirs of the AMP plan and its float32 "
                     "reference hold both serial programs")

    def handles(self, case) -> bool:
        """Planner cases that name this adapter (``params["strategy_passes"]``)."""
        if getattr(case, "ir", "legacy") != "pir":
            return False
        params = getattr(case, "params", None) or {}
        return bool(params.get("amp_reference")) and \
            self.name in (params.get("strategy_passes") or ())

    def pattern_present(self, snap, dtype="bfloat16", level="O1", black=()) -> bool:
        """An op of the white list ``auto_cast`` installs for ``dtype``,
        ``level`` and the user's black list, looked up by its legacy name as
        PIR's AMP does."""
        from verify.value.pir_amp_rounding import amp_name, pir_lists

        white, _ = pir_lists(dtype, level, black=black)
        return any(amp_name(op.type) in white for op in snap.ops)

    def reference_dir(self, case):
        """The float32 plan of the same model and mesh (planned once, cached)."""
        p = case.params
        ref = dataclasses.replace(case, name=f"{case.name}.float32", params={
            **p, "model": p["amp_reference"], "uses": list(p.get("amp_reference_uses", []))})
        return planner_dir(ref)

    def whole_application(self, case, numeric: bool) -> dict:
        checks, outcomes, notes = [], [], []
        p = case.params
        dtype, level = p.get("amp_dtype", "bfloat16"), p.get("amp_level", "O1")
        black = tuple(p.get("amp_black", ()))
        from verify.value.pir_amp_rounding import (amp_off_ops, amp_rewrites, check_serial,
                                                   following_casts, model_casts,
                                                   pir_lists, rounding_depths)

        lists = pir_lists(dtype, level, black=black)
        if black:
            notes.append(f"AMP lists: Paddle's {dtype} {level} lists with the user's "
                         f"custom_black_list {sorted(black)}")

        fired = {}
        amp_dir, ref_dir = planner_dir(case), self.reference_dir(case)
        where = f"{self.name} on {case.name}"
        for r in case.ranks:
            try:
                fp32 = _snap(ref_dir, r, _serial_file(ref_dir, r))
                amp = _snap(amp_dir, r, _serial_file(amp_dir, r))
            except Exception as exc:
                from verify.verdicts import failure_line

                checks.append(CheckResult("case", "build", r, Verdict.INCONCLUSIVE,
                                          f"{where} rank {r}: the serial programs could "
                                          f"not be read: {failure_line(exc)}"))
                continue
            outcomes.append((r, fp32, amp, None))
            fired[r] = bool(amp_rewrites(fp32, amp))
            checks.append(self.amp_fired_check(case, r, fp32, amp, dtype, level, black))
            checks.append(check_serial(f"{where} rank {r}", r, fp32, amp, dtype, level,
                                       lists=lists))
        if numeric and outcomes:
            from verify.numeric.pir_amp_runs import check as run_check

            r, fp32, amp0, _ = outcomes[0]
            checks.append(run_check(f"{where} rank {r}", r, ref_dir / f"rank{r}",
                                    amp_dir / f"rank{r}", dtype,
                                    rounding_depths(fp32, dtype, level, lists=lists,
                                                    off=amp_off_ops(fp32, amp0),
                                                    follow=following_casts(fp32, amp0),
                                                    cast_down=model_casts(fp32, amp0)),
                                    {op.type for op in fp32.ops}))
            notes.append(f"pir amp rounding run: rank {r}'s serial programs (every rank "
                         "plans from one serial program)")
        elif not numeric:
            notes.append("pir amp rounding run not run (no numeric backend)")
        return {"checks": checks, "outcomes": outcomes, "notes": notes, "fired": fired}

    def amp_fired_check(self, case, rank, fp32, amp, dtype="bfloat16",
                        level="O1", black=()) -> CheckResult:
        """The contract both ways, on the serial programs: where the float32
        program holds an op of the white list (:meth:`pattern_present`) the
        AMP build must have rewritten it (casts, low values); where it holds
        none, the AMP program must be the float32 one, op for op, with no
        low value (else CONTRACT_BROKEN, naming the first op it added)."""
        from verify.value.pir_amp_rounding import amp_rewrites

        present, added = self.pattern_present(fp32, dtype, level, black), \
            amp_rewrites(fp32, amp)
        name = "fired" if present else "left alone"
        where = f"{self.name} on case {case.name} rank {rank}"
        details = {"fired": bool(added), "pattern_present": present,
                   "rewrites": len(added)}
        if present and not added:
            return CheckResult("contract", name, rank, Verdict.NOT_APPLIED,
                               f"{where}: the float32 serial program holds an op of the "
                               "white list, and the AMP build left it in float32 (no cast, "
                               "no low value)", details=details)
        if added and not present:
            idx, typ, why = added[0]
            return CheckResult("contract", name, rank, Verdict.CONTRACT_BROKEN,
                               f"{where}: no op of the white list, yet the AMP serial "
                               f"program's op {idx} ({typ}): {why} ({len(added)} such op(s))",
                               counterexample={"rank": rank, "op_index": idx, "op_type": typ,
                                               "why": why, "added": [a[0] for a in added]},
                               details=details)
        msg = (f"the AMP build rewrote the serial program ({len(added)} op(s) added or in "
               "the low dtype)") if added else \
            "no op of the white list; the AMP build left the serial program alone, as it must"
        return CheckResult("contract", name, rank, Verdict.EQUIVALENT, msg, details=details)


def _serial_file(folder, rank) -> str:
    import json

    rec = json.loads((folder / f"rank{rank}" / "planner.json").read_text())
    for st in rec.get("stages", []):
        if st.get("stage") == SERIAL and st.get("snapshot"):
            return st["snapshot"]
    raise FileNotFoundError(f"rank {rank}: no serial stage snapshot in {folder}")


ADAPTER = PirAmpAdapter()
