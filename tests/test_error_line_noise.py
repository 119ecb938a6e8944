"""``verdicts.error_line`` names what went wrong, not the warning a process
printed last: a planning process killed inside a stage leaves its last stderr
lines in the record (``verify/plan/crash_records.py``), and a generated plan
killed by SIGSEGV in the reshard stage was reported as ``warnings.warn(``."""
from __future__ import annotations

from verify.verdicts import error_line

KILLED = """the planning process was killed by SIGSEGV inside planner stage reshard (after serial, partition); its last error lines:
/x/paddle/utils/cpp_extension/extension_utils.py:712: UserWarning: No ccache found.
  warnings.warn(warning_message)
[2026-12-05 10:50:41,234] [    INFO] engine.py:1098 - Building model with 'to_static' method.
INFO 2026-12-05 10:50:41,235 helper.py:274] start to build program for mode = train.
WARNING 2026-12-05 10:50:44,187 helper.py:636] The startup_program is not built by `lazy init`.
/x/paddle/pir/math_op_patch.py:241: UserWarning: Tensor do not have 'place' interface.
  warnings.warn("""


def test_a_killed_process_record_names_the_kill_not_its_last_warning():
    assert error_line(KILLED).startswith("the planning process was killed by SIGSEGV "
                                         "inside planner stage reshard")


def test_an_exception_line_is_still_the_line_and_a_later_warning_does_not_hide_it():
    tb = ("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
          "    f()\nValueError: bad shape\n")
    assert error_line(tb) == "ValueError: bad shape"
    assert error_line(tb + "/x/y.py:3: UserWarning: w\n  warnings.warn(\n") == \
        "ValueError: bad shape"


def test_the_generate_failure_line_uses_it():
    from verify.generate.run import _error_line
    from verify.verdicts import CheckResult, Verdict

    c = CheckResult("pass", "after reshard", 0, Verdict.PASS_CRASHED, "m",
                    details={"traceback": KILLED})
    assert "killed by SIGSEGV" in _error_line(c)
