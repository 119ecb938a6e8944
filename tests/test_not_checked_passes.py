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
