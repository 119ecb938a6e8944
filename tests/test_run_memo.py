"""Numeric runs remembered by their payload (``verify/numeric/run_memo.py``):
a byte-identical payload is not run again, any changed byte (a program, a
seeded value, the step count) runs, a failed run is not kept, and no caller
can alter what another gets."""
from __future__ import annotations

import numpy as np
import pytest

from verify.numeric import run_memo


def _payload(program=b"prog", value=1.0, steps=3):
    return ("run_exported_ranks", {0: {"exported": {"main": program},
                                       "params": {"w": np.full((2, 2), value, "float32")}}},
            {0: [[0, 1]]}, steps)


def test_same_payload_runs_once_a_changed_one_runs_again():
    run_memo.clear()
    calls = []

    def run():
        calls.append(1)
        return {0: [{"loss": np.array(float(len(calls)))}]}

    first = run_memo.remembered(_payload(), run)
    again = run_memo.remembered(_payload(), run)
    assert len(calls) == 1 and again[0][0]["loss"] == first[0][0]["loss"]
    for changed in (_payload(program=b"prog2"), _payload(value=1.0 + 1e-7), _payload(steps=2)):
        run_memo.remembered(changed, run)
    assert len(calls) == 4 and run_memo.STATS == {"hits": 1, "misses": 4}


def test_results_are_copies_and_failures_are_not_kept():
    run_memo.clear()
    got = run_memo.remembered(_payload(), lambda: {0: [{"loss": np.zeros(1)}]})
    got[0][0]["loss"][0] = 99.0  # a caller scribbling on its result
    assert run_memo.remembered(_payload(), lambda: None)[0][0]["loss"][0] == 0.0

    def boom():
        raise RuntimeError("executor crashed")

    with pytest.raises(RuntimeError):
        run_memo.remembered(_payload(program=b"bad"), boom)
    assert run_memo.remembered(_payload(program=b"bad"), lambda: "ran") == "ran"
