"""The Engine's own post-partition pass pipeline, checked after every pass.

Not one Paddle pass: the list ``Parallelizer._apply_post_optimization``
(3.3.1, legacy IR) runs on a rank's partitioned programs, in its order and
with the attrs it passes, under a strategy (the case's
``params["pipeline"]``: dotted overrides of ``auto.Strategy()``; empty is
3.3.1's default, where ``sp_optimization.enable`` is True)::

    sequence parallel optimization      if sp_optimization.enable
    fused linear promotion              if fused_linear_promotion.enable and
                                        fused_passes.enable and "fuse_gemm_epilogue"
                                        in fused_passes.fused_passes_list
    data parallel optimization          if dp_optimization.enable
    sharding                            if sharding.enable
    allreduce matmul grad overlapping   if mp_optimization.allreduce_matmul_grad_overlapping
    grad clip                           always (training)
    supplement explicit dependencies    unless FLAGS_new_executor_sequential_run
    fused_passes_list, one by one       if fused_passes.enable (legacy passes only;
                                        PIR passes are left to the executor)

(AMP's master-grad pass and gradient merge are not modelled: the cases
here run neither; a strategy enabling them is refused.)  The stages share
one ``PassContext`` and one ``params_grads`` list, as in the planner (the
promotion pass prunes that list in place and the clip pass reads it).

Like MLIR's ``-verify-each``: a snapshot is taken after every stage, and
the contract reports one result per stage, named ``after <pass>``: the
shape check and the def-use check of ``verify/checks`` on that stage's
snapshot against the previous one, the stage pass's own contract where it
is judged on that stage alone (dp_opt: every grad synced once with its
factor; grad clip: the global norm across ranks), and whether the stage
raised.  A
raising stage is that stage's PASS_CRASHED (with the traceback); the stages
after it are reported as not run (INCONCLUSIVE), never as passing.  The
application as a whole is judged by the normal checks on the final
program against the original (value proof, numeric runs).
"""
from __future__ import annotations

import logging
import traceback

from verify.verdicts import CheckResult, Verdict, combine

from ._planner_state import planner_state
from .base import PassAdapter, PassRun

FAMILY = "engine_pipeline"
# The registry names :func:`stages` applies (the fused_passes_list's own are
# the strategy's; 3.3.1's CPU build registers none of them).
STAGE_PASSES = ("auto_parallel_sequence_parallel_optimization",
                "auto_parallel_fused_linear_promotion",
                "auto_parallel_data_parallel_optimization", "auto_parallel_sharding",
                "allreduce_matmul_grad_overlapping", "auto_parallel_grad_clip",
                "auto_parallel_supplement_explicit_dependencies")


def strategy_of(case):
    """``auto.Strategy()`` with the case's ``params["pipeline"]`` overrides."""
    from paddle.distributed.fleet import auto

    strategy = auto.Strategy()
    for path, value in (case.params.get("pipeline") or {}).items():
        *owners, field = path.split(".")
        obj = strategy
        for o in owners:
            obj = getattr(obj, o)
        setattr(obj, field, value)
    return strategy


def stages(strategy, rp, params_grads) -> list:
    """``[(pass name, attrs)]`` the 3.3.1 Parallelizer applies, in order."""
    import copy

    from paddle.distributed.auto_parallel.static import parallelizer_v2
    from paddle.distributed.auto_parallel.static.utils import is_sequential_run

    if strategy.amp.enable or strategy.gradient_merge.enable or strategy.pipeline.enable:
        raise NotImplementedError("engine_pipeline models no AMP master-grad, gradient "
                                  "merge or pipeline stages")
    ctx, rank = rp.dist_context, rp.rank
    out = []
    if strategy.sp_optimization.enable:
        out.append(("auto_parallel_sequence_parallel_optimization",
                    {**copy.deepcopy(strategy.sp_optimization.to_dict()),
                     "dist_context": ctx, "global_rank": rank}))
    fused = strategy.fused_passes
    if strategy.fused_linear_promotion.enable and fused.enable and \
            "fuse_gemm_epilogue" in (fused.fused_passes_list or []):
        out.append(("auto_parallel_fused_linear_promotion",
                    {"dist_context": ctx, "global_rank": rank,
                     "enable_sp": strategy.sp_optimization.enable,
                     "params_grads": params_grads, "amp_level": "o0"}))
    if strategy.dp_optimization.enable:
        out.append(("auto_parallel_data_parallel_optimization",
                    {**copy.deepcopy(strategy.dp_optimization.to_dict()),
                     "dist_context": ctx, "global_rank": rank,
                     "use_sharding": strategy.sharding.enable}))
    if strategy.sharding.enable:
        out.append(("auto_parallel_sharding",
                    {**copy.deepcopy(strategy.sharding.to_dict()), "dist_context": ctx,
                     "params_grads": params_grads, "global_rank": rank,
                     "gradient_sync_after_accumulate":
                         strategy.dp_optimization.gradient_sync_after_accumulate}))
    if strategy.mp_optimization.allreduce_matmul_grad_overlapping:
        out.append(("allreduce_matmul_grad_overlapping", {"dist_context": ctx}))
    out.append(("auto_parallel_grad_clip",
                {**copy.deepcopy(strategy.sharding.to_dict()), "dist_context": ctx,
                 "params_grads": params_grads, "rank_id": rank}))
    if not is_sequential_run():
        out.append(("auto_parallel_supplement_explicit_dependencies", {"dist_context": ctx}))
    if fused.enable:
        from paddle.base.framework import get_flags

        pir = get_flags("FLAGS_enable_pir_in_executor")["FLAGS_enable_pir_in_executor"]
        for name in fused.fused_passes_list or []:
            if pir and name in (parallelizer_v2.PIR_PASS + parallelizer_v2.PIR_PYTHON_PASS):
                continue  # handed to the executor, not applied to the program
            out.append((name, {}))
    return out


class EnginePipelineAdapter(PassAdapter):
    name = "engine_pipeline"
    short = "pipeline"
    paddle_modules = (  # its stages (see the module docstring)
        "paddle.distributed.passes.auto_parallel_sequence_parallel_optimization",
        "paddle.distributed.passes.auto_parallel_fused_linear_promotion",
        "paddle.distributed.passes.auto_parallel_data_parallel_optimization",
        "paddle.distributed.passes.auto_parallel_sharding",
        "paddle.distributed.passes.allreduce_matmul_grad_overlapping",
        "paddle.distributed.passes.auto_parallel_grad_clip",
        "paddle.distributed.passes.auto_parallel_supplement_explicit_dependencies",
    )
    repro_blocker = ("not one Paddle pass but the Parallelizer's list of them; its stage "
                     "results name the pass that broke the program")

    def __init__(self):
        self._stages = {}  # (case, rank) -> [stage record]

    def handles(self, case) -> bool:
        return super().handles(case) and case.family == FAMILY

    def attrs(self, case, rp) -> dict:
        return {}

    def tested_passes(self) -> tuple:
        """Every stage :func:`stages` may apply (a pass file replaces any)."""
        return STAGE_PASSES

    # In this process, always: the stages' exceptions are caught per stage
    # and their records stay here.  (In an isolation worker, the CPU build's
    # second application of the unregistered C++ pass ``fuse_gemm_epilogue``
    # kills the worker with SIGSEGV, where in a plain process it raises
    # ValueError each time: engine_pipeline_tp2_clip rank 1 measured on
    # 3.3.1, twice in two runs.)
    isolated = False

    def apply_local(self, case, rank: int) -> PassRun:
        """Run the stages on a fresh build of ``rank``, snapshotting after
        each; the first raising stage stops the pipeline (its traceback is
        the run's error)."""
        from verify.ir.legacy_ir import paddle_module

        paddle_module()
        from paddle.distributed.passes import PassContext, new_pass

        from verify.ir import snapshot as snap_mod

        from .auto_parallel_grad_clip import give_serial_optimizer

        if rank == case.ranks[0]:  # a new application: the other ranks' records are stale
            self._stages = {k: v for k, v in self._stages.items() if k[0] != case.name}
        original = case.build(rank)
        records, failure = [], {}

        def snap(rp, which):
            s = snap_mod.from_programs(rp.main, rp.startup,
                                       meta={"case": case.name, "rank": rank,
                                             "program": which})
            s.feeds = sorted(f.name for f in rp.feeds)
            return s

        def run(rp):
            give_serial_optimizer(case, rp.dist_context)
            strategy = strategy_of(case)
            rp.dist_context._strategy = strategy  # the planner's context holds its strategy
            params_grads = list(rp.params_grads)  # shared by the stages, as in the planner
            context = PassContext()
            prev = snap(rp, "original")
            logging.disable(logging.WARNING)
            try:
                with planner_state(case, rank):
                    plan = stages(strategy, rp, params_grads)
                    for i, (name, attrs) in enumerate(plan):
                        rec = {"pass": name, "error": None, "before": prev, "after": None}
                        records.append(rec)
                        try:
                            p = new_pass(name, attrs)
                            p.apply([rp.main], [rp.startup], context)
                            for prog in (rp.main, rp.startup):
                                prog.global_block()._sync_with_cpp()
                        except (Exception, SystemExit) as exc:
                            rec["error"] = traceback.format_exc()
                            failure.update(tb=rec["error"], type=type(exc).__name__)
                            records.extend({"pass": n, "error": None, "before": None,
                                            "after": None, "not_run": name}
                                           for n, _ in plan[i + 1:])
                            return
                        if name == "auto_parallel_sharding":
                            params_grads[:] = context.get_attr("params_grads") or params_grads
                        rec["after"] = prev = snap(rp, f"after {name}")
            finally:
                logging.disable(logging.NOTSET)

        rewritten = case.build(rank, then=run)
        self._stages[(case.name, rank)] = records
        self._last = (case.name, rank)
        return PassRun(original, rewritten, failure.get("tb"), failure.get("type"))

    # -- the stage records travel back from an isolation worker with the programs
    def export_rewritten(self, rp) -> dict:
        """What the isolation worker sends back: the rewritten programs as
        the worker's default answer holds them, plus this rank's stage records."""
        from verify.ir.program_transport import export_legacy

        key = getattr(self, "_last", None)
        return {**export_legacy(rp),
                "key": list(key) if key else None,
                "stages": self._stages.get(key, []) if key else []}

    def import_rewritten(self, fresh, exported):
        from verify.ir.program_transport import rebuild_legacy

        if exported.get("key"):
            self._stages[tuple(exported["key"])] = exported["stages"]
        return rebuild_legacy(fresh, exported)

    def pattern_present(self, snap) -> bool:
        """A partitioned program for the pipeline to work on: one that
        communicates (a collective), i.e. planned for more than one rank."""
        from verify.ir import collectives

        return any(collectives.communicates(op.type) for op in snap.ops)

    def stage_results(self, case, rank) -> list:
        """One CheckResult per stage (see the module docstring)."""
        from verify.checks import CheckContext, def_use, shape_check

        out = []
        inherited = set()  # findings already present after the previous stage
        for rec in self._stages.get((case.name, rank), []):
            name = f"after {rec['pass']}"
            if rec.get("not_run"):
                out.append(CheckResult("contract", name, rank, Verdict.INCONCLUSIVE,
                                       f"not run: {rec['not_run']} raised before it on case "
                                       f"{case.name} rank {rank}",
                                       details={"pass": rec["pass"], "ran": False}))
                continue
            if rec["error"]:
                from verify.verdicts import error_line

                out.append(CheckResult("contract", name, rank, Verdict.PASS_CRASHED,
                                       f"{rec['pass']} raised on case {case.name} rank {rank}: "
                                       f"{error_line(rec['error'])}",
                                       details={"pass": rec["pass"], "ran": True,
                                                "traceback": rec["error"]}))
                continue
            ctx = CheckContext(pass_name=rec["pass"], case_name=case.name, rank=rank,
                               before=rec["before"], after=rec["after"],
                               symbols=dict(case.symbols))
            checks = shape_check.run(ctx) + def_use.run(ctx)
            seen = {_key(c) for c in checks if not c.ok}
            # a stage answers for what it broke, not for what an earlier stage left
            own = [c for c in checks if c.ok or _key(c) not in inherited]
            inherited = seen
            if rec["pass"] == "auto_parallel_data_parallel_optimization":  # its contract
                from . import get

                extra = get(rec["pass"]).contract(case, rank, rec["before"], rec["after"])
                own += extra
                checks = checks + extra
            if rec["pass"] == "auto_parallel_grad_clip" and \
                    self._has_global_norm(rec["before"]):
                # its contract needs every rank, and a clip to be about: a model
                # without a global-norm clip has nothing the rule speaks of
                from .auto_parallel_grad_clip import global_norm_checks

                snaps = {r: self._stage_after(case, r, rec["pass"]) for r in case.ranks}
                extra = global_norm_checks(case, rank, snaps)
                own += extra
                checks = checks + extra
            verdict = combine(own) if own else Verdict.EQUIVALENT
            bad = [c for c in own if not c.ok]
            from verify.ir.snapshot import changed

            fired = changed(rec["before"], rec["after"])
            msg = (f"{rec['pass']} on case {case.name} rank {rank} "
                   f"({'rewrote the program' if fired else 'changed nothing'}): ")
            msg += bad[0].message if bad else "shapes and def-use hold" + (
                f" (besides {len(seen)} finding(s) an earlier stage left)" if seen else "")
            out.append(CheckResult("contract", name, rank, verdict, msg,
                                   counterexample=bad[0].counterexample if bad else None,
                                   details={"pass": rec["pass"], "ran": True, "fired": fired,
                                            "ops_after": len(rec["after"].ops),
                                            "checks": [c.to_dict() for c in checks]}))
        return out

    @staticmethod
    def _has_global_norm(snap) -> bool:
        """Whether ``snap`` (a stage's input) holds a global-norm clip."""
        from .auto_parallel_grad_clip import global_norms

        return snap is not None and bool(global_norms(snap))

    def _stage_after(self, case, rank, name):
        """``rank``'s snapshot after stage ``name`` (applying the pipeline to
        that rank first if it has not run yet); None if it did not get there."""
        if (case.name, rank) not in self._stages:
            self.apply_local(case, rank)
        for rec in self._stages[(case.name, rank)]:
            if rec["pass"] == name:
                return rec.get("after")
        return None

    def contract(self, case, rank, before, after) -> list:
        return self.stage_results(case, rank)

    def crash_checks(self, case, rank, before, after) -> list:
        """The stages' results when the pipeline raised (the application
        reports the crash; this says which stage, and what came before)."""
        return self.stage_results(case, rank)

    def intended_changes(self, case, rank, before, after) -> dict:
        """The pipeline's stages each change reaching definitions on purpose;
        the stage checks and the value/numeric checks judge them."""
        from . import get

        out = {}
        for rec in self._stages.get((case.name, rank), []):
            if rec.get("after") is None:
                continue
            try:
                adapter = get(rec["pass"])
            except KeyError:
                continue
            out.update(adapter.intended_changes(case, rank, rec["before"], rec["after"]))
        return out


def _key(check) -> str:
    """A finding's identity across stages: its check and counterexample."""
    import json

    return json.dumps([check.kind, check.name, check.counterexample], sort_keys=True,
                      default=str)


ADAPTER = EnginePipelineAdapter()
