"""A parameter the startup initialises with a constant (every bias: legacy
``fill_constant``, PIR ``pd_op.full`` stored by ``builtin.set_parameter``)
is an input of the value proof, as a random draw: training moves it from
the first step on, so a proof at the constant (bias 0) would prove a
rewrite that drops or scales the bias.  Such a rewrite is refuted naming
the bias input; a faithful one is proved; a pass changing the fill value
changes the input (refuted).  A constant that is no parameter (an optimizer
state) stays the constant the startup computes.

One rank of hand-built snapshots in each IR's vocabulary: startup
``w = uniform``, ``b = const 0``, ``m = const 0`` (a persistable, no
parameter); main ``y = x @ w + b`` (no Paddle needed for the proof)."""
from __future__ import annotations

import pytest

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value.proof import prove_application
from verify.verdicts import Verdict

# per IR: (uniform, const, matmul, add, scale) op types and their slots
LEGACY = {"uniform": ("uniform_random", "Out"), "const": ("fill_constant", "Out"),
          "matmul": ("matmul_v2", ("X", "Y"), "Out"), "add": ("elementwise_add", ("X", "Y"), "Out"),
          "scale": ("scale", "X", "Out")}
PIR = {"uniform": ("pd_op.uniform", "out"), "const": ("pd_op.full", "out"),
       "matmul": ("pd_op.matmul", ("x", "y"), "out"), "add": ("pd_op.add", ("x", "y"), "out"),
       "scale": ("pd_op.scale", "x", "out")}


def _snap(ir, fill=0.0, bias_scale=None, drop_bias=False, add_state=False):
    """``y = x @ w + b`` (``bias_scale``: ``b`` scaled first; ``drop_bias``:
    ``y = x @ w``; ``add_state``: ``+ m``, a persistable const 0 that is no
    parameter); ``fill``: the value ``b`` is initialised with."""
    pir = ir is PIR
    vars_ = {"w": Var("w", [4, 3], "float32", persistable=True, is_parameter=True),
             "b": Var("b", [3], "float32", persistable=True, is_parameter=True),
             "m": Var("m", [3], "float32", persistable=True),
             "x": Var("x", [2, 4], "float32", is_data=True),
             "h": Var("h", [2, 3], "float32"), "y": Var("y", [2, 3], "float32"),
             "b2": Var("b2", [3], "float32"), "h2": Var("h2", [2, 3], "float32")}
    draw = {"shape": [4, 3], "dtype": "float32", "seed": 0}
    draw.update({"min@value": -1.0, "max@value": 1.0} if pir else {"min": -1.0, "max": 1.0})
    inits = [(ir["uniform"][0], "w", draw),
             (ir["const"][0], "b", {"shape": [3], "value": fill, "dtype": "float32"}),
             (ir["const"][0], "m", {"shape": [3], "value": 0.0, "dtype": "float32"})]
    startup = []
    for t, name, attrs in inits:
        out = f"startup%{len(startup)}" if pir else name
        startup.append(Op(len(startup), t, {}, {ir["uniform"][1]: [out]}, attrs))
        if pir:  # the value stored under the parameter's (or state's) name
            store = "builtin.set_parameter" if vars_[name].is_parameter \
                else "builtin.shadow_output"
            slot, key = ("parameter", "parameter_name") if vars_[name].is_parameter \
                else ("output", "output_name")
            startup.append(Op(len(startup), store, {"operands": [out]}, {slot: [name]},
                              {key: name}))
    ops = []
    if pir:
        ops += [Op(0, "builtin.parameter", {}, {"results": ["w"]}, {"parameter_name": "w"}),
                Op(1, "builtin.parameter", {}, {"results": ["b"]}, {"parameter_name": "b"}),
                Op(2, "pd_op.data", {}, {"out": ["x"]}, {"name": "x"})]

    def op(kind, ins, out, attrs):
        t, in_slots, out_slot = ir[kind]
        in_slots = (in_slots,) if isinstance(in_slots, str) else in_slots
        ops.append(Op(len(ops), t, {s: [n] for s, n in zip(in_slots, ins)}, {out_slot: [out]},
                      attrs))

    op("matmul", ("x", "w"), "h", {"trans_x": False, "trans_y": False} if not pir else
       {"transpose_x": False, "transpose_y": False})
    bias = "b"
    if bias_scale is not None:
        op("scale", ("b",), "b2", {"scale@value" if pir else "scale": bias_scale, "bias": 0.0,
                                   "bias_after_scale": True})
        bias = "b2"
    last = "h"
    if add_state:
        op("add", ("h", "m"), "h2", {"axis": -1})
        last = "h2"
    if drop_bias:
        op("scale", (last,), "y", {"scale@value" if pir else "scale": 1.0, "bias": 0.0,
                                   "bias_after_scale": True})
    else:
        op("add", (last, bias), "y", {"axis": -1})
    return ProgramSnapshot(ops=ops, vars=vars_, startup_ops=startup, feeds=["x"])


def _prove(before, after):
    return prove_application("constant params", [0], {}, {0: before}, {0: after},
                             {0: ["y"]}, feed_key=lambda r, n: "dp0", sizes=(None,))[0]


def _refuted_naming_bias(res):
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == "y"
    assert any(str(n).startswith("b@r0") for n in res.counterexample["inputs"]), \
        res.counterexample["inputs"]


@pytest.mark.parametrize("ir", [LEGACY, PIR], ids=["legacy", "pir"])
def test_a_rewrite_dropping_or_scaling_a_zero_bias_is_refuted(ir):
    """At b = 0 both broken rewrites equal the original; over every b they
    do not, and the counterexample sets the bias input."""
    orig = _snap(ir)
    _refuted_naming_bias(_prove(orig, _snap(ir, drop_bias=True)))
    _refuted_naming_bias(_prove(orig, _snap(ir, bias_scale=2.0)))


@pytest.mark.parametrize("ir", [LEGACY, PIR], ids=["legacy", "pir"])
def test_a_faithful_rewrite_is_proved(ir):
    res = _prove(_snap(ir), _snap(ir, bias_scale=1.0))
    assert res.verdict == Verdict.EQUIVALENT, res.message
    # the message says what "all inputs" covers
    assert "every trainable parameter value, randomly or constant-initialised; " \
           "optimizer states" in res.message, res.message


@pytest.mark.parametrize("ir", [LEGACY, PIR], ids=["legacy", "pir"])
def test_a_changed_fill_value_is_refuted(ir):
    """The fill value is in the input's key: a pass that initialises the
    bias with 0.5 instead of 0 feeds another input (as a changed draw)."""
    res = _prove(_snap(ir), _snap(ir, fill=0.5))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message


@pytest.mark.parametrize("ir", [LEGACY, PIR], ids=["legacy", "pir"])
def test_a_constant_state_that_is_no_parameter_stays_the_constant(ir):
    """The proof covers one step from the states the startup computes: a
    rewrite that drops ``+ m`` (m a persistable 0, no parameter) is proved."""
    res = _prove(_snap(ir, add_state=True), _snap(ir))
    assert res.verdict == Verdict.EQUIVALENT, res.message


def _layer_norm(ir, with_scale=True):
    """``y = layer_norm(x, scale, bias)`` (one rank; ``with_scale`` False:
    the rewrite dropped the scale), ``scale`` initialised to 1.0 and
    ``bias`` to 0.0 by the startup, as Paddle's LayerNorm does: at those
    constants both programs agree.  Legacy ``layer_norm`` is an opaque
    kernel (a replay decides), PIR ``pd_op.layer_norm`` a polynomial row
    (``... * scale + bias``: canonical forms decide)."""
    pir = ir is PIR
    vars_ = {"s": Var("s", [4], "float32", persistable=True, is_parameter=True),
             "c": Var("c", [4], "float32", persistable=True, is_parameter=True),
             "x": Var("x", [2, 4], "float32", is_data=True),
             "y": Var("y", [2, 4], "float32"),
             "mu": Var("mu", [2], "float32"), "var": Var("var", [2], "float32")}
    startup = []
    for name, value in (("s", 1.0), ("c", 0.0)):
        out = f"startup%{len(startup)}" if pir else name
        startup.append(Op(len(startup), ir["const"][0], {}, {ir["const"][1]: [out]},
                          {"shape": [4], "value": value, "dtype": "float32"}))
        if pir:
            startup.append(Op(len(startup), "builtin.set_parameter", {"operands": [out]},
                              {"parameter": [name]}, {"parameter_name": name}))
    attrs = {"epsilon": 1e-5, "begin_norm_axis": 1}
    if pir:
        ops = [Op(0, "builtin.parameter", {}, {"results": ["s"]}, {"parameter_name": "s"}),
               Op(1, "builtin.parameter", {}, {"results": ["c"]}, {"parameter_name": "c"}),
               Op(2, "pd_op.data", {}, {"out": ["x"]}, {"name": "x"})]
        ins = {"x": ["x"], "bias": ["c"], **({"scale": ["s"]} if with_scale else {})}
        ops.append(Op(3, "pd_op.layer_norm", ins,
                      {"out": ["y"], "mean": ["mu"], "variance": ["var"]}, attrs))
    else:
        ins = {"X": ["x"], "Bias": ["c"], **({"Scale": ["s"]} if with_scale else {})}
        ops = [Op(0, "layer_norm", ins, {"Y": ["y"], "Mean": ["mu"], "Variance": ["var"]},
                  attrs)]
    return ProgramSnapshot(ops=ops, vars=vars_, startup_ops=startup, feeds=["x"])


@pytest.mark.parametrize("ir", [LEGACY, PIR], ids=["legacy", "pir"])
def test_a_rewrite_dropping_a_layer_norm_scale_initialised_to_one_is_refuted(ir):
    """A member of the class the bias tests were not written for: a
    LayerNorm scale the startup sets to 1.0 (a multiplicative parameter, no
    bias, no zero).  Dropping it is the identity at 1.0, refuted over every
    scale value naming the scale input; keeping it is proved."""
    res = _prove(_layer_norm(ir), _layer_norm(ir, with_scale=False))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == "y"
    assert any(str(n).startswith("s@r0") for n in res.counterexample["inputs"]), \
        res.counterexample["inputs"]
    same = _prove(_layer_norm(ir), _layer_norm(ir))
    assert same.verdict == Verdict.EQUIVALENT, same.message


def _row_parallel(rank, promoted=False, bias_scale=1.0, squared=False):
    """One rank of ``y = all_reduce(x_r @ w_r) + b`` (TP 2, ring 0), ``b`` a
    replicated parameter the startup sets to 0.0 and broadcasts from rank
    0; ``promoted``: rank 0 adds ``bias_scale * b`` before the all-reduce,
    rank 1 adds nothing (the promotion pass's rewrite).  Each rank's
    partial sum has 16 monomials: the original's sum over ranks (32) is
    cut before ``b`` is added, the promoted one after.  ``squared``: the
    term added is ``b * b`` (an op result, no input symbol), in both
    programs."""
    vars_ = {"w": Var("w", [16, 2], "float32", persistable=True, is_parameter=True),
             "b": Var("b", [2], "float32", persistable=True, is_parameter=True),
             "x": Var("x", [1, 16], "float32", is_data=True)}
    for n in ("h", "hb", "z", "y", "b2", "bb"):
        vars_[n] = Var(n, [2] if n in ("b2", "bb") else [1, 2], "float32")
    startup = [Op(0, "uniform_random", {}, {"Out": ["w"]},
                  {"shape": [16, 2], "dtype": "float32", "min": -1.0, "max": 1.0, "seed": 0}),
               Op(1, "fill_constant", {}, {"Out": ["b"]},
                  {"shape": [2], "value": 0.0, "dtype": "float32"}),
               Op(2, "c_broadcast", {"X": ["b"]}, {"Out": ["b"]}, {"ring_id": 0, "root": 0})]
    ops = [Op(0, "matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["h"]},
              {"trans_x": False, "trans_y": False})]
    add = lambda a, c, out: ops.append(Op(len(ops), "elementwise_add", {"X": [a], "Y": [c]},
                                          {"Out": [out]}, {"axis": -1}))
    allreduce = lambda a, out: ops.append(Op(len(ops), "c_allreduce_sum", {"X": [a]},
                                             {"Out": [out]}, {"ring_id": 0}))
    bias = "b"
    if squared:
        ops.append(Op(len(ops), "elementwise_mul", {"X": ["b"], "Y": ["b"]}, {"Out": ["bb"]},
                      {"axis": -1}))
        bias = "bb"
    if not promoted:
        allreduce("h", "z")
        add("z", bias, "y")
    elif rank == 0:
        if bias_scale != 1.0:
            ops.append(Op(len(ops), "scale", {"X": ["b"]}, {"Out": ["b2"]},
                          {"scale": bias_scale, "bias": 0.0, "bias_after_scale": True}))
            bias = "b2"
        add("h", bias, "hb")
        allreduce("hb", "y")
    else:
        allreduce("h", "y")
    return ProgramSnapshot(ops=ops, vars=vars_, startup_ops=startup, feeds=["x"])


def _prove_tp(squared=False, **kw):
    before = {r: _row_parallel(r, squared=squared) for r in (0, 1)}
    after = {r: _row_parallel(r, promoted=True, squared=squared, **kw) for r in (0, 1)}
    return prove_application("promotion-like", [0, 1], {0: [[0, 1]]}, before, after,
                             {r: ["y"] for r in (0, 1)}, feed_key=lambda r, n: f"tp{r}")


def test_a_bias_promoted_before_the_all_reduce_is_proved_by_canonical_form():
    """The faithful promotion with the bias an input: the sum of the ranks'
    partial sums is cut before the bias is added in one program and after
    it in the other; the cut keeps the bias (an input symbol) beside its
    atom (``Store.cut_result``), so both canonical forms are ``cut(S) + b``
    (no expansion, no Z3 query).  The bias doubled before the all-reduce is
    refuted naming it."""
    for res in _prove_tp():
        assert res.verdict == Verdict.EQUIVALENT, res.message
        assert res.details["by_normal_form"] >= 1 and res.details["by_expanded_form"] == 0 \
            and res.details["queries"] == 0, res.details
    for res in _prove_tp(bias_scale=2.0):
        _refuted_naming_bias(res)


def test_a_product_promoted_before_the_all_reduce_is_proved_with_the_cut_expanded():
    """The same promotion of ``b * b`` (a term that is no input symbol, so
    it stays inside the cut): the forms differ, ``cut(S) + b^2`` against
    ``cut(S + b^2)``, and canonical forms with the cut expanded prove it
    (no Z3 query)."""
    for res in _prove_tp(squared=True):
        assert res.verdict == Verdict.EQUIVALENT, res.message
        assert res.details["by_expanded_form"] >= 1 and res.details["queries"] == 0, \
            res.details
