"""Every value row against Paddle's own kernels, on generated inputs, on
each of Paddle's executors (issue 34 item 2).

An *example* is a one-op Paddle program (plus the ``pd_op.full`` /
``full_int_array`` constants a PIR builder adds) with fed inputs: shapes
(broadcasting with ``axis``, a lower-rank operand), a dtype, non-default
attrs.  It runs in three modes, each a worker process of its own (the
flags are read at import and cached by the executor, so one mode a
process; the worker proves the flag took effect by counting the
executor's ``translate_to_pir`` calls):

  * ``legacy``      legacy op types by ``block.append_op``
                    (``FLAGS_enable_pir_api=0``), ``FLAGS_enable_pir_in_executor=0``;
  * ``legacy_pir``  the same programs with ``FLAGS_enable_pir_in_executor=1``
                    (translated to PIR for execution);
  * ``pir``         ``pd_op.*`` programs built by ``paddle._C_ops`` under the
                    PIR API.

The worker snapshots the program the way the suite does
(``verify.ir.snapshot.from_programs`` / ``pir_snapshot.from_pir_programs``)
and the rows of ``semantics.ROWS`` are applied to that snapshot's ops in
order on exact rationals (``ExactKernels``: constants exact, the
uninterpreted kernels ``kernels.reference``'s), as the proof applies them
on terms.  Paddle's output must then match:

  * integers exactly, after the row's wrap modulo 2^bits (``WRAPPED``);
    bool exactly;
  * floats within ``tolerance(dtype, ...)``: ``4 eps (|exact| + mag)``, eps
    the dtype's unit roundoff (2^-52, 2^-23, 2^-10, 2^-7), ``mag`` the
    largest |input|^2 times the longest dim plus the largest |input| (a
    bound on the terms a kernel accumulates: its rounding may differ from
    one rounding of the exact result).  Float inputs are multiples of 1/8
    in [-4, 4], exact in every float dtype.

A dtype the row does not model (``check_dtypes``) or an op Paddle refuses
(no kernel for the dtype, an attr it rejects) is skipped, counted apart.
Where the row models the dtype and Paddle runs it, they must agree.
Two executors' results for the same legacy program are compared too
(``executor_disagreements``): a result one computes and the other refuses,
or values further apart than the tolerance.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

MODES = ("legacy", "legacy_pir", "pir")
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "bool")
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int32", "int64")
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10,
       "bfloat16": 2.0 ** -7}
VARTYPE = {"bool": 0, "int32": 2, "int64": 3, "float16": 4, "float32": 5, "float64": 6,
           "bfloat16": 22}
_ENV = {"legacy": {"FLAGS_enable_pir_api": "0", "FLAGS_enable_pir_in_executor": "0"},
        "legacy_pir": {"FLAGS_enable_pir_api": "0", "FLAGS_enable_pir_in_executor": "1"},
        "pir": {"FLAGS_enable_pir_api": "1", "FLAGS_enable_pir_in_executor": "1"}}


# -- values ------------------------------------------------------------------
def values(rng, shape, dtype, kind="any"):
    """Input elements: floats multiples of 1/8 in [-4, 4] (``pos``: > 0,
    ``nonzero``: |v| >= 1/8); integers mostly small, some near the top of
    the range (so products and sums wrap); bool 0/1."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        v = rng.integers(0, 2, n)
    elif dtype in INTS:
        bits = 32 if dtype == "int32" else 64
        small = rng.integers(-8, 9, n)
        big = rng.integers(1 << (bits - 3), 1 << (bits - 2), n) * rng.choice([-1, 1], n)
        v = np.where(rng.random(n) < 0.3, big, small)
        if kind in ("pos", "nonzero"):
            v = np.where(v == 0, 1, np.abs(v) if kind == "pos" else v)
    else:
        v = rng.integers(-32, 33, n) / 8.0
        if kind == "pos":
            v = np.abs(v) + 0.125
        elif kind == "nonzero":
            v = np.where(v == 0, 0.125, v)
    return [int(a) if dtype in INTS or dtype == "bool" else float(a) for a in v], list(shape)


def feed_array(data, shape, dtype):
    """The numpy array Paddle is fed (bfloat16 as its uint16 bits)."""
    if dtype == "bfloat16":
        f = np.asarray(data, dtype=np.float32).reshape(shape)
        return (f.view(np.uint32) >> 16).astype(np.uint16)
    return np.asarray(data, dtype=np.bool_ if dtype == "bool" else dtype).reshape(shape)


# -- examples ------------------------------------------------------------------
@dataclass
class Example:
    """One program: fed inputs, the legacy op and/or the PIR builder call."""

    spec: str
    dtype: str
    feeds: dict                 # name -> (data list, shape, dtype)
    legacy: dict | None = None  # {"type", "inputs": {slot: [names]}, "outputs": {slot: n}, "attrs"}
    pir: dict | None = None     # {"op": pd_op name, "ins": [names or [names]], "args": [...]}
    id: int = 0

    def to_json(self):
        return {"id": self.id, "spec": self.spec, "dtype": self.dtype, "feeds": self.feeds,
                "legacy": self.legacy, "pir": self.pir}


def _dt(dtype):
    import paddle
    return getattr(paddle, dtype)


# PIR builders: ``fn(C, ins, *args) -> [values to fetch]`` (C = paddle._C_ops)
PIR_BUILD = {
    "pd_op.add": lambda C, v: [C.add(v[0], v[1])],
    "pd_op.subtract": lambda C, v: [C.subtract(v[0], v[1])],
    "pd_op.multiply": lambda C, v: [C.multiply(v[0], v[1])],
    "pd_op.divide": lambda C, v: [C.divide(v[0], v[1])],
    "pd_op.add_grad": lambda C, v: list(C.add_grad(v[0], v[1], v[2], -1)),
    "pd_op.subtract_grad": lambda C, v: list(C.subtract_grad(v[0], v[1], v[2], -1)),
    "pd_op.multiply_grad": lambda C, v: list(C.multiply_grad(v[0], v[1], v[2], -1)),
    "pd_op.matmul": lambda C, v, tx, ty: [C.matmul(v[0], v[1], tx, ty)],
    "pd_op.matmul_grad": lambda C, v, tx, ty: list(C.matmul_grad(v[0], v[1], v[2], tx, ty)),
    "pd_op.scale": lambda C, v, s, b, after: [C.scale(v[0], s, b, after)],
    "pd_op.cast": lambda C, v, d: [C.cast(v[0], _dt(d))],
    "pd_op.reshape": lambda C, v, shape: [C.reshape(v[0], shape)],
    "pd_op.transpose": lambda C, v, perm: [C.transpose(v[0], perm)],
    "pd_op.sum": lambda C, v, axis, keep: [C.sum(v[0], axis, None, keep)],
    "pd_op.mean": lambda C, v, axis, keep: [C.mean(v[0], axis, keep)],
    "pd_op.full": lambda C, v, shape, value, d: [C.full(shape, value, _dt(d), _cpu())],
    "pd_op.square": lambda C, v: [C.square(v[0])],
    "pd_op.relu": lambda C, v: [C.relu(v[0])],
    "pd_op.gelu": lambda C, v, approx: [C.gelu(v[0], approx)],
    "pd_op.softmax": lambda C, v, axis: [C.softmax(v[0], axis)],
    "pd_op.assign": lambda C, v: [C.assign(v[0])],
    "pd_op.unsqueeze": lambda C, v, axes: [C.unsqueeze(v[0], axes)],
    "pd_op.expand": lambda C, v, shape: [C.expand(v[0], shape)],
    "pd_op.tile": lambda C, v, reps: [C.tile(v[0], reps)],
    "pd_op.split_with_num": lambda C, v, num, axis: list(C.split_with_num(v[0], num, axis)),
    "pd_op.concat": lambda C, v, axis: [C.concat(list(v), axis)],
    "pd_op.add_n": lambda C, v: [C.add_n(list(v))],
    "pd_op.slice": lambda C, v, axes, st, en, dec: [C.slice(v[0], axes, st, en,
                                                             [1] * len(axes), dec)],
    "pd_op.square_grad": lambda C, v: [C.square_grad(v[0], v[1])],
    "pd_op.relu_grad": lambda C, v: [C.relu_grad(v[0], v[1])],
    "pd_op.gelu_grad": lambda C, v, approx: [C.gelu_grad(v[0], v[1], approx)],
    "pd_op.softmax_grad": lambda C, v, axis: [C.softmax_grad(v[0], v[1], axis)],
    "pd_op.sum_grad": lambda C, v, axis, keep: [C.sum_grad(v[0], v[1], axis, keep, False)],
    "pd_op.mean_grad": lambda C, v, axis, keep: [C.mean_grad(v[0], v[1], axis, keep, False)],
    "pd_op.pow": lambda C, v, y: [C.pow(v[0], y)],
    "pd_op.pow_grad": lambda C, v, y: [C.pow_grad(v[0], v[1], y)],
    "pd_op.transpose_grad": lambda C, v, perm: [C.transpose_grad(v[0], perm)],
    "pd_op.embedding": lambda C, v, pad: [C.embedding(v[0], v[1], pad, False)],
    # the static PIR builder returns layer_norm's ``out`` only
    "pd_op.layer_norm": lambda C, v, eps, begin: [C.layer_norm(v[0], v[1], v[2], eps, begin)],
    "pd_op.full_like": lambda C, v, value, d: [C.full_like(v[0], value, _dt(d), _cpu())],
    "pd_op.split": lambda C, v, sections, axis: list(C.split(v[0], sections, axis)),
}


def _cpu():
    import paddle
    return paddle.CPUPlace()


# -- generators (hypothesis draws) ---------------------------------------------
def _st():
    from hypothesis import strategies as st
    return st


def _shape(draw, rmin=1, rmax=4, hi=4):
    st = _st()
    return [draw(st.integers(1, hi)) for _ in range(draw(st.integers(rmin, rmax)))]


def _rng(draw):
    return np.random.default_rng(draw(_st().integers(0, 2 ** 32 - 1)))


class _B:
    """Builds an Example: named feeds, then the legacy op / PIR call."""

    def __init__(self, draw, spec, dtype):
        self.draw, self.rng, self.n = draw, _rng(draw), 0
        self.ex = Example(spec, dtype, {})

    def feed(self, shape, dtype, kind="any"):
        name = f"in{self.n}"
        self.n += 1
        data, shape = values(self.rng, shape, dtype, kind)
        self.ex.feeds[name] = (data, shape, dtype)
        return name

    def legacy(self, type_, inputs, outputs, attrs):
        self.ex.legacy = {"type": type_, "inputs": inputs, "outputs": outputs, "attrs": attrs}
        return self

    def pir(self, op, ins, *args):
        self.ex.pir = {"op": op, "ins": ins, "args": list(args)}
        return self

    def grad(self, wrt, out_shape, dtype):
        """Make the programs the backward of their op: the grads of ``wrt``
        for a fed gradient of the op's first output (the backward pass
        writes its grad ops; ``paddle.static.gradients`` / PIR's
        ``ir_backward.grad``)."""
        g = self.feed(out_shape, dtype)
        for p in (self.ex.legacy, self.ex.pir):
            if p is not None:
                p["grad"] = {"wrt": list(wrt), "gout": g}
        return self


def _ew_shapes(draw):
    """x and y shapes and the axis: equal, numpy-broadcast (size-1 dims
    either side, a lower-rank y), or a lower-rank y placed at ``axis``."""
    st = _st()
    xs = _shape(draw)
    r = len(xs)
    kind = draw(st.sampled_from(["same", "bcast", "axis"]))
    if kind == "same":
        return xs, list(xs), -1
    m = draw(st.integers(1, r))
    if kind == "bcast":
        ys = [1 if draw(st.booleans()) else d for d in xs[r - m:]]
        xs = [d if i < r - m or ys[i - r + m] == 1 or not draw(st.booleans()) else 1
              for i, d in enumerate(xs)]
        return xs, ys, -1
    a = draw(st.integers(0, r - m))
    return xs, xs[a:a + m], a


def _bshape(xs, ys, axis):
    if axis != -1 and len(ys) < len(xs):
        ys = [1] * axis + list(ys) + [1] * (len(xs) - axis - len(ys))
    return list(np.broadcast_shapes(tuple(xs), tuple(ys)))


def gen_ew(legacy, pir, grad=False, ykind="any"):
    def gen(draw, dtype):
        b = _B(draw, legacy + "_grad" if grad else legacy, dtype)
        xs, ys, axis = _ew_shapes(draw)
        x, y = b.feed(xs, dtype), b.feed(ys, dtype, ykind)
        if not grad:
            b.legacy(legacy, {"X": [x], "Y": [y]}, {"Out": 1}, {"axis": axis})
            if pir and axis == -1:
                b.pir(pir, [x, y])
            return b.ex
        b.legacy(legacy, {"X": [x], "Y": [y]}, {"Out": 1}, {"axis": axis})
        if pir and axis == -1:
            b.pir(pir, [x, y])
        return b.grad([x, y], _bshape(xs, ys, axis), dtype).ex
    return gen


def _mm_shapes(draw, batch=True):
    st = _st()
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    bx = _shape(draw, 0, 2, 3) if batch else []
    by = list(bx)
    if bx and draw(st.booleans()):  # y lower rank, or a batch dim of 1
        by = bx[1:] if draw(st.booleans()) else [1] + bx[1:]
    if draw(st.booleans()):
        bx, by = by, bx
    tx, ty = draw(st.booleans()), draw(st.booleans())
    xs = bx + ([k, m] if tx else [m, k])
    ys = by + ([n, k] if ty else [k, n])
    out = list(np.broadcast_shapes(tuple(bx), tuple(by))) + [m, n]
    return xs, ys, tx, ty, out


def gen_matmul_v2(grad=False):
    def gen(draw, dtype):
        b = _B(draw, "matmul_v2_grad" if grad else "matmul_v2", dtype)
        xs, ys, tx, ty, out = _mm_shapes(draw)
        x, y = b.feed(xs, dtype), b.feed(ys, dtype)
        at = {"trans_x": tx, "trans_y": ty}
        b.legacy("matmul_v2", {"X": [x], "Y": [y]}, {"Out": 1}, at).pir(
            "pd_op.matmul", [x, y], tx, ty)
        return b.grad([x, y], out, dtype).ex if grad else b.ex
    return gen


def gen_matmul_v1(draw, dtype):
    st = _st()
    b = _B(draw, "matmul", dtype)
    xs, ys, tx, ty, _ = _mm_shapes(draw, batch=False)
    alpha = draw(st.sampled_from([1.0, 0.5, 2.0, 0.1, -3.0]))
    b.legacy("matmul", {"X": [b.feed(xs, dtype)], "Y": [b.feed(ys, dtype)]}, {"Out": 1},
             {"transpose_X": tx, "transpose_Y": ty, "alpha": alpha})
    return b.ex


SCALES = [0.5, -2.0, 2.7, 0.1, 3.0, -1.5, 1.0 / 3, 65536.0]
BIASES = [0.0, 1.0, -0.5, 1.9, 0.3, -7.0]


def gen_scale(draw, dtype):
    st = _st()
    b = _B(draw, "scale", dtype)
    x = b.feed(_shape(draw), dtype)
    s, bias = draw(st.sampled_from(SCALES)), draw(st.sampled_from(BIASES))
    after = draw(st.booleans())
    b.legacy("scale", {"X": [x]}, {"Out": 1}, {"scale": s, "bias": bias,
                                               "bias_after_scale": after})
    return b.pir("pd_op.scale", [x], s, bias, after).ex


def gen_cast(draw, dtype):
    st = _st()
    b = _B(draw, "cast", dtype)
    dst = draw(st.sampled_from(DTYPES))
    x = b.feed(_shape(draw), dtype)
    b.legacy("cast", {"X": [x]}, {"Out": 1}, {"in_dtype": VARTYPE[dtype],
                                              "out_dtype": VARTYPE[dst]})
    b.ex.legacy["out_dtype"] = dst
    return b.pir("pd_op.cast", [x], dst).ex


def _divisors(n):
    return [d for d in range(2, n + 1) if n % d == 0]


def gen_reshape(draw, dtype):
    st = _st()
    b = _B(draw, "reshape2", dtype)
    xs = _shape(draw)
    rem, target = int(np.prod(xs)), []
    while rem > 1 and len(target) < 3 and draw(st.booleans()):
        d = draw(st.sampled_from(_divisors(rem)))
        target.append(d)
        rem //= d
    target.append(rem)
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    elif target[0] == xs[0] and draw(st.booleans()):
        target[0] = 0
    x = b.feed(xs, dtype)
    b.legacy("reshape2", {"X": [x]}, {"Out": 1, "XShape": 1}, {"shape": target})
    return b.pir("pd_op.reshape", [x], target).ex


def gen_transpose(draw, dtype):
    st = _st()
    b = _B(draw, "transpose2", dtype)
    xs = _shape(draw)
    perm = list(draw(st.permutations(range(len(xs)))))
    x = b.feed(xs, dtype)
    b.legacy("transpose2", {"X": [x]}, {"Out": 1, "XShape": 1}, {"axis": perm})
    return b.pir("pd_op.transpose", [x], perm).ex


def _axes(draw, r):
    st = _st()
    axes = sorted(draw(st.sets(st.integers(0, r - 1), max_size=r)))
    return [a - r if draw(st.booleans()) else a for a in axes]


def gen_reduce(legacy, pir, grad=False):
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, legacy, dtype)
        xs = _shape(draw)
        axes, keep = _axes(draw, len(xs)), draw(st.booleans())
        x = b.feed(xs, dtype)
        at = {"dim": axes, "keep_dim": keep, "reduce_all": not axes}
        if not grad:
            b.legacy(legacy, {"X": [x]}, {"Out": 1}, at)
            return b.pir(pir, [x], axes, keep).ex
        ax = [a % len(xs) for a in axes] or list(range(len(xs)))
        gs = [1 if i in ax else d for i, d in enumerate(xs)] if keep else \
            [d for i, d in enumerate(xs) if i not in ax]
        b.legacy(legacy, {"X": [x]}, {"Out": 1}, at).pir(pir, [x], axes, keep)
        return b.grad([x], gs, dtype).ex
    return gen


def gen_mean(grad=False):
    def gen(draw, dtype):
        b = _B(draw, "mean_grad" if grad else "mean", dtype)
        b.legacy("mean", {"X": [b.feed(_shape(draw), dtype)]}, {"Out": 1}, {})
        return b.grad(["in0"], [], dtype).ex if grad else b.ex
    return gen


FILL_VALUES = [0.1, 2.7, -3.5, 1e5, 3.0, 1.0, 1e-8, -0.0, 70000.0, 2.0 ** 40 + 1]


def gen_fill(draw, dtype):
    st = _st()
    b = _B(draw, "fill_constant", dtype)
    shape, value = _shape(draw), draw(st.sampled_from(FILL_VALUES))
    at = {"shape": shape, "dtype": VARTYPE[dtype], "value": value}
    if draw(st.booleans()):
        at["str_value"] = repr(value)
    b.legacy("fill_constant", {}, {"Out": 1}, at)
    return b.pir("pd_op.full", [], shape, value, dtype).ex


def gen_unary(legacy, pir, kind="any", attr=None):
    """``legacy(X) -> Out`` and ``pir(x)``; ``attr``: (name, strategy) of
    one attr passed to both."""
    def gen(draw, dtype):
        b = _B(draw, legacy or pir, dtype)
        xs = _shape(draw)
        x = b.feed(xs, dtype, kind)
        args, at = [], {}
        if attr:
            v = draw(attr[1](len(xs)))
            at[attr[0]] = v
            args.append(v)
        if legacy:
            b.legacy(legacy, {"X": [x]}, {"Out": 1}, at)
        if pir:
            b.pir(pir, [x], *args)
        return b.ex
    return gen


def gen_unary_grad(legacy, pir, attr=None, kind="any", outs=("Out",), shape=None):
    """The backward of ``legacy(X)`` / ``pir(x)``: the grad of x for a fed
    gradient of the output; ``shape(draw, xs, attr) -> out shape``."""
    def gen(draw, dtype):
        b = _B(draw, legacy or pir, dtype)
        xs = _shape(draw)
        x = b.feed(xs, dtype, kind)
        args, at = [], {}
        if attr:
            v = draw(attr[1](len(xs)))
            at[attr[0]] = v
            args.append(v)
        if legacy:
            b.legacy(legacy, {"X": [x]}, {o: 1 for o in outs}, at)
        if pir:
            b.pir(pir, [x], *args)
        return b.grad([x], shape(xs, args) if shape else xs, dtype).ex
    return gen


def _axis_attr(r):
    return _st().integers(-r, r - 1)


def _bool_attr(r):
    return _st().booleans()


def gen_many(legacy, pir, out_slot="Out", axis=False):
    """``sum`` / ``stack`` / ``concat``: 2-3 inputs of one shape."""
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, legacy or pir, dtype)
        xs = _shape(draw, 1, 3)
        names = [b.feed(xs, dtype) for _ in range(draw(st.integers(2, 3)))]
        at, args = {}, []
        if axis:
            a = draw(st.integers(-len(xs) - (legacy == "stack"), len(xs) - 1))
            at["axis"], args = a, [a]
        if legacy:
            b.legacy(legacy, {"X": names}, {out_slot: 1}, at)
        if pir:
            b.pir(pir, names, *args)
        return b.ex
    return gen


def gen_split(draw, dtype):
    st = _st()
    b = _B(draw, "split", dtype)
    xs = _shape(draw)
    axis = draw(st.integers(0, len(xs) - 1))
    num = draw(st.sampled_from([1] + _divisors(xs[axis])))
    xs_neg = axis - len(xs) if draw(st.booleans()) else axis
    x = b.feed(xs, dtype)
    b.legacy("split", {"X": [x]}, {"Out": num}, {"axis": xs_neg, "num": num, "sections": []})
    return b.pir("pd_op.split_with_num", [x], num, xs_neg).ex


def gen_slice_grad(draw, dtype):
    ex = gen_slice(draw, dtype)
    at = ex.legacy["attrs"]
    data, xs, _ = ex.feeds["in0"]
    idx = [slice(None)] * len(xs)
    for a, s, e in zip(at["axes"], at["starts"], at["ends"]):
        idx[a] = slice(s, e)
    out = np.zeros(xs)[tuple(idx)]
    shape = [d for i, d in enumerate(out.shape) if i not in at["decrease_axis"]]
    if 0 in out.shape:
        return ex
    b = _B(draw, "slice_grad", dtype)
    b.ex, b.n = ex, len(ex.feeds)
    return b.grad(["in0"], shape, dtype).ex


def gen_slice(draw, dtype):
    st = _st()
    b = _B(draw, "slice", dtype)
    xs = _shape(draw)
    axes = sorted(draw(st.sets(st.integers(0, len(xs) - 1), min_size=1)))
    starts, ends = [], []
    for a in axes:
        s = draw(st.integers(-xs[a], xs[a] - 1))
        starts.append(s)
        ends.append(draw(st.sampled_from([s % xs[a] + 1, xs[a], 2 ** 31 - 1, -1 if s < 0 else
                                          xs[a]])))
    dec = [a for a, s, e in zip(axes, starts, ends)
           if (min(e, xs[a]) if e >= 0 else e + xs[a]) - (s % xs[a]) == 1 and draw(st.booleans())]
    x = b.feed(xs, dtype)
    b.legacy("slice", {"Input": [x]}, {"Out": 1},
             {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": dec,
              "infer_flags": [1] * len(axes)})
    return b.pir("pd_op.slice", [x], axes, starts, ends, dec).ex


def gen_lookup(grad=False):
    def gen(draw, dtype):
        ex = _gen_lookup(draw, dtype)
        if grad:
            ids, w = ex.legacy["inputs"]["Ids"][0], ex.legacy["inputs"]["W"][0]
            out = ex.feeds[ids][1] + [ex.feeds[w][1][1]]
            b = _B(draw, "lookup_table_v2_grad", dtype)
            b.ex, b.n = ex, len(ex.feeds)
            return b.grad([w], out, dtype).ex
        return ex
    return gen


def _gen_lookup(draw, dtype):
    st = _st()
    b = _B(draw, "lookup_table_v2", dtype)
    rows, width = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    ids_shape = _shape(draw, 1, 2)
    pad = draw(st.sampled_from([-1, 0, rows - 1]))
    ids = f"in{b.n}"
    b.n += 1
    n = int(np.prod(ids_shape))
    b.ex.feeds[ids] = ([int(v) for v in b.rng.integers(0, rows, n)], ids_shape, "int64")
    w = b.feed([rows, width], dtype)
    b.legacy("lookup_table_v2", {"Ids": [ids], "W": [w]}, {"Out": 1}, {"padding_idx": pad})
    return b.pir("pd_op.embedding", [ids, w], pad).ex


def gen_layer_norm(grad=False):
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, "layer_norm_grad" if grad else "layer_norm", dtype)
        xs = _shape(draw, 2, 3)
        begin = draw(st.integers(1, len(xs) - 1))
        eps = draw(st.sampled_from([1e-5, 0.5, 1e-3]))
        n = int(np.prod(xs[begin:]))
        x, sc, bi = b.feed(xs, dtype), b.feed([n], dtype), b.feed([n], dtype)
        b.legacy("layer_norm", {"X": [x], "Scale": [sc], "Bias": [bi]},
                 {"Y": 1, "Mean": 1, "Variance": 1}, {"epsilon": eps, "begin_norm_axis": begin})
        b.pir("pd_op.layer_norm", [x, sc, bi], eps, begin)
        return b.grad([x, sc, bi], xs, dtype).ex if grad else b.ex
    return gen


def gen_full_like(draw, dtype):
    st = _st()
    b = _B(draw, "full_like", dtype)
    src = draw(st.sampled_from(["float32", "int64", "float64"]))
    x = b.feed(_shape(draw), src)
    return b.pir("pd_op.full_like", [x], draw(st.sampled_from(FILL_VALUES)), dtype).ex


def gen_split_sections(draw, dtype):
    st = _st()
    b = _B(draw, "pd_op.split", dtype)
    xs = _shape(draw)
    axis = draw(st.integers(0, len(xs) - 1))
    num = draw(st.sampled_from([1] + _divisors(xs[axis])))
    sections = [xs[axis] // num] * num
    if num > 1 and draw(st.booleans()):
        sections[-1] = -1
    return b.pir("pd_op.split", [b.feed(xs, dtype)], sections, axis).ex


def gen_sgd(draw, dtype):
    b = _B(draw, "sgd", dtype)
    xs = _shape(draw)
    p, g, lr = b.feed(xs, dtype), b.feed(xs, dtype), b.feed([1], dtype)
    return b.legacy("sgd", {"Param": [p], "Grad": [g], "LearningRate": [lr]},
                    {"ParamOut": 1}, {}).ex


def gen_pir_unary(op, attr=None, kind="any"):
    return gen_unary(None, op, kind, attr)


def gen_expand(tile):
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, "pd_op.tile" if tile else "pd_op.expand", dtype)
        xs = [1 if draw(st.booleans()) else d for d in _shape(draw, 1, 3)]
        lead = draw(st.integers(0, 1))
        if tile:
            reps = [draw(st.integers(1, 3)) if d == 1 else 1 for d in xs]
            b.pir("pd_op.tile", [b.feed(xs, dtype)], [draw(st.integers(1, 3))] * lead + reps)
        else:
            tgt = [draw(st.integers(1, 3)) if d == 1 else (d if draw(st.booleans()) else -1)
                   for d in xs]
            b.pir("pd_op.expand", [b.feed(xs, dtype)], [draw(st.integers(1, 3))] * lead + tgt)
        return b.ex
    return gen


def gen_unsqueeze(draw, dtype):
    st = _st()
    b = _B(draw, "pd_op.unsqueeze", dtype)
    xs = _shape(draw, 1, 3)
    a = draw(st.integers(-len(xs) - 1, len(xs)))
    return b.pir("pd_op.unsqueeze", [b.feed(xs, dtype)], [a]).ex


def gen_tensor_attr(draw, dtype):
    """An attr given as a tensor: reshape2's ``Shape`` / ``ShapeTensor``
    (with a different ``shape`` attr), fill_constant's ``ValueTensor``,
    scale's ``ScaleTensor``."""
    st = _st()
    kind = draw(st.sampled_from(["Shape", "ShapeTensor", "ValueTensor", "ScaleTensor"]))
    b = _B(draw, "tensor_attrs", dtype)
    if kind == "ValueTensor":
        src = draw(st.sampled_from(["float32", "float64", "int32", "int64"]))
        v = b.feed([1], src)
        shape = _shape(draw, 1, 2)
        b.legacy("fill_constant", {"ValueTensor": [v]}, {"Out": 1},
                 {"shape": shape, "dtype": VARTYPE[dtype], "value": 1.0})
        return b.ex
    xs = _shape(draw, 2, 3)
    x = b.feed(xs, dtype)
    if kind == "ScaleTensor":
        s = b.feed([1], "float32")
        b.legacy("scale", {"X": [x], "ScaleTensor": [s]}, {"Out": 1},
                 {"scale": 2.0, "bias": draw(st.sampled_from(BIASES))})
        return b.ex
    target = [int(np.prod(xs))] if draw(st.booleans()) else [xs[0], -1]
    names = []
    for i, t in enumerate([target] if kind == "Shape" else [[t] for t in target]):
        n = f"in{b.n}"
        b.n += 1
        b.ex.feeds[n] = (list(t), [len(t)], "int32")
        names.append(n)
    b.legacy("reshape2", {"X": [x], kind: names}, {"Out": 1, "XShape": 1},
             {"shape": list(reversed(xs))})
    return b.ex


@dataclass
class Spec:
    name: str
    rows: tuple                 # the ROWS keys its programs exercise
    gen: object
    dtypes: tuple = field(default=())


def _specs():
    st = _st()
    out = []

    def add(name, rows, gen):
        out.append(Spec(name, tuple(rows), gen))

    for leg, pir, yk in (("elementwise_add", "pd_op.add", "any"),
                         ("elementwise_sub", "pd_op.subtract", "any"),
                         ("elementwise_mul", "pd_op.multiply", "any"),
                         ("elementwise_div", "pd_op.divide", "nonzero"),
                         ("elementwise_max", None, "any")):
        add(leg, [leg] + ([pir] if pir else []), gen_ew(leg, pir, ykind=yk))
    for leg, pir in (("elementwise_add", "pd_op.add"), ("elementwise_sub", "pd_op.subtract"),
                     ("elementwise_mul", "pd_op.multiply")):
        add(leg + "_grad", [leg, leg + "_grad", pir, pir + "_grad"],
            gen_ew(leg, pir, grad=True))
    add("elementwise_div_grad", ["pd_op.divide", "pd_op.divide_grad"],
        gen_ew("elementwise_div", "pd_op.divide", grad=True, ykind="nonzero"))
    add("matmul_v2", ["matmul_v2", "pd_op.matmul"], gen_matmul_v2())
    add("matmul_v2_grad", ["matmul_v2", "matmul_v2_grad", "pd_op.matmul",
                           "pd_op.matmul_grad"], gen_matmul_v2(True))
    add("matmul", ["matmul"], gen_matmul_v1)
    add("scale", ["scale", "pd_op.scale"], gen_scale)
    add("cast", ["cast", "pd_op.cast"], gen_cast)
    add("reshape2", ["reshape2", "pd_op.reshape"], gen_reshape)
    add("transpose2", ["transpose2", "pd_op.transpose"], gen_transpose)
    add("reduce_sum", ["reduce_sum", "pd_op.sum"], gen_reduce("reduce_sum", "pd_op.sum"))
    add("reduce_mean", ["reduce_mean", "pd_op.mean"], gen_reduce("reduce_mean", "pd_op.mean"))
    add("reduce_sum_grad", ["reduce_sum", "reduce_sum_grad", "pd_op.sum", "pd_op.sum_grad"],
        gen_reduce("reduce_sum", "pd_op.sum", grad=True))
    add("reduce_mean_grad", ["reduce_mean", "reduce_mean_grad", "pd_op.mean",
                             "pd_op.mean_grad"],
        gen_reduce("reduce_mean", "pd_op.mean", grad=True))
    add("mean", ["mean"], gen_mean())
    add("mean_grad", ["mean", "mean_grad"], gen_mean(True))
    add("fill_constant", ["fill_constant", "pd_op.full"], gen_fill)
    add("square", ["square", "pd_op.square"], gen_unary("square", "pd_op.square"))
    add("square_grad", ["square", "square_grad", "pd_op.square", "pd_op.square_grad"],
        gen_unary_grad("square", "pd_op.square"))
    add("squared_l2_norm", ["squared_l2_norm"], gen_unary("squared_l2_norm", None))
    add("relu", ["relu", "pd_op.relu"], gen_unary("relu", "pd_op.relu"))
    add("relu_grad", ["relu", "relu_grad", "pd_op.relu", "pd_op.relu_grad"],
        gen_unary_grad("relu", "pd_op.relu"))
    add("gelu", ["gelu", "pd_op.gelu"],
        gen_unary("gelu", "pd_op.gelu", attr=("approximate", _bool_attr)))
    add("gelu_grad", ["gelu", "gelu_grad", "pd_op.gelu", "pd_op.gelu_grad"],
        gen_unary_grad("gelu", "pd_op.gelu", attr=("approximate", _bool_attr)))
    add("sqrt", ["sqrt"], gen_unary("sqrt", None, kind="pos"))
    add("softmax", ["softmax", "pd_op.softmax"],
        gen_unary("softmax", "pd_op.softmax", attr=("axis", _axis_attr)))
    add("softmax_grad", ["softmax", "softmax_grad", "pd_op.softmax", "pd_op.softmax_grad"],
        gen_unary_grad("softmax", "pd_op.softmax", attr=("axis", _axis_attr)))
    add("assign", ["assign", "pd_op.assign"], gen_unary("assign", "pd_op.assign"))
    add("sum", ["sum", "pd_op.add_n", "builtin.combine"], gen_many("sum", "pd_op.add_n"))
    add("stack", ["stack"], gen_many("stack", None, out_slot="Y", axis=True))
    add("concat", ["pd_op.concat", "builtin.combine"], gen_many(None, "pd_op.concat",
                                                                 axis=True))
    add("split", ["split", "pd_op.split_with_num", "builtin.split"], gen_split)
    add("slice", ["slice", "pd_op.slice"], gen_slice)
    add("lookup_table_v2", ["lookup_table_v2", "pd_op.embedding"], gen_lookup())
    add("lookup_table_v2_grad", ["lookup_table_v2", "lookup_table_v2_grad", "pd_op.embedding",
                                 "pd_op.embedding_grad"], gen_lookup(True))
    add("layer_norm", ["layer_norm", "pd_op.layer_norm"], gen_layer_norm())
    add("layer_norm_grad", ["layer_norm", "layer_norm_grad", "pd_op.layer_norm",
                            "pd_op.layer_norm_grad"], gen_layer_norm(True))
    add("full_like", ["pd_op.full_like"], gen_full_like)
    add("split_sections", ["pd_op.split"], gen_split_sections)
    add("slice_grad", ["slice", "slice_grad", "pd_op.slice", "pd_op.slice_grad"],
        gen_slice_grad)
    add("sgd", ["sgd"], gen_sgd)
    add("pow", ["pd_op.pow"], gen_pir_unary("pd_op.pow", attr=(
        "y", lambda r: st.sampled_from([2.0, 3.0]))))
    add("pow_grad", ["pd_op.pow", "pd_op.pow_grad"], gen_unary_grad(None, "pd_op.pow", attr=(
        "y", lambda r: st.sampled_from([2.0, 3.0]))))
    add("transpose2_grad", ["transpose2", "transpose2_grad", "pd_op.transpose",
                            "pd_op.transpose_grad"], gen_unary_grad(
        "transpose2", "pd_op.transpose", outs=("Out", "XShape"),
        attr=("axis", lambda r: st.permutations(range(r)).map(list)),
        shape=lambda xs, a: [xs[i] for i in a[0]]))
    add("reshape2_grad", ["reshape2", "reshape2_grad", "pd_op.reshape", "pd_op.reshape_grad"],
        gen_unary_grad("reshape2", "pd_op.reshape", outs=("Out", "XShape"),
                       attr=("shape", lambda r: st.just([-1])),
                       shape=lambda xs, a: [int(np.prod(xs))]))
    add("unsqueeze", ["pd_op.unsqueeze"], gen_unsqueeze)
    add("tensor_attrs", ["fill_constant"], gen_tensor_attr)
    add("expand", ["pd_op.expand"], gen_expand(False))
    add("tile", ["pd_op.tile"], gen_expand(True))
    from verify.value import semantics as S
    for spec in out:
        allowed = set(DTYPES)
        for r in spec.rows:
            d = S.row_dtypes(r)
            if d is not S.ANY:
                allowed &= set(d)
        spec.dtypes = tuple(d for d in DTYPES if d in allowed)
    return out


SPECS = None


def specs() -> list:
    global SPECS
    if SPECS is None:
        SPECS = _specs()
    return SPECS


def sample(spec: Spec, dtype: str, n: int, seed: int = 0) -> list:
    """``n`` examples of ``spec`` in ``dtype``, drawn by Hypothesis with a
    fixed seed (the spec's name, dtype and ``seed``): the same every run."""
    import zlib

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    got = []

    @hseed(zlib.crc32(f"{spec.name}/{dtype}/{seed}".encode()))
    @settings(max_examples=n + 1, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        got.append(spec.gen(data.draw, dtype))
    collect()
    # Hypothesis's first example is its simplest (every dim 1, every choice
    # the first): kept only when it is all there is
    return got[1:n + 1] or got[:1]


# -- the worker: one executor mode, a batch of examples ---------------------------
def run_mode(mode: str, examples: list, timeout: float = 900) -> dict:
    """Run ``examples`` in a fresh worker process for ``mode``: ``{"results":
    {id: result}, "translations": n, "flags": {...}}``."""
    import tempfile

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGS_")}
    env.update(_ENV[mode])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("GLOG_minloglevel", "2")
    with tempfile.TemporaryDirectory(prefix="kdiff-") as d:
        src, dst = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(src, "w") as f:
            json.dump([e.to_json() for e in examples], f)
        proc = subprocess.run([sys.executable, "-m", "verify.selfcheck.kernel_differential",
                               mode, src, dst], env=env, cwd=root, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0 or not os.path.exists(dst):
            raise RuntimeError(f"kernel worker {mode} failed ({proc.returncode}): "
                               f"{proc.stderr[-2000:]}")
        with open(dst) as f:
            out = json.load(f)
    out["results"] = {r["id"]: r for r in out["results"]}
    return out


def _plain(v):
    return json.loads(json.dumps(v, default=str))


def _fetched(arr, declared):
    """A fetched array as JSON: its dtype the array's own (uint16 the
    bfloat16 bits; ``declared``, the program's var dtype, may differ)."""
    a = np.asarray(arr)
    dtype = "bfloat16" if a.dtype == np.uint16 else "bool" if a.dtype == np.bool_ else \
        str(a.dtype)
    if a.dtype == np.uint16:
        a = (a.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(a.shape)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    return {"shape": list(a.shape), "dtype": dtype,
            "data": [x if isinstance(x, int) else float(x) for x in a.reshape(-1).tolist()]}


def _run_legacy(paddle, ex):
    from verify.ir.snapshot import from_programs

    leg = ex["legacy"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        vs = {n: paddle.static.data(n, shape, dt) for n, (_, shape, dt) in ex["feeds"].items()}
        for n in (leg.get("grad") or {}).get("wrt", []):
            vs[n].stop_gradient = False
        # outputs declared in the example's dtype (cast: its target); an op
        # whose var-type inference sets its outputs' dtypes overrides it
        dt = leg.get("out_dtype", ex["dtype"])
        outs = {s: [block.create_var(name=f"out.{s}.{i}", dtype=dt) for i in range(n)]
                for s, n in leg["outputs"].items()}
        block.append_op(type=leg["type"], inputs={s: [vs[n] for n in names]
                                                  for s, names in leg["inputs"].items()},
                        outputs=outs, attrs=leg["attrs"])
        fetch = [v.name for s, vl in outs.items() if s != "XShape" for v in vl]
        if leg.get("grad"):
            out = next(vl[0] for s, vl in outs.items() if s != "XShape")
            grads = paddle.static.gradients([out], [vs[n] for n in leg["grad"]["wrt"]],
                                            target_gradients=[vs[leg["grad"]["gout"]]])
            fetch = [g.name for g in grads]
    snap = from_programs(main)
    return main, snap, fetch


def _run_pir(paddle, ex):
    from paddle import _C_ops

    from verify.ir.pir_snapshot import Names, from_pir_programs

    p = ex["pir"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        vs = {n: paddle.static.data(n, shape, dt) for n, (_, shape, dt) in ex["feeds"].items()}
        if p.get("grad"):
            for n in p["grad"]["wrt"]:
                vs[n].stop_gradient = False
        outs = PIR_BUILD[p["op"]](_C_ops, [vs[n] for n in p["ins"]], *p["args"])
        if p.get("grad"):
            from paddle.autograd.ir_backward import grad

            outs = grad(outs[:1], [vs[n] for n in p["grad"]["wrt"]],
                        grad_outputs=[vs[p["grad"]["gout"]]])
    names = Names("%")
    snap = from_pir_programs(main, names=names)
    fetch = [names.name(v) for v in outs]
    return main, snap, fetch, outs


def _message(exc) -> str:
    """Paddle's own message (its "In user code" traceback cut away)."""
    text = str(exc)
    import re

    m = re.search(r"\b(\w+Error: [^\n]*)", text.split("In user code:")[-1])
    if m:
        return " ".join(m.group(1).split())[:300]
    for mark in ("(InvalidArgument)", "(Unimplemented)", "(PreconditionNotMet)",
                 "(NotFound)", "(InvalidType)", "(Fatal)", "(OutOfRange)"):
        if mark in text:
            text = text[text.index(mark):]
            break
    else:
        text = text.strip().splitlines()[-1] if text.strip() else ""
    return " ".join(text.split())[:300]


def _worker(mode, src, dst):
    import paddle
    import paddle.base.executor as E

    calls = [0]
    orig = E.translate_to_pir

    def counted(*a, **k):  # proof that FLAGS_enable_pir_in_executor took effect
        calls[0] += 1
        return orig(*a, **k)
    E.translate_to_pir = counted
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    with open(src) as f:
        examples = json.load(f)
    results = []
    for ex in examples:
        r = {"id": ex["id"]}
        if ex["legacy" if mode != "pir" else "pir"] is None:
            continue
        try:
            if mode == "pir":
                main, snap, fetch, vals = _run_pir(paddle, ex)
                targets = vals
            else:
                main, snap, fetch = _run_legacy(paddle, ex)
                targets = fetch
            r["snap"] = {"ops": [{"type": o.type, "inputs": o.inputs, "outputs": o.outputs,
                                  "attrs": _plain(o.attrs)} for o in snap.ops],
                         "vars": {n: v.dtype for n, v in snap.vars.items()},
                         "shapes": {n: _plain(v.shape) for n, v in snap.vars.items()}}
            r["ops"] = [o.type for o in snap.ops]
            r["fetch"] = fetch
        except Exception as exc:  # Paddle refuses to build it
            r["error"] = f"build: {type(exc).__name__}: {_message(exc)}"
            results.append(r)
            continue
        try:
            feed = {n: feed_array(*v) for n, v in ex["feeds"].items()}
            got = exe.run(main, feed=feed, fetch_list=targets)
            r["outs"] = [_fetched(a, r["snap"]["vars"].get(n, "")) for a, n in zip(got, fetch)]
            r["declared"] = [r["snap"]["vars"].get(n, "") for n in fetch]
        except Exception as exc:  # Paddle refuses to run it
            r["error"] = f"run: {type(exc).__name__}: {_message(exc)}"
            r["error_full"] = str(exc)[-3000:]
        results.append(r)
    flags = paddle.get_flags(["FLAGS_enable_pir_in_executor", "FLAGS_enable_pir_api"])
    with open(dst, "w") as f:
        json.dump({"mode": mode, "translations": calls[0], "flags": _plain(flags),
                   "results": results}, f, default=str)



# -- the rows on exact values, and the comparison ---------------------------------
class ExactKernels:
    """``k`` for rows on exact rationals: constants as given, every
    uninterpreted kernel ``kernels.reference`` (the replay's real kernels)."""

    reduce_to = None

    def const(self, v):
        return Fraction(v)

    def uf(self, kernel, args, attrs=()):
        from verify.value.kernels import reference

        with np.errstate(over="ignore"):  # a cast that overflows: NotAnInput
            v = reference(kernel, attrs, tuple(Fraction(a) for a in args))
        return v if isinstance(v, Fraction) else Fraction(float(v))


def _tensor(data, shape, dtype):
    from verify.value import semantics as S

    arr = np.empty(len(data), dtype=object)
    for i, v in enumerate(data):
        arr[i] = Fraction(v)
    return S.Tensor(arr.reshape(shape), S.leaf_dims(shape), dtype)


def _wrap(v, dtype):
    from verify.value import semantics as S

    mod = S.wrap_modulus(dtype)
    if mod is None:
        return v
    bits, signed = mod
    n = int(v) % (1 << bits)
    return Fraction(n - (1 << bits) if signed and n >= 1 << (bits - 1) else n)


# ops that only declare a fed input (the ``data`` op a legacy program gets
# under FLAGS_enable_pir_in_executor=1, the executor's feed/fetch)
DECLARATIONS = frozenset({"data", "feed", "fetch"})


def _declared(res, name):
    from verify.value import semantics as S

    shape = res["snap"].get("shapes", {}).get(name)
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        return None
    return S.Tensor(np.empty(shape, dtype=object), S.leaf_dims(shape),
                    res["snap"]["vars"].get(name, ""))


def apply_rows(ex: Example, res: dict) -> list:
    """The rows of ``res``'s snapshot ops applied in order to ``ex``'s fed
    values (as ``symbolic.py`` applies them on terms): the fetched tensors."""
    from verify.ir.snapshot import Op
    from verify.value import semantics as S
    from verify.value.executor_disagreements import refusal

    env = {n: _tensor(*v) for n, v in ex.feeds.items()}
    k = ExactKernels()
    dtypes = res["snap"]["vars"]
    for i, rec in enumerate(res["snap"]["ops"]):
        op = Op(i, rec["type"], rec["inputs"], rec["outputs"], rec["attrs"])
        if op.type in DECLARATIONS:
            continue
        row = S.ROWS.get(op.type)
        if row is None:
            raise S.Unsupported(f"no semantics row for op {op.type}")
        # a var read before anything wrote it (a forward's XShape): its
        # declared shape, elements that fail if a row computes with them
        ins = {s: [env[n] if n in env else _declared(res, n) for n in names]
               for s, names in op.inputs.items() if names}
        S.check_dtypes(op, [(s, n, t.dtype) for s, names in op.inputs.items()
                            for n, t in zip(names, ins.get(s, [])) if t is not None] +
                       [(s, n, dtypes.get(n, "")) for s, names in op.outputs.items()
                        for n in names])
        why = refusal(op, [t.dtype for ts in ins.values() for t in ts if t is not None] +
                      [dtypes.get(n, "") for names in op.outputs.values() for n in names])
        if why:  # as the proof: no one meaning where Paddle's executors disagree
            raise S.Unsupported(why)
        outs = row(op, ins, k)
        for slot, names in op.outputs.items():
            for n, t in zip(names, outs.get(slot) or []):
                if t is None:
                    continue
                if op.type in S.WRAPPED and S.wrap_modulus(t.dtype):
                    flat = np.empty(t.arr.size, dtype=object)
                    for j, e in enumerate(t.arr.reshape(-1)):
                        flat[j] = _wrap(e, t.dtype)
                    t = S.Tensor(flat.reshape(t.arr.shape), t.dims, t.dtype)
                env[n] = t
    return [env.get(n) for n in res["fetch"]]


def magnitude(ex: Example) -> float:
    """The largest |input|^2 times the longest dim, plus the largest |input|."""
    big, longest = 0.0, 1
    for data, shape, _ in ex.feeds.values():
        if data:
            big = max(big, max(abs(float(v)) for v in data))
        longest = max([longest] + list(shape))
    return big * big * longest + big


def tolerance(dtype: str, exact: float, mag: float) -> float:
    return 4 * EPS[dtype] * (abs(exact) + mag)


def compare(ex: Example, res: dict, want: list) -> str | None:
    """None when Paddle's fetched outputs match the row's ``want``, else why not."""
    from verify.value import semantics as S

    mag = magnitude(ex)
    for i, (got, t) in enumerate(zip(res["outs"], want)):
        name = res["fetch"][i]
        if t is None:
            return f"{name}: the rows give no value"
        dtype = S.dtype_name(got["dtype"])
        if t.dtype and S.dtype_name(t.dtype) and S.dtype_name(t.dtype) != dtype:
            return f"{name}: row dtype {S.dtype_name(t.dtype)}, Paddle {dtype}"
        if list(t.arr.shape) != list(got["shape"]):
            return f"{name}: row shape {list(t.arr.shape)}, Paddle {got['shape']}"
        for j, (e, p) in enumerate(zip(t.arr.reshape(-1), got["data"])):
            if dtype in EPS:
                ef = float(e)
                if not (isinstance(p, (int, float)) and math.isfinite(p)) or \
                        abs(p - ef) > tolerance(dtype, ef, mag):
                    return (f"{name}[{j}]: row {ef!r}, Paddle {p!r} ({dtype}, tolerance "
                            f"{tolerance(dtype, ef, mag):.3g})")
            else:
                ev = _wrap(e, dtype) if dtype != "bool" else Fraction(int(e != 0))
                if Fraction(p) != ev:
                    return f"{name}[{j}]: row {ev}, Paddle {p} ({dtype})"
    return None


def judge(ex: Example, res: dict | None) -> tuple:
    """``(outcome, detail)``: agree, disagree, refused (Paddle), unsupported
    (the row), no_reference (a kernel the replay does not have), not_input."""
    from verify.value import semantics as S
    from verify.value.kernels import NoReference, NotAnInput

    if res is None:
        return "absent", ""
    if "error" in res:
        return "refused", res["error"]
    try:
        want = apply_rows(ex, res)
    except S.Unsupported as exc:
        return "unsupported", str(exc)
    except NoReference as exc:
        return "no_reference", str(exc)
    except NotAnInput as exc:
        return "not_input", str(exc)
    except Exception as exc:  # the row fails where Paddle computes
        return "disagree", f"the row raises {type(exc).__name__}: {exc}"
    why = compare(ex, res, want)
    return ("agree", "") if why is None else ("disagree", why)


def executor_diff(ex: Example, a: dict | None, b: dict | None) -> str | None:
    """How two modes' results for one example differ (one refuses, shapes,
    values beyond the tolerance), else None."""
    if a is None or b is None:
        return None
    if ("error" in a) != ("error" in b):
        bad, good = (a, b) if "error" in a else (b, a)
        return f"one refuses ({bad['error'][:200]}), the other computes"
    if "error" in a:
        return None
    mag = magnitude(ex)
    for x, y in zip(a["outs"], b["outs"]):
        if x["shape"] != y["shape"] or x["dtype"] != y["dtype"]:
            return f"{x['dtype']}{x['shape']} vs {y['dtype']}{y['shape']}"
        for j, (p, q) in enumerate(zip(x["data"], y["data"])):
            tol = tolerance(x["dtype"], p, mag) if x["dtype"] in EPS and \
                isinstance(p, float) and math.isfinite(p) else 0
            if not (p == q or (p != p and q != q)) and not abs(p - q) <= tol:
                return f"element {j}: {p!r} vs {q!r} ({x['dtype']})"
    return None



# -- a sweep: examples of every spec in every dtype its rows model ----------------
PAIRS = (("legacy", "legacy_pir"), ("legacy", "pir"), ("legacy_pir", "pir"))


@dataclass
class Sweep:
    examples: list
    outcomes: dict            # (mode, outcome) -> count
    disagreements: list       # (mode, spec, dtype, detail, example json): a row vs Paddle
    executor: list            # (mode a, mode b, spec, dtype, detail, example json, the
    #                           table's refusal for legacy vs legacy_pir, else None)
    rows_agreeing: set        # ROWS keys applied in a run that agreed with Paddle
    seconds: float
    translations: dict        # mode -> the executor's translate_to_pir calls
    runs: dict = field(default_factory=dict)  # mode -> run_mode's results by example id

    def examples_run(self, mode):
        return sum(n for (m, o), n in self.outcomes.items() if m == mode and o != "absent")


def listed_refusal(res: dict | None) -> str | None:
    """The table's refusal of an op of ``res``'s program snapshot (its
    attrs as the program records them: a legacy ``value`` attr is float32)."""
    from verify.ir.snapshot import Op
    from verify.value.executor_disagreements import refusal

    if not res or "snap" not in res:
        return None
    dtypes = list(res["snap"]["vars"].values())
    for i, rec in enumerate(res["snap"]["ops"]):
        why = refusal(Op(i, rec["type"], rec["inputs"], rec["outputs"], rec["attrs"]), dtypes)
        if why:
            return why
    return None


def build_examples(n: int, seed: int = 0, names=None) -> list:
    exs = []
    for spec in specs():
        if names and spec.name not in names:
            continue
        for dtype in spec.dtypes:
            for e in sample(spec, dtype, n, seed):
                e.id = len(exs)
                exs.append(e)
    return exs


def sweep(n: int = 1, seed: int = 0, names=None) -> Sweep:
    """``n`` examples a spec and dtype, run in the three modes and judged."""
    t0 = time.time()
    exs = build_examples(n, seed, names)
    runs = {m: run_mode(m, exs) for m in MODES}
    outcomes, dis, ex_dis, rows = {}, [], [], set()
    for e in exs:
        for m in MODES:
            res = runs[m]["results"].get(e.id)
            o, detail = judge(e, res)
            outcomes[(m, o)] = outcomes.get((m, o), 0) + 1
            if o == "agree":
                rows.update(t for t in res["ops"] if t not in DECLARATIONS)
            elif o == "disagree":
                dis.append((m, e.spec, e.dtype, detail, e.to_json()))
        for a, b in PAIRS:
            ra, rb = runs[a]["results"].get(e.id), runs[b]["results"].get(e.id)
            d = executor_diff(e, ra, rb)
            if d:
                listed = listed_refusal(ra) if (a, b) == ("legacy", "legacy_pir") else None
                ex_dis.append((a, b, e.spec, e.dtype, d, e.to_json(), listed))
    return Sweep(exs, outcomes, dis, ex_dis, rows, time.time() - t0,
                 {m: runs[m]["translations"] for m in MODES},
                 {m: runs[m]["results"] for m in MODES})


if __name__ == "__main__":
    _worker(*sys.argv[1:4])
