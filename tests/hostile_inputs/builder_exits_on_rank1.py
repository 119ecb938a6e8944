"""A case file whose builder ends the process with os._exit(0) on rank 1
(tests/test_hostile_inputs.py): the run must report that case INCONCLUSIVE,
never end green without a report."""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import my_cases  # noqa: E402

_build = my_cases.column_parallel


def exiting(case, rank):
    if rank == 1:
        os._exit(0)
    return _build(case, rank)


CASES = [dataclasses.replace(my_cases.CASES[0], name="hostile_exit_col", builder=exiting)]
