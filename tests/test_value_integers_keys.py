"""Issue 34, items 3 and 4: exact constants and integers; keys that cannot collide.

3. Integers are computed as Paddle computes them, or not at all: a row
   declares the dtypes it models (``semantics.ROW_DTYPES``), and an op whose
   tensors have another dtype is INCONCLUSIVE naming op, slot and dtype
   (an int64 division truncates: not modelled); integer ring arithmetic is
   exact modulo 2^bits (int32 ``x * 65536 * 65536`` is 0); a constant is
   cast to its tensor's dtype as the kernel casts it (``scale`` of an int by
   0.5 multiplies by 0, ``fill_constant(int64, 0.5)`` is 0); float64
   constants are exact and float32 ones their float32 value (every float
   was the simplest rational within 2^-24 of it).
4. An initialisation's input symbols and a kernel's Z3 function are named
   by a full digest of their data, the data compared on an equal digest:
   a ``uniform_random`` whose 6-hex-digit tag equalled another range's
   (found by brute force, max 4075.4228515625 against 0.5) was one input,
   so a rewrite changing the range was "proved".
Each test fails on the code before the change (named in its docstring)
beside a twin that stays proved.
"""
from __future__ import annotations

import hashlib
from fractions import Fraction

import numpy as np
import pytest

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value import proof, semantics
from verify.value.proof import prove_application, z3_function_name
from verify.value.semantics import Unsupported
from verify.value.symbolic import Store
from verify.verdicts import Verdict

INT32, INT64, FP32, FP64 = 2, 3, 5, 6  # VarType codes


def snap(ops, vars_, feeds=(), startup=()):
    vs = {n: (v if isinstance(v, Var) else Var(n, list(v), "float32")) for n, v in vars_.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs,
                           [Op(i, *o) for i, o in enumerate(startup)], list(feeds))


def prove(before, after, watch):
    return prove_application("test", [0], {}, {0: before}, {0: after}, {0: list(watch)})[0]


def proved(res):
    assert res.verdict == Verdict.EQUIVALENT, res.message
    return res


def refuted(res, var="y"):
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == var and res.counterexample["replayed"]
    return res.counterexample


def vars_of(dtype, names=("x", "h", "c", "y"), shape=(3,)):
    return {n: Var(n, list(shape), dtype) for n in names}


def scale(x, y, s, b=0.0):
    return ("scale", {"X": [x]}, {"Out": [y]}, {"scale": s, "bias": b, "bias_after_scale": True})


def fill(y, value, dtype, str_value=None, shape=(3,)):
    attrs = {"shape": list(shape), "value": value, "dtype": dtype}
    if str_value is not None:
        attrs["str_value"] = str_value
    return ("fill_constant", {}, {"Out": [y]}, attrs)


def assign(x="x", y="y"):
    return ("assign", {"X": [x]}, {"Out": [y]}, {})


def add(x, y, out):
    return ("elementwise_add", {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": -1})


# -- 3. integers ----------------------------------------------------------------
def test_scale_of_an_int_by_half_then_two_is_zero():
    """Before: x * 0.5 * 2 == x "proved" for an int64 x; Paddle gives 0
    (``scale`` casts 0.5 to int64)."""
    v = vars_of("int64")
    halved = snap([scale("x", "h", 0.5), scale("h", "y", 2.0)], v, ["x"])
    cex = refuted(prove(snap([assign()], v, ["x"]), halved, ["y"]))
    assert Fraction(cex["rewritten_value"]) == 0
    proved(prove(snap([fill("y", 0.0, INT64)], v, ["x"]), halved, ["y"]))
    f = vars_of("float32")  # twin: in float32 the composition is the identity
    proved(prove(snap([assign()], f, ["x"]),
                 snap([scale("x", "h", 0.5), scale("h", "y", 2.0)], f, ["x"]), ["y"]))


def test_fill_constant_int64_of_half_is_zero():
    """Before: ``x + fill_constant(int64, 0.5)`` was x + 1/2 and the correct
    rewrite to x "refuted"."""
    v = vars_of("int64")
    plus = lambda value: snap([fill("c", value, INT64), add("x", "c", "y")], v, ["x"])  # noqa: E731
    proved(prove(plus(0.5), snap([assign()], v, ["x"]), ["y"]))
    refuted(prove(plus(1.5), snap([assign()], v, ["x"]), ["y"]))  # truncated to 1, not 0
    f = vars_of("float32")  # twin: a float32 0.5 stays 0.5
    refuted(prove(snap([fill("c", 0.5, FP32), add("x", "c", "y")], f, ["x"]),
                  snap([assign()], f, ["x"]), ["y"]))
    proved(prove(snap([fill("c", 0.0, FP32), add("x", "c", "y")], f, ["x"]),
                 snap([assign()], f, ["x"]), ["y"]))


def test_int32_arithmetic_wraps_around():
    """Before: int32 ``x * 65536 * 65536`` was 2^32 x and its correct
    rewrite to 0 "refuted"; in int64 it is not 0."""
    for dtype, code, same in (("int32", INT32, True), ("int64", INT64, False)):
        v = vars_of(dtype)
        big = snap([scale("x", "h", 65536.0), scale("h", "y", 65536.0)], v, ["x"])
        res = prove(big, snap([fill("y", 0.0, code)], v, ["x"]), ["y"])
        if same:
            proved(res)
        else:
            refuted(res)
    v = vars_of("int32")  # wraps into the signed range: 2^31 x + 2^31 x is 0 too
    twice = snap([scale("x", "h", 65536.0), scale("h", "c", 32768.0), add("c", "c", "y")],
                 v, ["x"])
    proved(prove(twice, snap([fill("y", 0.0, INT32)], v, ["x"]), ["y"]))


def test_an_integer_division_is_inconclusive_naming_op_and_dtype():
    """Before: ``x_int / 4`` against ``x_int * 0.25`` was not refused (it
    went to the kernels as if over the reals); a row that does not declare
    a dtype refuses it, naming op, slot and dtype.  The float32 twin stays
    proved."""
    v = vars_of("int64")
    div = snap([fill("c", 4.0, INT64),
                ("elementwise_div", {"X": ["x"], "Y": ["c"]}, {"Out": ["y"]}, {"axis": -1})],
               v, ["x"])
    res = prove(div, snap([scale("x", "y", 0.25)], v, ["x"]), ["y"])
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert "elementwise_div on int64 (X x)" in res.message, res.message
    f = vars_of("float32")
    fdiv = [fill("c", 4.0, FP32),
            ("elementwise_div", {"X": ["x"], "Y": ["c"]}, {"Out": ["h"]}, {"axis": -1})]
    proved(prove(snap(fdiv + [assign("h", "y")], f, ["x"]),
                 snap(fdiv + [scale("h", "y", 1.0)], f, ["x"]), ["y"]))


def test_a_row_refuses_a_dtype_it_does_not_declare():
    v = {"x": Var("x", [2, 2], "int64"), "w": Var("w", [2, 2], "int64"),
         "y": Var("y", [2, 2], "int64")}
    mm = snap([("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {})], v, ["x", "w"])
    res = prove(mm, snap([("matmul_v2", {"X": ["w"], "Y": ["x"]}, {"Out": ["y"]}, {})], v,
                         ["x", "w"]), ["y"])
    assert res.verdict == Verdict.INCONCLUSIVE and "matmul_v2 on int64" in res.message
    with pytest.raises(Unsupported, match="mixing float32, int64"):
        semantics.check_dtypes(Op(0, "elementwise_add", {}, {}, {}),
                               [("X", "a", "int64"), ("Y", "b", "float32")])
    semantics.check_dtypes(Op(0, "reshape2", {}, {}, {}), [("X", "a", "int64")])  # any dtype


def test_a_cast_from_a_wrapped_integer_is_a_kernel():
    """int32 -> int64 is exact on values, but an int32 value is held modulo
    2^32 (its form one representative): the cast is a kernel of it, never
    the identity on its form; the same cast on both sides stays proved."""
    x = semantics.Tensor(np.array([7], dtype=object), [((1, 1),)], "int32")
    op = Op(0, "cast", {}, {}, {"in_dtype": INT32, "out_dtype": INT64})
    assert semantics.cast(op, {"X": [x]}, _Concrete())["Out"][0].arr[0][0] == "cast"
    f = Op(0, "cast", {}, {}, {"in_dtype": FP32, "out_dtype": FP64})  # a widening float
    x32 = semantics.Tensor(np.array([7], dtype=object), [((1, 1),)], "float32")
    assert semantics.cast(f, {"X": [x32]}, _Concrete())["Out"][0].arr[0] == 7
    v = vars_of("int32")
    v["y"] = Var("y", [3], "int64")
    wide = [scale("x", "h", 65536.0),
            ("cast", {"X": ["h"]}, {"Out": ["y"]}, {"in_dtype": INT32, "out_dtype": INT64})]
    twin = [scale("x", "c", 256.0), scale("c", "h", 256.0)] + wide[1:]
    proved(prove(snap(wide, v, ["x"]), snap(twin, v, ["x"]), ["y"]))


class _Concrete:
    reduce_to = None

    def const(self, v):
        return v

    def uf(self, kernel, args, attrs=()):
        return (kernel, tuple(args))


# -- 3. constants ------------------------------------------------------------------
def test_float64_constants_are_exact():
    """Before: str_value 0.3333333333333333 and 0.33333333333333 were both
    1/3 (within 2^-24) in a float64 program: "proved"."""
    v = vars_of("float64")

    def times(text):
        return snap([fill("c", float(text), FP64, str_value=text),
                     ("elementwise_mul", {"X": ["x"], "Y": ["c"]}, {"Out": ["y"]},
                      {"axis": -1})], v, ["x"])
    refuted(prove(times("0.3333333333333333"), times("0.33333333333333"), ["y"]))
    proved(prove(times("0.3333333333333333"), times("0.33333333333333330"), ["y"]))


def test_float32_constants_are_their_float32_values():
    """Before: scales 1.6666666269302368 and 1.6666667461395264 (two
    neighbouring float32s) were both 5/3 (the simplest rational within
    2^-24): "proved" equal.  A double attr is read as the float32 the
    kernel casts it to."""
    f = vars_of("float32")
    by = lambda s: snap([scale("x", "y", s)], f, ["x"])  # noqa: E731
    refuted(prove(by(1.6666666269302368), by(1.6666667461395264), ["y"]))
    proved(prove(by(1 / 3), by(0.3333333432674408), ["y"]))  # float32(1/3) both
    assert semantics.constant(1 / 3, "float32") == Fraction(0.3333333432674408)
    assert semantics.constant(1 / 3, "float64") == Fraction(1 / 3)
    assert semantics.constant(0.5, "int64") == 0 and semantics.constant(-2.7, "int32") == -2
    with pytest.raises(Unsupported):
        semantics.constant(2.0 ** 40, "int32")


# -- 4. keys ------------------------------------------------------------------------
def _init(lo, hi, seed=0):
    return snap([("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {})],
                {"x": [2, 3], "w": Var("w", [3, 2], "float32", True, True), "y": [2, 2]},
                feeds=["x"],
                startup=[("uniform_random", {}, {"Out": ["w"]},
                          {"shape": [3, 2], "min": lo, "max": hi, "seed": seed})])


def test_a_random_init_whose_truncated_tag_collides_is_another_input():
    """Before: max 4075.4228515625 and max 0.5 had one 6-hex-digit tag
    (b63a4c, sha1 of the attrs), so the inits were one input: "proved"."""
    def old_tag(hi):
        how = (("max", repr(hi)), ("min", "-0.5"), ("shape", "[3, 2]"))
        return hashlib.sha1(repr(("uniform_random", how)).encode()).hexdigest()[:6]
    assert old_tag(0.5) == old_tag(4075.4228515625)  # the collision the issue found
    res = prove(_init(-0.5, 0.5), _init(-0.5, 4075.4228515625), ["y"])
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert "w" in res.details["refuted"]
    proved(prove(_init(-0.5, 0.5), _init(-0.5, 0.5, seed=9), ["y"]))  # the seed aside


def test_init_tags_and_z3_names_are_full_digests_compared_on_a_match():
    store = Store()
    data = ("uniform_random", (("max", "0.5"),))
    tag = store.init_tag(data)
    assert tag == hashlib.sha256(repr(data).encode()).hexdigest()
    other = ("uniform_random", (("max", "4075.4228515625"),))
    store.init_texts[store.init_tag(other)] = "another text of the same digest"
    with pytest.raises(Unsupported, match="share the sha256"):
        store.init_tag(other)
    name = z3_function_name("gelu", (("approximate", "False"),), 1)
    assert len(name.split("#")[1].split("/")[0]) == 64
    assert name != z3_function_name("gelu", (("approximate", "True"),), 1)
    attrs = (("forged", "1"),)
    digest = hashlib.sha256(repr(attrs).encode()).hexdigest()
    proof._FUNCTION_DIGESTS[digest] = "something else"
    try:
        with pytest.raises(Unsupported, match="share the sha256"):
            z3_function_name("k", attrs, 1)
    finally:
        del proof._FUNCTION_DIGESTS[digest]


SEEDS = {'hashlib.sha1(repr(key).encode()).digest()[:8], "big")'}  # point_value's seed


def test_no_truncated_digest_names_anything_in_the_proof():
    """No key, symbol or function name of the value proof or the numeric
    runs is a truncated hash (``hexdigest()[:n]``); the one ``digest()[:8]``
    left seeds a point evaluation (``Store.point_value``: any value is sound
    there), and is no identity."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1] / "verify"
    hits = []
    for folder in ("value", "numeric"):
        for path in sorted((root / folder).glob("*.py")):
            for i, text in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"digest\(\)\s*\[", text) and text.strip() not in SEEDS:
                    hits.append(f"{path.name}:{i}: {text.strip()}")
    assert not hits, hits


def test_a_wrapped_integer_cast_replays_in_its_range():
    """The replay's cast reads an integer argument modulo 2^bits, as the
    proof holds it: int32 2^31 cast to float64 is -2^31."""
    from verify.value.kernels import reference

    attrs = (("in_dtype", repr("int32")), ("out_dtype", repr("float64")))
    assert reference("cast", attrs, (Fraction(2 ** 31),)) == -2 ** 31
    assert reference("cast", attrs, (Fraction(5),)) == 5
