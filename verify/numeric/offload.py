"""Where the numeric layer's heavy runs happen.

The numeric checks run programs (the simulator, PIR runs, micro-step runs) and
re-apply a pass to a float32 twin; a crash of Paddle's executor there must
cost one application, not the run.  Which process runs them is the engine's
decision, not this layer's: ``verify/engine/isolation.py`` installs itself
here (:func:`install`) and sends each job to a worker when isolation is on.
With nothing installed every job runs in this process.
"""
from __future__ import annotations

import importlib

_RUNNER = None


def install(runner) -> None:
    """Route the jobs below to ``runner`` (an object with ``run_call``,
    ``run_simulated`` and ``run_pass`` of the same signatures)."""
    global _RUNNER
    _RUNNER = runner


def run_call(module: str, function: str, kwargs: dict, where: str, budgets: float = 1.0):
    """``module.function(**kwargs)``, a function of the suite; its result.
    ``budgets``: how many of the runner's per-job time budgets the job gets
    (a job whose work is a known multiple of one application's, e.g. one
    run per rank in lock step)."""
    if _RUNNER is not None:
        if budgets != 1.0:
            return _RUNNER.run_call(module, function, kwargs, where,
                                    timeout=_RUNNER.budget() * budgets)
        return _RUNNER.run_call(module, function, kwargs, where)
    return getattr(importlib.import_module(module), function)(**kwargs)


def run_simulated(specs: dict, where: str = "simulated") -> dict:
    """The simulator's run of ``specs`` (``simulated_ranks.run_simulated``)."""
    if _RUNNER is not None:
        return _RUNNER.run_simulated(specs, where)
    from .simulated_ranks import run_simulated as local

    return local(specs, where)


def run_pass(adapter, case, rank: int):
    """``adapter``'s pass applied to ``rank`` of ``case``: a ``PassRun``."""
    if _RUNNER is not None:
        return _RUNNER.run_pass(adapter, case, rank)
    from verify.ir.paddle_overlay import require_here

    require_here(f"{adapter.name} on case {case.name} rank {rank} (applied in process)")
    return adapter.apply_local(case, rank)
