"""The real kernels behind the uninterpreted functions of ``semantics.py``.

A refutation counts only when it is replayed with these (``proof.py``):
the counterexample's input values pushed through the terms with every
kernel computed as Paddle computes it (``tests/test_value_axioms.py``
and ``tests/test_kernel_differential.py`` check each against Paddle's own
CPU kernel; ``tests/test_value_kernel_references.py`` that every kernel a
row applies has one).  Rational kernels (inv, max, relu, a truncating cast,
the lookup's row selection, where, not_equal, bitwise_and, tril, arange,
set_value_, pow of an integral power) return exact Fractions; transcendental ones
(gelu, silu, sqrt, rsqrt, sin, cos, softmax, layer_norm, adam, the cross
entropy with softmax) return float64.

``reference(kernel, attrs, args)`` raises :class:`NoReference` for a kernel
with no reference here, :class:`NotAnInput` where the argument values are
not values the real program can see (an id outside the table, a sqrt of a
negative, a division by zero): the replay then tries other inputs or says
INCONCLUSIVE.
"""
from __future__ import annotations

import ast
import functools
import math
from fractions import Fraction

import numpy as np


class NoReference(Exception):
    """No real kernel here for this uninterpreted function."""


class NotAnInput(Exception):
    """The argument values cannot occur in the real program."""


def _attrs(attrs) -> dict:
    """The attrs key (``(name, repr)`` pairs) as values, read-only: cached
    (a replay calls a kernel per element; parsing was a third of it)."""
    try:
        return _attrs_cached(attrs)
    except TypeError:  # an unhashable key
        return _parse_attrs(attrs)


@functools.lru_cache(maxsize=4096)
def _attrs_cached(attrs) -> dict:
    return _parse_attrs(attrs)


def _parse_attrs(attrs) -> dict:
    out = {}
    for k, v in attrs:
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k] = v
    return out


def _f(x) -> float:
    return float(x)


def _gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_d(x, approximate=False):
    if approximate:
        c = math.sqrt(2 / math.pi)
        u = c * (x + 0.044715 * x ** 3)
        t = math.tanh(u)
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    return (0.5 * (1 + math.erf(x / math.sqrt(2)))
            + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi))


def round_to(x, dtype):
    """``x`` rounded to ``dtype`` (round to nearest even), as a Fraction."""
    if dtype == "float64":
        return Fraction(float(x))
    if dtype == "float32":
        return Fraction(float(np.float32(float(x))))
    if dtype == "float16":
        return Fraction(float(np.float16(float(x))))
    if dtype == "bfloat16":
        bits = int(np.array(float(x), dtype=np.float32).view(np.uint32))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return Fraction(float(np.array(bits, dtype=np.uint32).view(np.float32)))
    raise NoReference(f"cast to {dtype}")


_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8}


def _cast(x, at):
    dst = at.get("out_dtype", "")
    src = at.get("in_dtype", "")
    if src in _INT_BITS and x == int(x):
        # an integer value is held as a polynomial reduced modulo 2^bits (the
        # proof's integer arithmetic wraps, semantics.WRAPPED): its value is
        # the representative in the dtype's range
        bits = _INT_BITS[src]
        x = Fraction(int(x) % (1 << bits))
        if not src.startswith("u") and x >= 1 << (bits - 1):
            x -= 1 << bits
    if dst == "bool":
        return Fraction(int(x != 0))
    if dst in _INT_BITS:
        v = math.trunc(x)  # Paddle's float -> int cast truncates toward zero
        bits = _INT_BITS[dst]
        lo, hi = (0, 2 ** bits - 1) if dst.startswith("u") else (-2 ** (bits - 1),
                                                                  2 ** (bits - 1) - 1)
        if not lo <= v <= hi:
            raise NotAnInput(f"{x} does not fit {dst}")
        return Fraction(v)
    return round_to(x, dst)


def _layer_norm(kernel, args, at):
    """layer_norm / layer_norm_grad rebuilt from the inputs' signature
    (``semantics.kernel_key``: slots, shapes, in the order of ``args``)."""
    _, out_slot, j = kernel.split(".")
    sig = at["@inputs"]
    vals, pos = {}, 0
    for slot, tensors in sig:
        shape = tuple(tensors[0][0])
        n = int(np.prod(shape)) if shape else 1
        vals[slot] = np.array([_f(a) for a in args[pos:pos + n]], dtype=np.float64).reshape(shape)
        pos += n
    x = vals["X"]
    b = int(at.get("begin_norm_axis", 1))
    eps = float(at.get("epsilon", 1e-5))
    rows = int(np.prod(x.shape[:b])) if b else 1
    x2 = x.reshape(rows, -1)
    scale = vals.get("Scale", np.ones(x2.shape[1])).reshape(-1)
    if kernel.startswith("layer_norm."):
        mean = x2.mean(axis=1)
        var = x2.var(axis=1)
        xhat = (x2 - mean[:, None]) / np.sqrt(var[:, None] + eps)
        bias = vals.get("Bias", np.zeros(x2.shape[1])).reshape(-1)
        out = {"Y": xhat * scale + bias, "Mean": mean, "Variance": var}[out_slot]
    else:  # the grad reads the forward's saved Mean and Variance
        mean = vals["Mean"].reshape(-1)
        var = vals["Variance"].reshape(-1)
        dy = vals["Y@GRAD"].reshape(rows, -1)
        inv = 1.0 / np.sqrt(var[:, None] + eps)
        xhat = (x2 - mean[:, None]) * inv
        if out_slot == "Scale@GRAD":
            out = (dy * xhat).sum(axis=0)
        elif out_slot == "Bias@GRAD":
            out = dy.sum(axis=0)
        else:
            g = dy * scale
            out = inv * (g - g.mean(axis=1, keepdims=True)
                         - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return float(np.asarray(out).reshape(-1)[int(j)])


def _adam(kernel, a, at):
    p, g, m1, m2, lr, b1p, b2p = (_f(v) for v in a)
    b1, b2, eps = float(at["beta1"]), float(at["beta2"]), float(at["epsilon"])
    decay = kernel.startswith("adamw.") and at.get("with_decay", True)
    coeff = float(at.get("coeff", 0.0)) if decay else 0.0
    m1o = b1 * m1 + (1 - b1) * g
    m2o = b2 * m2 + (1 - b2) * g * g
    lr_t = lr * float(at.get("lr_ratio", 1.0))
    p2 = p * (1 - lr_t * coeff)
    if m2o < 0:
        raise NotAnInput("a negative second moment")
    po = p2 - lr_t * (m1o / (1 - b1p)) / (math.sqrt(m2o) / math.sqrt(1 - b2p) + eps)
    return {"ParamOut": po, "Moment1Out": m1o, "Moment2Out": m2o}[kernel.split(".")[1]]


def _signed(x, dtype):
    """An integer held modulo 2^bits (``semantics.WRAPPED``) as the value
    ``dtype`` holds: its representative in the dtype's range; a bool 0/1;
    a float as is."""
    if dtype == "bool":
        return Fraction(int(x != 0))
    bits = _INT_BITS.get(dtype)
    if bits is None:
        return x
    if x != int(x):
        raise NotAnInput(f"{x} is not a {dtype}")
    v = int(x) % (1 << bits)
    if not dtype.startswith("u") and v >= 1 << (bits - 1):
        v -= 1 << bits
    return Fraction(v)


def _dtypes(at, n):
    """The inputs' dtypes of an ``_uf_broadcast`` kernel (its ``@dtypes`` key)."""
    d = at.get("@dtypes")
    return tuple(d) if isinstance(d, (tuple, list)) and len(d) == n else ("",) * n


def _pow(x, y):
    """``x ** y`` (Paddle's PowFunctor, ``std::pow``): exact for an integral
    ``y``, float64 else; a NaN (negative base, fractional y) or an infinity
    (0 to a negative power) is no value a program computes with."""
    if y == int(y):
        if x == 0 and y < 0:
            raise NotAnInput(f"0 ** {y}")
        return Fraction(x) ** int(y)
    if x < 0:
        raise NotAnInput(f"{x} ** {y}")
    return _f(x) ** y


def _to_dtype(v, dtype):
    """A scalar converted to the kernel's element type ``T`` (an integer
    truncates toward zero, a float rounds to nearest)."""
    if dtype in _INT_BITS:
        return Fraction(math.trunc(v))
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        return round_to(v, dtype)
    raise NoReference(f"arange of dtype {dtype!r}")


def _arange(at):
    """Element ``index`` of ``arange(start, end, step)`` in ``dtype``:
    Paddle's CPU kernel converts the bounds to T and accumulates
    ``value += step`` in T (so a float32 0.1 step drifts as the real one)."""
    dtype = str(at.get("dtype", ""))
    start = _to_dtype(Fraction(at["start@value"]), dtype)
    step = _to_dtype(Fraction(at["step@value"]), dtype)
    i = int(at["index"])
    if dtype in _INT_BITS:  # integer addition is exact: no drift
        return start + i * step
    seq = _arange_seq(start, step, dtype)
    while len(seq) <= i:  # the running sums, computed once per (start, step, dtype)
        seq.append(_to_dtype(seq[-1] + step, dtype))
    return seq[i]


@functools.lru_cache(maxsize=64)
def _arange_seq(start, step, dtype):
    return [start]


def _tril(kernel, args, at):
    """Element j of ``tril(x, diagonal)``: x[j] where its column minus its
    row (of the last two dims) is at most ``diagonal``, else 0."""
    sig = at["@inputs"]
    (slot, ((shape, _),)), = sig
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2:
        raise NotAnInput(f"tril of a rank-{len(shape)} x")
    j = int(kernel.rsplit(".", 1)[1])
    rows, cols = shape[-2], shape[-1]
    r, c = (j // cols) % rows, j % cols
    return Fraction(args[j]) if c - r <= int(at.get("diagonal", 0)) else Fraction(0)


def _ce_rows(args, at):
    """The row's pieces of a ``uf_rows`` kernel, by slot: its ``@rows`` key
    names the slots (sorted), each one's row width and dtype, in the order
    of ``args``."""
    out, pos = {}, 0
    for slot, (width, dtype) in at["@rows"]:
        out[slot] = (list(args[pos:pos + int(width)]), dtype)
        pos += int(width)
    return out


def _hard_label(lab, width, at):
    """A hard label's class, None where it is ``ignore_index``."""
    v = lab[0]
    if v == int(at.get("ignore_index", -100)):
        return None
    if v != int(v) or not 0 <= v < width:
        raise NotAnInput(f"label {v} outside {width} classes")
    return int(v)


def _cross_entropy(kernel, args, at):
    """Paddle's cross_entropy_with_softmax (and its grad) on one row along
    ``axis``: softmax of the logits (``use_softmax``; else the input is the
    probabilities), loss ``-log p[label]`` (0 at ``ignore_index``) or with a
    soft label ``-sum(label * log p)``; the grad of the logits ``(p -
    onehot) * dloss`` (without softmax: ``-dloss / p`` at the label, soft:
    ``-label * dloss / p``)."""
    name, out_slot, j = kernel.rsplit(".", 2)
    j = int(j)
    rows = _ce_rows(args, at)
    soft, use_sm = bool(at.get("soft_label", False)), bool(at.get("use_softmax", True))
    if name == "cross_entropy_with_softmax":
        x = [_f(v) for v in rows["input"][0]]
        if use_sm:
            e = [math.exp(v - max(x)) for v in x]
            p = [v / sum(e) for v in e]
        else:
            p = list(rows["input"][0])
        if out_slot == "softmax":
            return p[j]
        lab = rows["label"][0]
        if soft:
            return -sum(_f(l) * math.log(_f(q)) for l, q in zip(lab, p))
        c = _hard_label(lab, len(p), at)
        return 0.0 if c is None else -math.log(_f(p[c]))
    p, lab, g = rows["softmax"][0], rows["label"][0], rows["loss_grad"][0][0]
    if soft:
        return (p[j] - lab[j]) * g if use_sm else -_f(lab[j]) * _f(g) / _f(p[j])
    c = _hard_label(lab, len(p), at)
    if c is None:
        return Fraction(0)
    if use_sm:
        return (p[j] - int(j == c)) * g
    return -g / p[j] if j == c else Fraction(0)


def _by_slot(args, at):
    """An opaque kernel's arguments (``semantics.kernel_key``'s ``@inputs``:
    slots sorted, each tensor's shape and dtype) as {slot: [(array, dtype)]}."""
    out, pos = {}, 0
    for slot, tensors in at["@inputs"]:
        for shape, dtype in tensors:
            n = int(np.prod(shape)) if shape else 1
            arr = np.empty(n, dtype=object)
            arr[:] = list(args[pos:pos + n])
            out.setdefault(slot, []).append((arr.reshape(tuple(shape)), dtype))
            pos += n
    return out


def _set_value(kernel, args, at):
    """Element j of ``set_value_``: x with the slice ``starts:ends:steps`` on
    ``axes`` (Python's bounds: negative from the end, clamped) set to the
    constant ``values`` of ``shape``, cast to x's dtype and broadcast over
    the slice (its ``decrease_axes`` dropped)."""
    x, dtype = _by_slot(args, at)["x"][0]
    x = x.copy()
    index = [slice(None)] * x.ndim
    for a, st, en, sp in zip(at.get("axes") or [], at["starts@value"], at["ends@value"],
                             at["steps@value"]):
        if int(sp) <= 0:
            raise NoReference(f"set_value_ with step {sp}")
        index[int(a) % x.ndim] = slice(int(st), int(en), int(sp))
    index = tuple(index)
    target = x[index]
    dec = {int(a) % x.ndim for a in at.get("decrease_axes") or []}
    if at.get("none_axes"):
        raise NoReference("set_value_ with none_axes")
    vals = [_cast(Fraction(v), {"out_dtype": dtype}) if dtype != "bool" else
            Fraction(int(v != 0)) for v in at["values"]]
    v = np.empty(len(vals), dtype=object)
    v[:] = vals
    v = v.reshape(tuple(int(n) for n in at.get("shape") or [len(vals)]))
    kept = [n for i, n in enumerate(target.shape) if i not in dec]
    if v.size == 1:  # one value: every element of the slice (a 0-D one too)
        v = v.reshape(())
    x[index] = np.broadcast_to(v, kept).reshape(target.shape)
    return x.reshape(-1)[int(kernel.rsplit(".", 1)[1])]


# The kernels ``reference`` evaluates: a name, or ``prefix.*`` for a family
# (an optimizer's or an opaque kernel's outputs).  ``reference`` refuses any
# other name (NoReference); ``verify/selfcheck/row_kernels.py`` lists every
# kernel a row applies, and tests/test_value_kernel_references.py fails on
# one missing here.
REFERENCED = ("inv", "max", "min", "relu", "relu.mask", "cast", "lookup_select", "gelu",
              "gelu.d", "silu", "silu.d", "sqrt", "rsqrt", "sin", "cos", "pow", "pow_grad",
              "where", "not_equal", "bitwise_and", "arange", "softmax", "tril.*",
              "adamw.*", "adam.*", "layer_norm.rstd", "layer_norm.*", "layer_norm_grad.*",
              "cross_entropy_with_softmax.*", "cross_entropy_with_softmax_grad.*",
              "set_value_.*", "tanh")

# Attrs that bound the inputs a kernel accepts without changing its value:
# ``lookup_select``'s ``rows`` (the embedding kernel raises on an id outside
# [0, rows); c_embedding_grad's kernel, which knows no vocabulary, skips such
# an id, and [id == row] is the same function wherever both run).  The
# store keys an atom without them (``symbolic.Store.uf``: every lookup of id
# ``i`` at row ``r`` is one atom, whichever kernel and table size made it)
# and keeps the strictest bound any op put on the atom (the function given
# here merges two); only the replay with the real kernels reads it
# (``proof._replay_evaluator``), so a counterexample never feeds an id one of
# the programs would raise on.
DOMAIN_ATTRS = {"lookup_select": {"rows": min}}

# Kernels no reference can replay, each with why: a refutation whose
# difference passes through one stays unknown (never a counterexample).
UNREPLAYABLE = {
    "dropout.mask": "the CPU dropout kernel draws its mask from Paddle's own "
                    "mt19937_64 stream seeded by the seed operand; the rows only need "
                    "that equal seeds give equal masks (an uninterpreted function)",
}


def has_reference(kernel: str) -> bool:
    """Whether ``reference`` has the real kernel behind name ``kernel``."""
    return any(kernel == r or r.endswith(".*") and kernel.startswith(r[:-1])
               for r in REFERENCED)


def reference(kernel: str, attrs, args):
    """The real value of uninterpreted ``kernel`` at ``args`` (Fractions)."""
    if not has_reference(kernel):
        raise NoReference(kernel)
    at = _attrs(attrs)
    try:
        if kernel == "rsqrt":  # 1 / sqrt(x)
            if args[0] <= 0:
                raise NotAnInput(f"rsqrt of {args[0]}")
            return 1.0 / math.sqrt(_f(args[0]))
        if kernel == "sin":
            return math.sin(_f(args[0]))
        if kernel == "cos":
            return math.cos(_f(args[0]))
        if kernel == "pow":  # x ** y, y the float attr
            return _pow(args[0], float(at["y"]))
        if kernel == "pow_grad":  # dout * y * x ** (y - 1)
            y = float(at["y"])
            d = _pow(args[0], y - 1)
            return (d * Fraction(y) * args[1]) if isinstance(d, Fraction) \
                else d * y * _f(args[1])
        if kernel == "where":  # x where condition, else y
            return args[1] if args[0] != 0 else args[2]
        if kernel == "not_equal":
            a, b = (_signed(v, d) for v, d in zip(args, _dtypes(at, 2)))
            return Fraction(int(a != b))
        if kernel == "bitwise_and":
            a, b = (_signed(v, d) for v, d in zip(args, _dtypes(at, 2)))
            if a != int(a) or b != int(b):
                raise NotAnInput(f"bitwise_and of {a} and {b}")
            return Fraction(int(a) & int(b))
        if kernel == "arange":
            return _arange(at)
        if kernel.startswith("cross_entropy_with_softmax") and "@rows" in at:
            return _cross_entropy(kernel, args, at)
        if kernel.startswith("set_value_.out.") and "@inputs" in at:
            return _set_value(kernel, args, at)
        if kernel.startswith("tril.out.") and "@inputs" in at:  # its one output
            return _tril(kernel, args, at)
        if kernel == "inv":
            return 1 / args[0]
        if kernel == "max":
            return max(args)
        if kernel == "min":
            return min(args)
        if kernel == "relu":
            return max(args[0], 0)
        if kernel == "relu.mask":  # relu_grad is dout * (out > 0)
            return Fraction(int(args[0] > 0))
        if kernel == "cast":
            return _cast(args[0], at)
        if kernel == "lookup_select":  # the id names this row (and is not the padding id)
            idv, row, pad = args[0], int(at["row"]), int(at["padding_idx"])
            if idv != int(idv):
                raise NotAnInput(f"id {idv} is not an integer")
            if "rows" in at and not 0 <= idv < int(at["rows"]):  # its domain (DOMAIN_ATTRS)
                raise NotAnInput(f"id {idv} outside a table of {at['rows']} rows")
            return Fraction(int(idv == row and idv != pad))
        if kernel == "gelu":
            return _gelu(_f(args[0]), bool(at.get("approximate", False)))
        if kernel == "gelu.d":  # gelu_grad is dout * gelu'(x)
            return _gelu_d(_f(args[0]), bool(at.get("approximate", False)))
        if kernel == "silu":  # x * sigmoid(x), exp of a non-positive argument
            x = _f(args[0])
            e = math.exp(-abs(x))
            return x / (1.0 + e) if x >= 0 else x * e / (1.0 + e)
        if kernel == "silu.d":  # silu_grad is dout * silu'(x)
            sg = 1.0 / (1.0 + math.exp(-_f(args[0])))
            return sg * (1.0 + _f(args[0]) * (1.0 - sg))
        if kernel == "tanh":
            return math.tanh(_f(args[0]))
        if kernel == "sqrt":
            if args[0] < 0:
                raise NotAnInput(f"sqrt of {args[0]}")
            return math.sqrt(_f(args[0]))
        if kernel == "softmax":
            xs = [_f(v) for v in args]
            e = [math.exp(v - max(xs)) for v in xs]
            return e[int(at["index"])] / sum(e)
        if kernel.startswith(("adamw.", "adam.")):
            return _adam(kernel, args, at)
        if kernel == "layer_norm.rstd":  # 1 / sqrt(variance + epsilon)
            v = _f(args[0]) + float(at.get("epsilon", 1e-5))
            if v <= 0:
                raise NotAnInput(f"layer_norm of a variance {args[0]}")
            return 1.0 / math.sqrt(v)
        if kernel.startswith(("layer_norm.", "layer_norm_grad.")) and "@inputs" in at:
            return _layer_norm(kernel, args, at)
    except ZeroDivisionError as exc:
        raise NotAnInput(f"{kernel}: division by zero") from exc
    except (OverflowError, ValueError) as exc:
        raise NotAnInput(f"{kernel}: {exc}") from exc
    raise NoReference(kernel)
