"""Every value row against Paddle's kernels on generated one-op programs, on
the legacy executor (``FLAGS_enable_pir_in_executor`` 0 and 1) and as PIR
programs (issue 34 item 2; ``verify/selfcheck/kernel_differential.py``).

The gate runs a sample: one Hypothesis example (a fixed seed) per spec and
dtype its rows model, each in the three modes; ``benchmarks/
bench_kernel_differential.py`` runs the full sweep.  Tolerance: integers and
bool exact (after the row's wrap modulo 2^bits); floats within
``4 eps (|exact| + mag)`` (``kernel_differential.tolerance``).
"""
from __future__ import annotations

import pytest

from verify.ir.snapshot import Op
from verify.selfcheck import kernel_differential as K
from verify.value import semantics as S
from verify.value.executor_disagreements import TABLE, refusal


@pytest.fixture(scope="module")
def sweep():
    return K.sweep(n=1, seed=0)


def test_every_row_agrees_with_paddle_where_both_compute(sweep):
    assert not sweep.disagreements, "\n".join(
        f"{m} {spec} {dt}: {why}\n  {ex}" for m, spec, dt, why, ex in sweep.disagreements[:10])
    for mode in K.MODES:  # each mode ran and agreed on most examples
        assert sweep.outcomes.get((mode, "agree"), 0) > 0.5 * sweep.examples_run(mode), \
            (mode, sorted(sweep.outcomes.items()))


def test_the_executor_flag_takes_effect(sweep):
    """The legacy_pir worker translated its programs to PIR, the legacy one never."""
    assert sweep.translations["legacy"] == 0
    assert sweep.translations["legacy_pir"] >= sweep.examples_run("legacy_pir") // 2


def test_the_rows_covered(sweep):
    """Every row a spec names ran in an example that agreed with Paddle
    (pd_op.pow's y=3 kernel has no reference: only its y=2 form)."""
    named = {r for s in K.specs() for r in s.rows}
    assert named <= set(S.ROWS), named - set(S.ROWS)
    assert named <= sweep.rows_agreeing, sorted(named - sweep.rows_agreeing)
    assert len(sweep.rows_agreeing & set(S.ROWS)) >= 80


def test_executor_disagreements_are_all_in_the_table(sweep):
    """Where the legacy executor and its PIR translation disagree on a
    program, the table (``executor_disagreements``) has the op and dtype:
    the value proof refuses it there."""
    seen = set()
    for a, b, spec, dtype, why, ex, refused in sweep.executor:
        if (a, b) != ("legacy", "legacy_pir"):
            continue  # legacy vs pd_op programs: different programs (float32 attrs)
        assert refused, f"not in the table: {spec} {dtype}: {why}\n  {ex}"
        seen.add(ex["legacy"]["type"])
    assert "reduce_sum" in seen  # float16 on CPU: the legacy executor refuses


def test_fill_constant_str_value_lost_by_the_pir_translation():
    """The reproducer of the fill_constant finding, on the three modes: the
    legacy executor reads str_value, the PIR-translated one the float32
    value; the row (str_value) agrees with the first, and the proof refuses."""
    exs = []
    for dtype, v in (("int64", 2.0 ** 40 + 1), ("float64", 0.1), ("float32", 0.1)):
        e = K.Example("fill_constant", dtype, {}, legacy={
            "type": "fill_constant", "inputs": {}, "outputs": {"Out": 1},
            "attrs": {"shape": [2], "dtype": K.VARTYPE[dtype], "value": v,
                      "str_value": repr(v)}})
        e.id = len(exs)
        exs.append(e)
    legacy, translated = K.run_mode("legacy", exs), K.run_mode("legacy_pir", exs)
    got = [(legacy["results"][i]["outs"][0]["data"][0],
            translated["results"][i]["outs"][0]["data"][0]) for i in range(3)]
    assert got[0] == (2 ** 40 + 1, 2 ** 40) and got[1] == (0.1, 0.10000000149011612)
    assert got[2][0] == got[2][1]  # twin: float32 0.1 is the float32 value in both
    for i, want in ((0, True), (1, True), (2, False)):
        rec = legacy["results"][i]["snap"]["ops"][0]
        op = Op(0, rec["type"], rec["inputs"], rec["outputs"], rec["attrs"])
        assert bool(refusal(op, [exs[i].dtype])) == want, rec["attrs"]
        assert K.judge(exs[i], legacy["results"][i])[0] == ("unsupported" if want else "agree")


def test_the_proof_refuses_a_row_the_executors_disagree_on():
    """symbolic.py's hook: fill_constant(int64, str_value 2^40+1) makes the
    proof INCONCLUSIVE naming the finding; the same op with a value float32
    holds (2^40) still proves."""
    from verify.ir.snapshot import ProgramSnapshot, Var
    from verify.value.proof import prove_application
    from verify.verdicts import Verdict

    def prog(sv, copy):
        attrs = {"shape": [3], "value": float(2 ** 40), "dtype": 3, "str_value": sv}
        out = "t" if copy else "y"
        ops = [Op(0, "fill_constant", {}, {"Out": ["c"]}, attrs),
               Op(1, "elementwise_add", {"X": ["x"], "Y": ["c"]}, {"Out": [out]}, {"axis": -1})]
        if copy:
            ops.append(Op(2, "assign", {"X": ["t"]}, {"Out": ["y"]}, {}))
        vs = {n: Var(n, [3], "int64") for n in ("x", "c", "t", "y")}
        return ProgramSnapshot(ops, vs, [], ["x"])

    def prove(sv):
        return prove_application("test", [0], {}, {0: prog(sv, False)}, {0: prog(sv, True)},
                                 {0: ["y"]})[0]
    bad = prove("1099511627777.0")
    assert bad.verdict == Verdict.INCONCLUSIVE and "executors disagree" in bad.message
    assert prove("1099511627776.0").verdict == Verdict.EQUIVALENT


def test_a_wrong_row_is_caught_with_its_example(monkeypatch):
    """Teeth: a scale row that ignores bias_after_scale, and an elementwise
    row that drops ``axis``, disagree with Paddle on a generated example."""
    right_scale = S.ROWS["scale"]

    def wrong_scale(op, ins, k):
        return right_scale(Op(0, op.type, op.inputs, op.outputs,
                              {**op.attrs, "bias_after_scale": True}), ins, k)
    monkeypatch.setitem(S.ROWS, "scale", wrong_scale)
    right_add = S.ROWS["elementwise_add"]

    def wrong_add(op, ins, k):
        x, y = ins["X"][0], ins["Y"][0]
        if y.arr.ndim < x.arr.ndim:  # numpy's trailing alignment, whatever axis says
            return {"Out": [S.Tensor(x.arr + y.arr, x.dims, x.dtype)]}
        return right_add(op, ins, k)
    monkeypatch.setitem(S.ROWS, "elementwise_add", wrong_add)
    sw = K.sweep(n=2, seed=0, names={"scale", "elementwise_add"})
    caught = {(spec, m) for m, spec, _, _, _ in sw.disagreements}
    assert ("scale", "legacy") in caught and ("scale", "legacy_pir") in caught, caught
    assert ("scale", "pir") not in caught  # pd_op.scale's row is its own (not patched)
    assert ("elementwise_add", "legacy") in caught, caught
    why = next(d for m, s, _, d, _ in sw.disagreements if s == "scale")
    assert "row" in why and "Paddle" in why


def test_tables_are_consistent():
    for d in TABLE:
        assert d.op in S.ROWS and d.condition and d.legacy and d.pir and d.found


def _slice_example(shape, axes, starts, ends, decrease, dtype="float32"):
    data = [float(i) / 8 for i in range(int(__import__("math").prod(shape)))]
    e = K.Example("slice", dtype, {"in0": (data, list(shape), dtype)})
    e.legacy = {"type": "slice", "inputs": {"Input": ["in0"]}, "outputs": {"Out": 1},
                "attrs": {"axes": axes, "starts": starts, "ends": ends,
                          "decrease_axis": decrease, "infer_flags": [1] * len(axes)}}
    e.pir = {"op": "pd_op.slice", "ins": ["in0"], "args": [axes, starts, ends, decrease]}
    return e


def test_a_slice_decreasing_every_axis_is_0d_as_paddles():
    """Found by the sweep: ``slice`` with every axis in decrease_axis is a
    0-D tensor on 3.3.1's three executors; the row kept shape [1].  Twin:
    one axis of two decreased keeps the other."""
    exs = [_slice_example([4], [0], [3], [4], [0]),
           _slice_example([4, 1, 4], [0, 1, 2], [3, 0, 3], [4, 1, 4], [0, 1, 2]),
           _slice_example([3, 4], [0], [1], [2], [0])]
    for i, e in enumerate(exs):
        e.id = i
    for mode in K.MODES:
        run = K.run_mode(mode, exs)
        for e in exs:
            res = run["results"][e.id]
            assert K.judge(e, res) == ("agree", ""), (mode, e.legacy["attrs"], res.get("outs"))
        assert run["results"][0]["outs"][0]["shape"] == []


def test_tensor_valued_attrs():
    """Found by the sweep: reshape2 reads a ``Shape`` / ``ShapeTensor`` input
    over its ``shape`` attr (x [3, 4], Shape [2, 6], attr [4, 3]: Paddle
    [2, 6]); the row used the attr.  Now Unsupported.  Twins: a
    ``ValueTensor`` fill_constant (modelled: the cast of the tensor) agrees;
    a ``ScaleTensor`` scale is Unsupported."""
    data = [float(i) / 8 for i in range(12)]
    reshape = {"type": "reshape2", "outputs": {"Out": 1, "XShape": 1}, "attrs": {"shape": [4, 3]}}
    exs = [
        K.Example("reshape2", "float32", {"in0": (data, [3, 4], "float32"),
                                          "in1": ([2, 6], [2], "int32")},
                  legacy={**reshape, "inputs": {"X": ["in0"], "Shape": ["in1"]}}),
        K.Example("reshape2", "float32", {"in0": (data, [3, 4], "float32"),
                                          "in1": ([2], [1], "int32"), "in2": ([6], [1], "int32")},
                  legacy={**reshape, "inputs": {"X": ["in0"], "ShapeTensor": ["in1", "in2"]}}),
        K.Example("fill_constant", "int32", {"in0": ([-2.75], [1], "float32")},
                  legacy={"type": "fill_constant", "inputs": {"ValueTensor": ["in0"]},
                          "outputs": {"Out": 1},
                          "attrs": {"shape": [2], "dtype": 2, "value": 1.0}}),
        K.Example("scale", "float32", {"in0": (data, [3, 4], "float32"),
                                       "in1": ([3.0], [1], "float32")},
                  legacy={"type": "scale", "inputs": {"X": ["in0"], "ScaleTensor": ["in1"]},
                          "outputs": {"Out": 1}, "attrs": {"scale": 2.0, "bias": 0.5}})]
    for i, e in enumerate(exs):
        e.id = i
    for mode in ("legacy", "legacy_pir"):
        run = K.run_mode(mode, exs)
        assert run["results"][0]["outs"][0]["shape"] == [2, 6]
        assert run["results"][2]["outs"][0]["data"] == [-2, -2]
        got = [K.judge(e, run["results"][e.id])[0] for e in exs]
        assert got == ["unsupported", "unsupported", "agree", "unsupported"], (mode, got)


def test_layer_norm_stats_shape_and_the_bf16_divide_grad():
    """Found by the sweep.  (1) layer_norm's Mean/Variance are
    x.shape[:begin_norm_axis] ([2, 2] for x [2, 2, 2], begin 2); the row
    flattened them to [4].  (2) CPU bfloat16 divide_grad gives y_grad the
    wrong sign on every executor: the proof refuses it (a kernel finding);
    the float32 twin agrees."""
    d = [0.5, -1.0, 2.0, 0.25, 1.5, -2.0, 3.0, 1.0]
    ln = K.Example("layer_norm", "float32", {"in0": (d, [2, 2, 2], "float32"),
                                             "in1": ([1.0, 0.5], [2], "float32"),
                                             "in2": ([0.0, 0.25], [2], "float32")},
                   legacy={"type": "layer_norm", "inputs": {"X": ["in0"], "Scale": ["in1"],
                                                            "Bias": ["in2"]},
                           "outputs": {"Y": 1, "Mean": 1, "Variance": 1},
                           "attrs": {"epsilon": 1e-5, "begin_norm_axis": 2}})
    exs = [ln]
    for dt in ("bfloat16", "float32"):
        exs.append(K.Example("div", dt, {"in0": ([1.875, 3.0], [2], dt),
                                         "in1": ([3.0, -2.0], [2], dt),
                                         "in2": ([1.875, 1.0], [2], dt)},
                             pir={"op": "pd_op.divide", "ins": ["in0", "in1"], "args": [],
                                  "grad": {"wrt": ["in0", "in1"], "gout": "in2"}}))
    for i, e in enumerate(exs):
        e.id = i
    legacy, pir = K.run_mode("legacy", exs[:1]), K.run_mode("pir", exs[1:])
    assert legacy["results"][0]["outs"][1]["shape"] == [2, 2]
    assert K.judge(ln, legacy["results"][0]) == ("agree", "")
    bf16, f32 = pir["results"][1], pir["results"][2]
    assert bf16["outs"][1]["data"][0] == 0.390625 and f32["outs"][1]["data"][0] == -0.390625
    outcome, why = K.judge(exs[1], bf16)
    assert outcome == "unsupported" and "not the op's definition" in why
    assert K.judge(exs[2], f32) == ("agree", "")
