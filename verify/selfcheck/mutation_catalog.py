"""Pass-level mutants: real Paddle passes with one injected bug each.

Each entry is ``(file, pass name, case name, description)``: ``file`` (relative
to the repository root) is a pass module loaded with ``--pass-file`` (it
subclasses the installed pass and re-registers it under the same name);
``case`` is one on which the real pass is EQUIVALENT (``verify/baseline.json``)
and fires, so a mutant that is not caught there is a gap of the checker.
``tests/test_pass_mutants.py`` states which check must catch each one.

``tests/mutants/overlap_raises.py`` and ``registers_nothing.py`` are fixtures
of the command-line tests (a crashing pass, a file that is no pass), not
mutants of a rewrite, and are not listed.
"""
from __future__ import annotations

OVERLAP = "allreduce_matmul_grad_overlapping"
PROMOTION = "auto_parallel_fused_linear_promotion"

PASS_MUTANTS = [
    ("tests/mutants/overlap_stream_dropped.py", OVERLAP, "col_3d_static",
     "the split allreduce is left on the default (calculation) stream"),
    ("tests/mutants/overlap_wrong_insert_index.py", OVERLAP, "col_3d_static",
     "the new allreduce is inserted after the dY matmul instead of right after "
     "the dX matmul"),
    ("tests/mutants/overlap_removes_wrong_op.py", OVERLAP, "col_3d_static",
     "off by one in the removal: the original allreduce stays (dX allreduced "
     "twice) and the op after it (the weight's sgd) is deleted"),
    ("tests/mutants/overlap_dy_after_allreduce.py", OVERLAP, "col_cast_window",
     "older behaviour: the dY matmul and its reshapes go after the window ops, "
     "so the window's cast reads Y@GRAD before it is written"),
    ("tests/mutants/promotion_bias_every_rank.py", PROMOTION, "row_mp_o0_sgd_tp2",
     "every TP rank keeps the bias and adds it before the all_reduce (bias "
     "counted tp times)"),
    ("tests/mutants/promotion_bias_removed_everywhere.py", PROMOTION, "row_mp_o0_sgd_tp2",
     "the bias is removed on every TP rank, the first one included"),
    ("tests/mutants/promotion_dp_broadcast_deleted.py", PROMOTION, "row_dp_mp_o0_sgd",
     "the first TP rank also deletes the bias's startup broadcast over the "
     "data-parallel ring"),
    ("tests/mutants/promotion_init_widened.py", PROMOTION, "row_mp_o0_sgd_tp2",
     "the rewrite itself is right, then the startup's first uniform_random is "
     "widened from [-0.5, 0.5] to [-50, 50] (the parameters start elsewhere)"),
    ("tests/mutants/amp_scale_twice.py", "auto_parallel_amp", "amp_mlp_fp16",
     "the loss's gradient multiplied by the loss scale a second time, the "
     "gradients unscaled once"),
    ("tests/mutants/amp_wrong_dtype.py", "auto_parallel_amp", "amp_mlp_fp16",
     "the first inserted cast rounds to bfloat16 where the float16 lists imply float16"),
    ("tests/mutants/amp_cast_dropped.py", "auto_parallel_amp", "amp_mlp_fp16",
     "the cast of the bias of the gray add after a white matmul dropped"),
    ("tests/mutants/sharding_wrong_root.py", "auto_parallel_sharding",
     "engine_shard_dp2_adamw_s1",
     "each updated parameter is broadcast from the next rank instead of its owner "
     "(the stale copy overwrites the update)"),
    ("tests/mutants/sharding_broadcast_dropped.py", "auto_parallel_sharding",
     "engine_shard_dp2_adamw_s1",
     "no broadcast from the owners: a non-owner never receives the update"),
    ("tests/mutants/recompute_backward_reads_forward.py", "auto_parallel_recompute",
     "recompute_mlp2",
     "the segments are copied into the backward but the grad ops are never re-pointed "
     "to the copies: the forward activations stay alive (values kept)"),
    ("tests/mutants/recompute_clone_wrong_bias.py", "auto_parallel_recompute",
     "recompute_mlp2",
     "the first recomputed bias add reads the first block's bias instead of its own"),
]
