"""Adapter for Paddle's legacy ``auto_parallel_amp`` (AMP O1).

The planner applies it before partition (``Parallelizer._apply_pre_optimization``,
``strategy.amp.level == "o1"``) to the serial program after backward and
before the optimizer is appended, under the programs' ``program_guard`` (the
pass reads ``paddle.static.default_main_program()``).  It casts each op's
float inputs to the low dtype or back to float32 as Paddle's white/black/gray
lists say, scales the loss by a loss-scaling variable, unscales the
parameter gradients (``check_finite_and_unscale``) and, with dynamic loss
scaling, updates the scale (``update_loss_scaling``).

An AMP program does not compute the original's values: the value check is
``verify/value/amp_rounding.py`` (the rewritten program equals the original
with ``round_<dtype>`` exactly where the lists imply, loss scale exact), and
the numeric check ``verify/numeric/amp_runs.py`` (the rewrite run with each
cast to the low dtype emulated by a rounding in float32, against the float32
original, within a tolerance from the dtype's unit roundoff and the rounding
chain).  Case params: ``amp_dtype`` (float16 / bfloat16), ``init_loss_scaling``
(default 32768.0), ``use_dynamic_loss_scaling`` (default True).
"""
from __future__ import annotations

import logging
import traceback

from .base import PassAdapter, PassRun


class AmpAdapter(PassAdapter):
    name = "auto_parallel_amp"
    short = "amp"
    paddle_modules = ("paddle.static.amp.fp16_lists", "paddle.static.amp.fp16_utils")

    def handles(self, case) -> bool:
        """Cases that state what this pass must do (built for it): the pass
        reads the dist context's grad-op map, which other families leave empty."""
        return super().handles(case) and self.name in case.expect

    def dtype(self, case) -> str:
        return case.params.get("amp_dtype", "float16")

    def attrs(self, case, rp) -> dict:
        p = case.params
        return {"dtype": self.dtype(case), "level": "o1",
                "init_loss_scaling": float(p.get("init_loss_scaling", 32768.0)),
                "use_dynamic_loss_scaling": bool(p.get("use_dynamic_loss_scaling", True)),
                "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
                "incr_ratio": 2.0, "decr_ratio": 0.8, "stop_update": False,
                "custom_white_list": [], "custom_black_list": [],
                "custom_black_varnames": [], "use_fp16_guard": False,
                "dist_context": rp.dist_context, "params_grads": list(rp.params_grads),
                "loss": rp.main.global_block().var(rp.loss), "input_data": []}

    def apply_local(self, case, rank: int) -> PassRun:
        """As the base, with the rank's programs as Paddle's default programs
        while the pass runs (the planner's ``program_guard``)."""
        from verify.ir.legacy_ir import paddle_module

        paddle = paddle_module()
        from paddle.distributed.passes import PassContext, new_pass

        original = self.build_original(case, rank)
        failure = {}

        def apply_pass(rp):
            logging.disable(logging.WARNING)
            try:
                with paddle.static.program_guard(rp.main, rp.startup):
                    new_pass(self.name, self.attrs(case, rp)).apply(
                        [rp.main], [rp.startup], PassContext())
                for prog in (rp.main, rp.startup):
                    prog.global_block()._sync_with_cpp()
            except (Exception, SystemExit) as exc:  # the pass's own bug: keep everything
                failure["tb"] = traceback.format_exc()
                failure["type"] = type(exc).__name__
                failure["oom"] = isinstance(exc, MemoryError)
            finally:
                logging.disable(logging.NOTSET)

        rewritten = case.build(rank, then=apply_pass)
        return PassRun(original, rewritten, failure.get("tb"), failure.get("type"),
                       out_of_memory=failure.get("oom", False))

    def pattern_present(self, snap) -> bool:
        """A forward op on Paddle's white list reading a float32 value."""
        from verify.value.amp_rounding import amp_lists
        from verify.value.semantics import dtype_name

        white = amp_lists("float16").white_list
        return any(op.type in white and op.role in (0, 256) and any(
            snap.var(n) is not None and dtype_name(snap.var(n).dtype) == "float32"
            for n in op.reads()) for op in snap.ops)

    def fired_check(self, case, rank, before, after):
        """As the base, judged on the main program: the pass always makes its
        loss-scaling variable in the startup (``_init_amp_var``), also where
        nothing is cast and the scale is a constant 1; a startup var the main
        program never reads changes no value."""
        from verify.ir.snapshot import ProgramSnapshot

        read = {n for op in after.ops for n in op.reads()}
        added = [op for op in after.startup_ops[len(before.startup_ops):]
                 if not set(op.writes()) & read]
        if added and after.startup_ops[:len(before.startup_ops)] == before.startup_ops:
            after = ProgramSnapshot(after.ops, after.vars, before.startup_ops,
                                    after.feeds, after.meta)
        res = super().fired_check(case, rank, before, after)
        if added:
            res.details["unread_startup_writes"] = sorted(n for op in added
                                                          for n in op.writes())
        return res

    def intended_changes(self, case, rank, before, after) -> dict:
        """Every value written by an op that reads a cast (or the loss scale)
        or that the pass inserted over an original name: their values are
        the original's with roundings, which the reaching-definition check
        cannot judge and the AMP value check does (op by op, every input)."""
        from verify.value.amp_rounding import pair_ops

        pairs = pair_ops(before, after)
        out = {}
        for op in after.ops:
            o = pairs.get(op.idx)
            if o is None or o.inputs != op.inputs:
                out.update({n: "AMP: a rounded or rescaled value (judged by the amp "
                               "rounding check)" for n in op.writes()})
        return out

    def value_checks(self, case, outcomes) -> list:
        """Rounding where the lists imply (``verify/value/amp_rounding.py``)."""
        from verify.value.amp_rounding import check_rank

        out = []
        for o in outcomes:
            rp = o.run.original if o.run is not None else None
            watched = (list(rp.fetches) + ([rp.loss] if rp.loss else [])) if rp else []
            out += check_rank(self.name, case.name, o.rank, o.before, o.after,
                              self.dtype(case), list(dict.fromkeys(watched)))
        return out

    def numeric_checks(self, case, outcomes, backends=("simulated",), seed=0, notes=None,
                       mutator=None):
        """The rounding-emulated run against the float32 original
        (``verify/numeric/amp_runs.py``): this CPU build has no float16 /
        bfloat16 matmul kernels, so the rewrite's casts are emulated."""
        from verify.numeric.amp_runs import amp_numeric_checks

        if notes is not None and "ranks" in backends:
            notes.append("ranks backend not run: the AMP program is one serial rank, run "
                         "in this process with its casts emulated in float32")
        return amp_numeric_checks(self.name, case, outcomes, self.dtype(case), seed=seed)


ADAPTER = AmpAdapter()
