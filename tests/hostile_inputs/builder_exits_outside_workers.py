"""A case file whose builder behaves in an isolation worker and ends the
process with os._exit(0) anywhere else (tests/test_hostile_inputs.py): the
exit guard of the run's process turns that into exit 2 with one line."""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import my_cases  # noqa: E402

_build = my_cases.column_parallel


def sly(case, rank):
    if "VERIFY_ISOLATION_PARENT" not in os.environ:
        os._exit(0)
    return _build(case, rank)


CASES = [dataclasses.replace(my_cases.CASES[0], name="hostile_sly_col", builder=sly)]
