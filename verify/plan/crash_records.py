"""Stage records of a planning process that was killed inside a stage.

A pass that aborts the process (3.3.1's VPP split raises SIGABRT from C++)
leaves no ``planner.json``: the recording wrapper never gets to write it.
Before each stage runs, the planning process names it in ``running.json``
(``stages.Capture.enter``); when the process then dies, the parent writes
the rank's records from that file: the stage running PASS_CRASHED with the
signal and the process's last error lines, the stages after it not run.
The stages it finished are named but not snapshotted (their programs died
with the process).
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

TRACE = "running.json"


def how_it_died(returncode: int) -> str:
    """``killed by SIGABRT`` for a negative return code, else ``exit N``."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


def write_killed(rank_dir: Path, returncode: int, stderr: str) -> bool:
    """Write ``rank_dir/planner.json`` for a process that died inside the stage
    its trace names; False (nothing written) when no stage was running."""
    from verify.plan.program_format import VERSION
    from verify.plan.stages import STAGES

    trace = Path(rank_dir) / TRACE
    if not trace.is_file():
        return False
    running = json.loads(trace.read_text())
    stage = running["stage"]
    tail = [ln for ln in (stderr or "").strip().splitlines() if ln.strip()][-12:]
    error = (f"the planning process was {how_it_died(returncode)} inside planner stage "
             f"{stage} (after {', '.join(running['done']) or 'no stage'}); its last "
             "error lines:\n" + "\n".join(tail))
    later = list(STAGES[STAGES.index(stage) + 1:]) if stage in STAGES else []
    record = {"stages": [{"stage": s, "error": None, "snapshot": None, "shapes": "global",
                          "lost": True} for s in running["done"]]
              + [{"stage": stage, "error": error, "snapshot": None, "shapes": "global"}],
              "not_run": [s for s in later if s in running.get("expected", later)],
              "serial_error": None, "version": VERSION, "gradient_merge": None,
              "killed": how_it_died(returncode)}
    (Path(rank_dir) / "planner.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    return True
