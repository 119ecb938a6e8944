"""The value proof holds at the real shapes, or there is no proof (issue 19).

One test per class of false proof / false refutation the shape reduction
and the kernel keys allowed, each on a small one-rank program and its
rewrite, beside the twin that must stay proved:

1. a reshape split that the reduction made non-injective (a permutation of
   rows of a sequence dim);
2. a constant that depends on a size (a mean's 1/n written out);
3. an opaque kernel applied to the same data at another shape;
4. an opaque kernel given the same values in another input slot;
5. a cast to an integer dtype (Paddle truncates);
6. a random initialisation with other attrs;
7. a batch (-1) dim hard-coded to one size;
and fill_constant's ValueTensor.  Each refutation is replayed: its inputs,
at the real shapes, give different values with the real kernels.
"""
from __future__ import annotations

from fractions import Fraction

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value.proof import prove_application
from verify.verdicts import Verdict


def snap(ops, vars_, feeds=(), startup=()):
    """A one-rank snapshot: ``vars_`` {name: shape} (float32), ops as tuples
    (type, inputs, outputs, attrs), indexed in order."""
    vs = {n: (v if isinstance(v, Var) else Var(n, list(v), "float32")) for n, v in vars_.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs,
                           [Op(i, *o) for i, o in enumerate(startup)], list(feeds))


def prove(before, after, watch):
    return prove_application("test", [0], {}, {0: before}, {0: after}, {0: list(watch)})[0]


def assert_refuted(res, var):
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    cex = res.counterexample
    assert cex["var"] == var and cex["replayed"], cex
    assert Fraction(cex["original_value"]) != Fraction(cex["rewritten_value"]) or \
        abs(float(cex["original_value"]) - float(cex["rewritten_value"])) > 1e-9
    # the inputs are arrays of the real shapes a user can feed
    for leaf in cex["feed"].values():
        assert leaf["shape"] and isinstance(leaf["values"], list)
    assert res.details["refuted_replayed"] >= 1
    return cex


def assert_proved(res):
    assert res.verdict == Verdict.EQUIVALENT, res.message
    assert "ignores rounding" in res.message and "shapes" in res.message or "B in" in res.message


# -- 1. non-injective reduction ------------------------------------------------
def _permute_rows(perm_twice):
    """y = x with rows 1 and 2 of the sequence dim swapped (S = 4 split as
    [2, 2], transposed); ``perm_twice`` applies the swap twice (identity)."""
    ops = [("reshape2", {"X": ["x"]}, {"Out": ["a"]}, {"shape": [2, 2, 2, 3]}),
           ("transpose2", {"X": ["a"]}, {"Out": ["b"]}, {"axis": [0, 2, 1, 3]})]
    if perm_twice:
        ops += [("transpose2", {"X": ["b"]}, {"Out": ["c"]}, {"axis": [0, 2, 1, 3]}),
                ("reshape2", {"X": ["c"]}, {"Out": ["y"]}, {"shape": [2, 4, 3]})]
    else:
        ops += [("reshape2", {"X": ["b"]}, {"Out": ["y"]}, {"shape": [2, 4, 3]})]
    return snap(ops, {"x": [2, 4, 3], "a": [2, 2, 2, 3], "b": [2, 2, 2, 3],
                      "c": [2, 2, 2, 3], "y": [2, 4, 3]}, feeds=["x"])


def test_1_a_permutation_of_sequence_rows_is_refuted():
    before = snap([("assign", {"X": ["x"]}, {"Out": ["y"]}, {})],
                  {"x": [2, 4, 3], "y": [2, 4, 3]}, feeds=["x"])
    cex = assert_refuted(prove(before, _permute_rows(False), ["y"]), "y")
    assert cex["element"][1] in (1, 2)  # a swapped row
    assert_proved(prove(before, _permute_rows(True), ["y"]))


# -- 2. size-dependent constants -------------------------------------------------
def _sum_times(n):
    return snap([("reduce_sum", {"X": ["x"]}, {"Out": ["s"]}, {"reduce_all": True}),
                 ("scale", {"X": ["s"]}, {"Out": ["loss"]}, {"scale": 1.0 / n})],
                {"x": [4, 16], "s": [], "loss": []}, feeds=["x"])


def test_2_a_mean_written_with_the_wrong_count_is_refuted_the_right_one_proved():
    before = snap([("mean", {"X": ["x"]}, {"Out": ["loss"]}, {})],
                  {"x": [4, 16], "loss": []}, feeds=["x"])
    assert_proved(prove(before, _sum_times(64), ["loss"]))  # the real count: 4 * 16
    assert_refuted(prove(before, _sum_times(8), ["loss"]), "loss")


def test_a_mean_written_with_a_float32_reciprocal_is_its_float32_value():
    """A float32 attr is its float32 value (issue 34: it was the simplest
    rational within 2^-24, 1/12, so constants a rewrite moved by less than
    that were the same): ``sum * 0.0833333358`` is not the mean of 12
    values; ``sum * 0.0625`` is the mean of 16 (1/16 is a float32 exactly)."""
    before = snap([("mean", {"X": ["x"]}, {"Out": ["loss"]}, {})],
                  {"x": [3, 4], "loss": []}, feeds=["x"])
    after = snap([("reduce_sum", {"X": ["x"]}, {"Out": ["s"]}, {"reduce_all": True}),
                  ("scale", {"X": ["s"]}, {"Out": ["loss"]}, {"scale": 0.0833333358168602})],
                 {"x": [3, 4], "s": [], "loss": []}, feeds=["x"])
    cex = assert_refuted(prove(before, after, ["loss"]), "loss")
    assert Fraction(cex["rewritten_value"]) / Fraction(cex["original_value"]) == \
        Fraction(0.0833333358168602) * 12
    before16 = snap([("mean", {"X": ["x"]}, {"Out": ["loss"]}, {})],
                    {"x": [4, 4], "loss": []}, feeds=["x"])
    after16 = snap([("reduce_sum", {"X": ["x"]}, {"Out": ["s"]}, {"reduce_all": True}),
                    ("scale", {"X": ["s"]}, {"Out": ["loss"]}, {"scale": 0.0625})],
                   {"x": [4, 4], "s": [], "loss": []}, feeds=["x"])
    assert_proved(prove(before16, after16, ["loss"]))


# -- 3. opaque kernels keyed by shape --------------------------------------------
def test_3_layer_norm_of_the_same_data_at_another_shape_is_refuted():
    vars_ = {"x": [2, 4, 8], "y": [2, 4, 8], "x2": [8, 8], "y2": [8, 8]}
    ln = {"begin_norm_axis": 1, "epsilon": 1e-5}
    before = snap([("layer_norm", {"X": ["x"]}, {"Y": ["y"]}, ln)], vars_, feeds=["x"])
    after = snap([("reshape2", {"X": ["x"]}, {"Out": ["x2"]}, {"shape": [8, 8]}),
                  ("layer_norm", {"X": ["x2"]}, {"Y": ["y2"]}, ln),
                  ("reshape2", {"X": ["y2"]}, {"Out": ["y"]}, {"shape": [2, 4, 8]})],
                 vars_, feeds=["x"])
    assert_refuted(prove(before, after, ["y"]), "y")
    # the same data at the same shape, through a reshape and back: proved
    same = snap([("reshape2", {"X": ["x"]}, {"Out": ["x2"]}, {"shape": [8, 8]}),
                 ("reshape2", {"X": ["x2"]}, {"Out": ["x3"]}, {"shape": [2, 4, 8]}),
                 ("layer_norm", {"X": ["x3"]}, {"Y": ["y"]}, ln)],
                {**vars_, "x3": [2, 4, 8]}, feeds=["x"])
    assert_proved(prove(before, same, ["y"]))


# -- 4. opaque kernels keyed by slot ---------------------------------------------
def test_4_layer_norm_given_its_scale_as_bias_is_refuted():
    vars_ = {"x": [2, 8], "c": [8], "y": [2, 8]}
    ln = {"begin_norm_axis": 1, "epsilon": 1e-5}
    before = snap([("layer_norm", {"X": ["x"], "Scale": ["c"]}, {"Y": ["y"]}, ln)], vars_,
                  feeds=["x", "c"])
    after = snap([("layer_norm", {"X": ["x"], "Bias": ["c"]}, {"Y": ["y"]}, ln)], vars_,
                 feeds=["x", "c"])
    assert_refuted(prove(before, after, ["y"]), "y")
    assert_proved(prove(before, before, ["y"]))


# -- 5. casts that truncate ------------------------------------------------------
def test_5_a_round_trip_through_an_integer_dtype_is_refuted():
    vars_ = {"x": [3, 2], "t": Var("t", [3, 2], "int64"), "y": [3, 2], "w": Var("w", [3, 2],
                                                                             "float64")}
    before = snap([("assign", {"X": ["x"]}, {"Out": ["y"]}, {})], vars_, feeds=["x"])
    after = snap([("cast", {"X": ["x"]}, {"Out": ["t"]}, {"in_dtype": 5, "out_dtype": 3}),
                  ("cast", {"X": ["t"]}, {"Out": ["y"]}, {"in_dtype": 3, "out_dtype": 5})],
                 vars_, feeds=["x"])
    cex = assert_refuted(prove(before, after, ["y"]), "y")
    assert "cast" in cex["kernels"]
    widened = snap([("cast", {"X": ["x"]}, {"Out": ["y"]}, {"in_dtype": 5, "out_dtype": 6})],
                   vars_, feeds=["x"])
    assert_proved(prove(before, widened, ["y"]))  # float32 -> float64 is exact


# -- 6. random initialisations keyed by type and attrs ---------------------------
def _init(lo, hi, seed=0):
    return snap([("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {})],
                {"x": [2, 3], "w": Var("w", [3, 2], "float32", True, True), "y": [2, 2]},
                feeds=["x"],
                startup=[("uniform_random", {}, {"Out": ["w"]},
                          {"shape": [3, 2], "min": lo, "max": hi, "seed": seed})])


def test_6_a_widened_initialisation_range_is_refuted():
    res = prove(_init(-0.5, 0.5), _init(-50.0, 50.0), ["y"])
    assert_refuted(res, "w")  # the parameter itself, then what reads it
    assert "y" in res.details["refuted"]
    assert_proved(prove(_init(-0.5, 0.5), _init(-0.5, 0.5, seed=7), ["y"]))  # seed aside


# -- 7. -1 dims at several sizes --------------------------------------------------
def test_7_a_batch_hard_coded_to_two_is_refuted_at_another_size():
    vars_ = {"x": [-1, 4], "s": [], "loss": []}
    before = snap([("mean", {"X": ["x"]}, {"Out": ["loss"]}, {})], vars_, feeds=["x"])
    after = snap([("reduce_sum", {"X": ["x"]}, {"Out": ["s"]}, {"reduce_all": True}),
                  ("scale", {"X": ["s"]}, {"Out": ["loss"]}, {"scale": 1.0 / 8})],
                 vars_, feeds=["x"])  # 8 = 2 * 4: right only when B = 2
    ok = prove(before, before, ["loss"])
    assert_proved(ok)
    assert "at x[B, 4] for B in 1, 2, 3" in ok.message, ok.message
    res = prove(before, after, ["loss"])
    cex = assert_refuted(res, "loss")
    assert cex["shapes"] in ("with every -1 dim = 1", "with every -1 dim = 3")


# -- fill_constant's ValueTensor --------------------------------------------------
def test_fill_constant_reads_its_value_tensor():
    vars_ = {"x": [2], "v": [1], "c": [2], "y": [2]}
    before = snap([("fill_constant", {"ValueTensor": ["v"]}, {"Out": ["c"]},
                    {"shape": [2], "value": 0.0, "dtype": 5}),
                   ("elementwise_add", {"X": ["x"], "Y": ["c"]}, {"Out": ["y"]}, {})],
                  vars_, feeds=["x", "v"])
    after = snap([("assign", {"X": ["x"]}, {"Out": ["y"]}, {})], vars_, feeds=["x", "v"])
    assert_refuted(prove(before, after, ["y"]), "y")  # x + v is not x
    assert_proved(prove(before, before, ["y"]))
