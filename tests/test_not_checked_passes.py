"""The passes the suite lists as not checked (``passes/_not_checked.py``,
docs/passes.md): each stated reason is asserted on the installed Paddle, so
this fails when Paddle changes and the pass may become checkable."""
from __future__ import annotations

import io

import pytest

import passes
from passes._not_checked import NOT_CHECKED


def test_listed_with_their_reasons_and_without_an_adapter():
    from verify.cli import cmd_list

    out = io.StringIO()
    cmd_list(out=out)
    text = out.getvalue()
    assert "not checked:" in text
    for name, (_, why) in NOT_CHECKED.items():
        assert f"  {name}  (" in text and why in text
        assert name not in passes.adapters()


# -- auto_parallel_quantization ---------------------------------------------------
def test_quantization_needs_a_cuda_device():
    import paddle
    from paddle.distributed.auto_parallel.static.dist_context import DistributedContext
    from paddle.distributed.passes import PassContext, new_pass

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 8], "float32")
        loss = paddle.mean(paddle.static.nn.fc(x, 4))
        _, params_grads = paddle.optimizer.SGD(0.1).minimize(loss)
    quant = new_pass("auto_parallel_quantization", {
        "dist_context": DistributedContext(), "params_grads": params_grads, "mode": "train",
        "loss": loss, "channel_wise_abs_max": True, "weight_bits": 8, "activation_bits": 8,
        "not_quant_pattern": ["skip_quant"], "onnx_format": True})
    with pytest.raises(AttributeError, match="'ParallelEnv' object has no attribute "
                                             "'_device_id'") as info:
        quant.apply([main], [startup], PassContext())
    assert any(f.name == "_apply_single_impl" and
               str(f.path).endswith("auto_parallel_quantization.py")
               for f in info.traceback), info.traceback
    assert not paddle.is_compiled_with_cuda()
    with pytest.raises(ValueError, match="use wrong place"):
        paddle.framework.CUDAPlace(0)


# -- replace_with_parallel_cross_entropy ------------------------------------------
def test_parallel_cross_entropy_has_no_cpu_kernel():
    import paddle

    assert not paddle.is_compiled_with_cuda()
    with paddle.base.dygraph.guard():  # another test of the process may have left static mode on
        logits, label = paddle.randn([2, 8]), paddle.randint(0, 8, [2, 1])
        with pytest.raises(RuntimeError, match="Do not support c_softmax_with_cross_entropy "
                                               "for cpu kernel now"):
            paddle._C_ops.c_softmax_with_cross_entropy(logits, label, -100, 0, 0, 1)


# -- auto_parallel_fp16 (O2) --------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_o2_keeps_every_op_of_these_programs_in_float32_on_cpu(dtype):
    import paddle
    from paddle.static.amp.fp16_lists import AutoMixedPrecisionLists

    assert not paddle.is_compiled_with_cuda()
    unsupported = AutoMixedPrecisionLists(dtype=dtype).unsupported_list
    assert {"matmul_v2", "elementwise_add", "relu", "mean", "softmax"} <= unsupported
    assert len(unsupported) > 1000


# -- auto_parallel_sync_shared_params ---------------------------------------------
def _eager_reshard_as_rank1(src, dst):
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "FLAGS_"))}
    env.update(PADDLE_TRAINER_ID="1", PADDLE_TRAINERS_NUM="2",
               PADDLE_TRAINER_ENDPOINTS="127.0.0.1:6170,127.0.0.1:6171",
               PADDLE_CURRENT_ENDPOINT="127.0.0.1:6171")
    return subprocess.run([sys.executable, os.path.join(root, "tests", "eager_cross_mesh_reshard.py"),
                           json.dumps(src), json.dumps(dst)], env=env, capture_output=True,
                          text=True, timeout=240)


def test_eager_reshard_off_the_ranks_mesh_dies_in_get_default_place():
    """The pass's eager reshard of the tied weight, on the rank outside stage
    0's mesh: Paddle's ``GetDistTensorDeviceContext`` asks ``GetDefaultPlace``
    (the input holds no local value), which on this wheel indexes the first
    registered custom device type, and there is none: SIGSEGV before any
    communication."""
    import signal

    import paddle

    assert not paddle.is_compiled_with_cuda() and paddle.device.get_all_custom_device_type() == []
    p = _eager_reshard_as_rank1([0], [1])
    assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), (p.returncode, p.stderr[-2000:])
    out = p.stdout + p.stderr
    assert "before" in out and "after" not in out
    assert "phi::distributed::GetDefaultPlace()" in out, out[-3000:]
    assert "phi::DeviceManager::GetDeviceCount" in out


def test_eager_reshard_onto_the_ranks_own_mesh_returns():
    """The twin: the same call where rank 1 holds the input (mesh [1] onto
    itself) never needs a default place and returns."""
    p = _eager_reshard_as_rank1([1], [1])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "after True" in p.stdout
