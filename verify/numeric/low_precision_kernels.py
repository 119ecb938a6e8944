"""Which ops of a legacy program this CPU build has no kernel for in the low
precision (float16/bfloat16) they compute in: why a case's own AMP
programs cannot run here and its numeric runs take the float32 twin
(``Case.numeric_twin``), said op by op instead of assumed.

Read from Paddle's own kernel registries: phi's (``(CPU|ONEDNN, layout,
dtype)`` per kernel, the op type mapped to its phi kernel name by Paddle)
and the fluid one for ops without a phi kernel.  An op is looked up in
each low-precision dtype among its float inputs (its outputs for an op
without inputs: ``fill_constant``): every op the AMP cases use takes its
kernel's dtype from a data input, so an op reading bfloat16 data runs a
bfloat16 kernel.  The answer names what is missing in a message; it never
decides a verdict.  A kernel that is registered can still fail (oneDNN's
bfloat16 ``matmul_v2_grad`` crashes when the input's gradient is not asked
for, as for a fed input), so "nothing missing" does not promise a run.
"""
from __future__ import annotations

LOW = ("float16", "bfloat16")
# how the fluid registry spells a dtype
_FLUID = {"float16": "::phi::dtype::float16", "bfloat16": "::phi::dtype::bfloat16"}
_BACKENDS = ("CPU", "ONEDNN")


def _registries():
    from paddle.base import core

    return core._get_registered_phi_kernels("function"), \
        core._get_all_register_op_kernels("fluid")


def has_cpu_kernel(op_type: str, dtype: str, registries=None) -> bool:
    """Whether this build registers a CPU (plain or oneDNN) kernel of
    ``op_type`` for ``dtype``."""
    from paddle.base import core

    phi, fluid = registries or _registries()
    name = core._get_phi_kernel_name(op_type) or op_type
    for key in phi.get(name, ()):  # "(CPU, Undefined(AnyLayout), bfloat16)"
        parts = [p.strip() for p in key.strip("()").split(",")]
        if len(parts) == 3 and parts[0] in _BACKENDS and parts[2] == dtype:
            return True
    want = f"data_type[{_FLUID.get(dtype, dtype)}]"
    return any(want in key and "Place(cpu)" in key for key in fluid.get(op_type, ()))


def _dtype(block, name) -> str:
    if not block.has_var(name):
        return ""
    return str(block.var(name).dtype).replace("paddle.", "")


def missing_kernels(program, which: str = "") -> list:
    """``[{"op_index", "op_type", "dtype", "program"}]``: the ops of
    ``program``'s global block reading (or, without inputs, writing) a
    float16/bfloat16 value in whose dtype no CPU kernel is registered."""
    registries = _registries()
    block = program.global_block()
    out = []
    for idx, op in enumerate(block.ops):
        names = op.input_arg_names or op.output_arg_names
        for dt in sorted({_dtype(block, n) for n in names} & set(LOW)):
            if not has_cpu_kernel(op.type, dt, registries):
                out.append({"op_index": idx, "op_type": op.type, "dtype": dt,
                            "program": which})
    return out


def describe(missing: list) -> str:
    """``"no bfloat16 CPU kernel for adamw (rewritten rank 0 op 14, 1 more)"``:
    one clause per dtype and op type, naming where the first one sits."""
    groups = {}
    for m in missing:
        groups.setdefault((m["dtype"], m["op_type"]), []).append(m)
    return "; ".join(
        f"no {dt} CPU kernel for {t} ({ms[0]['program']} op {ms[0]['op_index']}"
        + (f", {len(ms) - 1} more)" if len(ms) > 1 else ")")
        for (dt, t), ms in groups.items())
