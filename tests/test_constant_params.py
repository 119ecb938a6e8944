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
