"""Where Paddle 3.3.1's executors compute one program differently (and where
every executor computes a kernel other than its definition): a table.

Found by the kernel differential (``verify/selfcheck/kernel_differential.py``,
``tests/test_kernel_differential.py``, ``benchmarks/bench_kernel_differential.py``):
the same legacy program run by the legacy executor
(``FLAGS_enable_pir_in_executor=0``) and by the executor that translates it
to PIR first (``=1``, what the suite's real ranks run), and the equivalent
``pd_op`` program.  A value row can follow only one of them, so where they
disagree the proof says Unsupported (INCONCLUSIVE) instead of proving with
the row: :func:`refusal`.  Written up in docs/paddle-findings.md.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Disagreement:
    """``kind`` "executors": two executors compute the op differently;
    "kernel": every executor computes it, alike, other than its definition
    (the row models the definition; real ranks would not follow it)."""
    op: str          # the op type
    condition: str   # where (dtype, attrs)
    legacy: str      # what the legacy executor computes
    pir: str         # what FLAGS_enable_pir_in_executor=1 computes
    found: str       # how (the reproducer)
    applies: object  # (op, dtypes) -> bool
    kind: str = "executors"


def _str_value_lost(op, dtypes) -> bool:
    """fill_constant whose ``str_value`` the float32 ``value`` attr does not
    hold (as the output dtype reads them): the PIR translation uses ``value``."""
    from .semantics import Unsupported, constant, dtype_name

    sv = op.attrs.get("str_value")
    if not sv:
        return False
    dtype = dtype_name(op.attrs.get("dtype", ""))
    try:
        return constant(sv, dtype) != constant(float(op.attrs.get("value", 0.0)), dtype)
    except (Unsupported, ValueError):
        return True


TABLE = (
    Disagreement(
        op="reduce_sum", condition="float16 input on CPU",
        legacy="refuses: InvalidArgumentError 'float16 can only be used on GPU or NPU or "
               "XPU place' (get_expected_kernel_func.cc)",
        pir="computes the float16 sum (pd_op.sum has a CPU float16 kernel)",
        found="kernel differential, every reduce_sum example in float16 (e.g. x=[2.875], "
              "reduce_all); its grad program too",
        applies=lambda op, dtypes: "float16" in dtypes),
    Disagreement(
        op="fill_constant",
        condition="str_value set and not equal to the float32 value attr (float64 0.1, "
                  "int64 2^40+1, int32 16777217)",
        legacy="reads str_value: 0.1, 1099511627777, 16777217",
        pir="reads the float32 value attr: 0.10000000149011612, 1099511627776, 16777216",
        found="kernel differential, fill_constant int64 value 2^40+1 with str_value "
              "'1099511627777.0', shape [4, 3, 2, 4]",
        applies=_str_value_lost),
    Disagreement(
        op="pd_op.divide_grad", condition="bfloat16 on CPU",
        legacy="y_grad = +dout * out / y, the sign flipped (x=1.875, y=3, dout=1.875: "
               "+0.390625, float32 and float64 -0.390625); the same on the legacy "
               "executor's elementwise_div_grad",
        pir="the same wrong sign (pd_op.divide_grad, and the translated legacy program)",
        found="kernel differential, elementwise_div_grad / pd_op.divide_grad in bfloat16",
        applies=lambda op, dtypes: "bfloat16" in dtypes, kind="kernel"),
)


def refusal(op, dtypes) -> str | None:
    """Why the value row of ``op`` (its tensors of ``dtypes``) cannot stand
    for both of Paddle's executors, or None."""
    from .semantics import dtype_name

    dtypes = {dtype_name(d) for d in dtypes}
    for d in TABLE:
        if d.op == op.type and d.applies(op, dtypes):
            if d.kind == "kernel":
                return (f"{op.type} ({d.condition}): Paddle's kernel is not the op's "
                        f"definition ({d.legacy}), docs/paddle-findings.md")
            return (f"{op.type} ({d.condition}): Paddle's executors disagree (legacy "
                    f"{d.legacy}; FLAGS_enable_pir_in_executor=1 {d.pir}), "
                    "docs/paddle-findings.md")
    return None
