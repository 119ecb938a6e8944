"""The programs of the kernel differential (``kernel_differential.py``):
examples drawn by Hypothesis with fixed seeds, one spec a family of
one-op programs (the op, its shapes, dtypes and non-default attrs, its
backward program), and the PIR builders the worker calls.

An :class:`Example` is plain data (JSON): the fed inputs, the legacy op
(``block.append_op``) and/or the ``paddle._C_ops`` call building the
``pd_op`` program; ``grad`` makes either the backward program of its op.
No Paddle import here: the worker imports Paddle with its mode's flags.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "bool")
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int32", "int64")
VARTYPE = {"bool": 0, "int32": 2, "int64": 3, "float16": 4, "float32": 5, "float64": 6,
           "bfloat16": 22}


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
    # the vocab-parallel lookup (auto_parallel_c_embedding_pass): table, ids
    "pd_op.c_embedding": lambda C, v, start, vocab: [C.c_embedding(v[0], v[1], start, vocab)],
    # the static PIR builder returns layer_norm's ``out`` only
    "pd_op.layer_norm": lambda C, v, eps, begin: [C.layer_norm(v[0], v[1], v[2], eps, begin)],
    "pd_op.full_like": lambda C, v, value, d: [C.full_like(v[0], value, _dt(d), _cpu())],
    "pd_op.split": lambda C, v, sections, axis: list(C.split(v[0], sections, axis)),
    "pd_op.repeat_interleave": lambda C, v, rep, axis, size: [
        C.repeat_interleave(v[0], rep, axis, size)],
    "pd_op.strided_slice": lambda C, v, axes, st, en, sp: [
        C.strided_slice(v[0], axes, st, en, sp)],
    "pd_op.flatten": lambda C, v, start, stop: [C.flatten(v[0], start, stop)],
    # the grad op itself: the pieces, then the fed out_grad
    "pd_op.stack_grad": lambda C, v, axis: list(C.stack_grad(list(v[:-1]), v[-1], axis)),
    # the global-norm grad clip's ops
    "pd_op.squared_l2_norm": lambda C, v: [C.squared_l2_norm(v[0])],
    "pd_op.sqrt": lambda C, v: [C.sqrt(v[0])],
    "pd_op.tanh": lambda C, v: [C.tanh(v[0])],
    "pd_op.maximum": lambda C, v: [C.maximum(v[0], v[1])],
    "pd_op.minimum": lambda C, v: [C.minimum(v[0], v[1])],
    "pd_op.stack": lambda C, v, axis: [C.stack(list(v), axis)],
    # the LLaMA model's uninterpreted kernels (their references: kernels.py)
    "pd_op.rsqrt": lambda C, v: [C.rsqrt(v[0])],
    "pd_op.sin": lambda C, v: [C.sin(v[0])],
    "pd_op.cos": lambda C, v: [C.cos(v[0])],
    "pd_op.tril": lambda C, v, diag: [C.tril(v[0], diag)],
    "pd_op.where": lambda C, v: [C.where(v[0], v[1], v[2])],
    "pd_op.not_equal": lambda C, v: [C.not_equal(v[0], v[1])],
    "pd_op.bitwise_and": lambda C, v: [C.bitwise_and(v[0], v[1])],
    "pd_op.arange": lambda C, v, start, end, step, d: [C.arange(start, end, step, _dt(d),
                                                                _cpu())],
    # set_value_ writes in place: on a copy of the fed x
    "pd_op.set_value_": lambda C, v, st, en, sp, axes, dec, shape, vals: [C.set_value_(
        C.assign(v[0]), st, en, sp, axes, dec, [], shape, vals)],
    # (loss, softmax): the loss first, so a grad example differentiates it
    "pd_op.cross_entropy_with_softmax": lambda C, v, soft, use_sm, ignore, axis: list(
        reversed(C.cross_entropy_with_softmax(v[0], v[1], soft, use_sm, True, ignore, axis))),
    # swiglu(x, y), or swiglu(x) of x's two halves along its last axis
    "pd_op.swiglu": lambda C, v: [C.swiglu(v[0], v[1] if len(v) > 1 else None)],
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


def _unary_op(draw, dtype, legacy, pir, kind, attr, outs):
    """One unary op, legacy and/or PIR, on a generated ``x``: ``(builder, x,
    x's shape, the PIR call's extra args)``; ``attr``: (name, strategy) of
    one attr passed to both."""
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
    return b, x, xs, args


def gen_unary(legacy, pir, kind="any", attr=None):
    """``legacy(X) -> Out`` and ``pir(x)``; ``attr``: (name, strategy) of
    one attr passed to both."""
    def gen(draw, dtype):
        return _unary_op(draw, dtype, legacy, pir, kind, attr, ("Out",))[0].ex
    return gen


def gen_unary_grad(legacy, pir, attr=None, kind="any", outs=("Out",), shape=None):
    """The backward of ``legacy(X)`` / ``pir(x)``: the grad of x for a fed
    gradient of the output; ``shape(draw, xs, attr) -> out shape``."""
    def gen(draw, dtype):
        b, x, xs, args = _unary_op(draw, dtype, legacy, pir, kind, attr, outs)
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


def gen_c_embedding(grad=False):
    """A rank's piece of a vocab-split table: ``rows`` local rows at global
    ids ``start .. start + rows - 1`` of a vocabulary of ``vocab``; the ids
    drawn from the whole vocabulary, so some fall below, inside and above
    the piece (the kernel writes 0 for those another rank holds)."""
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, "c_embedding_grad" if grad else "c_embedding", dtype)
        rows, width = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        start = rows * draw(st.integers(0, 2))
        vocab = start + rows + rows * draw(st.integers(0, 1))
        ids_shape = _shape(draw, 1, 2)
        w = b.feed([rows, width], dtype)
        ids = f"in{b.n}"
        b.n += 1
        n = int(np.prod(ids_shape))
        b.ex.feeds[ids] = ([int(v) for v in b.rng.integers(0, vocab, n)], ids_shape, "int64")
        b.pir("pd_op.c_embedding", [w, ids], start, vocab)
        return b.grad([w], ids_shape + [width], dtype).ex if grad else b.ex
    return gen


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


def gen_repeat_interleave(draw, dtype):
    st = _st()
    b = _B(draw, "pd_op.repeat_interleave", dtype)
    xs = _shape(draw, 1, 3)
    axis, rep = draw(st.integers(-len(xs), len(xs) - 1)), draw(st.integers(1, 3))
    size = draw(st.sampled_from([-1, xs[axis] * rep]))
    return b.pir("pd_op.repeat_interleave", [b.feed(xs, dtype)], rep, axis, size).ex


def gen_strided_slice(grad=False):
    """``pd_op.strided_slice`` of a non-empty piece: starts from either
    end, ends past the dim (INT_MAX too) or inside it, strides 1-3; ``grad``:
    its backward (``pd_op.strided_slice_grad``)."""
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, "pd_op.strided_slice_grad" if grad else "pd_op.strided_slice", dtype)
        xs = _shape(draw, 1, 3)
        axes = sorted(draw(st.sets(st.integers(0, len(xs) - 1), min_size=1)))
        starts, ends, strides, idx = [], [], [], [slice(None)] * len(xs)
        for a in axes:
            d = xs[a]
            s = draw(st.integers(0, d - 1))
            e = draw(st.sampled_from([d, 2 ** 31 - 1, s + 1 + draw(st.integers(0, d - s - 1))]))
            sp = draw(st.integers(1, 3))
            idx[a] = slice(s, min(e, d), sp)
            starts.append(s - d if draw(st.booleans()) else s)
            ends.append(e - d if e < d and draw(st.booleans()) else e)
            strides.append(sp)
        x = b.feed(xs, dtype)
        b.pir("pd_op.strided_slice", [x], axes, starts, ends, strides)
        if grad:
            return b.grad([x], list(np.zeros(xs)[tuple(idx)].shape), dtype).ex
        return b.ex
    return gen


def gen_flatten(grad=False):
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, "pd_op.flatten_grad" if grad else "pd_op.flatten", dtype)
        xs = _shape(draw, 1, 4)
        r = len(xs)
        start = draw(st.integers(0, r - 1))
        stop = draw(st.integers(start, r - 1))
        out = xs[:start] + [int(np.prod(xs[start:stop + 1]))] + xs[stop + 1:]
        x = b.feed(xs, dtype)
        b.pir("pd_op.flatten", [x], start - r if draw(st.booleans()) else start,
              stop - r if draw(st.booleans()) else stop)
        return b.grad([x], out, dtype).ex if grad else b.ex
    return gen


def gen_stack_grad(draw, dtype):
    """``pd_op.stack_grad`` of 2-3 pieces along an axis from either end (the
    fed out_grad has the pieces' count there)."""
    st = _st()
    b = _B(draw, "pd_op.stack_grad", dtype)
    xs = _shape(draw, 1, 3)
    n = draw(st.integers(2, 3))
    axis = draw(st.integers(-len(xs) - 1, len(xs)))
    a = axis % (len(xs) + 1)
    names = [b.feed(xs, dtype) for _ in range(n)]
    g = b.feed(xs[:a] + [n] + xs[a:], dtype)
    return b.pir("pd_op.stack_grad", names + [g], axis).ex


def gen_swiglu(with_y, grad=False):
    """``pd_op.swiglu``: ``silu(x) * y`` with a y of x's shape, or without y
    ``silu(x1) * x2`` of x's halves (its last dim even); ``grad``: the
    backward (``pd_op.swiglu_grad``) for x (and y)."""
    def gen(draw, dtype):
        name = "swiglu" + ("" if with_y else "_halves") + ("_grad" if grad else "")
        b = _B(draw, name, dtype)
        xs = _shape(draw, 1, 3)
        if not with_y:
            xs[-1] *= 2
        names = [b.feed(xs, dtype)] + ([b.feed(xs, dtype)] if with_y else [])
        b.pir("pd_op.swiglu", names)
        if grad:
            return b.grad(names, xs if with_y else xs[:-1] + [xs[-1] // 2], dtype).ex
        return b.ex
    return gen


def gen_tril(draw, dtype):
    """``pd_op.tril`` of a rank 2-3 x, ``diagonal`` from below to above the
    main one (past the matrix too)."""
    st = _st()
    b = _B(draw, "tril", dtype)
    xs = _shape(draw, 2, 3)
    return b.pir("pd_op.tril", [b.feed(xs, dtype)], draw(st.integers(-3, 3))).ex


def gen_where(draw, dtype):
    """``pd_op.where(condition, x, y)``: a bool condition, x and y of
    ``dtype``, all of one shape (3.3.1's WhereInferMeta wants them equal)."""
    b = _B(draw, "where", dtype)
    xs = _shape(draw, 1, 3)
    c = b.feed(xs, "bool")
    return b.pir("pd_op.where", [c, b.feed(xs, dtype), b.feed(xs, dtype)]).ex


def gen_compare(op, name):
    """A binary ``op`` (not_equal, bitwise_and) of two tensors of one shape;
    y a copy of x at some elements (so equal pairs occur)."""
    def gen(draw, dtype):
        b = _B(draw, name, dtype)
        xs = _shape(draw, 1, 3)
        x = b.feed(xs, dtype)
        y = b.feed(xs, dtype)
        xd, yd = b.ex.feeds[x][0], b.ex.feeds[y][0]
        for i in range(0, len(xd), 2):
            yd[i] = xd[i]
        return b.pir(op, [x, y]).ex
    return gen


ARANGES = [(0.0, 5.0, 1.0), (1.0, 7.0, 2.0), (0.5, 3.0, 0.25), (0.0, 1.0, 0.1),
           (-2.0, 2.5, 0.5), (10.0, 0.0, -3.0), (0.0, 128.0, 1.0)]


def gen_arange(draw, dtype):
    """``pd_op.arange(start, end, step)`` in ``dtype`` (bounds constants, as
    the planned programs' are): integer and fractional steps, a negative one."""
    st = _st()
    b = _B(draw, "arange", dtype)
    start, end, step = draw(st.sampled_from(ARANGES))
    return b.pir("pd_op.arange", [], start, end, step, dtype).ex


def gen_cross_entropy(grad=False):
    """``pd_op.cross_entropy_with_softmax`` of rank-2 logits along either
    axis: a hard int64 label (some rows ``ignore_index``) or a soft one,
    with softmax or on probabilities (``use_softmax`` False: positive
    inputs); ``grad``: its backward (the loss's grad of the logits)."""
    def gen(draw, dtype):
        st = _st()
        b = _B(draw, "cross_entropy_grad" if grad else "cross_entropy", dtype)
        xs = _shape(draw, 2, 2)
        axis = draw(st.sampled_from([-1, 0, 1]))
        a = axis % 2
        soft, use_sm = draw(st.booleans()), draw(st.booleans())
        x = b.feed(xs, dtype, "any" if use_sm else "pos")
        ls = list(xs)
        if not soft:
            ls[a] = 1
            lab = f"in{b.n}"
            b.n += 1
            ignore = -100
            data = [int(v) for v in b.rng.integers(0, xs[a], int(np.prod(ls)))]
            if len(data) > 1 and draw(st.booleans()):
                data[0] = ignore
            b.ex.feeds[lab] = (data, ls, "int64")
        else:
            lab, ignore = b.feed(ls, dtype, "pos"), -100
        b.pir("pd_op.cross_entropy_with_softmax", [x, lab], soft, use_sm, ignore, axis)
        if grad:
            gs = list(xs)
            gs[a] = 1
            return b.grad([x], gs, dtype).ex
        return b.ex
    return gen


SET_VALUES = [2.5, -1.0, 0.1, 7.0]


def gen_set_value(draw, dtype):
    """``pd_op.set_value_`` of a slice (bounds from either end, past the dim,
    strides 1-2, an index that drops its axis) to one value or a row of
    values broadcast over it."""
    st = _st()
    b = _B(draw, "set_value_", dtype)
    xs = _shape(draw, 1, 3)
    axes = sorted(draw(st.sets(st.integers(0, len(xs) - 1), min_size=1)))
    starts, ends, steps, dec, piece = [], [], [], [], list(xs)
    for a in axes:
        d = xs[a]
        s = draw(st.integers(0, d - 1))
        if draw(st.booleans()):  # x[..., s, ...]: one index, its axis dropped
            e, sp = s + 1, 1
            dec.append(a)
        else:
            e = draw(st.sampled_from([d, 2 ** 31 - 1, s + 1]))
            sp = draw(st.integers(1, 2))
        piece[a] = len(range(s, min(e, d), sp))
        starts.append(s - d if draw(st.booleans()) else s)
        ends.append(e)
        steps.append(sp)
    kept = [n for i, n in enumerate(piece) if i not in dec]
    if kept and draw(st.booleans()):  # a row of values along the last kept dim
        shape = [kept[-1]]
        vals = [draw(st.sampled_from(SET_VALUES)) for _ in range(kept[-1])]
    else:
        shape, vals = [1], [draw(st.sampled_from(SET_VALUES))]
    return b.pir("pd_op.set_value_", [b.feed(xs, dtype)], starts, ends, steps, axes, dec,
                 shape, vals).ex


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
                         ("elementwise_max", "pd_op.maximum", "any"),
                         ("elementwise_min", "pd_op.minimum", "any")):
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
    add("squared_l2_norm", ["squared_l2_norm", "pd_op.squared_l2_norm"],
        gen_unary("squared_l2_norm", "pd_op.squared_l2_norm"))
    add("relu", ["relu", "pd_op.relu"], gen_unary("relu", "pd_op.relu"))
    add("relu_grad", ["relu", "relu_grad", "pd_op.relu", "pd_op.relu_grad"],
        gen_unary_grad("relu", "pd_op.relu"))
    add("gelu", ["gelu", "pd_op.gelu"],
        gen_unary("gelu", "pd_op.gelu", attr=("approximate", _bool_attr)))
    add("gelu_grad", ["gelu", "gelu_grad", "pd_op.gelu", "pd_op.gelu_grad"],
        gen_unary_grad("gelu", "pd_op.gelu", attr=("approximate", _bool_attr)))
    add("sqrt", ["sqrt", "pd_op.sqrt"], gen_unary("sqrt", "pd_op.sqrt", kind="pos"))
    add("tanh", ["pd_op.tanh"], gen_pir_unary("pd_op.tanh"))
    add("tanh_grad", ["pd_op.tanh", "pd_op.tanh_grad"], gen_unary_grad(None, "pd_op.tanh"))
    add("softmax", ["softmax", "pd_op.softmax"],
        gen_unary("softmax", "pd_op.softmax", attr=("axis", _axis_attr)))
    add("softmax_grad", ["softmax", "softmax_grad", "pd_op.softmax", "pd_op.softmax_grad"],
        gen_unary_grad("softmax", "pd_op.softmax", attr=("axis", _axis_attr)))
    add("assign", ["assign", "pd_op.assign"], gen_unary("assign", "pd_op.assign"))
    add("sum", ["sum", "pd_op.add_n", "builtin.combine"], gen_many("sum", "pd_op.add_n"))
    add("stack", ["stack", "pd_op.stack", "builtin.combine"],
        gen_many("stack", "pd_op.stack", out_slot="Y", axis=True))
    add("concat", ["pd_op.concat", "builtin.combine"], gen_many(None, "pd_op.concat",
                                                                 axis=True))
    add("split", ["split", "pd_op.split_with_num", "builtin.split"], gen_split)
    add("slice", ["slice", "pd_op.slice"], gen_slice)
    add("lookup_table_v2", ["lookup_table_v2", "pd_op.embedding"], gen_lookup())
    add("lookup_table_v2_grad", ["lookup_table_v2", "lookup_table_v2_grad", "pd_op.embedding",
                                 "pd_op.embedding_grad"], gen_lookup(True))
    add("c_embedding", ["pd_op.c_embedding"], gen_c_embedding())
    add("c_embedding_grad", ["pd_op.c_embedding", "pd_op.c_embedding_grad"],
        gen_c_embedding(True))
    add("layer_norm", ["layer_norm", "pd_op.layer_norm"], gen_layer_norm())
    add("layer_norm_grad", ["layer_norm", "layer_norm_grad", "pd_op.layer_norm",
                            "pd_op.layer_norm_grad"], gen_layer_norm(True))
    add("full_like", ["pd_op.full_like"], gen_full_like)
    add("split_sections", ["pd_op.split"], gen_split_sections)
    add("slice_grad", ["slice", "slice_grad", "pd_op.slice", "pd_op.slice_grad"],
        gen_slice_grad)
    add("sgd", ["sgd"], gen_sgd)
    add("pow", ["pd_op.pow"], gen_pir_unary("pd_op.pow", attr=(
        "y", lambda r: st.sampled_from([2.0, 3.0, 0.5, -1.0, 1.5])), kind="pos"))
    add("pow_grad", ["pd_op.pow", "pd_op.pow_grad"], gen_unary_grad(None, "pd_op.pow", attr=(
        "y", lambda r: st.sampled_from([2.0, 3.0, 0.5, -1.0, 1.5])), kind="pos"))
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
    add("repeat_interleave", ["pd_op.repeat_interleave"], gen_repeat_interleave)
    add("strided_slice", ["pd_op.strided_slice"], gen_strided_slice())
    add("strided_slice_grad", ["pd_op.strided_slice", "pd_op.strided_slice_grad"],
        gen_strided_slice(True))
    add("flatten", ["pd_op.flatten"], gen_flatten())
    add("flatten_grad", ["pd_op.flatten", "pd_op.flatten_grad"], gen_flatten(True))
    add("stack_grad", ["pd_op.stack_grad", "builtin.combine", "builtin.split"],
        gen_stack_grad)
    add("rsqrt", ["pd_op.rsqrt"], gen_pir_unary("pd_op.rsqrt", kind="pos"))
    add("sin", ["pd_op.sin"], gen_pir_unary("pd_op.sin"))
    add("cos", ["pd_op.cos"], gen_pir_unary("pd_op.cos"))
    add("tril", ["pd_op.tril"], gen_tril)
    add("where", ["pd_op.where"], gen_where)
    add("not_equal", ["pd_op.not_equal"], gen_compare("pd_op.not_equal", "not_equal"))
    add("bitwise_and", ["pd_op.bitwise_and"], gen_compare("pd_op.bitwise_and", "bitwise_and"))
    add("arange", ["pd_op.arange"], gen_arange)
    add("set_value_", ["pd_op.set_value_"], gen_set_value)
    add("cross_entropy", ["pd_op.cross_entropy_with_softmax"], gen_cross_entropy())
    add("cross_entropy_grad", ["pd_op.cross_entropy_with_softmax",
                               "pd_op.cross_entropy_with_softmax_grad"], gen_cross_entropy(True))
    add("swiglu", ["pd_op.swiglu"], gen_swiglu(True))
    add("swiglu_halves", ["pd_op.swiglu"], gen_swiglu(False))
    add("swiglu_grad", ["pd_op.swiglu", "pd_op.swiglu_grad"], gen_swiglu(True, True))
    add("swiglu_halves_grad", ["pd_op.swiglu", "pd_op.swiglu_grad"], gen_swiglu(False, True))
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
