"""The stream a planned program's record keeps is the one Paddle's executor
runs: the op desc's dist attr (what ``Program.clone`` copies and the PIR
translator turns into the op's ``execution_stream``), not the
``DistributedContext``'s attr of the op, an object of its own in 3.3.1.

A stream set through the context after the op was registered (the code
before Paddle PR 64662: "set to auto_parallel_mp, but it did not take
effect") is recorded as the executor runs it, ``default``; the twin, a
stream set on the desc, is kept.  Real Paddle: a real program, a real
``DistributedContext``, the real PIR translation as the witness of what
the executor reads."""
from __future__ import annotations

import subprocess
import sys

import pytest

from verify.ir.legacy_ir import paddle_module
from verify.plan.records import program_record


def _program():
    paddle = paddle_module()
    from paddle.distributed.auto_parallel.static.dist_attribute import OperatorDistAttr
    from paddle.distributed.auto_parallel.static.dist_context import DistributedContext

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        paddle.scale(x, 2.0)
    [op] = [o for o in main.global_block().ops if o.type == "scale"]
    ctx = DistributedContext(serial_main_prog=main)
    attr = OperatorDistAttr(op.desc)
    attr.process_mesh = paddle.distributed.ProcessMesh([0, 1])
    ctx.set_op_dist_attr_for_program(op, attr)
    return paddle, main, op, ctx


_WITNESS = """
import os
os.environ["FLAGS_enable_pir_api"] = "0"
import paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    paddle.scale(paddle.static.data("x", [2, 3], "float32"), 2.0)
op = [o for o in main.global_block().ops if o.type == "scale"][0]

def stream():
    translated = paddle.pir.translate_to_pir(main.desc)  # alive while its ops are read
    [t] = [o for o in translated.global_block().ops if o.name() == "pd_op.scale"]
    return t.attrs().get("execution_stream") or "default"

before = stream()
op.dist_attr.execution_stream = "auto_parallel_mp"
print(before, stream())
"""


def test_the_executor_reads_the_desc_stream():
    """The witness: the PIR translation the executor runs takes the op's
    stream from its desc's dist attr (in a process of its own, legacy mode
    from the start)."""
    r = subprocess.run([sys.executable, "-c", _WITNESS], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.split() == ["default", "auto_parallel_mp"], r.stdout + r.stderr[-2000:]


@pytest.fixture(autouse=True)
def _legacy_static():
    paddle = paddle_module()
    paddle.enable_static()
    yield


def test_a_stream_set_on_the_context_attr_only_is_recorded_as_run():
    paddle, main, op, ctx = _program()
    ctx.get_op_dist_attr_for_program(op).execution_stream = "auto_parallel_mp"
    assert ctx.get_op_dist_attr_for_program(op).execution_stream == "auto_parallel_mp"
    # the executor's copy: the desc, and the PIR op it is translated to
    assert op.desc.dist_attr.execution_stream == "default"
    assert main.clone().global_block().ops[-1].dist_attr.execution_stream == "default"
    [rec] = [r for r in program_record(main, ctx)["ops"] if r["type"] == "scale"]
    assert rec["mesh"]["process_ids"] == [0, 1]  # the context's attr is read for the rest
    assert rec["execution_stream"] == "default"


def test_twin_a_stream_set_on_the_desc_is_recorded():
    paddle, main, op, ctx = _program()
    op.dist_attr.execution_stream = "auto_parallel_mp"
    assert main.clone().global_block().ops[-1].dist_attr.execution_stream == \
        "auto_parallel_mp"
    [rec] = [r for r in program_record(main, ctx)["ops"] if r["type"] == "scale"]
    assert rec["execution_stream"] == "auto_parallel_mp"
