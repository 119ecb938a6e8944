"""Read-sets (``verify/ir/read_sets.py``) against Paddle's own op
definitions, and what they refuse: a rewrite that changes an attr a row
does not read, or connects a tensor-valued attr input, is not proved."""
from __future__ import annotations

import pytest

from verify.checks.shape_rules import RULES
from verify.ir import op_definitions, read_sets
from verify.value.semantics import ROWS


def _definitions(op_type) -> list:
    """Paddle's definitions of ``op_type``: its OpProto / grad maker / PIR
    stub (``definition``), and for a PIR op a real instance's op info."""
    found = [op_definitions.definition(op_type),
             op_definitions.instance_definitions().get(op_type)]
    return [d for d in found if d is not None]


def _unaccounted(op_type):
    """Slots and attrs of Paddle's definitions of ``op_type`` its
    declaration neither reads, declares irrelevant nor refuses."""
    decl = read_sets.DECLARED[op_type]
    known = decl.reads | set(decl.ignore) | set(decl.shape_ignore) | set(decl.values) | \
        decl.refuses | set(read_sets.COMMON)
    names = []
    for d in _definitions(op_type):
        names += list(d.inputs) + ([] if decl.keyed else list(d.attrs))
    return sorted({n for n in names if n not in known})


def test_most_rows_are_enumerated_against_a_definition():
    """Which types Paddle gives no definition of here (the ``builtin.*`` ops
    and retired legacy collectives): a short, known list."""
    undefined = sorted(t for t in set(ROWS) | set(RULES) if not _definitions(t))
    assert len(undefined) <= 20, undefined
    assert all(t.startswith(("builtin.", "c_", "pd_op.", "dist_op.", "elementwise_div_grad"))
               for t in undefined), undefined


def test_every_row_and_rule_has_a_declaration():
    missing = sorted(t for t in set(ROWS) | set(RULES) if t not in read_sets.DECLARED)
    assert not missing, f"no read-set declaration for {missing}"


def test_every_slot_and_attr_of_paddles_definitions_is_accounted_for():
    bad = {t: _unaccounted(t) for t in sorted(set(ROWS) | set(RULES))}
    bad = {t: v for t, v in bad.items() if v}
    assert not bad, "declarations leave Paddle's slots/attrs unaccounted for: " + \
        "; ".join(f"{t}: {' '.join(v)}" for t, v in bad.items())


# -- behaviour: what a row does not read is not proved --------------------------
from verify.checks.shape_check import check_snapshot  # noqa: E402
from verify.ir.snapshot import Op, ProgramSnapshot, Var  # noqa: E402
from verify.value.proof import prove_application  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402


def _snap(ops, shapes, feeds, dtypes=None):
    vs = {n: Var(n, list(s), (dtypes or {}).get(n, "float32")) for n, s in shapes.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs, [], list(feeds))


def _prove(before, after, watched):
    return prove_application("t", [0], {}, {0: before}, {0: after}, {0: watched})[0]


def _bias_program(bias_tensor: bool, scale_attrs=None):
    """y = scale(x, 2) (+ a BiasTensor b = fill_constant(5) when asked): the
    kernel adds the tensor's bias, not the attr's."""
    attrs = {"scale": 2.0, "bias": 0.0, "bias_after_scale": True, **(scale_attrs or {})}
    ins = {"X": ["x"], **({"BiasTensor": ["b"]} if bias_tensor else {})}
    ops = [("fill_constant", {}, {"Out": ["b"]}, {"shape": [1], "value": 5.0, "dtype": 5}),
           ("scale", ins, {"Out": ["y"]}, attrs)]
    return _snap(ops, {"x": [2, 3], "b": [1], "y": [2, 3]}, ["x"])


def test_a_connected_tensor_attr_the_row_ignores_is_inconclusive_naming_it():
    """scale's row reads the ``bias`` attr, never ``BiasTensor``: before
    read-sets a rewrite connecting one (y = 2x + 5 in Paddle) was proved
    EQUIVALENT to y = 2x.  Now: INCONCLUSIVE, naming op, slot and var;
    the twin that leaves the slot unconnected is still proved."""
    res = _prove(_bias_program(False), _bias_program(True), ["y"])
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert "op 1 (scale)" in res.message and "BiasTensor" in res.message and "b" in res.message
    twin = _prove(_bias_program(False), _bias_program(False), ["y"])
    assert twin.verdict == Verdict.EQUIVALENT, twin.message


def _matmul_program(attrs):
    ops = [("matmul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]},
            {"transpose_X": False, "transpose_Y": False, "alpha": 1.0, **attrs})]
    return _snap(ops, {"x": [2, 4], "w": [4, 4], "y": [2, 4]}, ["x", "w"])


@pytest.mark.parametrize("attrs,named", [({"head_number": 2}, "head_number=2"),
                                         ({"fused_reshape_Out": [2, 2, 2]},
                                          "fused_reshape_Out")])
def test_a_changed_attr_the_row_ignores_is_inconclusive_naming_it(attrs, named):
    """matmul's row reads the trans flags and alpha; a rewrite setting an
    attr it does not read (``head_number``, the multi-head split; an attr
    Paddle's definition does not even list) was proved EQUIVALENT; now it is
    INCONCLUSIVE naming the attr and its value, and an attr at Paddle's
    default (``head_number=1``) or one declared irrelevant with a reason
    (``op_namescope``) still proves."""
    res = _prove(_matmul_program({}), _matmul_program(attrs), ["y"])
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert named in res.message and "op 0 (matmul)" in res.message
    twin = _prove(_matmul_program({}), _matmul_program({"head_number": 1,
                                                        "op_namescope": "/moved/"}), ["y"])
    assert twin.verdict == Verdict.EQUIVALENT, twin.message


def _sgd_program(skip: bool):
    """p' = sgd(p, g, lr), with ``MasterParam`` connected but
    ``multi_precision`` False (``skip``): Paddle's kernel ignores the
    master copy, the old row updated from it."""
    ins = {"Param": ["p"], "Grad": ["g"], "LearningRate": ["lr"]}
    if skip:
        ins["MasterParam"] = ["m"]
    ops = [("sgd", ins, {"ParamOut": ["p2"]}, {"multi_precision": False})]
    return _snap(ops, {"p": [2, 2], "g": [2, 2], "lr": [1], "m": [2, 2], "p2": [2, 2]},
                 ["p", "g", "lr", "m"])


def test_a_master_param_the_kernel_ignores_does_not_change_the_value():
    """The sgd row reads ``MasterParam`` only under ``multi_precision`` (as
    Paddle's kernel does): connecting one without it is proved equal."""
    res = _prove(_sgd_program(False), _sgd_program(True), ["p2"])
    assert res.verdict == Verdict.EQUIVALENT, res.message


def _adamw_program(extra=None):
    """adamw, with one more input slot ``extra`` = (slot, dtype) connected."""
    names = ["p", "g", "m1", "m2", "lr", "b1", "b2"]
    ins = dict(zip(["Param", "Grad", "Moment1", "Moment2", "LearningRate", "Beta1Pow",
                    "Beta2Pow"], [[n] for n in names]))
    if extra:
        ins[extra[0]] = ["s"]
    outs = {"ParamOut": ["p2"], "Moment1Out": ["m1o"], "Moment2Out": ["m2o"],
            "Beta1PowOut": ["b1o"], "Beta2PowOut": ["b2o"]}
    ops = [("adamw", ins, outs, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
                                 "coeff": 0.01, "with_decay": True})]
    shapes = {**{n: [2, 2] for n in ("p", "g", "m1", "m2", "p2", "m1o", "m2o")},
              **{n: [1] for n in ("lr", "b1", "b2", "b1o", "b2o", "s")}}
    return _snap(ops, shapes, names + ["s"], {"s": extra[1] if extra else "float32"})


@pytest.mark.parametrize("extra", [("SkipUpdate", "bool"), ("Beta1Tensor", "float32")])
def test_an_optimizer_skip_flag_or_tensor_hyper_parameter_is_inconclusive(extra):
    """adamw with ``SkipUpdate`` connected leaves the parameter as it is when
    the flag is set, with ``Beta1Tensor`` it uses the tensor's beta1, not
    the attr's; the row reads neither: INCONCLUSIVE naming the slot (before
    read-sets the Beta1Tensor rewrite was proved EQUIVALENT; the bool skip
    flag was refused only by the dtype check)."""
    res = _prove(_adamw_program(), _adamw_program(extra), ["p2"])
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert f"input slot {extra[0]} is connected (s) but its row does not read it" in res.message
    twin = _prove(_adamw_program(), _adamw_program(), ["p2"])
    assert twin.verdict == Verdict.EQUIVALENT, twin.message


def _reshape_program(shape_tensor: bool):
    ins = {"X": ["x"], **({"ShapeTensor": ["t0", "t1"]} if shape_tensor else {})}
    ops = [("reshape2", ins, {"Out": ["y"], "XShape": ["xs"]}, {"shape": [6, 2]})]
    return _snap(ops, {"x": [3, 4], "t0": [1], "t1": [1], "y": [6, 2], "xs": [0, 3, 4]},
                 ["x", "t0", "t1"], {"t0": "int32", "t1": "int32"})


def test_a_shape_tensor_leaves_the_shape_rule_unchecked():
    """reshape2's shape rule reads the ``shape`` attr; a connected
    ``ShapeTensor`` (the target Paddle uses) leaves the op unchecked, named,
    instead of shape-checked against the attr; the twin checks."""
    out = check_snapshot(_reshape_program(True), 0, "t")
    assert [r.verdict for r in out] == [Verdict.INCONCLUSIVE], [r.message for r in out]
    assert "ShapeTensor" in out[0].message and "op 0 (reshape2)" in out[0].message
    twin = check_snapshot(_reshape_program(False), 0, "t")
    assert [r.verdict for r in twin] == [Verdict.EQUIVALENT], [r.message for r in twin]
    res = _prove(_reshape_program(False), _reshape_program(True), ["y"])
    assert res.verdict == Verdict.INCONCLUSIVE and "ShapeTensor" in res.message, res.message


def test_refusal_takes_the_definition_as_data():
    """The check runs on a plain op and a hand-made definition."""
    op = Op(3, "matmul_v2", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]},
            {"trans_x": True, "odd": 7})
    d = op_definitions.OpDef("matmul_v2", ("X", "Y"), {"odd": 7})
    assert read_sets.refusal(op, d) is None
    why = read_sets.refusal(op, op_definitions.OpDef("matmul_v2", ("X", "Y"), {"odd": 0}))
    assert why == ("op 3 (matmul_v2): attr odd=7 differs from Paddle's default and its row "
                   "does not declare it")


def test_a_pir_hyper_parameter_operand_is_read_only_as_a_constant():
    """pd_op.adamw_ takes beta1/beta2/epsilon as operands; the row reads
    their constants (``epsilon@value``) and fell back on the attr default
    otherwise: an operand computed at run time is refused, naming it."""
    ins = {"param": ["p"], "grad": ["g"], "learning_rate": ["lr"], "moment1": ["m1"],
           "moment2": ["m2"], "beta1_pow": ["b1"], "beta2_pow": ["b2"], "master_param": [],
           "skip_update": [], "beta1": ["c1"], "beta2": ["c2"], "epsilon": ["e"]}
    attrs = {"beta1@value": 0.9, "beta2@value": 0.999, "coeff": 0.01, "with_decay": True,
             "multi_precision": False, "lazy_mode": False, "amsgrad": False, "lr_ratio": 1.0,
             "min_row_size_to_use_multithread": 1000, "use_global_beta_pow": False,
             "chunk_id": -1, "op_role": 2, "stop_gradient": [False]}
    op = Op(7, "pd_op.adamw_", ins, {"param_out": ["p"]}, dict(attrs))
    d = op_definitions.definition("pd_op.adamw_")
    assert read_sets.refusal(op, d) == (
        "op 7 (pd_op.adamw_): input slot epsilon is connected to e, not a constant: its row "
        "reads only a constant there")
    op.attrs["epsilon@value"] = 1e-8
    assert read_sets.refusal(op, d) is None
    op.inputs["skip_update"] = ["skip"]
    assert "input slot skip_update is connected (skip)" in read_sets.refusal(op, d)


def test_the_tanh_rows_read_out_and_dout_and_key_tanh():
    """``pd_op.tanh_grad``'s row is ``dout (1 - out^2)``: it reads out and
    out_grad, so an op with an ``x`` slot connected too (a grad the row
    would compute from out alone) is refused, naming the slot; ``pd_op.tanh``
    is an uninterpreted kernel keyed by every attr (another attr is another
    function, never a silent read)."""
    grad = Op(5, "pd_op.tanh_grad", {"out": ["o"], "out_grad": ["g"]}, {"x_grad": ["dx"]},
              {"op_role": 1})
    assert read_sets.refusal(grad) is None
    grad.inputs["x"] = ["x"]
    assert read_sets.refusal(grad) == ("op 5 (pd_op.tanh_grad): input slot x is connected "
                                       "(x) but its row does not read it")
    fwd = Op(4, "pd_op.tanh", {"x": ["x"]}, {"out": ["o"]}, {"odd": 3})
    assert read_sets.refusal(fwd) is None and read_sets.DECLARED["pd_op.tanh"].keyed
    assert "pd_op.tanh" in RULES and "pd_op.tanh_grad" in RULES  # shape rules: same checks
