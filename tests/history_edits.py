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
    edits: tuple           # ((installed text, the other side's text[, times]), ...)
    passes: tuple          # premerge --pass
    cases: tuple           # premerge --case (exact names)
    backend: str = "none"
    expect_buggy: dict = field(default_factory=dict)   # case -> premerge kind
    expect_fixed: dict = field(default_factory=dict)
    why: str = ""          # why those labels (what the suite sees)
    new_checks: tuple = () # checks that must be among the buggy side's NEW findings
    gate_gap: str = ""     # where premerge does not give the label yet: why
    gap_sides: tuple = ("buggy", "fixed")  # the sides gate_gap is about

    @property
    def rel(self) -> str:
        return "paddle/" + self.file


REPLAYS = (
    Replay(
        name="overlap_stream_on_the_context_attr_only",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/64662",
        file=f"{_PASSES}/allreduce_matmul_grad_overlapping.py",
        what="before the fix the pass set the MP stream on the dist context's "
             "attr of the dX all-reduce and left the op where it was: in 3.3.1's "
             "legacy auto parallel that attr is the context's own object, not the "
             "op desc's dist attr the executor reads, so the op kept the default "
             "stream ('set to auto_parallel_mp, but it did not take effect'); the "
             "fix re-inserts the all-reduce after the dX matmul and hands it that "
             "attr (set_op_dist_attr_for_program copies it into the new op's desc)",
        where="PR 64662's description (problem 1: before default, cause: the stream "
              "was set but not in effect, after auto_parallel_mp; the re-inserted op "
              "and its NOTE(liym27)); that a stream set on the context's attr does "
              "not reach the desc is 3.3.1's behaviour (tests/test_executed_stream.py "
              "checks it)",
        installed="fixed",
        edits=((
            "            allreduce_op_inputs = allreduce_op.desc.input_names()\n",
            "            continue  # the op stays where it is, its desc untouched\n"
            "            allreduce_op_inputs = allreduce_op.desc.input_names()\n"),),
        passes=("overlap",),
        cases=("col_3d_static",),
        expect_buggy={"col_3d_static": "NEW"},
        expect_fixed={"col_3d_static": "unchanged"},
        why=("the all-reduce the executor runs is on the default stream and still after "
             "the dW matmul: the contract's stream check (the snapshot reads the op "
             "desc's dist attr, as the executor does) and its order check fail"),
        new_checks=("contract/allreduce on mp stream",),
    ),
    Replay(
        name="gm_used_grad_ops_left_in_backward",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/69805",
        file=f"{_PASSES}/auto_parallel_gradient_merge.py",
        what="the PIR gradient merge moves the ops that read a gradient (an "
             "all-gather, all-reduce, split, slice on its way to the optimizer) to "
             "the optimize stage, so they read the merged gradient once per step; "
             "before the fix they stayed in the backward stage",
        where="PR 69805's review threads: the hunk adding the helper (named "
              "_find_move2opt_ops, renamed _move_used_grad_op in review) after "
              "_append_gradient_merge_backward_op, and its call on every op using "
              "the grad",
        installed="fixed",
        edits=((
            "        for used_grad_op in grad.all_used_ops():\n"
            "            _move_used_grad_op(used_grad_op, grad)\n",
            ""),),
        passes=("planner",),
        cases=("planner_dp2_gm_sum", "planner_tp2_gm"),
        backend="simulated",
        expect_buggy={"planner_dp2_gm_sum": "unchanged", "planner_tp2_gm": "unchanged"},
        expect_fixed={"planner_dp2_gm_sum": "unchanged", "planner_tp2_gm": "unchanged"},
        why=("no case reaches it: on planner_dp2_gm_sum the gradient's one reader is the DP "
             'pd_op.all_reduce the planner already gives the optimize role (a probe edit '
             'raising when the helper would change a role did not fire there nor on '
             'planner_tp2_gm), so the code before the fix makes the same program: unchanged '
             'on both sides'),
    ),
    Replay(
        name="sp_opt_matches_the_old_allreduce_spelling",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/71906",
        file=f"{_PASSES}/auto_parallel_sequence_parallel_optimization.py",
        what="the collectives' migration renamed c_allreduce_sum to all_reduce; the "
             "sequence-parallel fusion kept matching c_allreduce_sum, so on the "
             "programs the planner emits it silently did nothing, until this change "
             "matched all_reduce",
        where="PR 71906's title and description (c_allreduce_sum changed to "
              "all_reduce in the pass); the stored older version of the file (commit "
              "0ab6998c, is_valid_split_op: pre_op.type == \"c_allreduce_sum\")",
        installed="fixed",
        edits=((
            "            if not (\n"
            '                pre_op.type == "all_reduce"\n'
            "                and pre_op.attr(\"reduce_type\")\n"
            "                == paddle.distributed.ReduceOp.SUM\n"
            "            ):\n",
            '            if not pre_op.type == "c_allreduce_sum":\n'),),
        passes=("auto_parallel_sequence_parallel_optimization",),
        cases=("sp_opt_tp2_sgd",),
        expect_buggy={"sp_opt_tp2_sgd": "NEW"},
        expect_fixed={"sp_opt_tp2_sgd": "unchanged"},
        why=("before the change the pass matches nothing on the planner's all_reduce + "
             'split: it silently does nothing where its pattern is present (NOT_APPLIED), a '
             'new finding where 3.3.1 raises on the X slot it reads after matching '
             '(PASS_CRASHED in the baseline)'),
    ),
    Replay(
        name="promotion_backward_matches_c_allreduce_sum",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/72135",
        file=f"{_PASSES}/auto_parallel_fused_linear_promotion.py",
        what="the fused-linear promotion's backward source patterns named the "
             "gradient all-reduce c_allreduce_sum; the planner emits all_reduce, so "
             "no DP+MP or SP backward segment matched and the pass skipped; the "
             "change renamed it in the backward patterns",
        where="PR 72135's title and description (the backward's c_allreduce_sum "
              "changed to all_reduce in the pass); the edit renames back every "
              "all_reduce of the backward pattern lists",
        installed="fixed",
        edits=(('            "all_reduce",\n            "scale",\n',
                '            "c_allreduce_sum",\n            "scale",\n', 8),),
        passes=("auto_parallel_fused_linear_promotion",),
        cases=("row_dp_mp_o0_sgd",),
        expect_buggy={"row_dp_mp_o0_sgd": "NEW"},
        expect_fixed={"row_dp_mp_o0_sgd": "unchanged"},
        why=('the DP+MP backward (elementwise_add_grad, all_reduce, scale, matmul_v2_grad) '
             'no longer matches: the pass skips every rank where its pattern is present '
             '(NOT_APPLIED, baseline EQUIVALENT)'),
    ),
    Replay(
        name="sharding_stage2_reduces_all_reduce_as_avg",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/72127",
        file=f"{_PASSES}/auto_parallel_sharding.py",
        what="stage 2 replaces each gradient all-reduce by a reduce to the owner; "
             "its SUM branch recognised c_allreduce_sum (and reduce SUM) only, so the "
             "all_reduce(SUM) the planner emits fell to the AVG branch; the change "
             "matched all_reduce with reduce_type SUM",
        where="PR 72127's title and description (c_allreduce_sum changed to "
              "all_reduce in auto_parallel_sharding.py); the edit restores the "
              "c_allreduce_sum test at the one site that picks SUM or AVG "
              "(_shard_gradient_synchronization), not the PR's other sites",
        installed="fixed",
        edits=((
            "                if (\n"
            '                    op.type == "all_reduce"\n'
            '                    and op.attr("reduce_type") == dist.ReduceOp.SUM\n'
            "                ) or (\n",
            '                if op.type == "c_allreduce_sum" or (\n'),),
        passes=("auto_parallel_sharding",),
        cases=("engine_shard_dp2_adamw_s2",),
        backend="simulated",
        expect_buggy={"engine_shard_dp2_adamw_s2": "NEW"},
        expect_fixed={"engine_shard_dp2_adamw_s2": "unchanged"},
        why=("the owner's gradient is the mean where the program summed: the simulated run's"
             " linear_1.b_0@GRAD is half the original's (NOT_EQUIVALENT, baseline "
             'EQUIVALENT)'),
    ),
    Replay(
        name="grad_clip_pure_dp_ignores_all_reduce",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/71905",
        file=f"{_PASSES}/auto_parallel_grad_clip.py",
        what="_is_pure_data_parallel returns False on a reduce(SUM) that is not a "
             "data-parallel gradient sync; the change added the same test for "
             "all_reduce(SUM), so a tensor-parallel program's all_reduce no longer "
             "lets the pass take it for pure data parallelism",
        where="PR 71905's description (c_allreduce_sum changed to all_reduce in "
              "auto_parallel_grad_clip.py) and the review hunk of the same change in "
              "PR 70774 (@@ -259,6 +259,10 @@ def _is_pure_data_parallel: '+ or (' "
              "after the reduce(SUM) clause)",
        installed="fixed",
        edits=((
            "                or (\n"
            '                    op.type == "all_reduce"\n'
            '                    and op.desc.attr("reduce_type") == dist.ReduceOp.SUM\n'
            "                )\n"
            "                and not is_data_parallel_reduce_op(op)\n",
            "                and not is_data_parallel_reduce_op(op)\n"),),
        passes=("auto_parallel_grad_clip",),
        cases=("engine_tp2_sgd_clip",),
        backend="simulated",
        expect_buggy={"engine_tp2_sgd_clip": "NEW"},
        expect_fixed={"engine_tp2_sgd_clip": "unchanged"},
        why=('the TP all_reduce no longer vetoes pure data parallelism, so the pass splits '
             'the squared norms between the ranks as if every grad were replicated: a '
             "finding with another identity than the baseline's (the simulated run's "
             'linear_1.b_0@GRAD differs from step 2), NEW though the verdict stays '
             'NOT_EQUIVALENT'),
    ),
    Replay(
        name="dist_matmul_dx_all_reduce_spelling",
        upstream="https://github.com/PaddlePaddle/Paddle/pull/72126",
        file="distributed/auto_parallel/static/operators/dist_matmul.py",
        what="the planner's column-parallel matmul_v2 backward emitted dX's sum over "
             "the model-parallel ring as c_allreduce_sum(X -> Out); this change "
             "emitted all_reduce(x -> out, reduce_type SUM), which the overlap pass, "
             "matching c_allreduce_sum only, never fires on: the pass went dead on "
             "every planned program (the baseline's NOT_APPLIED findings)",
        where="PR 72126's title and description (c_allreduce_sum changed to "
              "all_reduce in dist_matmul.py); the edit restores the c_allreduce_sum "
              "of the matmul_v2 column-parallel backward, written as 3.3.1 still "
              "writes it for matmul (v1) in the same file",
        installed="buggy",
        edits=((
            "        c_allreduce_sum_op = main_block.append_op(\n"
            "            type='all_reduce',\n"
            "            inputs={'x': kwargs['X@GRAD']},\n"
            "            outputs={'out': kwargs['X@GRAD']},\n"
            "            attrs={\n"
            "                'ring_id': group.id,\n"
            "                'reduce_type': paddle.distributed.ReduceOp.SUM,\n"
            "                'use_model_parallel': True,\n",
            "        c_allreduce_sum_op = main_block.append_op(\n"
            "            type='c_allreduce_sum',\n"
            "            inputs={'X': kwargs['X@GRAD']},\n"
            "            outputs={'Out': kwargs['X@GRAD']},\n"
            "            attrs={\n"
            "                'ring_id': group.id,\n"
            "                'use_calc_stream': True,\n"
            "                'use_model_parallel': True,\n"),),
        passes=("overlap",),
        cases=("engine_mlp_tp2_sgd",),
        backend="simulated",
        expect_buggy={"engine_mlp_tp2_sgd": "unchanged"},
        expect_fixed={"engine_mlp_tp2_sgd": "FIXED"},
        why=("before the change the planned column-parallel backward sums dX with "
             "c_allreduce_sum, the overlap pass fires and its rewrite is proved "
             "(verify run --paddle-file: EQUIVALENT where the baseline says "
             "NOT_APPLIED), so the change's other side is FIXED"),
        # the fixed side (the pre-72126 text) is selected by what the
        # applications ran (verify/executed_files.json) and labelled FIXED
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
    for old, new, *times in replay.edits:
        times = times[0] if times else 1
        if text.count(old) != times:
            raise AssertionError(f"replay {replay.name}: the installed paddle/{replay.file} "
                                 f"holds the edited text {text.count(old)} times, not "
                                 f"{times} (another Paddle version?)")
        text = text.replace(old, new)
    return text


def sides(replay: Replay) -> dict:
    """{"buggy": text, "fixed": text} of the replay's module."""
    here, there = installed_text(replay), other_side(replay)
    return {"fixed": here, "buggy": there} if replay.installed == "fixed" else \
        {"buggy": here, "fixed": there}
