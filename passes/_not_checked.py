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
    "replace_with_parallel_cross_entropy": (
        "paddle/distributed/passes/auto_parallel_replace_with_parallel_cross_entropy.py",
        "no CPU kernel: the c_softmax_with_cross_entropy it writes raises RuntimeError "
        "(Unavailable) Do not support c_softmax_with_cross_entropy for cpu kernel now "
        "(its grad has none either); it also needs fleet's hybrid communicate group"),
    "auto_parallel_fp16": (
        "paddle/distributed/passes/auto_parallel_fp16.py",
        "nothing to prove on a CPU build: AMP O2 keeps every op of its unsupported list in "
        "float32, and on CPU that list holds 1201 ops, matmul_v2 and elementwise_add among "
        "them, so O2 casts nothing here; its loss scaling is what auto_parallel_amp's check "
        "judges (docs/passes.md)"),
    "auto_parallel_sync_shared_params": (
        "paddle/distributed/passes/auto_parallel_sync_shared_params.py",
        "does not plan on CPU: sync_shared_parameters copies the tied weight from stage 0's "
        "mesh onto stage 1's with an eager paddle.base.core.reshard "
        "(auto_parallel_sync_shared_params.py:151), and on this CPU wheel such an eager reshard "
        "across disjoint meshes dies with SIGSEGV in phi::distributed::GetDefaultPlace, which "
        "passes the first registered custom device type to DeviceManager::GetDeviceCount "
        "when none is registered (a null std::string, fault address 0x8); it dies before any "
        "communication, so no process group or gloo rendezvous is involved (also with "
        "init_parallel_env on gloo); examples/planner_pp2_tied.py and the zoo LLaMA plan with "
        "the flag off (docs/planner.md)"),
}
