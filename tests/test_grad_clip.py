"""The global-norm grad clip (``paddle.nn.ClipGradByGlobalNorm``) as Paddle's
PIR optimizer emits it (``nn/clip.py`` ``_pir_clip``): per gradient a
``squared_l2_norm``, the norms ``stack``-ed and summed, ``sqrt``,
``maximum`` with the clip norm, ``divide``, every gradient ``multiply``-ed.

For each of the clip's rows, a broken program is refuted by the value proof
with a counterexample (replayed with the real kernels: sqrt, max and min are
uninterpreted in the terms), beside a faithful rewrite that is proved; and
the planner case with the clip (``planner_tp2_clip``) is decided, not
INCONCLUSIVE for a missing row or rule.
"""
from __future__ import annotations

import pytest

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value.proof import prove_application
from verify.verdicts import Verdict

SHAPES = {"g1": [2, 3], "g2": [4], "n1": [1], "n2": [1], "v": [2, 1], "st": [2, 1],
          "s": [], "gn": [], "c": [1], "m": [1], "f": [1], "y1": [2, 3], "y2": [4]}
WATCHED = ["y1", "y2", "gn"]


def clip_program(norm="squared_l2_norm", order=("n1", "n2"), root="sqrt",
                 bound="pd_op.maximum", double_g1=False):
    """y_i = g_i * c / max(sqrt(sum_j |g_j|^2), c), c = 1.0 (Paddle's
    ``_pir_clip`` with ``auto_skip_clip`` off).  The knobs break one op:
    ``norm`` "sum" sums the gradient instead of its squares, ``root`` None
    drops the sqrt, ``bound`` the op taking the max, ``double_g1`` counts
    g1's norm twice (a replicated norm all-reduced as if sharded), ``order``
    the stacked operands."""
    ops = [("pd_op.data", {}, {"out": ["g1"]}, {"name": "g1"}),
           ("pd_op.data", {}, {"out": ["g2"]}, {"name": "g2"})]
    for g, n in (("g1", "n1"), ("g2", "n2")):
        if norm == "squared_l2_norm":
            ops.append(("pd_op.squared_l2_norm", {"x": [g]}, {"out": [n]}, {}))
        else:  # the sum of the entries, kept as a [1]
            ops.append(("pd_op.sum", {"x": [g]}, {"out": [n + "0"]},
                        {"axis@value": [], "keepdim": False}))
            ops.append(("pd_op.reshape", {"x": [n + "0"]}, {"out": [n]}, {"shape@value": [1]}))
    if double_g1:
        ops.append(("pd_op.scale", {"x": ["n1"]}, {"out": ["n1d"]},
                    {"scale@value": 2.0, "bias": 0.0, "bias_after_scale": True}))
        order = tuple("n1d" if n == "n1" else n for n in order)
    ops += [("builtin.combine", {"operands": list(order)}, {"results": ["v"]}, {}),
            ("pd_op.stack", {"x": ["v"]}, {"out": ["st"]}, {"axis": 0}),
            ("pd_op.sum", {"x": ["st"]}, {"out": ["s"]}, {"axis@value": [], "keepdim": False})]
    if root == "sqrt":
        ops.append(("pd_op.sqrt", {"x": ["s"]}, {"out": ["gn"]}, {}))
    else:
        ops.append(("pd_op.assign", {"x": ["s"]}, {"out": ["gn"]}, {}))
    ops += [("pd_op.full", {}, {"out": ["c"]}, {"shape": [1], "value": 1.0, "dtype": "float32"}),
            (bound, {"x": ["gn"], "y": ["c"]}, {"out": ["m"]}, {}),
            ("pd_op.divide", {"x": ["c"], "y": ["m"]}, {"out": ["f"]}, {}),
            ("pd_op.multiply", {"x": ["g1"], "y": ["f"]}, {"out": ["y1"]}, {}),
            ("pd_op.multiply", {"x": ["g2"], "y": ["f"]}, {"out": ["y2"]}, {})]
    shapes = {**SHAPES, "n10": [], "n20": [], "n1d": [1]}
    vs = {n: Var(n, list(sh), "float32", is_data=n in ("g1", "g2")) for n, sh in shapes.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs, [], ["g1", "g2"])


def _prove(after, before=None, watched=WATCHED):
    return prove_application("grad clip", [0], {}, {0: before or clip_program()},
                             {0: after}, {0: list(watched)})[0]


def _refuted(res, var=None):
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    cex = res.counterexample
    assert cex and cex.get("inputs"), cex
    assert any(str(n).startswith(("g1", "g2")) for n in cex["inputs"]), cex["inputs"]
    if var is not None:
        assert cex["var"] == var, cex
    return cex


def test_the_clip_is_proved_against_itself_and_a_reordered_stack():
    """Twin: the norms stacked in the other order sum to the same global
    norm (canonical forms, sqrt/max keyed by equal arguments)."""
    assert _prove(clip_program()).verdict == Verdict.EQUIVALENT
    res = _prove(clip_program(order=("n2", "n1")))
    assert res.verdict == Verdict.EQUIVALENT, res.message


def test_a_norm_of_the_entries_not_their_squares_is_refuted():
    """squared_l2_norm replaced by the plain sum of a gradient's entries."""
    _refuted(_prove(clip_program(norm="sum")))


def test_a_norm_counted_twice_is_refuted():
    """g1's squared norm doubled (a replicated gradient's norm all-reduced
    as if it were a shard): the global norm is sqrt(2 a + b), not
    sqrt(a + b); where it exceeds the clip norm the clipped gradients differ."""
    _refuted(_prove(clip_program(double_g1=True)))


def test_a_missing_sqrt_is_refuted():
    _refuted(_prove(clip_program(root=None)))


def test_maximum_swapped_for_minimum_is_refuted():
    """min(norm, c) instead of max(norm, c): the gradients are scaled up
    where the norm is below the clip norm; replayed with Paddle's max/min."""
    _refuted(_prove(clip_program(bound="pd_op.minimum")))


def test_a_stack_of_the_operands_swapped_is_refuted():
    """The stacked vector itself watched: [n2, n1] is not [n1, n2]."""
    _refuted(_prove(clip_program(order=("n2", "n1")), watched=["st"]), var="st")
    assert _prove(clip_program(), watched=["st"]).verdict == Verdict.EQUIVALENT


@pytest.mark.slow
def test_the_planner_case_with_the_clip_is_proved_not_inconclusive():
    """planner_tp2_clip (examples/planner_tp2_clip.py): AdamW with
    ClipGradByGlobalNorm(1.0) planned for TP2.  Before the clip's rows the
    relation proof stopped at pd_op.squared_l2_norm (INCONCLUSIVE, 'no
    semantics row'); now every rank's proof holds, and no stage's shape
    check leaves an op unchecked for a missing rule."""
    import cases
    from test_planner import _apply

    from verify.selfcheck.coverage import scan

    types, stops = scan([cases.all_cases()["planner_tp2_clip"]])
    assert not stops, stops  # python -m verify coverage: nothing would stop
    assert {"pd_op.squared_l2_norm", "pd_op.stack", "pd_op.sqrt", "pd_op.maximum",
            "pd_op.divide"} <= set(types)  # the clip's ops are in the programs
    app = _apply("planner_tp2_clip")
    proofs = [c for c in app.checks if c.name == "planner relation proof"]
    assert len(proofs) == 2 and all(c.verdict == Verdict.EQUIVALENT for c in proofs), \
        [c.message for c in proofs]
    assert app.verdict == Verdict.EQUIVALENT and app.proof == "proved", app.proof
    text = " ".join(c.message for c in app.checks)
    assert "no semantics row" not in text and "no shape rule" not in text


def _sqrt_program(inside: bool):
    """gn = sqrt(4 s) (``inside``) or 2 sqrt(s), s = |g1|^2: equal over the
    reals by an identity of sqrt the uninterpreted term does not have."""
    ops = [("pd_op.data", {}, {"out": ["g1"]}, {"name": "g1"}),
           ("pd_op.squared_l2_norm", {"x": ["g1"]}, {"out": ["s"]}, {})]
    scale = {"bias": 0.0, "bias_after_scale": True}
    if inside:
        ops += [("pd_op.scale", {"x": ["s"]}, {"out": ["t"]}, {"scale@value": 4.0, **scale}),
                ("pd_op.sqrt", {"x": ["t"]}, {"out": ["gn"]}, {})]
    else:
        ops += [("pd_op.sqrt", {"x": ["s"]}, {"out": ["t"]}, {}),
                ("pd_op.scale", {"x": ["t"]}, {"out": ["gn"]}, {"scale@value": 2.0, **scale})]
    vs = {n: Var(n, sh, "float32", is_data=n == "g1")
          for n, sh in {"g1": [2, 3], "s": [1], "t": [1], "gn": [1]}.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs, [], ["g1"])


def test_sqrt_claims_no_identity_it_does_not_model():
    """sqrt is uninterpreted: sqrt(4 s) against 2 sqrt(s) is neither proved
    (no identity of sqrt is assumed) nor refuted (the replay with the real
    sqrt finds them equal): INCONCLUSIVE, saying why; never a false proof."""
    res = _prove(_sqrt_program(False), before=_sqrt_program(True), watched=["gn"])
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert "gn" in res.message
