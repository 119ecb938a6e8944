"""Mutants of the planner's own parts, made from the installed Paddle at test
time: each is one marked edit of an installed module (never a copy kept in
this project), written under its own file name so ``--paddle-file`` (the
premerge overlay) puts it in place of the installed module."""
from __future__ import annotations

from pathlib import Path

_STATIC = "distributed/auto_parallel/static"

# the 1/k scale loop of 3.3.1's _append_scale_op_before_comm (avg with an
# optimizer named neither sgd nor adam), inside its reverse walk of the block
_SCALE_LOOP = (
    "        for _, new_grad in new_params_to_grads:\n"
    "            new_grad = paddle._C_ops.scale_(new_grad, 1.0 / k_steps, 0.0, False)\n"
    "\n"
    "            scale_op = new_grad.get_defining_op()\n"
    "            scale_op.op_role = int(OpRole.Optimize)\n"
    "\n"
    "            full_op = scale_op.operand_source(1).get_defining_op()\n"
    "            assert full_op.name() == \"pd_op.full\", (\n"
    "                f\"The defining op of the scale value should be `pd_op.full`, but got "
    "{full_op.name()}\"\n"
    "            )\n"
    "            full_op.op_role = int(OpRole.Optimize)\n")

# name -> (module file under paddle/, installed text, mutant's text[, installed, mutant ...])
EDITS = {
    # the c_embedding pass gives mp rank r the start_index r * (V/mp + 1): rank 0's rows
    # right, rank 1's one row off
    "c_embedding_start_off": (
        "distributed/passes/auto_parallel_c_embedding.py",
        "        vocab_start_index = mp_rank * per_part_size\n",
        "        # MUTANT: every rank but the first looks its rows up one id too far\n"
        "        vocab_start_index = mp_rank * (per_part_size + 1)\n"),
    # the c_embedding pass raises while it replaces the lookup
    "c_embedding_raises": (
        "distributed/passes/auto_parallel_c_embedding.py",
        "        num_embeddings = op.operand(1).source().type().shape[0]\n",
        "        num_embeddings = op.operand(1).source().type().shape[0]\n"
        "        # MUTANT: the pass raises\n"
        "        raise ValueError(\"c_embedding mutant: refusing to replace the lookup\")\n"),
    # p_to_r all-reduces over every process of the job, not the partial mesh's group
    "p_to_r_world": (
        f"{_STATIC}/reshard_funcs/p_to_r_reshard_func.py",
        "        group = new_process_group(sorted(src_mesh.process_ids))\n",
        "        # MUTANT: reduced over every process of the job, not its mesh\n"
        "        group = new_process_group(\n"
        "            list(range(paddle.distributed.get_world_size()))\n"
        "        )\n"),
    # p_to_r raises: a planner stage that crashes
    "p_to_r_raises": (
        f"{_STATIC}/reshard_funcs/p_to_r_reshard_func.py",
        "    def reshard(self, src_dist_attr, dst_dist_attr, src_value, dst_type):\n"
        "        src_mesh = src_dist_attr.process_mesh\n",
        "    def reshard(self, src_dist_attr, dst_dist_attr, src_value, dst_type):\n"
        "        src_mesh = src_dist_attr.process_mesh\n"
        "        # MUTANT: the reshard function raises\n"
        "        raise RuntimeError(\"p_to_r mutant: refusing to reshard\")\n"),
    # p_to_r aborts the process (as a C++ check failing does): no Python
    # exception, no records written by the planning process itself
    "p_to_r_aborts": (
        f"{_STATIC}/reshard_funcs/p_to_r_reshard_func.py",
        "    def reshard(self, src_dist_attr, dst_dist_attr, src_value, dst_type):\n"
        "        src_mesh = src_dist_attr.process_mesh\n",
        "    def reshard(self, src_dist_attr, dst_dist_attr, src_value, dst_type):\n"
        "        src_mesh = src_dist_attr.process_mesh\n"
        "        # MUTANT: the process aborts inside the reshard stage\n"
        "        import os\n"
        "        os.abort()\n"),
    # r_to_s keeps the next rank's chunk instead of its own
    "r_to_s_neighbour": (
        f"{_STATIC}/reshard_funcs/r_to_s_reshard_func.py",
        "            if curr_global_rank == mesh.process_ids[-1]:\n"
        "                end = total_nums\n",
        "            if curr_global_rank == mesh.process_ids[-1]:\n"
        "                end = total_nums\n"
        "            # MUTANT: the rank keeps its neighbour's chunk\n"
        "            start = ((rank_relative + 1) % num_of_pieces) * piece_len\n"
        "            end = start + piece_len\n"),
    # s_to_r along a dim other than 0 concatenates the gathered pieces reversed
    "s_to_r_reversed": (
        f"{_STATIC}/reshard_funcs/s_to_r_reshard_func.py",
        "                concat_value = paddle._C_ops.concat(split_values, split_axis)\n"
        "                # fold builtin.split op and builtin.combine op\n",
        "                # MUTANT: the gathered pieces are concatenated in reverse order\n"
        "                concat_value = paddle._C_ops.concat(split_values[::-1], split_axis)\n",
        # (a reversed combine cannot be folded into the split's results)
        "                builtin_combine_op = concat_op.operand_source(\n"
        "                    0\n"
        "                ).get_defining_op()\n"
        "                concat_op.operand(0).set_source(pd_split_op.result(0))\n"
        "                builtin_combine_op.erase()\n"
        "                builtin_split_op.erase()\n",
        ""),
    # partition reads a Partial operand as it is (no reshard to what the op needs)
    "partition_keeps_partial": (
        f"{_STATIC}/pir_pass.py",
        "            prev_var = operand.source()\n"
        "            if prev_var.is_combine():\n",
        "            prev_var = operand.source()\n"
        "            # MUTANT: an operand whose value is partial is read as it is\n"
        "            if (\n"
        "                not prev_var.is_combine()\n"
        "                and prev_var.is_dist()\n"
        "                and prev_var.dist_attr().partial_status\n"
        "            ):\n"
        "                continue\n"
        "            if prev_var.is_combine():\n"),
    # the remove stage keeps the ops of a sub-mesh the rank is not in
    "remove_keeps_other_rank_op": (
        f"{_STATIC}/pir_pass.py",
        "                    and cur_rank not in op.dist_attr.process_mesh.process_ids\n"
        "                ):\n"
        "                    op.erase()\n",
        "                    and cur_rank not in op.dist_attr.process_mesh.process_ids\n"
        "                ):\n"
        "                    # MUTANT: another rank's op is kept\n"
        "                    continue\n"),
    # the remove stage drops, on every rank, a one-process sub-mesh's ops whose
    # results are unused (the optimizer's in-place updates of the head): the
    # parameters stay, nothing updates them or reads their gradients
    "remove_drops_sub_mesh_updates": (
        f"{_STATIC}/pir_pass.py",
        "                if (\n"
        "                    op.dist_attr\n"
        "                    and cur_rank not in op.dist_attr.process_mesh.process_ids\n"
        "                ):\n"
        "                    op.erase()\n",
        "                # MUTANT: a one-process sub-mesh's ops with unused results are dropped\n"
        "                if (\n"
        "                    op.dist_attr\n"
        "                    and len(op.dist_attr.process_mesh.process_ids) == 1\n"
        "                    and all(v.use_empty() for v in op.results())\n"
        "                ):\n"
        "                    op.erase()\n"
        "                    continue\n"
        "                if (\n"
        "                    op.dist_attr\n"
        "                    and cur_rank not in op.dist_attr.process_mesh.process_ids\n"
        "                ):\n"
        "                    op.erase()\n"),
    # the gradient merge's avg scale is left out: the optimizer reads the sum of
    # the k micro-batch gradients where the strategy asks for their mean
    "gm_no_avg_scale": (
        "distributed/passes/auto_parallel_gradient_merge.py",
        "        _insert_scale_op_after(target_value, optimizer_op, 1.0 / k_steps)\n",
        "        # MUTANT: the merged gradient is not averaged\n"
        "        _insert_scale_op_after(target_value, optimizer_op, 1.0)\n"),
    # NOT a mutant: the scale loop mended (moved out of the walk, as
    # tests/fixed_passes/gradient_merge_scale_mended.py does for the pass's own
    # cases): each accumulator scaled in place once, after the last backward op,
    # before the optimizer that reads it by its keyword
    "gm_scale_mended": (
        "distributed/passes/auto_parallel_gradient_merge.py",
        "            break\n" + _SCALE_LOOP,
        "            break\n    # MENDED: the scale loop after the walk, not inside it\n" +
        "".join(ln[4:] if ln.startswith("    ") else ln
                for ln in _SCALE_LOOP.splitlines(keepends=True))),
    # the accumulators are never zeroed after the update: the second optimizer
    # step merges the first step's gradients again
    "gm_never_zeroed": (
        "distributed/passes/auto_parallel_gradient_merge.py",
        "        # reset gradient merge var to zero after finishing optimization\n",
        "        # MUTANT: the accumulator is never zeroed\n"
        "        new_params_grads.append((param, new_gradient_merge_var))\n"
        "        continue\n"),
    # FThenB runs every backward job on micro-batch 0: micro-batch 0's gradients
    # accumulated twice, micro-batch 1's never (its sends and recvs still pair)
    "fthenb_backward_micro0": (
        "distributed/passes/pipeline_scheduler_pass/pipeline_fthenb.py",
        "            backward_job = core.Job(self.BACKWARD)\n"
        "            backward_job.set_micro_batch_id(i)\n",
        "            backward_job = core.Job(self.BACKWARD)\n"
        "            # MUTANT: every backward job on micro-batch 0\n"
        "            backward_job.set_micro_batch_id(0)\n"),
    # 1F1B's cool-down phase drops its send_backward jobs: the last stage never
    # sends those gradients back, the stage before waits for them forever
    "1f1b_no_cooldown_send": (
        "distributed/passes/pipeline_scheduler_pass/pipeline_1f1b.py",
        "            send_bwd_job.set_micro_batch_id(backward_micro_batch_id)\n"
        "            job_list.append(send_bwd_job)\n\n"
        "            backward_micro_batch_id += 1\n",
        "            send_bwd_job.set_micro_batch_id(backward_micro_batch_id)\n"
        "            # MUTANT: the cool-down's send_backward job is dropped\n\n"
        "            backward_micro_batch_id += 1\n"),
    # the remove stage drops the last parameter's initialisation from each
    # rank's startup program: the main program reads a parameter no startup
    # made ("Cannot find ... in scope"), although the serial program runs
    "remove_drops_startup_param": (
        f"{_STATIC}/pir_pass.py",
        "        # 3. dead code elimination\n",
        "        # MUTANT: the last parameter's initialisation is dropped\n"
        "        sets = [op for op in startup_program.global_block().ops\n"
        "                if op.name() == \"builtin.set_parameter\"]\n"
        "        if sets:\n"
        "            sets[-1].erase()\n"
        "        # 3. dead code elimination\n"),
    # r_to_p keeps the value on every rank but global rank 0, which it zeroes:
    # the Partial(sum) of the pieces is another value (a wrong piece, well typed)
    "r_to_p_zeroes_rank0": (
        f"{_STATIC}/reshard_funcs/r_to_p_reshard_func.py",
        "            and local_rank != 0\n",
        "            # MUTANT: rank 0 zeroed, the others keep the value\n"
        "            and local_rank == 0\n"),
    # a cross-mesh reshard's send is addressed to the sending rank itself:
    # the receiving rank waits for a tensor nobody sends it (a deadlock)
    "p2p_send_to_itself": (
        f"{_STATIC}/reshard_funcs/same_status_reshard_func.py",
        "                    comm_group.ranks.index(dst),\n",
        "                    # MUTANT: the send is addressed to the sender itself\n"
        "                    comm_group.ranks.index(src),\n"),
    # the scheduler's cross-job event recorded without force_record_event:
    # the attrs still name the event, but PIR's interpreter records an event
    # only for an op whose force_record_event is true, so the next job's
    # reader waits for nothing while the recv may still be writing
    "sched_record_not_forced": (
        "distributed/passes/pipeline_scheduler_pass/pipeline_pass_base.py",
        "            recorder_op.set_bool_attr(\"force_record_event\", True)\n",
        "            # MUTANT: the event is named, its recording not forced\n"
        "            recorder_op.set_bool_attr(\"force_record_event\", False)\n"),
    # recompute: a relu's output is replaced, in the backward, by the recomputed
    # value of its input (the pre-activation): the relu's grad and the matmul's
    # weight grad read the wrong recomputed value
    "recompute_reads_pre_activation": (
        "distributed/passes/auto_parallel_recompute_pir.py",
        "                rc_value = value_map.look_up(ori_value)\n",
        "                rc_value = value_map.look_up(ori_value)\n"
        "                # MUTANT: a relu's output stands for the recomputed input\n"
        "                d = ori_value.get_defining_op()\n"
        "                if d.name() == \"pd_op.relu\":\n"
        "                    rc_value = value_map.look_up(d.operand_source(0))\n"),
    # recompute: the clones are made but the backward keeps reading the forward
    # activations (the values are right; the memory recompute exists to save is not)
    "recompute_keeps_activations": (
        "distributed/passes/auto_parallel_recompute_pir.py",
        "                ori_value.replace_grad_users_with(rc_value, set(bwd_ops))\n",
        "                # MUTANT: the backward keeps reading the forward values\n"
        "                pass\n"),
    # eliminate_transpose_by_reshape replaces every dim-0/dim-1 swap by a
    # reshape, whether or not one of the swapped dims is 1 (elements move)
    "eliminate_transpose_any_dims": (
        f"{_STATIC}/pir_pass.py",
        "            if perm == expected_perm and (\n"
        "                var.shape[0] == 1 or var.shape[1] == 1\n"
        "            ):\n",
        "            # MUTANT: the size-1 condition is dropped\n"
        "            if perm == expected_perm:\n"),
    # fuse_attention_ffn_qkv_pass hands the fused projection's k part to the
    # readers of v and the v part to the readers of k
    "ffn_qkv_k_v_swapped": (
        f"{_STATIC}/pir_pass.py",
        "        reshape_k.result(0).replace_all_uses_with(out_k)\n"
        "        reshape_v.result(0).replace_all_uses_with(out_v)\n",
        "        # MUTANT: k's readers get v's part and v's readers k's\n"
        "        reshape_k.result(0).replace_all_uses_with(out_v)\n"
        "        reshape_v.result(0).replace_all_uses_with(out_k)\n"),
    # fuse_attention_ffn_qkv_pass hands fuse_param_func the q/k/v parameters
    # as q, v, k: the fused weight's k and v parts swapped, the program not
    "ffn_qkv_fused_k_v_parts_swapped": (
        f"{_STATIC}/pir_pass.py",
        "                                obj._local_value()\n"
        "                                for obj in concated_dy_param_list\n",
        "                                # MUTANT: q, v, k\n"
        "                                obj._local_value()\n"
        "                                for obj in ([concated_dy_param_list[i] for i in "
        "(0, 2, 1)] if is_qkv else concated_dy_param_list)\n"),
    # ... hands it q, q, v: k's columns in no fused column, q's twice
    "ffn_qkv_fused_q_twice": (
        f"{_STATIC}/pir_pass.py",
        "                                obj._local_value()\n"
        "                                for obj in concated_dy_param_list\n",
        "                                # MUTANT: q, q, v\n"
        "                                obj._local_value()\n"
        "                                for obj in ([concated_dy_param_list[i] for i in "
        "(0, 0, 2)] if is_qkv else concated_dy_param_list)\n"),
    # NOT a mutant: r_to_p mended, the value kept on the mesh's first process (not
    # where the global rank is 0): planner_gen_r_to_p_rank0's defect gone
    "r_to_p_mesh_first": (
        f"{_STATIC}/reshard_funcs/r_to_p_reshard_func.py",
        "            and local_rank != 0\n",
        "            # MENDED: zeros off the mesh's first process, not off global rank 0\n"
        "            and local_rank != dst_mesh.process_ids[0]\n"),
}


def write(name: str, dest: Path) -> Path:
    """The mutant ``name`` as a file ``dest/<name>/<module file name>``: the
    installed module's text with the one edit (which must match exactly once)."""
    import paddle

    rel, *pairs = EDITS[name]
    src = Path(paddle.__file__).resolve().parent / rel
    text = src.read_text()
    for old, new in zip(pairs[::2], pairs[1::2]):
        if text.count(old) != 1:
            raise AssertionError(f"mutant {name}: the installed {rel} holds the edited text "
                                 f"{text.count(old)} times, not once (another Paddle version?)")
        text = text.replace(old, new)
    out = Path(dest) / name / src.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# MUTANT {name} of the installed paddle/{rel}\n" + text)
    return out
