"""What a numeric backend is asked to run, and what it returns.

Both backends (``simulated`` in one process, ``ranks`` as real processes
through Paddle's launcher) take the same :class:`RankSpec` per rank, so the
programs travel as serialized ProgramDesc and tensors as numpy arrays.

Per step k (0..steps-1) a backend feeds ``feeds[k]``, runs main once and then
reads every var in ``watch`` from the rank's scope (a var that does not
exist is simply absent from the result).
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass, field


@dataclass
class RankSpec:
    rank: int
    main: bytes  # ProgramDesc.serialize_to_string(), c_allreduce_sum translated
    startup: bytes
    params: dict  # name -> np.ndarray, set after startup for vars startup made
    feeds: list  # [ {name: np.ndarray} ] one dict per step
    watch: list  # var names to read after every step
    rings: dict = field(default_factory=dict)  # ring_id -> [[ranks]]

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(data: bytes) -> "RankSpec":
        return pickle.loads(data)


@dataclass
class RankResult:
    rank: int
    steps: list = field(default_factory=list)  # [ {name: np.ndarray} ]
    error: str | None = None  # traceback of the rank when it raised
    seconds: float = 0.0
    crashed: bool = False  # the rank's process died (a signal, an exit): no verdict
    waited: bool = False  # hung or abandoned (waiting on a peer that failed)


class BackendError(Exception):
    """A run that could not complete: a rank raised, hung or the collectives
    did not match; the message names the rank (``rank`` too, when one is to
    blame)."""

    def __init__(self, message, rank=None):
        super().__init__(message)
        self.rank = rank


class ProcessCrash(BackendError):
    """A run whose process died or overran (Paddle's executor may have
    crashed on the program): evidence neither way, so INCONCLUSIVE.
    The message's first line says why; a stack or log follows."""

    first_line_says_why = True


class UnsupportedJob(BackendError):
    """The job cannot run faithfully on this backend (e.g. two groups on one
    rank under gloo); the caller should call the check inconclusive."""


class ScheduleError(BackendError):
    """Ranks that cannot run their schedule to its end: collectives or
    sends/recvs that never meet (a rank would hang), a recv of another
    shape than its peer sent, a tensor sent and never received, a job
    reading a value no earlier job stored.  Unlike a crash this is a fact
    about the programs: a differential caller whose original ran may call
    it a difference."""


# A relation run whose serial (original) side ran and whose ranks' side
# failed returns ``(serial outputs, {RANKS_FAILURE: ranks_failure(...)})``:
# data, not an exception, so that it crosses the worker boundary saying that
# the original ran (``passes/planner.py`` makes it a finding).
RANKS_FAILURE = "ranks_failure"


def ranks_failure(exc: BaseException, phase: str) -> dict:
    """``{"rank", "phase", "error"}`` of the ranks' failure ``exc`` during
    ``phase`` (the ranks' startup programs, their steps, their job lists);
    ``error``: the message, then the traceback."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    text = str(exc)
    return {"rank": getattr(exc, "rank", None), "phase": phase,
            "error": (text if text.strip() else type(exc).__name__) + "\n" + tb}


def caught_ranks_failure(exc: BaseException) -> bool:
    """Whether a failure of the ranks' side is theirs to answer for (a rank
    raised, the schedule cannot complete), not a limit of the runner
    (:class:`UnsupportedJob`) nor a fault of the checker outside the runs."""
    return isinstance(exc, BackendError) and not isinstance(exc, UnsupportedJob)
