"""The serial program run again in float64: a measurement of the float32
run's own rounding error, value by value (``compare.tolerance``'s
``measured`` floor).

A float32 value's rounding error scales with the magnitudes of what was
summed to make it, not with the value: a gradient whose terms cancel (a
saturated softmax's backward, ``p * (dp - sum(p * dp))``) is tiny and
carries the rounding of the large terms that cancelled.  No bound taken
from the value alone can know that.  The same program with every float32
type and dtype attribute made float64 computes the same function with
roundings ~``2^29`` times smaller, so ``|x32 - x64|`` *is* the float32
run's error of ``x``, measured where it arises.

The rewrite is of the exported program's text (Paddle's PIR serialization:
``"0.t_f32"`` is the builtin float32 type, ``"1.a_dtype"`` a pd_op dtype
attribute); a program holding a float16 or bfloat16 type is not rewritten
(its low-precision roundings are a planned part of it, ``amp_runs``' bound),
nor is one the float64 executor refuses: then no measurement, and the
comparison keeps its depth-derived tolerance only.
"""
from __future__ import annotations

import numpy as np

SUFFIX = "@float64"  # the serial run's output key of a value's float64 run
_LOW = ('"0.t_f16"', '"0.t_bf16"', '"float16"', '"bfloat16"')


def float64_text(text: str) -> str | None:
    """The serialized program with float32 made float64; None when it holds a
    low-precision type (module docstring)."""
    if any(t in text for t in _LOW):
        return None
    return text.replace('"0.t_f32"', '"0.t_f64"').replace(
        '"1.a_dtype","D":"float32"', '"1.a_dtype","D":"float64"')


def float64_exported(exported: dict) -> dict | None:
    """``exported`` (``pir_snapshot.export_programs``' dict, ``main`` and
    ``startup`` as bytes) with both programs made float64, or None."""
    out = dict(exported)
    for which in ("main", "startup"):
        text = float64_text(exported[which].decode())
        if text is None:
            return None
        out[which] = text.encode()
    return out


def widened(values: dict) -> dict:
    """``{name: array}`` with every float32 array made float64 (exactly)."""
    return {n: (np.asarray(v).astype(np.float64) if np.asarray(v).dtype == np.float32 else v)
            for n, v in values.items()}


def with_float64(run, exported, params, feeds, out32) -> list:
    """``out32`` (the float32 run's ``[{name: array}]`` per step) with each
    float32 value's float64 run added as ``<name>@float64``: ``run(exported,
    params, feeds)`` the same runner on the rewritten program and widened
    inputs.  Where the program is not rewritten or its float64 run raises,
    ``out32`` unchanged (no measurement: the caller's tolerance stays its
    depth-derived one)."""
    data = float64_exported(exported)
    if data is None:
        return out32
    try:
        out64 = run(data, widened(params), [widened(f) for f in feeds])
    except Exception:  # an op without a float64 kernel: no measurement
        return out32
    return merged(out32, out64)


def merged(out32, out64) -> list:
    """``out32`` (``[{name: array}]`` per step) with each float32 value's
    float64 run from ``out64`` (the same steps) added as ``<name>@float64``."""
    out = []
    for s32, s64 in zip(out32, out64):
        step = dict(s32)
        for n, v in s64.items():
            if n in s32 and np.asarray(s32[n]).dtype == np.float32 and \
                    np.shape(v) == np.shape(s32[n]):
                step[n + SUFFIX] = np.asarray(v, dtype=np.float64)
        out.append(step)
    return out + [dict(s) for s in out32[len(out):]]
