"""Distributed passes of Paddle 3.3.1 the suite has no adapter for, and why
(``python -m verify list`` prints them; docs/passes.md gives the evidence;
tests/test_not_checked_passes.py asserts each reason still holds on the
installed Paddle, so it fails when Paddle changes)."""
from __future__ import annotations

# name -> (where it lives in Paddle, why it is not checked here)
NOT_CHECKED = {
    "auto_parallel_quantization": (
        "paddle/distributed/passes/auto_parallel_quantization.py",
        "CUDA only: its first step builds CUDAPlace(ParallelEnv().dev_id); on a CPU build "
        "ParallelEnv sets no _device_id (AttributeError: 'ParallelEnv' object has no "
        "attribute '_device_id'), and CUDAPlace(0) itself raises ValueError (InvalidArgument) "
        "use wrong place"),
    "fuse_attention_ffn_qkv_pass": (
        "paddle/distributed/auto_parallel/static/pir_pass.py (FLAGS_enable_fused_ffn_qkv_pass)",
        "no adapter: it rewrites the Engine's forward program and makes the fused "
        "parameters from the dygraph ones outside the programs (fuse_param_func), so a "
        "program pair alone does not relate them; judged by tests/test_fused_ffn_qkv.py "
        "(training losses with the flag off and on; on a 1-D mesh it kills the process) and "
        "planned inside planner_dp2_fused_ffn_qkv (whose serial reference is already fused)"),
}
