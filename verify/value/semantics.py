"""What each op computes, element by element: ONE table (``ROWS``) of rows.

A row is a function ``row(op, ins, k) -> {out slot: [Tensor]}``.  ``ins``
maps input slots to lists of :class:`Tensor` (an element array plus the
dims it came from); ``k`` is the kernel context: ``k.const(x)`` makes a
constant element and ``k.uf(kernel, args, attrs)`` applies an
uninterpreted function.  Rows use only numpy's structural operations and
``+ - *`` on elements, so the *same row* runs on symbolic terms (the proof,
``symbolic.py``) and on concrete floats (``tests/test_value_axioms.py``,
where ``k.uf`` is the real kernel): a wrong row makes a test fail.

Which ops have meaning and which stay uninterpreted, and why:
  * linear and bilinear ops (add/sub/scale/sum/mean/matmul and their grads,
    sgd, squared_l2_norm, square) are polynomials: they have exact meaning,
    so a rewrite that re-associates a sum across ranks (the bias promotion)
    or splits a matmul grad (the overlap pass) is provable;
  * index maps (reshape2, transpose2, stack; a widening cast, exact on
    values, the dtype tracked apart) move elements without arithmetic; a
    cast that can round or truncate (to an integer or a narrower float) is
    a kernel;
  * layer_norm is exact row by row around one kernel of each row's
    variance (its ``1/sqrt(var + eps)``); an activation's grad is its
    derivative kernel times dout (every such grad is linear in dout);
  * nonlinear kernels (gelu, relu, sqrt, max, division's reciprocal,
    adamw, rounding casts) are uninterpreted functions of
    exactly their inputs and attrs (opaque ones also of their input slots,
    shapes and dtypes: ``kernel_key``): sound for proofs (equal arguments give equal results), and
    a refutation through them is stated for some interpretation (the
    counterexample says which kernels it went through);
  * collectives (``COLLECTIVES``) need every rank's terms; the executor
    gathers those and calls :func:`collective`.
An op with no row makes the proof INCONCLUSIVE, never a pass; so does an op
carrying a slot or attr its row does not read: each row's read-set is
declared in ``verify/ir/read_sets.py`` (adding a row is adding its
declaration there; ``tests/test_read_sets.py`` checks it against Paddle's
op definitions).
"""
from __future__ import annotations

from verify.ir import collectives

from fractions import Fraction

import numpy as np

from .kernels import round_to  # the replay's rounding: one definition of round to nearest even


# -- tensors with their dims ---------------------------------------------
class Tensor:
    """An element array and, per dim, the (original size, reduced size)
    factors it is made of (so a reshape that splits a folded dim can undo
    the fold on reduced shapes)."""

    __slots__ = ("arr", "dims", "dtype")

    def __init__(self, arr, dims, dtype=""):
        self.arr = arr
        self.dims = tuple(tuple(d) for d in dims)
        self.dtype = dtype
        assert len(self.dims) == arr.ndim, (self.dims, arr.shape)

    @property
    def orig(self):
        return tuple(_prod(o for o, _ in d) for d in self.dims)


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def reduce_size(n: int, to: int | None = None) -> int:
    """The size a dim ``n`` is held at: ``n`` itself (``to`` None, what the
    proof uses: real shapes), else min(n, to) (1 stays 1; only the row tests
    of the factor bookkeeping still pass a ``to``)."""
    return n if to is None or n == 1 else min(n, to)


def leaf_dims(shape, to: int | None = None):
    return tuple(((int(n), reduce_size(int(n), to)),) for n in shape)


class Unsupported(Exception):
    """The row cannot give this op meaning (attrs, shapes): INCONCLUSIVE."""


def _t(ins, slot, i=0):
    xs = ins.get(slot) or []
    if i >= len(xs) or xs[i] is None:
        raise Unsupported(f"input {slot}[{i}] has no value")
    return xs[i]


def _has(ins, slot):
    return bool(ins.get(slot)) and ins[slot][0] is not None


# -- sums and matmuls: numpy's, or the term store's one-step fast path --------
def _fast(arr):
    """The element class when ``arr`` holds terms with one-step sums (T)."""
    if not isinstance(arr, np.ndarray) or arr.dtype != object or arr.size == 0:
        return None
    cls = type(arr.reshape(-1)[0])
    return cls if hasattr(cls, "total") and hasattr(cls, "dot") else None


def _sum(arr, axis=None, keepdims=False):
    """``arr.sum(axis, keepdims)``; on terms each output element is summed
    in one step (numpy's pairwise adds would intern every partial sum)."""
    arr = np.asarray(arr)
    cls = _fast(arr)
    if cls is None:
        return arr.sum(axis=axis, keepdims=keepdims)
    nd = arr.ndim
    axes = tuple(range(nd)) if axis is None else \
        tuple(sorted(a % nd for a in (axis if isinstance(axis, tuple) else (axis,))))
    keep = [a for a in range(nd) if a not in axes]
    kshape = [arr.shape[a] for a in keep]
    flat = np.transpose(arr, keep + list(axes)).reshape(_prod(kshape), -1)
    out = np.empty(flat.shape[0], dtype=object)
    for i in range(flat.shape[0]):
        out[i] = cls.total(list(flat[i]))
    if keepdims:
        return out.reshape([1 if a in axes else arr.shape[a] for a in range(nd)])
    return out.reshape(kshape) if kshape else out[0]


def _matmul(a, b):
    """``np.matmul(a, b)`` (both >= 2-D); on terms each element one dot."""
    cls = _fast(a) or _fast(b)
    if cls is None:
        return np.matmul(a, b)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return np.matmul(a, b)  # numpy's own error
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    A = np.broadcast_to(a, batch + a.shape[-2:])
    B = np.broadcast_to(b, batch + b.shape[-2:])
    n, p = a.shape[-2], b.shape[-1]
    out = np.empty(batch + (n, p), dtype=object)
    for idx in np.ndindex(*batch):
        Ai, Bi = A[idx], B[idx]
        cols = [list(Bi[:, j]) for j in range(p)]
        for i in range(n):
            row = list(Ai[i])
            for j in range(p):
                out[idx + (i, j)] = cls.dot(row, cols[j])
    return out


# -- broadcasting, as Paddle's elementwise ops do ---------------------------
def _align(x: Tensor, y: Tensor, axis: int):
    """``y``'s array reshaped so numpy broadcasting matches Paddle's ``axis``."""
    if axis == -1 or x.arr.ndim == y.arr.ndim or y.arr.ndim > x.arr.ndim:
        return x.arr, y.arr
    if axis < 0:
        axis = x.arr.ndim - y.arr.ndim
    shape = [1] * axis + list(y.arr.shape) + [1] * (x.arr.ndim - axis - y.arr.ndim)
    return x.arr, y.arr.reshape(shape)


def _out_dims(shape, *tensors):
    """Dims of a broadcast result: per axis, a tensor's dim of that size."""
    dims = []
    nd = len(shape)
    for ax, size in enumerate(shape):
        pick = ((1, 1),)
        for t in tensors:
            off = nd - t.arr.ndim
            if ax - off >= 0 and t.arr.shape[ax - off] == size and size != 1:
                pick = t.dims[ax - off]
                break
        dims.append(pick)
    return dims


def _unbroadcast(g, like: Tensor, axis=-1, x_ndim=None):
    """Sum ``g`` over the axes ``like`` was broadcast along (an add's grad)."""
    shape = like.arr.shape
    if axis != -1 and x_ndim is not None and len(shape) < x_ndim:
        ax = axis if axis >= 0 else x_ndim - len(shape)
        full = [1] * ax + list(shape) + [1] * (x_ndim - ax - len(shape))
    else:
        full = [1] * (g.ndim - len(shape)) + list(shape)
    sum_axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, full)) if b == 1 and a != 1)
    if sum_axes:
        g = _sum(g, axis=sum_axes, keepdims=True)
    return g.reshape(shape)


def _ew(fn):
    """Binary elementwise op with Paddle broadcasting."""
    def row(op, ins, k):
        x, y = _t(ins, "X"), _t(ins, "Y")
        a, b = _align(x, y, op.attrs.get("axis", -1))
        out = np.asarray(fn(a, b, k))
        return {"Out": [Tensor(out, _out_dims(out.shape, x, y), x.dtype)]}
    return row


def _ew_grad(dx_fn, dy_fn):
    """Grad of a broadcast binary op: local grads, summed over broadcast axes."""
    def row(op, ins, k):
        x, y, g = _t(ins, "X"), _t(ins, "Y"), _t(ins, "Out@GRAD")
        axis = op.attrs.get("axis", -1)
        a, b = _align(x, y, axis)
        out = {"X@GRAD": [Tensor(_unbroadcast(dx_fn(a, b, g.arr, k), x), x.dims, x.dtype)]}
        if dy_fn is not None:
            gy = _unbroadcast(dy_fn(a, b, g.arr, k), y, axis, x.arr.ndim)
            out["Y@GRAD"] = [Tensor(gy, y.dims, y.dtype)]
        return out
    return row


def _bcast(arr, shape):
    return np.broadcast_to(arr, shape) * 1 if arr.shape != tuple(shape) else arr


# -- matmul ----------------------------------------------------------------
def _tr(a):
    return np.swapaxes(a, -1, -2)


def _mm(a, b, ta, tb):
    """matmul_v2 with trans flags; a 1-D operand is a row/column vector."""
    if a.ndim == 1 or b.ndim == 1:
        raise Unsupported("matmul with a 1-D operand")
    a = _tr(a) if ta else a
    b = _tr(b) if tb else b
    return _matmul(a, b)


def _mm_dims(x, y, tx, ty):
    xd, yd = list(x.dims), list(y.dims)
    if tx:
        xd[-1], xd[-2] = xd[-2], xd[-1]
    if ty:
        yd[-1], yd[-2] = yd[-2], yd[-1]
    batch = xd[:-2] if len(xd) >= len(yd) else yd[:-2]
    return batch + [xd[-2], yd[-1]]


def matmul(op, ins, k):
    x, y = _t(ins, "X"), _t(ins, "Y")
    tx = bool(op.attrs.get("trans_x", op.attrs.get("transpose_X", False)))
    ty = bool(op.attrs.get("trans_y", op.attrs.get("transpose_Y", False)))
    out = _mm(x.arr, y.arr, tx, ty)
    alpha = op.attrs.get("alpha", 1.0)
    if alpha != 1.0:
        out = out * k.const(constant(alpha, x.dtype))
    return {"Out": [Tensor(out, _mm_dims(x, y, tx, ty), x.dtype)]}


def matmul_grad(op, ins, k):
    """The two matmuls of matmul_v2's backward, per trans flags:
    none: dX = dO Y^T, dY = X^T dO;  tx: dX = Y dO^T, dY = X dO;
    ty: dX = dO Y, dY = dO^T X;  both: dX = Y^T dO^T, dY = dO^T X^T;
    then summed over the batch dims an operand was broadcast along."""
    x, y, g = _t(ins, "X"), _t(ins, "Y"), _t(ins, "Out@GRAD")
    tx, ty = bool(op.attrs.get("trans_x", False)), bool(op.attrs.get("trans_y", False))
    X, Y, G = x.arr, y.arr, g.arr
    if not tx and not ty:
        dx, dy = _matmul(G, _tr(Y)), _matmul(_tr(X), G)
    elif tx and not ty:
        dx, dy = _matmul(Y, _tr(G)), _matmul(X, G)
    elif not tx and ty:
        dx, dy = _matmul(G, Y), _matmul(_tr(G), X)
    else:
        dx, dy = _matmul(_tr(Y), _tr(G)), _matmul(_tr(G), _tr(X))
    dx = _unbroadcast(dx, x) if dx.shape != X.shape else dx
    dy = _unbroadcast(dy, y) if dy.shape != Y.shape else dy
    return {"X@GRAD": [Tensor(dx, x.dims, x.dtype)], "Y@GRAD": [Tensor(dy, y.dims, y.dtype)]}


# -- reductions --------------------------------------------------------------
def _axes(op, nd):
    if op.attrs.get("reduce_all", False) or not op.attrs.get("dim"):
        return tuple(range(nd))
    return tuple(sorted(d % nd for d in op.attrs["dim"])) if nd else ()


def _reduce(mean: bool):
    def row(op, ins, k):
        x = _t(ins, "X")
        axes = _axes(op, x.arr.ndim)
        keep = bool(op.attrs.get("keep_dim", False))
        out = _sum(x.arr, axis=axes, keepdims=keep) if axes else x.arr * 1
        if mean:
            n = _prod(x.arr.shape[a] for a in axes)
            out = out * k.const(Fraction(1, n))
        out = np.asarray(out, dtype=x.arr.dtype)
        dims = [((1, 1),) if a in axes else d for a, d in enumerate(x.dims)] if keep else \
            [d for a, d in enumerate(x.dims) if a not in axes]
        return {"Out": [Tensor(out, dims, x.dtype)]}
    return row


def _reduce_grad(mean: bool):
    def row(op, ins, k):
        x, g = _t(ins, "X"), _t(ins, "Out@GRAD")
        axes = _axes(op, x.arr.ndim)
        ga = g.arr
        if not op.attrs.get("keep_dim", False):
            ga = ga.reshape([1 if a in axes else s for a, s in enumerate(x.arr.shape)])
        out = _bcast(ga, x.arr.shape)
        if mean:
            out = out * k.const(Fraction(1, _prod(x.arr.shape[a] for a in axes)))
        return {"X@GRAD": [Tensor(np.asarray(out), x.dims, x.dtype)]}
    return row


# -- index maps --------------------------------------------------------------
def _resolve_target(orig_in, target):
    n = _prod(orig_in)
    out = [orig_in[i] if t == 0 else t for i, t in enumerate(target)]
    if -1 in out:
        known = _prod(t for t in out if t != -1)
        out[out.index(-1)] = n // known
    if _prod(out) != n:
        raise Unsupported(f"reshape of {list(orig_in)} to {list(target)}")
    return out


def reshape_dims(dims, target, to=None):
    """Dims of a reshape: the input's factors regrouped to the target's
    original sizes; a factor split across target dims is split on reduced
    sizes too when they divide (else Unsupported)."""
    factors = [f for d in dims for f in d if f[0] != 1]
    if all(o == r for o, r in factors):  # real sizes: the target itself, exactly
        return [((int(t), int(t)),) for t in target]
    out, i = [], 0
    for t in target:
        if t == 1:
            out.append(((1, 1),))
            continue
        got, acc = [], 1
        while acc < t:
            if i >= len(factors):
                raise Unsupported(f"reshape to {target}: factors run out")
            o, r = factors[i]
            if acc * o <= t and t % (acc * o) == 0:
                got.append((o, r))
                acc *= o
                i += 1
            else:  # split this factor: the head goes here, the rest stays
                need = t // acc
                if o % need:
                    raise Unsupported(f"reshape to {target}: {o} does not split by {need}")
                rh = reduce_size(need, to)
                if r % rh:
                    raise Unsupported(f"reshape to {target}: reduced {r} does not split by {rh}")
                got.append((need, rh))
                factors[i] = (o // need, r // rh)
                acc *= need
        out.append(tuple(got))
    if any(f[0] != 1 for f in factors[i:]):
        raise Unsupported(f"reshape to {target}: factors left over")
    return out


def reshape(op, ins, k):
    x = _t(ins, "X")
    if _has(ins, "Shape") or _has(ins, "ShapeTensor"):  # Paddle reads these over the attr
        raise Unsupported("reshape to a tensor-valued shape (Shape/ShapeTensor)")
    target = _resolve_target(x.orig, op.attrs.get("shape") or [])
    dims = reshape_dims(x.dims, target, k.reduce_to)
    shape = [_prod(r for _, r in d) for d in dims]
    return {"Out": [Tensor(x.arr.reshape(shape), dims, x.dtype)]}


def transpose(op, ins, k):
    x = _t(ins, "X")
    perm = [int(a) % max(x.arr.ndim, 1) for a in op.attrs.get("axis", [])]
    return {"Out": [Tensor(np.transpose(x.arr, perm), [x.dims[p] for p in perm], x.dtype)]}


def stack(op, ins, k):
    xs = ins.get("X") or []
    if not xs or any(t is None for t in xs):
        raise Unsupported("stack input has no value")
    axis = op.attrs.get("axis", 0) % (xs[0].arr.ndim + 1)
    out = np.stack([t.arr for t in xs], axis=axis)
    dims = list(xs[0].dims)
    dims.insert(axis, ((len(xs), len(xs)),))
    return {"Y": [Tensor(out, dims, xs[0].dtype)]}


def split(op, ins, k):
    """``split`` into equal chunks along ``axis`` (``num``, or equal
    ``sections``): an index map.  On reduced shapes a chunk of a dim whose
    first factor is the chunk count (an all_gather's) is the rest of it;
    otherwise original and reduced sizes must both divide, as for
    reduce_scatter (``collective``)."""
    if _has(ins, "AxisTensor") or _has(ins, "SectionsTensorList"):
        raise Unsupported("split with a tensor-valued axis or sections")
    x = _t(ins, "X")
    nd = x.arr.ndim
    axis = int(op.attrs.get("axis", 0)) % max(nd, 1)
    sections = [int(v) for v in op.attrs.get("sections") or []]
    if -1 in sections:  # one inferred section: what the others leave
        sections = [x.orig[axis] - sum(v for v in sections if v != -1) if v == -1 else v
                    for v in sections]
    n = len(sections) if sections else int(op.attrs.get("num", 0))
    if n <= 0 or len(set(sections)) > 1:
        raise Unsupported(f"split into unequal sections {sections}")
    d = x.dims[axis]
    r = x.arr.shape[axis]
    if d[0] == (n, n):
        piece = d[1:] or ((1, 1),)
    else:
        o = _prod(a for a, _ in d)
        if o % n or r % n:
            raise Unsupported(f"split of reduced dim {r} (size {o}) into {n}")
        piece = ((o // n, r // n),)
    dims = list(x.dims)
    dims[axis] = piece
    return {"Out": [Tensor(part, dims, x.dtype) for part in np.split(x.arr, n, axis=axis)]}


# -- dtypes: a cast is the identity only where it cannot round or truncate ----
_VARTYPE = {0: "bool", 20: "uint8", 21: "int8", 1: "int16", 2: "int32", 3: "int64",
            4: "float16", 5: "float32", 6: "float64", 22: "bfloat16", 36: "uint16",
            37: "uint32", 38: "uint64", 32: "float8_e4m3fn", 33: "float8_e5m2"}
_ALIASES = {"fp16": "float16", "fp32": "float32", "fp64": "float64", "bf16": "bfloat16",
            "half": "float16", "float": "float32", "double": "float64", "int": "int32",
            "long": "int64"}
# (family, mantissa-or-value bits): a value of dtype a is exactly representable
# in dtype b when the families match and b's bits are at least a's
_KIND = {"bool": ("int", 1), "uint8": ("uint", 8), "int8": ("int", 8), "int16": ("int", 16),
         "int32": ("int", 32), "int64": ("int", 64), "uint16": ("uint", 16),
         "uint32": ("uint", 32), "uint64": ("uint", 64), "float16": ("f16", 16),
         "bfloat16": ("bf16", 16), "float32": ("float", 32), "float64": ("float", 64),
         "float8_e4m3fn": ("f8a", 8), "float8_e5m2": ("f8b", 8)}


def dtype_name(d) -> str:
    """A dtype in one spelling ("float32", "int64", ...), from a VarType
    code, a paddle dtype, a numpy dtype or a snapshot's name; "" unknown."""
    if d is None or d == "":
        return ""
    if isinstance(d, bool):
        return ""
    if isinstance(d, int):
        return _VARTYPE.get(d, "")
    s = str(d).lower()
    for prefix in ("paddle.", "vartype.", "datatype.", "pir."):
        s = s.replace(prefix, "")
    return _ALIASES.get(s, s)


# -- constants as the kernel reads them, and the dtypes a row models ----------
# an integer dtype's range (Paddle's static_cast<T> of an attr outside it is
# undefined: Unsupported) and its bits (its arithmetic wraps modulo 2^bits)
_INT_RANGE = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
              "uint8": (0, 255), "uint32": (0, (1 << 32) - 1), "uint64": (0, (1 << 64) - 1)}
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint32": 32,
            "uint64": 64}
FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
INTEGERS = frozenset(_INT_RANGE)
NUMERIC = FLOATS | INTEGERS


def constant(value, dtype="") -> Fraction:
    """The constant ``value`` (an attr: a Python number, or an exact rational
    a row computed) as a kernel of dtype ``dtype`` reads it, exactly: Paddle
    casts an attr to the tensor's type (``static_cast<T>``, ``Scalar::to<T>``).
    float64 (and an unknown dtype) the value itself, float32 and float16 their
    nearest value (a float32 attr is one already), bfloat16 only where exact
    (CPU and GPU round differently); an integer dtype truncated toward zero
    (``fill_constant(int64, 0.5)`` is 0, ``scale(x_int, 0.5)`` multiplies by
    0), Unsupported outside its range; bool 0 or 1.  Never rounded to a
    "simpler" rational (issue 34: every float was the simplest rational
    within 2^-24 of it, so a constant changed by less than that was the same)."""
    d = dtype_name(dtype)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, str):
        value = value.strip()
        try:
            value = int(value)
        except ValueError:
            value = float(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise Unsupported(f"constant {value!r} (not a finite number)")
    exact = value if isinstance(value, Fraction) else Fraction(value)
    if d == "bool":
        return Fraction(int(exact != 0))
    if d in _INT_RANGE:
        if isinstance(value, Fraction) and exact.denominator != 1:
            raise Unsupported(f"constant {value} in {d}: how the kernel rounds it is not modelled")
        n = int(exact)  # toward zero, as static_cast<T>
        lo, hi = _INT_RANGE[d]
        if not lo <= n <= hi:
            raise Unsupported(f"constant {value!r} outside the range of {d}")
        return Fraction(n)
    if isinstance(value, Fraction) or d in ("", "float64"):
        return exact  # a row's exact rational (a mean's 1/n), or a float64 value
    if d in ("float32", "float16"):
        with np.errstate(over="ignore"):
            v = float(np.float32(value) if d == "float32" else np.float16(value))
        if v in (float("inf"), float("-inf")):
            raise Unsupported(f"constant {value!r} overflows {d}")
        return Fraction(v)
    if d == "bfloat16":
        if Fraction(float(np.float32(value))) != exact or \
                int(np.float32(value).view(np.uint32)) & 0xFFFF:
            raise Unsupported(f"constant {value!r} is not a bfloat16 value (how it rounds "
                              "is not modelled)")
        return exact
    return exact


def kernel_constant(value, dtype="") -> Fraction:
    """``value`` (an attr) as a Paddle CPU kernel that converts it with
    ``Scalar::to<T>()`` or ``static_cast<T>`` reads it: in bfloat16 and
    float16, phi's ``bfloat16(float)`` / ``float16(float)`` of the float32
    value (a double Scalar goes through ``static_cast<float>`` first),
    rounded to nearest even (``cpu_float_to_bfloat16``); any other dtype as
    :func:`constant`.  Only for rows whose kernel is tested to read its
    attrs exactly so, on concrete values against Paddle (``scale``:
    tests/test_value_axioms.py); rows whose kernels compute in float32
    (``MPType``) keep :func:`constant`, which refuses an inexact bfloat16."""
    d = dtype_name(dtype)
    if d not in ("bfloat16", "float16") or isinstance(value, Fraction):
        return constant(value, dtype)
    try:
        with np.errstate(over="ignore"):
            return round_to(constant(value, "float32"), d)
    except OverflowError:  # Fraction(inf)
        raise Unsupported(f"constant {value!r} overflows {d}") from None


# Which dtypes each row models: every tensor it reads or writes (the slots
# in INDEX_SLOTS aside) must have one of them, else the op is Unsupported
# (INCONCLUSIVE naming op, slot and dtype), never computed as if real.
# ANY: rows that move values without arithmetic (index maps, copies), or
# whose kernels are uninterpreted functions keyed by their inputs' dtypes;
# WRAPPED: exact integer arithmetic (ring operations only: add, subtract,
# multiply, a truncated constant) whose integer results are reduced modulo
# 2^bits (``wrap_modulus``: Paddle's int32 ``x * 65536 * 65536`` is 0); every
# other row floats only (an integer division truncates, a mean divides).
ANY = None
_ANY_ROWS = (
    "reshape2", "reshape", "transpose2", "transpose", "stack", "split", "cast", "assign",
    "c_identity", "fill_constant", "nop", "depend", "reshape2_grad", "transpose2_grad",
    "slice", "slice_grad", "lookup_table_v2", "lookup_table_v2_grad",
    "builtin.parameter", "pd_op.data", "builtin.set_parameter", "builtin.shadow_output",
    "builtin.combine", "builtin.slice", "builtin.split", "pd_op.full", "pd_op.full_int_array",
    "pd_op.full_like", "pd_op.assign_value_", "pd_op.reshape", "pd_op.reshape_grad",
    "pd_op.transpose", "pd_op.transpose_grad", "pd_op.split_with_num", "pd_op.split",
    "pd_op.assign", "pd_op.cast", "pd_op.share_data_", "pd_op.assign_out_", "pd_op.slice",
    "pd_op.slice_grad", "pd_op.concat", "pd_op.concat_grad", "pd_op.unsqueeze",
    "pd_op.expand", "pd_op.tile", "pd_op.embedding", "pd_op.embedding_grad", "pd_op.arange",
    "pd_op.c_embedding", "pd_op.c_identity",
    "pd_op.empty", "pd_op.set_value_with_tensor_", "pd_op.stack",
    # uninterpreted, keyed by every input's dtype (kernel_key / _uf_broadcast)
    "pd_op.set_value_", "pd_op.tril", "pd_op.cross_entropy_with_softmax",
    "pd_op.cross_entropy_with_softmax_grad", "pd_op.not_equal", "pd_op.bitwise_and",
    "pd_op.where")
WRAPPED = frozenset({"scale", "pd_op.scale", "pd_op.scale_", "elementwise_add",
                     "elementwise_sub", "elementwise_mul", "pd_op.add", "pd_op.add_",
                     "pd_op.subtract", "pd_op.multiply", "sum", "pd_op.add_n", "reduce_sum",
                     "pd_op.sum"})
ROW_DTYPES = {**{t: ANY for t in _ANY_ROWS}, **{t: NUMERIC for t in WRAPPED}}
# input slots a row reads only as constants recorded in attrs (a PIR operand
# whose value is ``<slot>@value``) or not at all: shapes, axes, bounds
INDEX_SLOTS = frozenset({"axis", "shape", "repeat_times", "starts", "ends", "sections",
                         "num", "ShapeTensor", "ShapeTensorList", "AxisTensor",
                         "SectionsTensorList", "StartsTensor", "EndsTensor",
                         "StartsTensorList", "EndsTensorList", "XShape", "steps"})


def row_dtypes(op_type):
    """The dtypes ``op_type``'s row models (``ANY``: all)."""
    return ROW_DTYPES.get(op_type, FLOATS)


def check_dtypes(op, tensors) -> None:
    """Unsupported unless every ``(slot, name, dtype)`` of ``tensors`` (the
    op's inputs and outputs, INDEX_SLOTS aside) has a dtype the op's row
    models; a WRAPPED row given integers computes in one dtype only."""
    declared = row_dtypes(op.type)
    seen = set()
    for slot, name, dtype in tensors:
        if slot in INDEX_SLOTS:
            continue
        for d in _element_dtypes(dtype):
            if declared is not ANY and d not in declared:
                raise Unsupported(f"{op.type} on {d} ({slot} {name}): its row models "
                                  f"{', '.join(sorted(declared))} only")
            seen.add(d)
    if op.type in WRAPPED and seen & INTEGERS and len(seen) > 1:
        raise Unsupported(f"{op.type} mixing {', '.join(sorted(seen))}: integer arithmetic "
                          "is modelled in one dtype only")


# a PIR vector value's type, ``vec[tensor<2x8xf32>,...]``: its elements' dtypes
_PIR_ELEMENT = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "ui8": "uint8",
                "b": "bool", "i1": "bool"}


def _element_dtypes(dtype) -> set:
    """The dtypes of a tensor (one) or of a PIR vector value's tensors (each,
    an unknown element spelled as it is); none where the dtype is unknown."""
    d = dtype_name(dtype)
    if not d.startswith("vec["):
        return {d} if d else set()
    import re

    return {_PIR_ELEMENT.get(e, e) for e in re.findall(r"x?([a-z]+[0-9]*)>", d)}


def wrap_modulus(dtype):
    """``(bits, signed)`` of an integer dtype whose arithmetic wraps, else None."""
    d = dtype_name(dtype)
    return (INT_BITS[d], not d.startswith("u")) if d in INT_BITS else None


def cast_is_exact(src: str, dst: str) -> bool:
    """Whether every value of ``src`` is exactly a value of ``dst``: then a
    cast is the identity on values; otherwise it rounds or truncates."""
    a, b = _KIND.get(dtype_name(src)), _KIND.get(dtype_name(dst))
    if a is None or b is None:
        return False
    if a[0] == "int" and a[1] == 1:  # bool: 0/1 fit every dtype
        return True
    if a[0] == "uint" and b[0] == "int":
        return b[1] > a[1]
    if a[0] == "int" and b[0] == "uint":
        return False  # negatives wrap
    families = {("f16", "float"), ("bf16", "float"), ("f8a", "f16"), ("f8a", "float"),
                ("f8b", "f16"), ("f8b", "float"), ("f8a", "bf16"), ("f8b", "bf16")}
    if a[0] == b[0] or (a[0], b[0]) in families:
        return b[1] >= a[1] or a[0] != b[0]
    return False


def cast(op, ins, k):
    """``cast``: the identity where the target holds every source value
    exactly (a widening); otherwise a rounding/truncating kernel
    ``cast(x)`` keyed by both dtypes (float -> int truncates, float32 ->
    float16 rounds: values change)."""
    x = _t(ins, "X")
    src = dtype_name(op.attrs.get("in_dtype", x.dtype)) or dtype_name(x.dtype)
    dst = dtype_name(op.attrs.get("out_dtype", op.attrs.get("dtype", ""))) or src
    # from an integer dtype (not bool) to another dtype: a kernel, never the
    # identity: an integer value is held as a polynomial reduced modulo 2^bits
    # (WRAPPED rows), one representative of its value, not the value itself
    if src == dst or cast_is_exact(src, dst) and src not in INT_BITS:
        return {"Out": [Tensor(x.arr, x.dims, dst)]}
    attrs = (("in_dtype", repr(src)), ("out_dtype", repr(dst)))
    out = np.empty(x.arr.shape, dtype=object)
    flat, src_flat = out.reshape(-1), x.arr.reshape(-1)
    for j in range(src_flat.size):
        flat[j] = k.uf("cast", [src_flat[j]], attrs)
    return {"Out": [Tensor(out, x.dims, dst)]}


def identity(in_slot="X", out_slot="Out"):
    def row(op, ins, k):
        x = _t(ins, in_slot)
        dtype = str(op.attrs.get("out_dtype", x.dtype))
        return {out_slot: [Tensor(x.arr, x.dims, dtype)]}
    return row


def fill_constant(op, ins, k):
    """A constant of ``shape``; with a ``ValueTensor`` input the value is
    that tensor's element (cast to ``dtype``, a kernel where the cast can
    truncate); a ``ShapeTensor``/``ShapeTensorList`` shape is not modelled."""
    for slot in ("ShapeTensor", "ShapeTensorList"):
        if _has(ins, slot):
            raise Unsupported(f"fill_constant with {slot} (a shape known only at run time)")
    shape = [int(n) for n in op.attrs.get("shape") or []]
    if any(n < 0 for n in shape):
        raise Unsupported(f"fill_constant of shape {shape} (a -1 dim)")
    dtype = dtype_name(op.attrs.get("dtype", ""))
    if _has(ins, "ValueTensor"):
        v = _t(ins, "ValueTensor")
        if v.arr.size != 1:
            raise Unsupported(f"fill_constant ValueTensor of {v.arr.size} elements")
        elem = v.arr.reshape(-1)[0]
        src = dtype_name(v.dtype)
        if src != dtype and (not cast_is_exact(src, dtype) or src in INT_BITS):
            elem = k.uf("cast", [elem], (("in_dtype", repr(dtype_name(v.dtype))),
                                         ("out_dtype", repr(dtype))))
        value = elem
    elif op.attrs.get("str_value"):
        value = k.const(constant(op.attrs["str_value"], dtype))
    else:
        value = k.const(constant(op.attrs.get("value", 0.0), dtype))
    dims = leaf_dims(shape, k.reduce_to)
    red = [_prod(r for _, r in d) for d in dims]
    arr = np.empty(red, dtype=object)
    arr.fill(value)
    return {"Out": [Tensor(arr, dims, dtype or str(op.attrs.get("dtype", "")))]}


# -- arithmetic rows --------------------------------------------------------
def scale_constants(attrs, dtype) -> tuple:
    """``(scale, bias)`` as phi's ScaleKernel reads them for an ``x`` of
    ``dtype``: ``scale.to<T>()``, ``bias.to<T>()`` (an integer scale
    truncates; a bfloat16 one is the float32 value rounded to bfloat16,
    :func:`kernel_constant`), then ``EigenScale`` computes in ``T``."""
    return (kernel_constant(attrs.get("scale", 1.0), dtype),
            kernel_constant(attrs.get("bias", 0.0), dtype))


def scale(op, ins, k):
    """``x * scale + bias`` (``(x + bias) * scale`` without
    ``bias_after_scale``), the constants as the kernel reads them
    (:func:`scale_constants`); over the reals, as every row: in a low
    dtype the kernel rounds each product and sum to ``T`` (the proof's
    ``ROUNDING`` disclaimer)."""
    x = _t(ins, "X")
    if _has(ins, "ScaleTensor"):
        raise Unsupported("scale with ScaleTensor")
    sv, bv = scale_constants(op.attrs, x.dtype)
    s, b = k.const(sv), k.const(bv)
    after = op.attrs.get("bias_after_scale", True)
    out = x.arr * s + b if after else (x.arr + b) * s
    return {"Out": [Tensor(np.asarray(out), x.dims, x.dtype)]}


def sum_op(op, ins, k):
    xs = ins.get("X") or []
    if not xs or any(t is None for t in xs):
        raise Unsupported("sum input has no value")
    out = xs[0].arr
    for t in xs[1:]:
        out = out + t.arr
    return {"Out": [Tensor(np.asarray(out), xs[0].dims, xs[0].dtype)]}


def square(op, ins, k):
    x = _t(ins, "X")
    return {"Out": [Tensor(x.arr * x.arr, x.dims, x.dtype)]}


def square_grad(op, ins, k):
    x, g = _t(ins, "X"), _t(ins, "Out@GRAD")
    return {"X@GRAD": [Tensor(g.arr * x.arr * k.const(2), x.dims, x.dtype)]}


def squared_l2_norm(op, ins, k):
    x = _t(ins, "X")
    total = _sum(x.arr * x.arr) if x.arr.size else k.const(0)
    arr = np.empty([1], dtype=object)
    arr[0] = total
    return {"Out": [Tensor(arr, [((1, 1),)], x.dtype)]}


def sgd(op, ins, k):
    p, g, lr = _t(ins, "Param"), _t(ins, "Grad"), _t(ins, "LearningRate")
    lrv = lr.arr.reshape(-1)[0]
    out = p.arr - g.arr * lrv
    res = {"ParamOut": [Tensor(np.asarray(out), p.dims, p.dtype)]}
    # the kernel reads MasterParam only under multi_precision (phi's sgd)
    if _has(ins, "MasterParam") and op.attrs.get("multi_precision", False):
        m = _t(ins, "MasterParam")
        res["MasterParamOut"] = [Tensor(np.asarray(m.arr - g.arr * lrv), m.dims, m.dtype)]
        res["ParamOut"] = res["MasterParamOut"]
    return res


def _vec(fn):
    return np.frompyfunc(fn, 1, 1)


def attrs_key(op, skip=("op_role", "op_role_var", "op_device", "use_mkldnn",
                        "use_cudnn", "mkldnn_data_type", "use_quantizer",
                        "fwd_recompute_id", "bwd_recompute_id",
                        "amp_off_region", "model_cast")):
    """An op's attrs as a hashable key (bookkeeping attrs aside; the
    suite's plan-time AMP marks too, which no kernel reads (read_sets.COMMON):
    the serial program carries them, the partitioned ranks' copies do not,
    and a rank's ``cos`` is the serial ``cos`` all the same)."""
    return tuple(sorted((a, repr(v)) for a, v in op.attrs.items() if a not in skip))


_attrs_key = attrs_key


def kernel_key(op, ins):
    """What an opaque kernel's result depends on besides its argument
    values: attrs, and per input slot the shapes and dtypes of its tensors
    (layer_norm of [2,4,8] and of the same data viewed as [8,8] differ; so
    do the same values passed as Scale or as Bias)."""
    sig = tuple((s, tuple((tuple(int(n) for n in t.arr.shape), dtype_name(t.dtype))
                          for t in ts if t is not None))
                for s, ts in sorted(ins.items()) if ts)
    return attrs_key(op) + (("@inputs", repr(sig)),)


def uf_elementwise(kernel, in_slots, out_slot, like=None):
    """``out[i] = kernel(in_1[i], ..., in_n[i])``: a nonlinear elementwise
    kernel (and its grads) as an uninterpreted function of its inputs."""
    def row(op, ins, k):
        ts = [_t(ins, s) for s in in_slots]
        ref = ts[0] if like is None else _t(ins, like)
        arrs = np.broadcast_arrays(*[t.arr for t in ts])
        attrs = _attrs_key(op)
        out = np.empty(arrs[0].shape, dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = k.uf(kernel, [a[idx] for a in arrs], attrs)
        return {out_slot: [Tensor(out, ref.dims, ref.dtype)]}
    return row


def uf_linear_grad(kernel, x_slot, dout_slot, out_slot, like=None):
    """``dx[i] = kernel(x[i]) * dout[i]``: the grad of an elementwise
    activation, its derivative ``kernel`` uninterpreted and the product with
    the incoming gradient exact.  Every such grad kernel is linear in dout
    (relu's ``dout * (out > 0)``, gelu's and silu's ``dout * f'(x)``), so a
    rewrite that scales dout before or after the kernel (the data-parallel
    optimization moves 1/n into the loss seed) is provable."""
    def row(op, ins, k):
        x, g = _t(ins, x_slot), _t(ins, dout_slot)
        ref = x if like is None else _t(ins, like)
        a, b = np.broadcast_arrays(x.arr, g.arr)
        attrs = _attrs_key(op)
        out = np.empty(a.shape, dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = k.uf(kernel, [a[idx]], attrs) * b[idx]
        return {out_slot: [Tensor(out, ref.dims, ref.dtype)]}
    return row


def elementwise_div(op, ins, k):
    """x / y = x * inv(y), inv uninterpreted (division is not a polynomial)."""
    x, y = _t(ins, "X"), _t(ins, "Y")
    a, b = _align(x, y, op.attrs.get("axis", -1))
    inv = np.empty(b.shape, dtype=object)
    for idx in np.ndindex(b.shape):
        inv[idx] = k.uf("inv", [b[idx]], ())
    out = np.asarray(a * inv)
    return {"Out": [Tensor(np.asarray(out), _out_dims(out.shape, x, y), x.dtype)]}


def elementwise_max(op, ins, k):
    x, y = _t(ins, "X"), _t(ins, "Y")
    a, b = _align(x, y, op.attrs.get("axis", -1))
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape):
        out[idx] = k.uf("max", [a[idx], b[idx]], ())
    return {"Out": [Tensor(out, _out_dims(out.shape, x, y), x.dtype)]}


def elementwise_min(op, ins, k):
    """``min(x, y)`` elementwise, ``min`` uninterpreted (replayed exactly,
    ``kernels.reference``), as ``elementwise_max``'s ``max``."""
    x, y = _t(ins, "X"), _t(ins, "Y")
    a, b = _align(x, y, op.attrs.get("axis", -1))
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape):
        out[idx] = k.uf("min", [a[idx], b[idx]], ())
    return {"Out": [Tensor(out, _out_dims(out.shape, x, y), x.dtype)]}


def clip(op, ins, k):
    """``clip``: ``min(max(x, lo), hi)`` elementwise (phi's ClipFunctor),
    ``max`` and ``min`` as in ``elementwise_max``; the bounds as the kernel
    reads them, cast to x's dtype (``constant``: a bound not exact in
    bfloat16 is refused; in float16 and float32 it is rounded).  Bounds
    given as tensors (``Min``/``Max``) are refused (read_sets)."""
    x = _t(ins, "X")
    lo = constant(op.attrs.get("min", 0.0), x.dtype)
    hi = constant(op.attrs.get("max", 0.0), x.dtype)
    if lo > hi:
        raise Unsupported(f"clip with min {lo} above max {hi} (the kernel refuses it)")
    klo, khi = k.const(lo), k.const(hi)
    out = np.empty(x.arr.shape, dtype=object)
    for idx in np.ndindex(x.arr.shape):
        out[idx] = k.uf("min", [k.uf("max", [x.arr[idx], klo], ()), khi], ())
    return {"Out": [Tensor(out, x.dims, x.dtype)]}


ADAMW_IN = ("Param", "Grad", "Moment1", "Moment2", "LearningRate", "Beta1Pow", "Beta2Pow")


def _adam_like(kernel):
    """adam/adamw: ParamOut, Moment1Out, Moment2Out uninterpreted elementwise
    functions of (param or master param, grad, moments, lr, beta pows);
    the beta pow outputs are the linear ``pow * beta``."""
    def row(op, ins, k):
        p = _t(ins, "Param")
        master = _has(ins, "MasterParam") and op.attrs.get("multi_precision", False)
        slots = list(ADAMW_IN)
        if master:
            slots[0] = "MasterParam"
        ts = [_t(ins, s) for s in slots]
        shape = p.arr.shape
        arrs = [np.broadcast_to(t.arr.reshape(-1)[0], shape) if t.arr.size == 1 and
                t.arr.shape != shape else t.arr for t in ts]
        attrs = _attrs_key(op)
        res = {}
        for out_slot in ("ParamOut", "Moment1Out", "Moment2Out"):
            out = np.empty(shape, dtype=object)
            for idx in np.ndindex(shape):
                out[idx] = k.uf(f"{kernel}.{out_slot}", [a[idx] for a in arrs], attrs)
            res[out_slot] = [Tensor(out, p.dims, p.dtype)]
        if master:
            res["MasterParamOut"] = res["ParamOut"]
        for i, (slot, beta) in enumerate((("Beta1Pow", "beta1"), ("Beta2Pow", "beta2"))):
            t = _t(ins, slot)
            res[slot + "Out"] = [Tensor(t.arr * k.const(constant(op.attrs.get(beta, 0.9),
                                                                  t.dtype)),
                                        t.dims, t.dtype)]
        return res
    return row


def uf_opaque(kernel, out_like: dict):
    """Every output element an uninterpreted function of ALL input elements
    (tril, set_value_, the cross entropy with softmax: whole-tensor kernels).
    ``out_like``: out slot -> (input slot, dims function or None)."""
    def row(op, ins, k):
        args = [e for s in sorted(ins) for t in (ins[s] or []) if t is not None
                for e in t.arr.reshape(-1)]
        attrs = kernel_key(op, ins)
        res = {}
        for out_slot, (in_slot, dims_fn) in out_like.items():
            if not _has(ins, in_slot):
                continue
            ref = _t(ins, in_slot)
            dims = ref.dims if dims_fn is None else dims_fn(op, ref)
            shape = [_prod(r for _, r in d) for d in dims]
            out = np.empty(shape, dtype=object)
            for j, idx in enumerate(np.ndindex(*shape)):
                out[idx] = k.uf(f"{kernel}.{out_slot}.{j}", args, attrs)
            res[out_slot] = [Tensor(out, dims, ref.dtype)]
        return res
    return row


def uf_rows(kernel, out_like: dict):
    """Every output row an uninterpreted function of the same row of every
    input, a row being the elements along the op's ``axis`` at one index of
    the other dims (the cross entropy with softmax and its grad: softmax,
    loss and input_grad of a row read only that row's logits, label and
    loss_grad).  So a batch split (data parallel) computes the same terms on
    its rows as the whole batch does.  The key holds each slot's row width
    and dtype (``@rows``), not the tensor's shape: the function of a row does
    not depend on how many rows there are.  ``out_like``: out slot ->
    (input slot, True where the output row is one element (the loss))."""
    def row(op, ins, k):
        ts = {s: _t(ins, s) for s in sorted(ins) if _has(ins, s)}
        nd = {t.arr.ndim for t in ts.values()}
        if len(nd) != 1 or not next(iter(nd)):
            raise Unsupported(f"{op.type}: inputs of ranks {sorted(nd)}: no rows")
        axis = int(op.attrs.get("axis", -1)) % next(iter(nd))
        moved = {s: np.moveaxis(t.arr, axis, -1) for s, t in ts.items()}
        lead = {m.shape[:-1] for m in moved.values()}
        if len(lead) != 1:
            raise Unsupported(f"{op.type}: inputs whose rows do not match "
                              f"({', '.join(f'{s} {list(t.arr.shape)}' for s, t in ts.items())})")
        lead = next(iter(lead))
        sig = tuple((s, (m.shape[-1], dtype_name(ts[s].dtype))) for s, m in moved.items())
        attrs = attrs_key(op) + (("@rows", repr(sig)),)
        res = {}
        for out_slot, (in_slot, one) in out_like.items():
            if in_slot not in ts:
                continue
            ref = ts[in_slot]
            width = 1 if one else moved[in_slot].shape[-1]
            out = np.empty(lead + (width,), dtype=object)
            for idx in np.ndindex(*lead):
                args = [e for m in moved.values() for e in m[idx]]
                for j in range(width):
                    out[idx + (j,)] = k.uf(f"{kernel}.{out_slot}.{j}", args, attrs)
            dims = [d if i != axis else ((1, 1),) for i, d in enumerate(ref.dims)] if one \
                else ref.dims
            res[out_slot] = [Tensor(np.moveaxis(out, -1, axis), dims, ref.dtype)]
        return res
    return row


def uf_opaque_homogeneous(kernel, out_like: dict, linear_slot: str):
    """``uf_opaque`` for a kernel linear in its input ``linear_slot`` (every
    output: layer_norm_grad in Y@GRAD).  Only homogeneity is used:
    ``f(.., c * g) = c * f(.., g)`` for a constant c.  The common constant
    ``c`` (the value of the first element of ``g`` at one fixed point,
    ``Store.point_value``, the first nonzero one) is taken out before the
    kernel is keyed and multiplied back after, so ``f(x, g / n)`` and
    ``f(x, g) / n`` are one canonical form, and so are the forms of one
    ``g`` the programs cut at other places (a lead coefficient would
    depend on the cuts: a bias inside or beside a cut sum); a zero ``g``
    gives zero outputs; no element nonzero at that point: nothing taken
    out (any nonzero c is sound); terms too deep or too many to evaluate
    (``POINT_WORK``): the first nonzero element's lead coefficient.  Tested
    against Paddle's grad at concrete values (tests/test_value_axioms.py)."""
    inner = uf_opaque(kernel, out_like)

    def row(op, ins, k):
        store = getattr(k, "store", None)
        if store is None:  # concrete values (a test's float kernels): nothing to key
            return inner(op, ins, k)
        g = _t(ins, linear_slot)
        polys = store.polys
        lead, zero = None, True
        for e in g.arr.reshape(-1):
            pid = e.i if hasattr(e, "i") else store.const(e)
            if polys[pid]:
                if zero:
                    form_lead = polys[pid][0][1]
                zero = False
                lead = store.point_value(pid)
                if lead is None:  # past the store's limit: the form's lead
                    lead = form_lead
                if lead:
                    break
        if not zero and not lead or lead == 1:  # nothing to take out
            return inner(op, ins, k)
        if zero:  # g == 0: every output of a linear kernel is 0
            lead, unit = 0, g
        else:
            unit = Tensor(np.asarray(g.arr * k.const(1 / Fraction(lead))), g.dims, g.dtype)
        res = inner(op, {**ins, linear_slot: [unit]}, k)
        c = k.const(Fraction(lead))
        return {s: [Tensor(np.asarray(t.arr * c), t.dims, t.dtype) for t in ts]
                for s, ts in res.items()}
    return row


def _ln_stats_dims(op, x):
    b = op.attrs.get("begin_norm_axis", 1)
    return list(x.dims[:b]) or [((1, 1),)]  # Mean/Variance: x.shape[:b], as 3.3.1's


# -- collectives (performed by the executor across ranks) --------------------
# the one table of collective op types lives in verify/ir/collectives.py
def collective_kind(op) -> str:
    return collectives.kind(op.type, op.attrs)


def collective(kind, xs, i, root, k):
    """Rank ``i``'s result of collective ``kind`` over the group's inputs
    ``xs`` (Tensors, group order).  root: index in the group."""
    x = xs[i]
    n = len(xs)
    if kind == "identity":
        return x
    if kind in ("sum", "avg", "prod", "reduce_scatter"):
        if len({t.arr.shape for t in xs}) > 1:
            raise Unsupported(f"{kind} over tensors of different shapes")
        acc = xs[0].arr
        for t in xs[1:]:
            # numpy turns a 0-d object sum into a bare element: keep an array
            acc = np.asarray(acc * t.arr if kind == "prod" else acc + t.arr, dtype=object)
        if kind == "avg":
            acc = acc * k.const(Fraction(1, n))
        if kind != "reduce_scatter":
            return Tensor(np.asarray(acc), x.dims, x.dtype)
        d0 = x.dims[0]
        o, r = _prod(a for a, _ in d0), acc.shape[0]
        if r % n or o % n:
            raise Unsupported(f"reduce_scatter of reduced dim {r} over {n} ranks")
        part = np.split(acc, n, axis=0)[i]
        dims = [((o // n, r // n),)] + list(x.dims[1:])
        if d0[0] == (n, n):
            dims[0] = d0[1:] or ((1, 1),)
        return Tensor(part, dims, x.dtype)
    if kind in ("max", "min"):
        arrs = [t.arr for t in xs]
        out = np.empty(x.arr.shape, dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = k.uf(kind, [a[idx] for a in arrs], ())
        return Tensor(out, x.dims, x.dtype)
    if kind == "all_gather":
        out = np.concatenate([t.arr for t in xs], axis=0)
        return Tensor(out, [((n, n),) + tuple(x.dims[0])] + list(x.dims[1:]), x.dtype)
    if kind == "broadcast":
        return Tensor(xs[root].arr, xs[root].dims, xs[root].dtype)
    if kind == "all_to_all":
        return _all_to_all(xs, i)
    if kind in ("reduce_sum", "reduce_avg"):
        # reduce to the root only: the other ranks keep their own x
        return collective(kind[len("reduce_"):], xs, i, root, k) if i == root else x
    raise Unsupported(f"collective kind {kind}")


def _all_to_all(xs, i):
    """Rank ``i``'s all_to_all: every rank's x cut into ``n`` chunks along dim
    0, chunk ``j`` of the result is rank ``j``'s chunk ``i`` (Paddle's GPU
    kernel: chunk j sent to and received from the group's rank j).  On a
    reduced dim 0 the cut is exact only along a leading factor kept at its
    real size and divisible by n (or a dim not reduced at all)."""
    x, n = xs[i], len(xs)
    if len({(t.arr.shape, t.dims) for t in xs}) > 1:
        raise Unsupported("all_to_all over tensors of different shapes")
    if not x.dims:
        raise Unsupported("all_to_all of a 0-d tensor")
    d0 = x.dims[0]
    orig = _prod(a for a, _ in d0)
    if orig % n:
        raise Unsupported(f"all_to_all of dim 0 ({orig}) over {n} ranks: not divisible "
                          "(the kernel refuses it)")
    unreduced = all(a == b for a, b in d0)
    if not (unreduced or d0[0][0] == d0[0][1] and d0[0][0] % n == 0):
        raise Unsupported(f"all_to_all of a reduced dim 0 {d0} over {n} ranks")
    out = np.concatenate([np.split(t.arr, n, axis=0)[i] for t in xs], axis=0)
    return Tensor(out, x.dims, x.dtype)


def _elementwise_sub_grad(op, ins, k):
    return _ew_grad(lambda a, b, g, k: _bcast(g, np.broadcast_shapes(a.shape, b.shape)),
                    lambda a, b, g, k: _bcast(g, np.broadcast_shapes(a.shape, b.shape)) *
                    k.const(-1))(op, ins, k)


def _no_grad_slots(fn, keep):
    def row(op, ins, k):
        out = fn(op, ins, k)
        return {s: v for s, v in out.items() if s in keep}
    return row


# -- THE TABLE ---------------------------------------------------------------
ROWS = {
    # index maps and identities (values unchanged; dtype tracked apart)
    "reshape2": reshape,
    "reshape": reshape,
    "transpose2": transpose,
    "transpose": transpose,
    "stack": stack,
    "split": split,
    "cast": cast,
    "assign": identity(),
    "c_identity": identity(),
    "fill_constant": fill_constant,
    # linear
    "scale": scale,
    "sum": sum_op,
    "elementwise_add": _ew(lambda a, b, k: a + b),
    "elementwise_sub": _ew(lambda a, b, k: a - b),
    "elementwise_add_grad": _ew_grad(
        lambda a, b, g, k: _bcast(g, np.broadcast_shapes(a.shape, b.shape)),
        lambda a, b, g, k: _bcast(g, np.broadcast_shapes(a.shape, b.shape))),
    "elementwise_sub_grad": _elementwise_sub_grad,
    "reduce_mean": _reduce(mean=True),
    "mean": _reduce(mean=True),
    "reduce_sum": _reduce(mean=False),
    "reduce_mean_grad": _reduce_grad(mean=True),
    "mean_grad": _reduce_grad(mean=True),
    "reduce_sum_grad": _reduce_grad(mean=False),
    "sgd": sgd,
    # ordering only (the dependencies pass): nop computes nothing (its Out keeps
    # its value), depend passes X through
    "nop": lambda op, ins, k: {},
    "depend": identity("X", "Out"),
    # bilinear / polynomial
    "matmul_v2": matmul,
    "matmul": matmul,
    "matmul_v2_grad": matmul_grad,
    "elementwise_mul": _ew(lambda a, b, k: a * b),
    "elementwise_mul_grad": _ew_grad(lambda a, b, g, k: g * b, lambda a, b, g, k: g * a),
    "square": square,
    "square_grad": square_grad,
    "squared_l2_norm": squared_l2_norm,
    # uninterpreted
    "elementwise_div": elementwise_div,
    "elementwise_max": elementwise_max,
    "elementwise_min": elementwise_min,
    "clip": clip,
    "gelu": uf_elementwise("gelu", ["X"], "Out"),
    "gelu_grad": uf_linear_grad("gelu.d", "X", "Out@GRAD", "X@GRAD"),
    "relu": uf_elementwise("relu", ["X"], "Out"),
    "relu_grad": uf_linear_grad("relu.mask", "Out", "Out@GRAD", "X@GRAD"),
    "sqrt": uf_elementwise("sqrt", ["X"], "Out"),
    "adamw": _adam_like("adamw"),
    "adam": _adam_like("adam"),
}

# Startup ops that draw random values: their output is an input symbol.
RANDOM_INIT = {"uniform_random", "gaussian_random", "truncated_gaussian_random",
               "randint", "randperm"}


# -- PIR ops (keyed by op.name(); slots and attrs as verify/ir/pir_snapshot.py
# records them).  Each is the legacy row of the same kernel, reached through
# a renaming of slots and attrs (one meaning per kernel), or a definition. ---
class _OpView:
    __slots__ = ("type", "attrs", "inputs", "outputs", "idx")

    def __init__(self, op, attrs):
        self.type, self.attrs = op.type, attrs
        self.inputs, self.outputs, self.idx = op.inputs, op.outputs, getattr(op, "idx", 0)


def _via(row, ins_map, outs_map, attrs_fn=lambda a: a):
    """A PIR row from a legacy ``row``: PIR input slots renamed by
    ``ins_map``, legacy outputs back by ``outs_map``, attrs by ``attrs_fn``."""
    def pir_row(op, ins, k):
        legacy_ins = {ins_map[s]: v for s, v in ins.items() if s in ins_map}
        out = row(_OpView(op, attrs_fn(dict(op.attrs))), legacy_ins, k)
        return {outs_map[s]: v for s, v in out.items() if s in outs_map}
    return pir_row


def _pir_trans(a):
    return {**a, "trans_x": bool(a.get("transpose_x")), "trans_y": bool(a.get("transpose_y"))}


def _pir_reduce_attrs(a):
    axis = a.get("axis@value")
    if axis is None:
        raise Unsupported("mean axes are not a constant (no axis@value)")
    return {**a, "dim": list(axis), "keep_dim": bool(a.get("keepdim")),
            "reduce_all": not axis}


def _pir_reshape_attrs(a):
    if a.get("shape@value") is None:
        raise Unsupported("reshape target is not a constant (no shape@value)")
    return {**a, "shape": list(a["shape@value"])}


def _pir_scale_attrs(a):
    if a.get("scale@value") is None:
        raise Unsupported("scale factor is not a constant (no scale@value)")
    return {**a, "scale": a["scale@value"]}


def _pir_full_int_array(op, ins, k):
    vals = list(op.attrs.get("value") or [])
    arr = np.empty([len(vals)], dtype=object)
    for i, v in enumerate(vals):
        arr[i] = k.const(v)
    return {"out": [Tensor(arr, [((len(vals), len(vals)),)], "int64")]}


def _pir_full_like(op, ins, k):
    x = _t(ins, "x")
    if op.attrs.get("value@value") is None:
        raise Unsupported("full_like value is not a constant (no value@value)")
    arr = np.empty(x.arr.shape, dtype=object)
    dtype = dtype_name(op.attrs.get("dtype", "")) or x.dtype
    arr.fill(k.const(constant(op.attrs["value@value"], dtype)))
    return {"out": [Tensor(arr, x.dims, dtype)]}


def _pir_named(in_slot, out_slot):
    """builtin.set_parameter / shadow_output: the operand under the name the
    op writes (slot ``parameter`` / ``output`` of the snapshot)."""
    def row(op, ins, k):
        return {out_slot: [_t(ins, in_slot)]}
    return row


def _pir_definition(op, ins, k):
    """builtin.parameter / pd_op.data: binds nothing; the value under the
    name is the entry's (startup's write, or a feed, or a fresh input)."""
    return {}


ROWS.update({
    "builtin.parameter": _pir_definition,
    "pd_op.data": _pir_definition,
    "builtin.set_parameter": _pir_named("operands", "parameter"),
    "builtin.shadow_output": _pir_named("operands", "output"),
    "pd_op.full": _via(fill_constant, {}, {"Out": "out"}),
    "pd_op.full_int_array": _pir_full_int_array,
    "pd_op.full_like": _pir_full_like,
    "pd_op.matmul": _via(matmul, {"x": "X", "y": "Y"}, {"Out": "out"}, _pir_trans),
    "pd_op.matmul_grad": _via(matmul_grad, {"x": "X", "y": "Y", "out_grad": "Out@GRAD"},
                              {"X@GRAD": "x_grad", "Y@GRAD": "y_grad"}, _pir_trans),
    "pd_op.reshape": _via(reshape, {"x": "X"}, {"Out": "out"}, _pir_reshape_attrs),
    "pd_op.transpose": _via(transpose, {"x": "X"}, {"Out": "out"},
                            lambda a: {**a, "axis": list(a.get("perm") or [])}),
    "pd_op.transpose_grad": _via(transpose, {"out_grad": "X"}, {"Out": "x_grad"},
                                 lambda a: {**a, "axis": [list(a.get("perm") or []).index(i)
                                                          for i in range(len(a.get("perm")
                                                                             or []))]}),
    "pd_op.square": _via(square, {"x": "X"}, {"Out": "out"}),
    "pd_op.scale": _via(scale, {"x": "X"}, {"Out": "out"}, _pir_scale_attrs),
    "pd_op.square_grad": _via(square_grad, {"x": "X", "out_grad": "Out@GRAD"},
                              {"X@GRAD": "x_grad"}),
    "pd_op.mean": _via(_reduce(mean=True), {"x": "X"}, {"Out": "out"}, _pir_reduce_attrs),
    "pd_op.mean_grad": _via(_reduce_grad(mean=True), {"x": "X", "out_grad": "Out@GRAD"},
                            {"X@GRAD": "x_grad"}, _pir_reduce_attrs),
    "pd_op.sgd_": _via(sgd, {"param": "Param", "grad": "Grad", "learning_rate": "LearningRate",
                             "master_param": "MasterParam"},
                       {"ParamOut": "param_out", "MasterParamOut": "master_param_out"}),
})
RANDOM_INIT |= {"pd_op.uniform", "pd_op.gaussian"}


# -- PIR collectives' neighbours (fuse_allreduce_split_to_reducescatter) ---------
# pd_op.all_reduce(_) / reduce_scatter / all_gather are collectives: the
# executor performs them from verify/ir/collectives.py.  A vector value
# (split_with_num's ``out``, a ``vec[...]``) of equal pieces is held as ONE
# Tensor: the pieces stacked along a new leading dim (original size = count);
# builtin.slice / builtin.split take pieces out of it again.
def _pir_split_with_num(op, ins, k):
    axis = op.attrs.get("axis@value")
    if axis is None:
        raise Unsupported("split_with_num axis is not a constant (no axis@value)")
    axis = int(axis[0] if isinstance(axis, list) else axis)
    parts = split(_OpView(op, {"axis": axis, "num": int(op.attrs.get("num", 0))}),
                  {"X": ins.get("x")}, k)["Out"]
    n = len(parts)
    return {"out": [Tensor(np.stack([p.arr for p in parts]), [((n, n),)] + list(parts[0].dims),
                           parts[0].dtype)]}


class Ragged(Tensor):
    """A vector value (``builtin.combine``'s) whose pieces are of one layout
    but for empty ones (a partial rotary's empty pass-through half, an empty
    prefix concatenated): ``arr`` stacks the non-empty pieces (as a vector
    is held: what a concat of it computes, the empty ones adding no
    element), ``pieces`` holds every piece in order.  Only the readers in
    ``RAGGED_READERS`` give it meaning; the executor refuses any other."""

    __slots__ = ("pieces",)

    def __init__(self, pieces):
        full = [t for t in pieces if t.arr.size]
        n = len(full)
        super().__init__(np.stack([t.arr for t in full]), [((n, n),)] + list(full[0].dims),
                         full[0].dtype)
        self.pieces = list(pieces)


# the ops whose rows read a Ragged vector: the concat and its grad (the empty
# pieces hold no element), the vector's pieces taken apart
RAGGED_READERS = ("pd_op.concat", "pd_op.concat_grad", "builtin.split", "builtin.slice")


def _pir_vector_piece(op, ins, k):
    """builtin.slice: piece ``index`` of a stacked vector value."""
    v = _t(ins, "operands")
    i = int(op.attrs.get("index", 0))
    if isinstance(v, Ragged):
        if not 0 <= i < len(v.pieces):
            raise Unsupported(f"builtin.slice index {i} of a vector of {len(v.pieces)}")
        return {"results": [v.pieces[i]]}
    if not 0 <= i < v.arr.shape[0]:
        raise Unsupported(f"builtin.slice index {i} of a vector of {v.arr.shape[0]}")
    return {"results": [Tensor(v.arr[i], v.dims[1:] or ((1, 1),), v.dtype)]}


def _pir_vector_pieces(op, ins, k):
    """builtin.split: every piece of a stacked vector value, in order."""
    v = _t(ins, "operands")
    # the snapshot names only the used results; results@index says which pieces
    if isinstance(v, Ragged):
        at = op.attrs.get("results@index") or range(len(v.pieces))
        return {"results": [v.pieces[i] for i in at]}
    at = op.attrs.get("results@index") or range(v.arr.shape[0])
    return {"results": [Tensor(v.arr[i], v.dims[1:] or ((1, 1),), v.dtype) for i in at]}


ROWS.update({
    "pd_op.assign": _via(identity(), {"x": "X"}, {"Out": "out"}),
    # the model-parallel identity paddleformers' parallel_matmul inserts under
    # fleet's hybrid group: its forward is the identity on any ring (no CPU
    # kernel: numeric runs execute it as assign, read_sets says why)
    "pd_op.c_identity": _via(identity(), {"x": "X"}, {"Out": "out"}),
    "pd_op.cast": _via(cast, {"x": "X"}, {"Out": "out"},
                       lambda a: {**a, "out_dtype": a.get("dtype", "")}),
    "pd_op.split_with_num": _pir_split_with_num,
    "builtin.slice": _pir_vector_piece,
    "builtin.split": _pir_vector_pieces,
    "pd_op.add": _via(ROWS["elementwise_add"], {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.add_": _via(ROWS["elementwise_add"], {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.add_grad": _via(ROWS["elementwise_add_grad"],
                           {"x": "X", "y": "Y", "out_grad": "Out@GRAD"},
                           {"X@GRAD": "x_grad", "Y@GRAD": "y_grad"}),
})


# -- the GPT model's ops (embedding lookup, softmax, the layout grads) --------
def _onehot(op, ids: Tensor, rows: int, k):
    """``oh[..., v]``: whether id ``ids[...]`` selects table row ``v``.

    Why a lookup is modelled so: the proof's feeds (the ids too) are input
    symbols, so a gather by concrete index is not available; a lookup is
    linear in the table row it selects, ``out[i] = sum_v sel_v(id_i) W[v]``,
    with ``sel_v`` an uninterpreted function of the id alone (one per row
    ``v`` and ``padding_idx``: the real kernel is 1 for the row the id names
    and 0 elsewhere, 0 everywhere for the padding id).  Sound: every
    interpretation, the real one too, satisfies what a proof concludes; and
    exact in the table, so a rewrite that moves the lookup's grad across
    ranks or re-associates it with the tied matmul's stays provable.  The
    same ``sel_v(id)`` atoms serve the grad (``dW[v] = sum_i sel_v(id_i)
    dOut[i]``), so forward and backward agree on which rows were read.
    ``rows`` (the kernel raises on an id outside [0, rows)) bounds the id,
    not the value: it is no part of the atom (``kernels.DOMAIN_ATTRS``), so
    a piece of a vocab-split table (``_c_select``) selects with the same atoms."""
    pad = int(op.attrs.get("padding_idx", -1))
    oh = np.empty(ids.arr.shape + (rows,), dtype=object)
    for idx in np.ndindex(ids.arr.shape):
        for v in range(rows):
            oh[idx + (v,)] = k.uf("lookup_select", [ids.arr[idx]],
                                  (("padding_idx", repr(pad)), ("row", repr(v)),
                                   ("rows", repr(rows))))
    return oh


def lookup_table_v2(op, ins, k):
    ids, w = _t(ins, "Ids"), _t(ins, "W")
    if w.arr.ndim != 2:
        raise Unsupported(f"lookup table of rank {w.arr.ndim}")
    oh = _onehot(op, ids, w.arr.shape[0], k)
    out = _matmul(oh.reshape(-1, w.arr.shape[0]), w.arr).reshape(
        ids.arr.shape + (w.arr.shape[1],))
    return {"Out": [Tensor(np.asarray(out), list(ids.dims) + [w.dims[1]], w.dtype)]}


def lookup_table_v2_grad(op, ins, k):
    if op.attrs.get("is_sparse", False):
        raise Unsupported("sparse lookup_table_v2_grad (a SelectedRows W@GRAD)")
    ids, w, g = _t(ins, "Ids"), _t(ins, "W"), _t(ins, "Out@GRAD")
    rows, width = w.arr.shape
    oh = _onehot(op, ids, rows, k).reshape(-1, rows)
    dw = _matmul(_tr(oh), g.arr.reshape(-1, width))
    return {"W@GRAD": [Tensor(np.asarray(dw), w.dims, w.dtype)]}


def _c_select(op, ids: Tensor, rows: int, k):
    """``sel[..., v]`` of ``pd_op.c_embedding`` and its grad: whether id
    ``ids[...]`` names global table row ``start_index + v`` (both CPU kernels
    subtract ``start_index`` and touch local row ``v`` where
    ``0 <= id - start < rows``, the local table's height; the forward writes
    0, the grad adds nothing, for any other id).  The atoms are the lookup's
    own (``lookup_select`` keyed by the global row, no padding): [id == row]
    is one function whichever kernel applies it, so a vocabulary split over
    ranks sums back to the serial embedding's terms, forward and grad.  The
    forward's ``vocab_size`` (the ids the vocabulary holds: the GPU kernel
    raises outside [0, vocab_size) where it is >= 0) bounds the ids
    (``kernels.DOMAIN_ATTRS``), never the value; the grad reads no
    vocabulary and bounds nothing."""
    start = int(op.attrs.get("start_index", 0))
    vocab = op.attrs.get("vocab_size")
    bound = (("rows", repr(int(vocab))),) if vocab is not None and int(vocab) >= 0 else ()
    sel = np.empty(ids.arr.shape + (rows,), dtype=object)
    for idx in np.ndindex(ids.arr.shape):
        for v in range(rows):
            sel[idx + (v,)] = k.uf("lookup_select", [ids.arr[idx]],
                                   (("padding_idx", repr(-1)), ("row", repr(start + v)))
                                   + bound)
    return sel


def c_embedding(op, ins, k):
    """``out[i] = sum_v [ids[i] == start_index + v] W[v]``: the local table's
    rows at their global ids, 0 for an id another rank holds."""
    ids, w = _t(ins, "x"), _t(ins, "weight")
    if w.arr.ndim != 2:
        raise Unsupported(f"c_embedding table of rank {w.arr.ndim}")
    rows = w.arr.shape[0]
    sel = _c_select(op, ids, rows, k)
    out = _matmul(sel.reshape(-1, rows), w.arr).reshape(ids.arr.shape + (w.arr.shape[1],))
    return {"out": [Tensor(np.asarray(out), list(ids.dims) + [w.dims[1]], w.dtype)]}


def c_embedding_grad(op, ins, k):
    """``dW[v] = sum_i [ids[i] == start_index + v] dOut[i]``: the kernel
    reads the table's shape (the gradient's), the ids, dOut and
    ``start_index``; no vocabulary (the op has no ``vocab_size``)."""
    ids, w, g = _t(ins, "x"), _t(ins, "weight"), _t(ins, "out_grad")
    if w.arr.ndim != 2:
        raise Unsupported(f"c_embedding_grad table of rank {w.arr.ndim}")
    rows, width = w.arr.shape
    sel = _c_select(op, ids, rows, k)
    dw = _matmul(_tr(sel.reshape(-1, rows)), g.arr.reshape(-1, width))
    return {"weight_grad": [Tensor(np.asarray(dw), w.dims, w.dtype)]}


def softmax(op, ins, k):
    """Each output element an uninterpreted function of the elements of its
    row along ``axis`` and of its position in that row (softmax is not a
    polynomial; it reads nothing outside the row)."""
    x = _t(ins, "X")
    nd = x.arr.ndim
    axis = int(op.attrs.get("axis", -1)) % max(nd, 1)
    xa = np.moveaxis(x.arr, axis, -1)
    out = np.empty(xa.shape, dtype=object)
    attrs = _attrs_key(op)
    for idx in np.ndindex(xa.shape[:-1]):
        row = list(xa[idx])
        for j in range(len(row)):
            out[idx + (j,)] = k.uf("softmax", row, attrs + (("index", repr(j)),))
    return {"Out": [Tensor(np.moveaxis(out, -1, axis), x.dims, x.dtype)]}


def softmax_grad(op, ins, k):
    """``dX = Out * (dOut - sum(dOut * Out, axis))``: a polynomial in Out and
    dOut (Paddle's softmax_grad reads only those)."""
    y, g = _t(ins, "Out"), _t(ins, "Out@GRAD")
    axis = int(op.attrs.get("axis", -1)) % max(y.arr.ndim, 1)
    s = _sum(g.arr * y.arr, axis=axis, keepdims=True)
    return {"X@GRAD": [Tensor(np.asarray(y.arr * (g.arr - s)), y.dims, y.dtype)]}


def reshape2_grad(op, ins, k):
    """dOut reshaped back to X's shape, which XShape declares as [0] + X."""
    g, xs = _t(ins, "Out@GRAD"), _t(ins, "XShape")
    target = list(xs.orig[1:])
    dims = reshape_dims(g.dims, target, k.reduce_to)
    shape = [_prod(r for _, r in d) for d in dims]
    return {"X@GRAD": [Tensor(g.arr.reshape(shape), dims, g.dtype)]}


def transpose2_grad(op, ins, k):
    """dOut transposed by the inverse of the forward's ``axis``."""
    g = _t(ins, "Out@GRAD")
    perm = [int(a) % max(g.arr.ndim, 1) for a in op.attrs.get("axis", [])]
    inv = [perm.index(i) for i in range(len(perm))]
    return {"X@GRAD": [Tensor(np.transpose(g.arr, inv), [g.dims[p] for p in inv], g.dtype)]}


ROWS.update({
    "lookup_table_v2": lookup_table_v2,
    "lookup_table_v2_grad": lookup_table_v2_grad,
    "softmax": softmax,
    "softmax_grad": softmax_grad,
    "reshape2_grad": reshape2_grad,
    "transpose2_grad": transpose2_grad,
})


# -- PIR training ops of the gradient-merge cases: subtract/sum and their
# grads (the legacy rows through renamings), momentum_ (exact: polynomial),
# adam_/adamw_ (the legacy uninterpreted rows), the merge's in-place scale_
# and the whole-tensor zeroing set_value_with_tensor_. ------------------------
def _pir_momentum(op, ins, k):
    """``v' = mu * v + g``, ``p' = p - lr * v'`` (3.3.1's momentum kernel
    without Nesterov or regularization; the others are not modelled)."""
    if op.attrs.get("use_nesterov") or op.attrs.get("regularization_method") or \
            float(op.attrs.get("rescale_grad", 1.0) or 1.0) != 1.0:
        raise Unsupported("momentum_ with nesterov, regularization or rescale_grad")
    p, g, v, lr = (_t(ins, s) for s in ("param", "grad", "velocity", "learning_rate"))
    mu = k.const(constant(op.attrs.get("mu", 0.9), v.dtype))
    lrv = lr.arr.reshape(-1)[0]
    v_out = v.arr * mu + g.arr
    return {"param_out": [Tensor(np.asarray(p.arr - v_out * lrv), p.dims, p.dtype)],
            "velocity_out": [Tensor(np.asarray(v_out), v.dims, v.dtype)]}


def _pir_adam_attrs(a):
    return {**a, "beta1": a.get("beta1@value", a.get("beta1", 0.9)),
            "beta2": a.get("beta2@value", a.get("beta2", 0.999)),
            "epsilon": a.get("epsilon@value", a.get("epsilon", 1e-8))}


_PIR_ADAM_INS = {"param": "Param", "grad": "Grad", "learning_rate": "LearningRate",
                 "moment1": "Moment1", "moment2": "Moment2", "beta1_pow": "Beta1Pow",
                 "beta2_pow": "Beta2Pow", "master_param": "MasterParam"}
_PIR_ADAM_OUTS = {"ParamOut": "param_out", "Moment1Out": "moment1_out",
                  "Moment2Out": "moment2_out", "Beta1PowOut": "beta1_pow_out",
                  "Beta2PowOut": "beta2_pow_out", "MasterParamOut": "master_param_out"}


def _pir_set_value_with_tensor(op, ins, k):
    """The whole-tensor form (no axes): ``values`` broadcast to ``x``'s shape."""
    if op.attrs.get("axes") or op.attrs.get("starts@value") or op.attrs.get("none_axes") \
            or op.attrs.get("decrease_axes"):
        raise Unsupported("set_value_with_tensor_ on a slice (axes given)")
    x, v = _t(ins, "x"), _t(ins, "values")
    if v.arr.size == 1:
        out = np.full(x.arr.shape, v.arr.reshape(-1)[0], dtype=object)
    else:
        out = np.broadcast_to(v.arr, x.arr.shape).copy()
    return {"out": [Tensor(out, x.dims, x.dtype)]}


def _ln_rows(op, x):
    """``(rows, n)``: layer_norm normalizes each row of ``n`` elements (the
    dims from ``begin_norm_axis`` on) on its own."""
    b = int(op.attrs.get("begin_norm_axis", 1))
    shape = x.arr.shape
    return int(np.prod(shape[:b])) if b else 1, int(np.prod(shape[b:]))


def _ln_rstd(op, var, k):
    """``1 / sqrt(var + epsilon)`` of one row: a kernel of the row's variance
    (a polynomial), the only non-polynomial part of layer_norm."""
    eps = float(op.attrs.get("epsilon", 1e-5))
    return k.uf("layer_norm.rstd", [var], (("epsilon", repr(eps)),))


def _ln_stats(op, x2, n, k):
    inv = k.const(Fraction(1, n))
    mean = [_row_sum(row) * inv for row in x2]
    var = [_row_sum([(e - m) * (e - m) for e in row]) * inv for row, m in zip(x2, mean)]
    return mean, var


def _row_sum(xs):
    xs = list(xs)
    total = getattr(type(xs[0]), "total", None) if xs else None
    return total(xs) if total is not None else sum(xs[1:], xs[0])


def _pir_layer_norm(op, ins, k):
    """``pd_op.layer_norm`` row by row: ``mean`` and ``variance`` of each row
    are polynomials of the row, ``out = (x - mean) * rstd * scale + bias``
    with ``rstd = 1/sqrt(variance + epsilon)`` a kernel of the variance: a
    row depends on its own elements only, so a batch or sequence split into
    pieces normalizes each row as the whole does."""
    x = _t(ins, "x")
    rows, n = _ln_rows(op, x)
    x2 = x.arr.reshape(rows, n)
    scale = _t(ins, "scale").arr.reshape(-1) if _has(ins, "scale") else None
    bias = _t(ins, "bias").arr.reshape(-1) if _has(ins, "bias") else None
    mean, var = _ln_stats(op, x2, n, k)
    out = np.empty((rows, n), dtype=object)
    for i in range(rows):
        r = _ln_rstd(op, var[i], k)
        for j in range(n):
            y = (x2[i, j] - mean[i]) * r
            if scale is not None:
                y = y * scale[j]
            if bias is not None:
                y = y + bias[j]
            out[i, j] = y
    stats = _ln_stats_dims(op, x)  # x.shape[:begin_norm_axis], as 3.3.1's
    sshape = [_prod(r for _, r in d) for d in stats]
    return {"out": [Tensor(out.reshape(x.arr.shape), x.dims, x.dtype)],
            "mean": [Tensor(np.array(mean, dtype=object).reshape(sshape), stats, x.dtype)],
            "variance": [Tensor(np.array(var, dtype=object).reshape(sshape), stats, x.dtype)]}


def _pir_layer_norm_grad(op, ins, k):
    """``pd_op.layer_norm_grad`` from the saved mean and variance, row by
    row: ``xhat = (x - mean) * rstd``, ``g = dy * scale``, ``dx = rstd * (g
    - mean(g) - xhat * mean(g * xhat))``, ``dscale = sum_rows(dy * xhat)``,
    ``dbias = sum_rows(dy)``."""
    x, dy = _t(ins, "x"), _t(ins, "out_grad")
    rows, n = _ln_rows(op, x)
    x2, dy2 = x.arr.reshape(rows, n), dy.arr.reshape(rows, n)
    mean = _t(ins, "mean").arr.reshape(-1)
    var = _t(ins, "variance").arr.reshape(-1)
    scale = _t(ins, "scale").arr.reshape(-1) if _has(ins, "scale") else None
    inv = k.const(Fraction(1, n))
    dx = np.empty((rows, n), dtype=object)
    xhat = np.empty((rows, n), dtype=object)
    for i in range(rows):
        r = _ln_rstd(op, var[i], k)
        xh = [(x2[i, j] - mean[i]) * r for j in range(n)]
        xhat[i] = xh
        g = [dy2[i, j] * scale[j] if scale is not None else dy2[i, j] for j in range(n)]
        mg = _row_sum(g) * inv
        mgx = _row_sum([a * b for a, b in zip(g, xh)]) * inv
        for j in range(n):
            dx[i, j] = r * (g[j] - mg - xh[j] * mgx)
    out = {"x_grad": [Tensor(dx.reshape(x.arr.shape), x.dims, x.dtype)]}
    if _has(ins, "scale"):
        sc = _t(ins, "scale")
        col = [_row_sum([dy2[i, j] * xhat[i, j] for i in range(rows)]) for j in range(n)]
        out["scale_grad"] = [Tensor(np.array(col, dtype=object).reshape(sc.arr.shape),
                                    sc.dims, sc.dtype)]
    if _has(ins, "bias"):
        bs = _t(ins, "bias")
        col = [_row_sum([dy2[i, j] for i in range(rows)]) for j in range(n)]
        out["bias_grad"] = [Tensor(np.array(col, dtype=object).reshape(bs.arr.shape),
                                   bs.dims, bs.dtype)]
    return out


# relu and layer_norm as the planner's PIR programs spell them
ROWS.update({
    "pd_op.relu": _via(ROWS["relu"], {"x": "X"}, {"Out": "out"}),
    "pd_op.relu_grad": _via(ROWS["relu_grad"], {"out": "Out", "out_grad": "Out@GRAD"},
                            {"X@GRAD": "x_grad"}),
    "pd_op.layer_norm": _pir_layer_norm,
    "pd_op.layer_norm_grad": _pir_layer_norm_grad,
    "pd_op.share_data_": _via(identity(), {"x": "X"}, {"Out": "out"}),
    # the legacy spelling: opaque kernels of all the inputs (the exact
    # row-by-row rows multiply out the variance's square: on planned_gpt_tp2
    # the proof's store grew past 11 GB); the grad homogeneous in Y@GRAD,
    # so a pass that moves a gradient's scale into the loss seed (the
    # data-parallel optimization) is still provable through it
    "layer_norm": uf_opaque("layer_norm", {"Y": ("X", None),
                                           "Mean": ("X", _ln_stats_dims),
                                           "Variance": ("X", _ln_stats_dims)}),
    "layer_norm_grad": uf_opaque_homogeneous("layer_norm_grad",
                                             {"X@GRAD": ("X", None),
                                              "Scale@GRAD": ("Scale", None),
                                              "Bias@GRAD": ("Bias", None)}, "Y@GRAD"),
})

ROWS.update({
    "pd_op.subtract": _via(ROWS["elementwise_sub"], {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.subtract_grad": _via(ROWS["elementwise_sub_grad"],
                                {"x": "X", "y": "Y", "out_grad": "Out@GRAD"},
                                {"X@GRAD": "x_grad", "Y@GRAD": "y_grad"}),
    "pd_op.sum": _via(ROWS["reduce_sum"], {"x": "X"}, {"Out": "out"}, _pir_reduce_attrs),
    "pd_op.sum_grad": _via(ROWS["reduce_sum_grad"], {"x": "X", "out_grad": "Out@GRAD"},
                           {"X@GRAD": "x_grad"}, _pir_reduce_attrs),
    "pd_op.scale_": _via(scale, {"x": "X"}, {"Out": "out"}, _pir_scale_attrs),
    "pd_op.momentum_": _pir_momentum,
    "pd_op.adam_": _via(_adam_like("adam"), _PIR_ADAM_INS, _PIR_ADAM_OUTS, _pir_adam_attrs),
    "pd_op.adamw_": _via(_adam_like("adamw"), _PIR_ADAM_INS, _PIR_ADAM_OUTS, _pir_adam_attrs),
    "pd_op.set_value_with_tensor_": _pir_set_value_with_tensor,
})


# -- PIR reshard index maps: pd_op.slice (r -> s) and pd_op.concat of a stacked
# vector (s -> r after an all_gather + split_with_num), as 3.3.1's planner emits.
def _pir_slice(op, ins, k):
    """``pd_op.slice`` of one equal chunk per axis (``starts@value`` /
    ``ends@value`` constants): chunk ``start // size`` of ``dim // size``,
    through the ``split`` row so reduced shapes follow the same rules."""
    starts, ends = op.attrs.get("starts@value"), op.attrs.get("ends@value")
    axes = list(op.attrs.get("axes") or [])
    if starts is None or ends is None:
        raise Unsupported("slice bounds are not constants (no starts@value/ends@value)")
    if op.attrs.get("decrease_axis"):
        raise Unsupported("slice with decrease_axis")
    x = _t(ins, "input")
    for axis, s, e in zip(axes, starts, ends):
        axis = int(axis) % x.arr.ndim
        o = x.orig[axis]
        # Paddle's bounds: a negative one counts from the end, both clamped to the dim
        s, e = (max(0, min(o, int(b) + o if int(b) < 0 else int(b))) for b in (s, e))
        size = e - s
        if size == o:
            continue  # the whole dim
        if size <= 0 and x.arr.shape[axis] == o:
            # empty (a partial rotary's pass-through of no lanes), at the real size
            index = [slice(None)] * x.arr.ndim
            index[axis] = slice(0, 0)
            x = Tensor(x.arr[tuple(index)], [d if i != axis else ((0, 0),)
                                             for i, d in enumerate(x.dims)], x.dtype)
            continue
        if size <= 0 or o % size or s % size:
            raise Unsupported(f"slice [{s}:{e}] of dim {o} is not one equal chunk")
        parts = split(_OpView(op, {"axis": axis, "num": o // size}), {"X": [x]}, k)["Out"]
        x = parts[s // size]
    return {"out": [x]}


def _pir_concat_vector(op, ins, k):
    """``pd_op.concat`` of a stacked vector value (``split_with_num``'s) along
    ``axis@value``: the pieces side by side, the dim's first factor their count."""
    axis = op.attrs.get("axis@value")
    if axis is None:
        raise Unsupported("concat axis is not a constant (no axis@value)")
    v = _t(ins, "x")
    axis = int(axis[0] if isinstance(axis, list) else axis) % max(v.arr.ndim - 1, 1)
    n = v.arr.shape[0]
    arr = np.concatenate([v.arr[i] for i in range(n)], axis=axis)
    dims = list(v.dims[1:])
    dims[axis] = ((n, n),) + tuple(dims[axis])
    return {"out": [Tensor(arr, dims, v.dtype)]}


ROWS.update({
    "pd_op.slice": _pir_slice,
    "pd_op.concat": _pir_concat_vector,
})


# -- slice and its grad (a fused q/k/v projection's pieces) -------------------
def _slice_ranges(op, ins, x):
    """[(axis, start, stop)] on ORIGINAL sizes, as Paddle clamps them; the
    tensor-valued starts/ends are not modelled."""
    for slot in ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"):
        if _has(ins, slot):
            raise Unsupported(f"slice with {slot}")
    out = []
    for a, s, e in zip(op.attrs.get("axes") or [], op.attrs.get("starts") or [],
                       op.attrs.get("ends") or []):
        a = int(a) % max(x.arr.ndim, 1)
        n = x.orig[a]
        s, e = int(s), int(e)
        s = max(0, min(n, s + n if s < 0 else s))
        e = max(0, min(n, e + n if e < 0 else e))
        out.append((a, s, max(s, e)))
    return out


def _slice_piece(x, axis, start, stop):
    """(reduced index range, dims) of ``[start, stop)`` along ``axis``: exact
    where the dim is not reduced; else, as ``split``, the k-th of n equal
    aligned chunks of a one-factor dim whose reduced size n divides."""
    d, r = x.dims[axis], x.arr.shape[axis]
    o = _prod(a for a, _ in d)
    length = stop - start
    if r == o:
        return slice(start, stop), ((length, length),) if length != 1 else ((1, 1),)
    if len(d) == 1 and length and o % length == 0 and start % length == 0 \
            and r % (o // length) == 0:
        n = o // length
        k, part = start // length, r // (o // length)
        return slice(k * part, (k + 1) * part), ((length, part),)
    raise Unsupported(f"slice [{start}:{stop}] of dim {axis} (size {o}, reduced {r})")


def slice_op(op, ins, k):
    """``slice``: an index map (the piece of each sliced axis, ``decrease_axis``
    dropped)."""
    x = _t(ins, "Input")
    index = [slice(None)] * x.arr.ndim
    dims = list(x.dims)
    for a, s, e in _slice_ranges(op, ins, x):
        index[a], dims[a] = _slice_piece(x, a, s, e)
    arr = x.arr[tuple(index)]
    drop = sorted({int(a) % max(x.arr.ndim, 1) for a in op.attrs.get("decrease_axis") or []})
    if drop:  # every axis dropped: a 0-D tensor, as 3.3.1 (and the shape rule) has it
        arr = arr.reshape([n for i, n in enumerate(arr.shape) if i not in drop])
        dims = [d for i, d in enumerate(dims) if i not in drop]
    return {"Out": [Tensor(np.asarray(arr), dims, x.dtype)]}


def slice_grad(op, ins, k):
    """``Input@GRAD``: zeros of Input's shape with ``Out@GRAD`` in the slice."""
    x, g = _t(ins, "Input"), _t(ins, "Out@GRAD")
    index = [slice(None)] * x.arr.ndim
    for a, s, e in _slice_ranges(op, ins, x):
        index[a] = _slice_piece(x, a, s, e)[0]
    out = np.empty(x.arr.shape, dtype=object)
    out.fill(k.const(0))
    piece = out[tuple(index)]
    out[tuple(index)] = g.arr.reshape(piece.shape)
    return {"Input@GRAD": [Tensor(out, x.dims, x.dtype)]}


ROWS.update({"slice": slice_op, "slice_grad": slice_grad})


# -- dropout with a deterministic seed (the recompute's copies draw its mask) --
def seed_op(op, ins, k):
    """``seed``: one int32, the ``seed`` attr; 0 draws a random seed, which
    no value stands for (refused)."""
    seed = op.attrs.get("seed", 0)
    if not seed:
        raise Unsupported("seed op with seed 0 draws a random seed")
    return {"Out": [Tensor(np.array([k.const(constant(seed, "int32"))], dtype=object),
                           leaf_dims([1]), "int32")]}


def _dropout_scale(op):
    """What the kept elements are multiplied by: 1/(1-p) in
    ``upscale_in_train``, 1 in ``downgrade_in_infer`` (training)."""
    if op.attrs.get("is_test", False):
        raise Unsupported(f"{op.type} with is_test")
    p = float(op.attrs.get("dropout_prob", 0.5))
    if not 0.0 <= p < 1.0:
        raise Unsupported(f"{op.type} with dropout_prob {p}")
    impl = op.attrs.get("dropout_implementation", "downgrade_in_infer")
    if impl == "upscale_in_train":
        return constant(Fraction(1) / (1 - constant(p, "float32")))
    if impl == "downgrade_in_infer":
        return Fraction(1)
    raise Unsupported(f"{op.type} with dropout_implementation {impl!r}")


def dropout(op, ins, k):
    """``dropout`` in training: ``Out = X * mask * scale``, the mask an
    uninterpreted function of the seed's value (the ``Seed`` tensor, else
    the fixed ``seed`` attr), the probability, the shape and the element:
    the kernel draws it from an engine seeded so, whatever X holds (an
    unseeded dropout draws a random mask: refused).  ``Mask`` is that mask."""
    x = _t(ins, "X")
    scale = _dropout_scale(op)
    if _has(ins, "Seed"):
        seed = _t(ins, "Seed").arr.reshape(-1)[0]
    elif op.attrs.get("fix_seed", False):
        seed = k.const(constant(op.attrs.get("seed", 0), "int32"))
    else:
        raise Unsupported("dropout without a Seed tensor or a fixed seed draws a random mask")
    shape = tuple(int(n) for n in x.arr.shape)
    attrs = (("dropout_prob", repr(float(op.attrs.get("dropout_prob", 0.5)))),
             ("shape", repr(shape)))
    mask = np.empty(shape, dtype=object)
    out = np.empty(shape, dtype=object)
    for j, idx in enumerate(np.ndindex(*shape)):
        mask[idx] = k.uf("dropout.mask", [seed], attrs + (("index", repr(j)),))
        out[idx] = x.arr[idx] * mask[idx] * k.const(scale)
    return {"Out": [Tensor(out, x.dims, x.dtype)], "Mask": [Tensor(mask, x.dims, "uint8")]}


def dropout_grad(op, ins, k):
    """``X@GRAD = Out@GRAD * Mask * scale`` (training)."""
    g, m = _t(ins, "Out@GRAD"), _t(ins, "Mask")
    c = k.const(_dropout_scale(op))
    return {"X@GRAD": [Tensor(np.asarray(g.arr * m.arr * c), g.dims, g.dtype)]}


ROWS.update({"seed": seed_op, "dropout": dropout, "dropout_grad": dropout_grad})
# the seed is an int32 read only as the mask's argument, the mask a uint8 of 0/1
ROW_DTYPES.update({"seed": frozenset({"int32"}),
                   "dropout": FLOATS | frozenset({"uint8", "int32"}),
                   "dropout_grad": FLOATS | frozenset({"uint8"})})


# -- the ops of paddleformers' causal LMs (cases/zoo.py: LLaMA, Phi-3, Gemma 3,
# GPT-OSS), additive rows.  Exact where the op is an index map or a
# polynomial (combine/add_n, unsqueeze, tile/expand of size-1 dims, cast,
# multiply and its grad, rsqrt_grad, pow 2, reshape/slice/concat grads, the
# embedding through the lookup rows); uninterpreted functions of exactly
# their inputs and attrs otherwise: elementwise kernels (cos, sin, rsqrt,
# silu, comparisons, where, ...) element by element, and the kernels whose
# elements read whole rows or positions (cross entropy, tril, arange) as
# ``uf_opaque`` keyed by attrs (sound: equal arguments, equal results). -----
def _same_layout(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` and ``b`` hold their elements alike: equal arrays'
    shapes and, per dim, the same factors once the size-1 ones are dropped
    (a gather of a size-1 dim records ``((n, n), (1, 1))``, a reshape ``((n,
    n),)``: one layout); a dim whose factors are all unreduced (the real
    sizes, as the proof runs) is its array's size whatever its factors."""
    if a.arr.shape != b.arr.shape:
        return False
    for da, db in zip(a.dims, b.dims):
        pa = tuple(f for f in da if f != (1, 1))
        pb = tuple(f for f in db if f != (1, 1))
        if pa != pb and not all(o == r for o, r in pa + pb):
            return False
    return True


def _pir_combine(op, ins, k):
    """builtin.combine: the operands stacked along a new leading dim (a
    vector value is held so, see ``_pir_split_with_num``); operands of one
    layout only (:func:`_same_layout`)."""
    ts = [t for t in ins.get("operands") or [] if t is not None]
    if not ts or len(ts) != len(ins.get("operands") or []):
        raise Unsupported("builtin.combine without every operand's value")
    full = [t for t in ts if t.arr.size]
    if full and len(full) < len(ts) and all(_same_layout(t, full[0]) for t in full):
        return {"results": [Ragged(ts)]}  # empty pieces beside one layout
    if not all(_same_layout(t, ts[0]) for t in ts):
        raise Unsupported("builtin.combine of unequal shapes: "
                          + ", ".join(f"{list(t.arr.shape)} {list(t.dims)}" for t in ts))
    n = len(ts)
    return {"results": [Tensor(np.stack([t.arr for t in ts]), [((n, n),)] + list(ts[0].dims),
                               ts[0].dtype)]}


def _pir_add_n(op, ins, k):
    v = _t(ins, "inputs")
    out = v.arr[0]
    for i in range(1, v.arr.shape[0]):
        out = out + v.arr[i]
    return {"out": [Tensor(np.asarray(out), v.dims[1:], v.dtype)]}


def _pir_stack(op, ins, k):
    """``pd_op.stack`` of a vector value (``builtin.combine``'s, its pieces
    along a leading dim): that dim moved to ``axis`` (in ``[-(r+1), r]`` for
    pieces of rank r), the new dim of size the piece count."""
    v = _t(ins, "x")
    nd = v.arr.ndim - 1
    axis = int(op.attrs.get("axis", 0))
    if not -(nd + 1) <= axis <= nd:
        raise Unsupported(f"stack axis {axis} outside [{-(nd + 1)}, {nd}]")
    axis %= nd + 1
    arr = np.array(np.moveaxis(v.arr, 0, axis), dtype=object)
    dims = list(v.dims[1:])
    dims.insert(axis, v.dims[0])
    return {"out": [Tensor(arr, dims, v.dtype)]}


def _pir_unsqueeze(op, ins, k):
    x = _t(ins, "x")
    axes = op.attrs.get("axis@value")
    if axes is None:
        raise Unsupported("unsqueeze axes are not constants (no axis@value)")
    arr, dims = x.arr, list(x.dims)
    for a in (axes if isinstance(axes, list) else [axes]):
        a = int(a)
        a = a + len(dims) + 1 if a < 0 else a
        dims.insert(a, ((1, 1),))
        arr = np.expand_dims(arr, a)
    return {"out": [Tensor(arr, dims, x.dtype)]}


def _broadcast_to(x: Tensor, target, k, what):
    """``x`` broadcast to ORIGINAL sizes ``target`` (right-aligned): size-1
    dims copied, equal dims kept; anything else Unsupported."""
    nd = len(target)
    arr = x.arr.reshape((1,) * (nd - x.arr.ndim) + x.arr.shape)
    dims = [((1, 1),)] * (nd - x.arr.ndim) + list(x.dims)
    shape, out_dims = [], []
    for i, t in enumerate(target):
        o = _prod(a for a, _ in dims[i])
        if t == o:
            shape.append(arr.shape[i])
            out_dims.append(dims[i])
        elif o == 1:
            red = reduce_size(int(t), k.reduce_to)
            shape.append(red)
            out_dims.append(((int(t), red),))
        else:
            raise Unsupported(f"{what}: dim {i} of size {o} to {t}")
    return Tensor(np.broadcast_to(arr, shape) * 1 if tuple(shape) != arr.shape else arr,
                  out_dims, x.dtype)


def _pir_expand(op, ins, k):
    x = _t(ins, "x")
    shape = op.attrs.get("shape@value")
    if shape is None:
        raise Unsupported("expand shape is not a constant (no shape@value)")
    lead = [1] * (len(shape) - x.arr.ndim) + list(x.orig)
    target = [lead[i] if int(t) == -1 else int(t) for i, t in enumerate(shape)]
    return {"out": [_broadcast_to(x, target, k, "expand")]}


def _pir_tile(op, ins, k):
    x = _t(ins, "x")
    rep = op.attrs.get("repeat_times@value")
    if rep is None:
        raise Unsupported("tile repeats are not constants (no repeat_times@value)")
    rep = [int(r) for r in rep]
    n = max(x.arr.ndim, len(rep))
    orig = [1] * (n - x.arr.ndim) + list(x.orig)
    rep = [1] * (n - len(rep)) + rep
    return {"out": [_broadcast_to(x, [o * r for o, r in zip(orig, rep)], k,
                                  "tile of a dim larger than 1")]}


def _uf_broadcast(kernel, in_slots, out_slot, dtype_slot=None, out_dtype=None):
    """``out[i] = kernel(in_1[i], ...)`` with Paddle broadcasting: an
    uninterpreted elementwise kernel keyed by the op's attrs; the output's
    dtype ``out_dtype`` (a comparison's bool), else ``dtype_slot``'s, else
    the last input's."""
    def row(op, ins, k):
        ts = [_t(ins, s) for s in in_slots]
        arrs = np.broadcast_arrays(*[t.arr for t in ts])
        # keyed by the inputs' dtypes too: ROW_DTYPES declares these rows for all
        attrs = _attrs_key(op) + (("@dtypes", repr(tuple(dtype_name(t.dtype) for t in ts))),)
        out = np.empty(arrs[0].shape, dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = k.uf(kernel, [a[idx] for a in arrs], attrs)
        dtype = out_dtype or (_t(ins, dtype_slot).dtype if dtype_slot else ts[-1].dtype)
        return {out_slot: [Tensor(out, _out_dims(out.shape, *ts), dtype)]}
    return row


def _pir_pow(op, ins, k):
    """``x ** y``: exact for y = 2 (x * x), uninterpreted otherwise."""
    if float(op.attrs.get("y", 0)) == 2.0:
        x = _t(ins, "x")
        return {"out": [Tensor(np.asarray(x.arr * x.arr), x.dims, x.dtype)]}
    return uf_elementwise("pow", ["x"], "out")(op, ins, k)


def _pir_pow_grad(op, ins, k):
    """``2 x dout`` for y = 2, uninterpreted otherwise."""
    if float(op.attrs.get("y", 0)) == 2.0:
        x, g = _t(ins, "x"), _t(ins, "out_grad")
        return {"x_grad": [Tensor(np.asarray(x.arr * g.arr * k.const(2)), x.dims, x.dtype)]}
    return uf_elementwise("pow_grad", ["x", "out_grad"], "x_grad", like="x")(op, ins, k)


def _pir_rsqrt_grad(op, ins, k):
    """``dx = -0.5 out^3 dout`` (Paddle's rsqrt_grad reads out and dout only)."""
    y, g = _t(ins, "out"), _t(ins, "out_grad")
    return {"x_grad": [Tensor(np.asarray(y.arr * y.arr * y.arr * g.arr * k.const(-0.5)),
                              y.dims, y.dtype)]}


def _pir_tanh_grad(op, ins, k):
    """``dx = dout (1 - out^2)`` (Paddle's tanh_grad reads out and dout only):
    a polynomial in out and dout, exact (tanh itself stays uninterpreted)."""
    y, g = _t(ins, "out"), _t(ins, "out_grad")
    return {"x_grad": [Tensor(np.asarray(g.arr - g.arr * y.arr * y.arr),
                              y.dims, y.dtype)]}


def _pir_divide_grad(op, ins, k):
    """``dx = dout / y``, ``dy = -dout * out / y`` (Paddle's divide_grad),
    1/y the forward's uninterpreted ``inv``."""
    x, y, out, g = (_t(ins, s) for s in ("x", "y", "out", "out_grad"))
    a, b = np.broadcast_arrays(x.arr, y.arr)
    inv = np.empty(b.shape, dtype=object)
    for idx in np.ndindex(b.shape):
        inv[idx] = k.uf("inv", [b[idx]], ())
    res = {"x_grad": [Tensor(_unbroadcast(np.asarray(g.arr * inv), x), x.dims, x.dtype)]}
    if op.outputs.get("y_grad"):
        res["y_grad"] = [Tensor(_unbroadcast(np.asarray(g.arr * out.arr * inv * k.const(-1)),
                                             y), y.dims, y.dtype)]
    return res


def _pir_reshape_grad(op, ins, k):
    """``out_grad`` reshaped back to ``x``'s shape."""
    x, g = _t(ins, "x"), _t(ins, "out_grad")
    dims = reshape_dims(g.dims, list(x.orig), k.reduce_to)
    shape = [_prod(r for _, r in d) for d in dims]
    return {"x_grad": [Tensor(g.arr.reshape(shape), dims, g.dtype)]}


def _pir_concat_grad(op, ins, k):
    """``out_grad`` split back into the pieces of the concatenated vector
    (held stacked, as ``_pir_concat_vector`` reads it)."""
    axis = op.attrs.get("axis@value")
    if axis is None:
        raise Unsupported("concat_grad axis is not a constant (no axis@value)")
    v, g = _t(ins, "x"), _t(ins, "out_grad")
    n = v.arr.shape[0]
    axis = int(axis[0] if isinstance(axis, list) else axis) % max(v.arr.ndim - 1, 1)
    parts = split(_OpView(op, {"axis": axis, "num": n}), {"X": [g]}, k)["Out"]
    if isinstance(v, Ragged):  # an empty piece's grad is empty, the others split g
        it = iter(parts)
        return {"x_grad": [Ragged([Tensor(np.empty(p.arr.shape, dtype=object), p.dims,
                                          g.dtype) if not p.arr.size else next(it)
                                   for p in v.pieces])]}
    return {"x_grad": [Tensor(np.stack([p.arr for p in parts]), v.dims, v.dtype)]}


def _pir_slice_any(op, ins, k):
    """``pd_op.slice``: the equal-chunk row, or with ``decrease_axis`` the
    legacy ``slice`` index map (its bounds from ``starts@value``/``ends@value``)."""
    if not op.attrs.get("decrease_axis"):
        return _pir_slice(op, ins, k)
    return {"out": slice_op(_OpView(op, _slice_attrs(op.attrs)),
                            {"Input": ins.get("input")}, k)["Out"]}


def _slice_attrs(a):
    return {**a, "starts": a.get("starts@value") or [], "ends": a.get("ends@value") or []}


def _pir_slice_grad(op, ins, k):
    if op.attrs.get("starts@value") is None or op.attrs.get("ends@value") is None:
        raise Unsupported("slice_grad bounds are not constants")
    return {"input_grad": slice_grad(_OpView(op, _slice_attrs(op.attrs)),
                                     {"Input": ins.get("input"),
                                      "Out@GRAD": ins.get("out_grad")}, k)["Input@GRAD"]}


def _pir_assign_value(op, ins, k):
    """A constant tensor: exact when every value is one number."""
    values = op.attrs.get("values") or []
    if len(set(float(v) for v in values)) != 1:
        raise Unsupported("assign_value_ of several distinct values")
    return {"out": fill_constant(_OpView(op, {"shape": op.attrs.get("shape") or [],
                                              "value": float(values[0]),
                                              "dtype": op.attrs.get("dtype", "")}),
                                 {}, k)["Out"]}


def _pir_split_sections(op, ins, k):
    """``pd_op.split`` into equal sections: the ``split`` row, the pieces held
    stacked (as ``split_with_num``'s); unequal sections have no stacked form."""
    secs, axis = op.attrs.get("sections@value"), op.attrs.get("axis@value")
    if secs is None or axis is None:
        raise Unsupported("split sections/axis are not constants")
    if len(set(int(c) for c in secs)) != 1:
        raise Unsupported(f"split into unequal sections {secs}")
    return _pir_split_with_num(_OpView(op, {"axis@value": axis, "num": len(secs)}), ins, k)


def _pir_empty(op, ins, k):
    """``pd_op.empty``: uninitialized memory has no value; only a tensor with
    no elements (a zero-length KV-cache past) has exact meaning: itself."""
    shape = [int(n) for n in op.attrs.get("shape@value") or []]
    if 0 not in shape:
        raise Unsupported(f"pd_op.empty {shape}: uninitialized elements")
    dims = leaf_dims(shape, k.reduce_to)
    return {"out": [Tensor(np.empty([_prod(r for _, r in d) for d in dims], dtype=object),
                           dims, str(op.attrs.get("dtype", "")))]}


def _pir_arange(op, ins, k):
    """Constants: element i an uninterpreted constant keyed by the bounds
    and i (its reduced position)."""
    start, end, step = (op.attrs.get(f"{n}@value") for n in ("start", "end", "step"))
    if None in (start, end, step) or float(step) == 0:
        raise Unsupported("arange bounds are not constants")
    import math

    n = max(0, math.ceil((float(end) - float(start)) / float(step)))
    dims = leaf_dims([n], k.reduce_to)
    out = np.empty([dims[0][0][1]], dtype=object)
    attrs = _attrs_key(op)
    for i in range(out.shape[0]):
        out[i] = k.uf("arange", [], attrs + (("index", repr(i)),))
    return {"out": [Tensor(out, dims, str(op.attrs.get("dtype", "")))]}



# -- swiglu (paddle.incubate.nn.functional.swiglu, 3.3.1) -----------------------
def _swiglu_operands(op, ins, k):
    """``(gate, value, halves)``: ``x`` and ``y``, or without ``y`` the two
    halves of ``x`` along its last axis (``paddle.chunk(x, 2, axis=-1)``,
    as the kernel splits it; ``halves`` True)."""
    x = _t(ins, "x")
    if _has(ins, "y"):
        y = _t(ins, "y")
        if x.arr.shape != y.arr.shape:  # SwiGLUInferMeta: x.dims() == y.dims()
            raise Unsupported(f"swiglu of x {list(x.orig)} and y {list(y.orig)}: unequal shapes")
        return x, y, False
    if x.arr.ndim == 0:
        raise Unsupported("swiglu of a 0-D x without y")
    a, b = split(_OpView(op, {"axis": x.arr.ndim - 1, "num": 2}), {"X": [x]}, k)["Out"]
    return a, b, True


# silu is one fixed function (swiglu has no attr): ``()`` keys it, and its
# derivative; kernels.reference evaluates both
_SILU_KEY = ()


def _pir_swiglu(op, ins, k):
    """``silu(x) * y``, or ``silu(x1) * x2`` of x's halves without ``y``: silu
    uninterpreted element by element, the product exact (so a rewrite that
    scales the value operand is provable)."""
    a, b, _ = _swiglu_operands(op, ins, k)
    out = np.empty(a.arr.shape, dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = k.uf("silu", [a.arr[idx]], _SILU_KEY) * b.arr[idx]
    return {"out": [Tensor(out, a.dims, a.dtype)]}


def _pir_swiglu_grad(op, ins, k):
    """The gate's grad ``dout * value * silu'(gate)``, the value's ``dout *
    silu(gate)`` (silu' uninterpreted, ``silu.d``; both linear in dout);
    without ``y`` the two side by side as x's halves (x_grad has x's layout)."""
    a, b, halves = _swiglu_operands(op, ins, k)
    g = _t(ins, "out_grad")
    if g.arr.shape != a.arr.shape:
        raise Unsupported(f"swiglu_grad of out_grad {list(g.orig)} for an out of "
                          f"{list(a.orig)}")
    da = np.empty(a.arr.shape, dtype=object)
    db = np.empty(a.arr.shape, dtype=object)
    for idx in np.ndindex(da.shape):
        da[idx] = k.uf("silu.d", [a.arr[idx]], _SILU_KEY) * b.arr[idx] * g.arr[idx]
        db[idx] = k.uf("silu", [a.arr[idx]], _SILU_KEY) * g.arr[idx]
    if halves:
        x = _t(ins, "x")
        return {"x_grad": [Tensor(np.concatenate([da, db], axis=-1), x.dims, x.dtype)]}
    return {"x_grad": [Tensor(da, a.dims, a.dtype)], "y_grad": [Tensor(db, b.dims, b.dtype)]}


ROWS.update({"pd_op.swiglu": _pir_swiglu, "pd_op.swiglu_grad": _pir_swiglu_grad})

ROWS.update({
    "builtin.combine": _pir_combine,
    "pd_op.add_n": _pir_add_n,
    "pd_op.unsqueeze": _pir_unsqueeze,
    "pd_op.expand": _pir_expand,
    "pd_op.tile": _pir_tile,
    # pd_op.cast: the row above (a rounding cast is a kernel, issue 19)
    "pd_op.multiply": _via(ROWS["elementwise_mul"], {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.multiply_grad": _via(ROWS["elementwise_mul_grad"],
                                {"x": "X", "y": "Y", "out_grad": "Out@GRAD"},
                                {"X@GRAD": "x_grad", "Y@GRAD": "y_grad"}),
    "pd_op.divide": _via(elementwise_div, {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.divide_grad": _pir_divide_grad,
    "pd_op.pow": _pir_pow,
    "pd_op.pow_grad": _pir_pow_grad,
    "pd_op.rsqrt": uf_elementwise("rsqrt", ["x"], "out"),
    # the global-norm grad clip (ClipGradByGlobalNorm): sum of squares exact,
    # sqrt / max / min uninterpreted (a refutation is replayed with the real
    # kernels, kernels.reference; equal only by an identity of sqrt such as
    # sqrt(4 s) = 2 sqrt(s) is not proved: INCONCLUSIVE, not EQUIVALENT)
    "pd_op.squared_l2_norm": _via(squared_l2_norm, {"x": "X"}, {"Out": "out"}),
    "pd_op.stack": _pir_stack,
    "pd_op.sqrt": uf_elementwise("sqrt", ["x"], "out"),
    "pd_op.maximum": _via(elementwise_max, {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.minimum": _via(elementwise_min, {"x": "X", "y": "Y"}, {"Out": "out"}),
    "pd_op.rsqrt_grad": _pir_rsqrt_grad,
    # tanh uninterpreted (a transcendental kernel, replayed with kernels.reference);
    # its grad exact in the forward's out
    "pd_op.tanh": uf_elementwise("tanh", ["x"], "out"),
    "pd_op.tanh_grad": _pir_tanh_grad,
    "pd_op.cos": uf_elementwise("cos", ["x"], "out"),
    "pd_op.sin": uf_elementwise("sin", ["x"], "out"),
    "pd_op.silu": uf_elementwise("silu", ["x"], "out"),
    "pd_op.silu_grad": uf_linear_grad("silu.d", "x", "out_grad", "x_grad"),
    # gelu's kernel depends on ``approximate`` (an attr: part of the function's key)
    "pd_op.gelu": uf_elementwise("gelu", ["x"], "out"),
    "pd_op.gelu_grad": uf_linear_grad("gelu.d", "x", "out_grad", "x_grad"),
    "pd_op.not_equal": _uf_broadcast("not_equal", ["x", "y"], "out", out_dtype="bool"),
    "pd_op.bitwise_and": _uf_broadcast("bitwise_and", ["x", "y"], "out"),
    "pd_op.where": _uf_broadcast("where", ["condition", "x", "y"], "out", dtype_slot="x"),
    "pd_op.softmax": _via(softmax, {"x": "X"}, {"Out": "out"}),
    "pd_op.softmax_grad": _via(softmax_grad, {"out": "Out", "out_grad": "Out@GRAD"},
                               {"X@GRAD": "x_grad"}),
    "pd_op.embedding": _via(lookup_table_v2, {"x": "Ids", "weight": "W"}, {"Out": "out"}),
    "pd_op.c_embedding": c_embedding,
    "pd_op.c_embedding_grad": c_embedding_grad,
    "pd_op.embedding_grad": _via(lookup_table_v2_grad,
                                 {"x": "Ids", "weight": "W", "out_grad": "Out@GRAD"},
                                 {"W@GRAD": "weight_grad"},
                                 lambda a: {**a, "is_sparse": a.get("sparse", False)}),
    "pd_op.reshape_grad": _pir_reshape_grad,
    "pd_op.concat_grad": _pir_concat_grad,
    "pd_op.slice": _pir_slice_any,
    "pd_op.slice_grad": _pir_slice_grad,
    "pd_op.assign_value_": _pir_assign_value,
    # sharding's parameter write-back: out (and the parameter it overwrites) is x
    "pd_op.assign_out_": _via(identity(), {"x": "X"}, {"Out": "out"}),
    "pd_op.arange": _pir_arange,
    "pd_op.empty": _pir_empty,
    "pd_op.split": _pir_split_sections,
    # constant values written into a slice of x: uninterpreted in x and the attrs
    "pd_op.set_value_": uf_opaque("set_value_", {"out": ("x", None)}),
    "pd_op.tril": uf_opaque("tril", {"out": ("x", None)}),
    # row by row along axis (uf_rows): a batch split computes the same rows
    "pd_op.cross_entropy_with_softmax": uf_rows(
        "cross_entropy_with_softmax", {"softmax": ("input", False), "loss": ("input", True)}),
    "pd_op.cross_entropy_with_softmax_grad": uf_rows(
        "cross_entropy_with_softmax_grad", {"input_grad": ("softmax", False)}),
})


# -- the GLM-style rotary of ERNIE 4.5 (cases/zoo.py): cos/sin halves
# repeat_interleave-d, the rotated half stack((-x2, x1), -1).flatten(-2) of the
# even and odd lanes (strided_slice), and their grads.  Index maps, exact. ----
def _whole(x: Tensor, axis: int, what: str):
    """``x``'s dim ``axis`` held at its real size (the proof's shapes); a
    reduced dim is not modelled by these index maps."""
    if x.arr.shape[axis] != x.orig[axis]:
        raise Unsupported(f"{what} of a reduced dim {axis}")


def _pir_repeat_interleave(op, ins, k):
    """Each element of ``axis`` repeated ``repeats`` times in place (numpy's
    ``repeat``); ``output_size`` -1 or the repeated size."""
    x = _t(ins, "x")
    rep = int(op.attrs.get("repeats", 0))
    if rep < 1:
        raise Unsupported(f"repeat_interleave with repeats {rep}")
    if x.arr.ndim == 0:
        return {"out": [Tensor(np.repeat(x.arr.reshape(1), rep), (((rep, rep),),), x.dtype)]}
    axis = int(op.attrs.get("axis", 0)) % x.arr.ndim
    _whole(x, axis, "repeat_interleave")
    n = x.orig[axis] * rep
    size = int(op.attrs.get("output_size", -1))
    if size not in (-1, n):
        raise Unsupported(f"repeat_interleave output_size {size}, repeated size {n}")
    dims = list(x.dims)
    dims[axis] = ((n, n),)
    return {"out": [Tensor(np.repeat(x.arr, rep, axis=axis), dims, x.dtype)]}


def _strided_index(op, x):
    """The numpy index of ``pd_op.strided_slice`` on ``x`` (constant
    ``starts``/``ends``/``strides``; positive strides, Paddle's clamping:
    negative bounds count from the end, then [0, dim])."""
    starts, ends, strides = (op.attrs.get(f"{n}@value") for n in ("starts", "ends", "strides"))
    if starts is None or ends is None or strides is None:
        raise Unsupported("strided_slice bounds are not constants")
    index = [slice(None)] * x.arr.ndim
    for a, s, e, st in zip(op.attrs.get("axes") or [], starts, ends, strides):
        a, s, e, st = int(a) % max(x.arr.ndim, 1), int(s), int(e), int(st)
        if st <= 0:
            raise Unsupported(f"strided_slice with stride {st}")
        _whole(x, a, "strided_slice")
        n = x.orig[a]
        s = max(0, min(n, s + n if s < 0 else s))
        e = max(0, min(n, e + n if e < 0 else e))
        index[a] = slice(s, max(s, e), st)
    return tuple(index)


def _pir_strided_slice(op, ins, k):
    x = _t(ins, "x")
    index = _strided_index(op, x)
    arr = np.asarray(x.arr[index])
    dims = [d if index[i] == slice(None) else ((arr.shape[i], arr.shape[i]),)
            for i, d in enumerate(x.dims)]
    return {"out": [Tensor(arr, dims, x.dtype)]}


def _pir_strided_slice_grad(op, ins, k):
    """``x_grad``: zeros of x's shape, ``out_grad`` at the strided positions."""
    x, g = _t(ins, "x"), _t(ins, "out_grad")
    index = _strided_index(op, x)
    out = np.empty(x.arr.shape, dtype=object)
    out.fill(k.const(0))
    piece = out[index]
    if piece.shape != g.arr.shape:
        raise Unsupported(f"strided_slice_grad out_grad {list(g.arr.shape)}, the slice "
                          f"{list(piece.shape)}")
    out[index] = g.arr
    return {"x_grad": [Tensor(out, x.dims, g.dtype)]}


def _flatten_target(op, shape):
    nd = len(shape)
    if nd == 0:
        return [1]
    a, b = (int(op.attrs.get(n, 1)) for n in ("start_axis", "stop_axis"))
    a, b = a % nd, b % nd
    if a > b:
        raise Unsupported(f"flatten start_axis {a} after stop_axis {b}")
    return list(shape[:a]) + [_prod(shape[a:b + 1])] + list(shape[b + 1:])


def _pir_flatten(op, ins, k):
    """``x`` with dims start_axis..stop_axis merged: a reshape."""
    x = _t(ins, "x")
    dims = reshape_dims(x.dims, _flatten_target(op, x.orig), k.reduce_to)
    shape = [_prod(r for _, r in d) for d in dims]
    return {"out": [Tensor(x.arr.reshape(shape), dims, x.dtype)]}


def _pir_stack_grad(op, ins, k):
    """``x_grad``: ``out_grad`` cut along ``axis`` into the stacked pieces, a
    vector value (held stacked along a new leading dim, as builtin.combine's)."""
    v, g = _t(ins, "x"), _t(ins, "out_grad")
    n = v.arr.shape[0]
    axis = int(op.attrs.get("axis", 0)) % max(g.arr.ndim, 1)
    if g.arr.ndim != v.arr.ndim or g.arr.shape[axis] != n:
        raise Unsupported(f"stack_grad of out_grad {list(g.arr.shape)} along {axis} into "
                          f"{n} pieces of {list(v.arr.shape[1:])}")
    dims = [((n, n),)] + [d for i, d in enumerate(g.dims) if i != axis]
    return {"x_grad": [Tensor(np.moveaxis(g.arr, axis, 0), dims, g.dtype)]}


ROWS.update({
    "pd_op.repeat_interleave": _pir_repeat_interleave,
    "pd_op.strided_slice": _pir_strided_slice,
    "pd_op.strided_slice_grad": _pir_strided_slice_grad,
    "pd_op.flatten": _pir_flatten,
    # flatten's grad: out_grad reshaped back to x's shape (reshape_grad's row)
    "pd_op.flatten_grad": _pir_reshape_grad,
    "pd_op.stack_grad": _pir_stack_grad,
})
# Paddle 3.3.1's CPU c_embedding_grad zeroes its output with memset(numel *
# sizeof(w_grad->dtype())): the size of the DataType enum (4 bytes), not of an element,
# so a float64 table's gradient keeps leftover memory in its second half (measured:
# tests/test_c_embedding_row.py) and a float16 one is zeroed past its end.  The row
# models the kernel where it is sound: float32 tables (the ids int32 or int64).
ROW_DTYPES["pd_op.c_embedding_grad"] = frozenset({"float32", "int32", "int64"})
ROW_DTYPES.update({t: ANY for t in ("pd_op.repeat_interleave", "pd_op.strided_slice",
                                    "pd_op.strided_slice_grad", "pd_op.flatten",
                                    "pd_op.flatten_grad", "pd_op.stack_grad")})
