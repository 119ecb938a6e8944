"""What a pass adapter is: how to run one Paddle pass on a case, and what the
pass must have done (its contract), judged on snapshots."""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass

from verify.ir.legacy_ir import paddle_module
from verify.verdicts import CheckResult, Verdict


@dataclass
class PassRun:
    """One rank's pass application: live programs, and the exception if any."""

    original: object  # cases.RankProgram, never touched by the pass
    rewritten: object  # cases.RankProgram the pass was applied to
    error: str | None = None  # traceback text when the pass raised
    error_type: str | None = None
    # One line when the pass's worker process timed out, exited, was killed
    # by a signal or hit its memory limit (verify/engine/isolation.py); the stack or
    # log is in ``error`` and ``rewritten`` is then an unrewritten build.
    crash: str | None = None
    out_of_memory: bool = False  # the pass raised MemoryError (its worker is then replaced)
    # One line when the worker died of something outside the pass and the
    # checker (killed from outside twice): the application is INCONCLUSIVE
    environment: str | None = None


class PassAdapter:
    """Base of the adapters in this package; one subclass per pass."""
    # may the engine apply this pass in an isolation worker process?
    isolated = True

    name: str = ""  # the Paddle registration name
    short: str = ""  # short name for test ids and markers
    ir: str = "legacy"  # the IR of the programs the pass rewrites: "legacy" or "pir"
    # Paddle modules the application runs besides the one registering
    # ``name`` (``verify premerge`` reruns the adapter when their import
    # closure changed; verify/premerge/affected.py reads this with ast, so
    # keep it a literal tuple of strings).
    paddle_modules: tuple = ()
    planner_family: bool = False  # rerun by premerge when Paddle's planner changed

    def handles(self, case) -> bool:
        """Whether this pass is applied to ``case`` at all: only cases of its
        own IR are paired with it (the matrix, the gate and the baseline
        hold no pass x case of different IRs).  A case whose
        ``params["only_pass"]`` names a pass is paired with that one only
        (e.g. the ``engine_pipeline`` family, whose application is a pipeline)."""
        only = (getattr(case, "params", None) or {}).get("only_pass")
        return self.ir == getattr(case, "ir", "legacy") and only in (None, self.name)

    def attrs(self, case, rp) -> dict:
        """The pass attrs for ``rp`` (a RankProgram of ``case``)."""
        raise NotImplementedError

    # -- where the pass code comes from (verify/ir/pass_sources.py) ---------------
    def tested_passes(self) -> tuple:
        """Names of the passes under test that this adapter takes from
        Paddle's Python pass registry (``new_pass`` or a class lookup); a
        ``--pass-file`` registering one of them replaces it on every path."""
        return (self.name,)

    def preceding_passes(self) -> tuple:
        """Names of the registry passes :meth:`preceding` may apply first."""
        return ()

    def python_passes(self) -> tuple:
        """Every registry name this adapter looks up."""
        return tuple(self.tested_passes()) + tuple(self.preceding_passes())

    def native_passes(self) -> tuple:
        """C++ passes this adapter applies (``paddle.pir.PassManager``):
        no Python file can replace them."""
        return ()

    def apply_local(self, case, rank: int) -> PassRun:
        """Apply the registered pass of this name to a fresh build of ``rank``.

        The original is a second, identical build, so the pass cannot touch
        it.  An exception inside the pass is captured with its traceback;
        the half-rewritten program stays in ``rewritten``.
        """
        paddle_module()
        from paddle.distributed.passes import PassContext, new_pass

        original = self.build_original(case, rank)
        failure = {}

        def apply_pass(rp):
            # Paddle's passes log every match at INFO/WARNING on their own
            # handlers; what they say is reported by the contract checks.
            logging.disable(logging.WARNING)
            context = PassContext()
            try:
                self.apply_preceding(case, rp, context)
                p = new_pass(self.name, self.attrs(case, rp))
                p.apply([rp.main], [rp.startup], context)
                for prog in (rp.main, rp.startup):
                    prog.global_block()._sync_with_cpp()
            except (Exception, SystemExit) as exc:  # the pass's own bug: keep everything
                failure["tb"] = traceback.format_exc()
                failure["type"] = type(exc).__name__  # for display
                failure["oom"] = isinstance(exc, MemoryError)
            finally:
                logging.disable(logging.NOTSET)

        rewritten = case.build(rank, then=apply_pass)
        return PassRun(original, rewritten, failure.get("tb"), failure.get("type"),
                       out_of_memory=failure.get("oom", False))

    def preceding(self, case, rp) -> list:
        """``[(pass name, attrs)]`` the planner applies before this pass in
        the same ``PassContext`` and that this pass depends on (e.g. the
        dependencies pass acts only after sharding).  The adapter's original
        program is the case's program after them (:meth:`build_original`);
        the pass under test is applied after them in the same context."""
        return []

    def apply_preceding(self, case, rp, context) -> None:
        """Apply :meth:`preceding` (installed passes) to ``rp`` in ``context``."""
        from paddle.distributed.passes import new_pass

        for name, attrs in self.preceding(case, rp):
            new_pass(name, attrs).apply([rp.main], [rp.startup], context)

    def build_original(self, case, rank: int):
        """The program the pass is applied to: the case's, after :meth:`preceding`."""
        paddle_module()
        from paddle.distributed.passes import PassContext

        def then(rp):
            logging.disable(logging.WARNING)
            try:
                self.apply_preceding(case, rp, PassContext())
            finally:
                logging.disable(logging.NOTSET)

        return case.build(rank, then=then if self.preceding.__func__ is not
                          PassAdapter.preceding else None)

    def pattern_present(self, snap) -> bool:
        """Whether ``snap`` (an original program) holds the pattern this pass
        exists for, by a matcher written from the pass's documented pattern,
        never from its code.  The suite's tests compare it with each case's
        declared ``fires``."""
        raise NotImplementedError

    def contract(self, case, rank, before, after) -> list:
        """Contract checks on snapshots; subclasses extend :meth:`fired_check`."""
        return [self.fired_check(case, rank, before, after)]

    def intended_changes(self, case, rank, before, after) -> dict:
        """Reads whose reaching definition the pass changes on purpose:
        ``{var name: reason}``.  Checks of reaching definitions accept these."""
        return {}

    def renames(self, case, rank, before, after) -> dict:
        """``{original var: rewritten var}`` for values the pass moved to a
        new name (a watched output keeps being compared under it)."""
        from verify.ir.renames import consumer_renames

        return consumer_renames(before, after)

    def unobserved(self, case, rank, before, after) -> dict:
        """``{var: reason}``: values the rewrite leaves stale on purpose on
        ``rank`` (no reader is left; e.g. a gradient reduced to another rank).
        The value and numeric checks drop one only where
        ``verify/ir/dead_values.py`` confirms it is dead in ``after``."""
        return {}

    def predict(self, case, rank, before) -> list:
        """Static predictions made from the original alone (e.g. the shapes
        the pass will build); a list of advisory CheckResults."""
        return []

    # -- shared contract pieces -----------------------------------------
    def fired_check(self, case, rank, before, after) -> CheckResult:
        """NOT_APPLIED where the pattern is present and nothing changed;
        CONTRACT_BROKEN where it is absent and the program changed."""
        from verify.ir.snapshot import changed

        present = self.pattern_present(before)
        fired = changed(before, after)
        name = "fired" if present else "left alone"
        details = {"fired": fired, "pattern_present": present}
        if present and not fired:
            return CheckResult("contract", name, rank, Verdict.NOT_APPLIED,
                               f"{self.name} did nothing on case {case.name} rank {rank}, "
                               "where its pattern is present", details=details)
        if not present and fired:
            return CheckResult("contract", name, rank, Verdict.CONTRACT_BROKEN,
                               f"{self.name} rewrote case {case.name} rank {rank}, "
                               "where its pattern is absent",
                               counterexample={"rank": rank, "ops_before": len(before.ops),
                                               "ops_after": len(after.ops)},
                               details=details)
        msg = "the pass fired on its pattern" if fired else \
            "pattern absent; the pass left the program alone, as it must"
        return CheckResult("contract", name, rank, Verdict.EQUIVALENT, msg, details=details)


class PirPassAdapter(PassAdapter):
    """Base of the adapters of PIR passes: programs cross process borders
    (isolation workers) in PIR's own serialization with their value names."""

    ir = "pir"

    def export_rewritten(self, rp) -> dict:
        """The rewritten programs as PIR's own serialization, and the value
        names of main by position (op index, result index)."""
        import paddle

        from verify.ir.pir_snapshot import export_programs

        with paddle.pir_utils.IrGuard():
            return export_programs(rp.main, rp.startup, rp.names)

    def import_rewritten(self, fresh, exported):
        """A RankProgram from :meth:`export_rewritten` and a fresh build:
        its programs deserialized on first read (a rewrite whose snapshot
        the caches hold by its stamp is never deserialized)."""
        import dataclasses

        import paddle

        from cases.pir_matmul_grad import LazyPirRankProgram, PirRankProgram
        from verify.ir.pir_snapshot import import_programs

        def load():
            with paddle.pir_utils.IrGuard():
                return import_programs(exported)

        if type(fresh) in (PirRankProgram, LazyPirRankProgram):
            fields = {f.name: getattr(fresh, f.name) for f in dataclasses.fields(fresh)
                      if f.init and f.name not in ("main", "startup", "names")}
            return LazyPirRankProgram(load, **fields)
        main, startup, names = load()
        return dataclasses.replace(fresh, main=main, startup=startup, names=names)

    def rewrite_clone(self, case, rank: int, rewrite) -> PassRun:
        """Build ``rank`` of ``case`` and call ``rewrite(main)`` on a clone of
        its main program (the pass); a raise is kept as the pass's crash,
        with the program as the pass left it."""
        import dataclasses

        import paddle

        original = case.build(rank)
        tb = etype = None
        oom = False
        with paddle.pir_utils.IrGuard():
            main = original.main.clone()
            startup = original.startup.clone()
            names = original.names.carried(original.main, main)
            try:
                rewrite(main)
            except (Exception, SystemExit) as exc:  # the pass's bug: keep the program
                tb, etype = traceback.format_exc(), type(exc).__name__
                oom = isinstance(exc, MemoryError)
        rewritten = dataclasses.replace(original, main=main, startup=startup, names=names)
        return PassRun(original, rewritten, tb, etype, out_of_memory=oom)


class NativePirPassAdapter(PirPassAdapter):
    """Base of the adapters of C++ PIR passes: applied by name with
    ``paddle.pir.PassManager`` to a clone of the rank's main program (no
    Python pass file can replace them; a raise is kept as the pass's crash)."""

    def attrs(self, case, rp) -> dict:
        return {}

    def tested_passes(self) -> tuple:
        return ()  # nothing from Python's registry: the pass is C++

    def native_passes(self) -> tuple:
        return (self.name,)

    def apply_local(self, case, rank: int) -> PassRun:
        def run(main):
            import paddle

            from verify.ir.pass_sources import note_native

            note_native(self.name)
            pm = paddle.pir.PassManager()
            pm.add_pass(self.name, {})
            pm.run(main)
        return self.rewrite_clone(case, rank, run)


def pass_file_refusal(loaded, selected, every) -> str | None:
    """Why ``loaded`` (a LoadedPassFile) cannot be judged with the adapters
    ``selected`` (of ``every`` adapter), in one line; None when it can.

    A file registering a C++ pass's name would be accepted by Python and
    never run; a file whose passes no selected adapter applies would leave
    the installed passes judged under the file's name."""
    names = set(loaded.registered)
    for a in every:
        native = names & set(a.native_passes())
        if native:
            n = sorted(native)[0]
            return (f"{loaded.path} registers {n}, a C++ pass ({a.short} applies it with "
                    "paddle.pir.PassManager): a Python pass file cannot replace it; "
                    "test a change to it with a build of Paddle")
    if not any(names & set(a.python_passes()) for a in selected):
        return (f"{loaded.path} registers {sorted(names)}, which none of the selected "
                f"adapters ({', '.join(a.short for a in selected) or 'none'}) applies")
    return None


def pairs(adapters, cases) -> list:
    """``[(adapter, case)]`` of every adapter with every case of its IR."""
    return [(a, c) for a in adapters for c in cases if a.handles(c)]


def finding(name, rank, message, **cex) -> CheckResult:
    """A CONTRACT_BROKEN result with a counterexample: the pass did not do
    what it exists for (values are judged by the value and numeric checks)."""
    return CheckResult("contract", name, rank, Verdict.CONTRACT_BROKEN, message,
                       counterexample=dict(rank=rank, **cex))


def holds(name, rank, message) -> CheckResult:
    return CheckResult("contract", name, rank, Verdict.EQUIVALENT, message)
