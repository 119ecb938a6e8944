"""The one place that prepares Paddle for legacy (ProgramDesc) programs.

Import this module before anything imports ``paddle``; every module of the
suite that needs Paddle gets it through :func:`paddle_module`.

Two things happen here and nowhere else:

1. ``FLAGS_enable_pir_api=0`` is set before Paddle is imported, so that
   ``paddle.static`` builds legacy programs (the passes under test rewrite
   legacy programs only).  ``FLAGS_enable_pir_in_executor`` is left to
   Paddle's default so the executor can still run the legacy program.

2. ``c_allreduce_sum`` is made known to the framework.  Paddle 3.3.1 removed
   that operator's definition, yet ``allreduce_matmul_grad_overlapping``
   matches exactly that type.  We register a *kernel-less* op proto for it
   from Python (a copy of ``all_reduce``'s proto with the old slot names
   ``X``/``Out`` and the old attrs), skip the C++ attr check and shape
   inference for that one type, and nothing else.  For execution, programs
   are translated to the equivalent ``all_reduce(x, reduce_type=SUM)`` by
   :func:`translate_for_execution`; the checks always see the original type.
"""
from __future__ import annotations

import os
import sys

if "paddle" in sys.modules and os.environ.get("FLAGS_enable_pir_api") != "0":
    # Too late to switch Paddle to legacy IR in this process.
    raise RuntimeError(
        "verify.ir.legacy_ir must be imported before paddle "
        "(or FLAGS_enable_pir_api=0 set in the environment)"
    )
os.environ["FLAGS_enable_pir_api"] = "0"
os.environ.setdefault("GLOG_v", "0")
os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402

warnings.filterwarnings("ignore", message=".*ccache.*")

import paddle  # noqa: E402
from paddle.base import core, framework  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

# Kernel-less op types this module defines, with (input slot, output slot).
LEGACY_ONLY_OPS = {"c_allreduce_sum": ("X", "Out")}
# reduce_type of all_reduce for SUM (phi ReduceType::kRedSum).
REDUCE_SUM = 0

_registered = False


def _register_c_allreduce_sum() -> None:
    holder = framework.OpProtoHolder.instance()
    if holder.has_op_proto("c_allreduce_sum"):
        return
    proto = framework_pb2.OpProto()
    proto.CopyFrom(holder.get_op_proto("all_reduce"))
    proto.type = "c_allreduce_sum"
    proto.inputs[0].name = "X"
    proto.outputs[0].name = "Out"
    keep = [a for a in proto.attrs if a.name != "reduce_type"]
    del proto.attrs[:]
    proto.attrs.extend(keep)
    for name in ("use_calc_stream", "use_model_parallel"):
        attr = proto.attrs.add()
        attr.name = name
        attr.type = framework_pb2.BOOLEAN
        attr.comment = "legacy c_allreduce_sum attribute"
    holder.op_proto_map["c_allreduce_sum"] = proto
    framework.Operator.OP_WITHOUT_KERNEL_SET.add("c_allreduce_sum")

    # The C++ attr checker looks the type up in the C++ OpInfoMap, where a
    # Python-only proto does not exist; skip it for our kernel-less types.
    original_check = core.OpDesc.check_attrs

    def check_attrs(desc):
        if desc.type() in LEGACY_ONLY_OPS:
            return None
        return original_check(desc)

    core.OpDesc.check_attrs = check_attrs


def bootstrap():
    """Make Paddle ready for legacy programs (idempotent); returns paddle."""
    global _registered
    if not _registered:
        paddle.enable_static()
        _register_c_allreduce_sum()
        _registered = True
    return paddle


def paddle_module():
    """The bootstrapped ``paddle`` module."""
    return bootstrap()


def translate_for_execution(program) -> int:
    """Rewrite ops that cannot execute here into equivalent ones.

    ``c_allreduce_sum`` becomes ``all_reduce(x, reduce_type=SUM)``; and
    ``c_identity`` (the forward of a column-parallel linear, numerically the
    identity) becomes ``assign``, because 3.3.1 has no CPU kernel for it
    ("Do not support c_identity for cpu kernel now").  Works in place on a
    program meant only for execution (never on one a check looks at).
    Returns the number of ops translated.
    """
    bootstrap()
    count = 0
    for block in program.blocks:
        for op in block.ops:
            if op.type == "c_identity":
                desc = op.desc
                for name in ("ring_id", "use_calc_stream", "use_model_parallel"):
                    if desc.has_attr(name):
                        desc.remove_attr(name)
                desc.set_type("assign")
                count += 1
                continue
            if op.type != "c_allreduce_sum":
                continue
            desc = op.desc
            x = desc.input("X")
            out = desc.output("Out")
            ring_id = desc.attr("ring_id") if desc.has_attr("ring_id") else 0
            role = desc.attr("op_role") if desc.has_attr("op_role") else 0
            desc.set_type("all_reduce")
            desc.remove_input("X")
            desc.remove_output("Out")
            desc.set_input("x", x)
            desc.set_output("out", out)
            for name in ("use_calc_stream", "use_model_parallel"):
                if desc.has_attr(name):
                    desc.remove_attr(name)
            desc._set_int32_attr("ring_id", int(ring_id))
            desc._set_int32_attr("reduce_type", REDUCE_SUM)
            desc._set_int32_attr("op_role", int(role))
            count += 1
    if count:
        for block in program.blocks:
            block._sync_with_cpp()
    return count


bootstrap()
