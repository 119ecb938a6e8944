"""Paddle's public history as test cases: real upstream changes to files the
suite covers, each expressed as an edit of the installed 3.3.1 module made at
test time (never a copy of Paddle's file kept here), with the pull request
that made the change named.

A replay has two sides.  ``installed`` says which of them 3.3.1 is:

* ``"fixed"``: 3.3.1 already holds the fix; ``edits`` turn the installed text
  back into the code before the fix (the buggy side);
* ``"buggy"``: 3.3.1 predates the fix; ``edits`` apply it (the fixed side).

The buggy side's code is reconstructed from the pull request's description
and the diff hunks of its review threads (``where``): the lines the fix
changed, written against 3.3.1's text, not the whole file of that time.

``expect_buggy`` / ``expect_fixed`` are what ``python -m verify premerge``
must say for each selected case, comparing with ``verify/baseline.json`` (the
installed Paddle's): the side that *is* 3.3.1 is the baseline, so premerge on
it (the installed text overlaid) says ``unchanged``; the other side says
``NEW`` (a buggy change) or ``FIXED`` (a fix), or ``unchanged`` where no case
reaches the code the change touches (stated in ``why``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

_PASSES = "distributed/passes"


@dataclass(frozen=True)
class Replay:
    name: str
    upstream: str          # the pull request (URL) that made the change
    file: str              # the module under paddle/
    what: str              # what the change did, in one sentence
    where: str             # where the buggy side's text comes from
    installed: str         # "fixed" or "buggy": which side 3.3.1 is
    edits: tuple           # ((installed text, the other side's text), ...)
    passes: tuple          # premerge --pass
    cases: tuple           # premerge --case (exact names)
    backend: str = "none"
    expect_buggy: dict = field(default_factory=dict)   # case -> premerge kind
    expect_fixed: dict = field(default_factory=dict)
    why: str = ""          # why those labels (what the suite sees)
    slow: bool = False     # a planner run: minutes, not seconds

    @property
    def rel(self) -> str:
        return "paddle/" + self.file


REPLAYS = (
    Replay(
        name="overlap_stream_on_the_removed_op",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/64662",
        file=f"{_PASSES}/allreduce_matmul_grad_overlapping.py",
        what="the split dX all-reduce is re-inserted after the first matmul as a new "
             "op; before the fix the MP stream was set on the original op's dist "
             "attr, which is then removed, so the op that runs kept the default "
             "stream ('set to auto_parallel_mp, but it did not take effect'); the "
             "fix takes the dist attr, sets the stream on it and gives it to the "
             "new op",
        where="PR 64662's description (problem 1: before default, cause: the stream "
              "was set but not in effect, after auto_parallel_mp)",
        installed="fixed",
        edits=((
            "            allreduce_op_dist_attr = (\n"
            "                self.dist_context.get_op_dist_attr_for_program(allreduce_op)\n"
            "            )\n"
            "            allreduce_op_dist_attr.execution_stream = (\n"
            "                AutoParallelStreamType.MP_STREAM.value\n"
            "            )\n",
            "            allreduce_op.dist_attr.execution_stream = (\n"
            "                AutoParallelStreamType.MP_STREAM.value\n"
            "            )\n"
            "            allreduce_op_dist_attr = (\n"
            "                self.dist_context.get_op_dist_attr_for_program(allreduce_op)\n"
            "            )\n"
        ), (
            "            self.dist_context.set_op_dist_attr_for_program(\n"
            "                allreduce_op, allreduce_op_dist_attr\n"
            "            )\n"
            "            # Remove the original allreduce op\n",
            "            # Remove the original allreduce op\n"),
        ),
        passes=("overlap",),
        cases=("col_3d_static",),
        expect_buggy={"col_3d_static": "NEW"},
        expect_fixed={"col_3d_static": "unchanged"},
        why="the all-reduce that runs computes on the default stream: no overlap, "
            "the contract of the pass (the dX all-reduce on the MP stream) fails",
    ),
)

BY_NAME = {r.name: r for r in REPLAYS}


def installed_text(replay: Replay) -> str:
    import paddle

    return (Path(paddle.__file__).resolve().parent / replay.file).read_text()


def other_side(replay: Replay) -> str:
    """The installed module's text with the replay's edits (each must match
    the installed text exactly once: another Paddle version fails loudly)."""
    text = installed_text(replay)
    for old, new in replay.edits:
        if text.count(old) != 1:
            raise AssertionError(f"replay {replay.name}: the installed paddle/{replay.file} "
                                 f"holds the edited text {text.count(old)} times, not once "
                                 "(another Paddle version?)")
        text = text.replace(old, new)
    return text


def sides(replay: Replay) -> dict:
    """{"buggy": text, "fixed": text} of the replay's module."""
    here, there = installed_text(replay), other_side(replay)
    return {"fixed": here, "buggy": there} if replay.installed == "fixed" else \
        {"buggy": here, "fixed": there}
