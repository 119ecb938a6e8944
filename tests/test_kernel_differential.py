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

from fractions import Fraction

import numpy as np
import pytest

from verify.ir.snapshot import Op
from verify.selfcheck import kernel_differential as K
from verify.value import semantics as S
from verify.value.executor_disagreements import TABLE, refusal


@pytest.fixture(scope="module")
def sweep():
    return K.sweep(n=1, seed=0)


def _fill(dtype, v):
    return K.Example("fill_constant", dtype, {}, legacy={
        "type": "fill_constant", "inputs": {}, "outputs": {"Out": 1},
        "attrs": {"shape": [2], "dtype": K.VARTYPE[dtype], "value": v, "str_value": repr(v)}})


_DATA = [float(i) / 8 for i in range(12)]
_RESHAPE = {"type": "reshape2", "outputs": {"Out": 1, "XShape": 1}, "attrs": {"shape": [4, 3]}}
_LN = [0.5, -1.0, 2.0, 0.25, 1.5, -2.0, 3.0, 1.0]


def _div(dt):
    return K.Example("div", dt, {"in0": ([1.875, 3.0], [2], dt), "in1": ([3.0, -2.0], [2], dt),
                                 "in2": ([1.875, 1.0], [2], dt)},
                     pir={"op": "pd_op.divide", "ins": ["in0", "in1"], "args": [],
                          "grad": {"wrt": ["in0", "in1"], "gout": "in2"}})


# the reproducers of what the sweep found, run once in each mode
FIXED = {
    "fill_int64": _fill("int64", 2.0 ** 40 + 1),
    "fill_float64": _fill("float64", 0.1),
    "fill_float32": _fill("float32", 0.1),
    "slice_1d": None, "slice_3d": None, "slice_one_axis": None,
    "reshape_Shape": K.Example("reshape2", "float32", {
        "in0": (_DATA, [3, 4], "float32"), "in1": ([2, 6], [2], "int32")},
        legacy={**_RESHAPE, "inputs": {"X": ["in0"], "Shape": ["in1"]}}),
    "reshape_ShapeTensor": K.Example("reshape2", "float32", {
        "in0": (_DATA, [3, 4], "float32"), "in1": ([2], [1], "int32"),
        "in2": ([6], [1], "int32")},
        legacy={**_RESHAPE, "inputs": {"X": ["in0"], "ShapeTensor": ["in1", "in2"]}}),
    "fill_ValueTensor": K.Example("fill_constant", "int32", {"in0": ([-2.75], [1], "float32")},
                                  legacy={"type": "fill_constant",
                                          "inputs": {"ValueTensor": ["in0"]},
                                          "outputs": {"Out": 1},
                                          "attrs": {"shape": [2], "dtype": 2, "value": 1.0}}),
    "scale_ScaleTensor": K.Example("scale", "float32", {
        "in0": (_DATA, [3, 4], "float32"), "in1": ([3.0], [1], "float32")},
        legacy={"type": "scale", "inputs": {"X": ["in0"], "ScaleTensor": ["in1"]},
                "outputs": {"Out": 1}, "attrs": {"scale": 2.0, "bias": 0.5}}),
    "layer_norm": K.Example("layer_norm", "float32", {
        "in0": (_LN, [2, 2, 2], "float32"), "in1": ([1.0, 0.5], [2], "float32"),
        "in2": ([0.0, 0.25], [2], "float32")},
        legacy={"type": "layer_norm", "inputs": {"X": ["in0"], "Scale": ["in1"], "Bias": ["in2"]},
                "outputs": {"Y": 1, "Mean": 1, "Variance": 1},
                "attrs": {"epsilon": 1e-5, "begin_norm_axis": 2}}),
    "add_axis": K.Example("elementwise_add", "float32", {
        "in0": ([float(i) for i in range(24)], [2, 3, 4], "float32"),
        "in1": ([0.5, -1.0, 2.0], [3], "float32")},
        legacy={"type": "elementwise_add", "inputs": {"X": ["in0"], "Y": ["in1"]},
                "outputs": {"Out": 1}, "attrs": {"axis": 1}}),
    "div_bf16": _div("bfloat16"),
    "div_f32": _div("float32"),
}


@pytest.fixture(scope="module")
def fixed():
    """``{mode: {name: result}}`` of FIXED, one worker a mode."""
    FIXED["slice_1d"] = _slice_example([4], [0], [3], [4], [0])
    FIXED["slice_3d"] = _slice_example([4, 1, 4], [0, 1, 2], [3, 0, 3], [4, 1, 4], [0, 1, 2])
    FIXED["slice_one_axis"] = _slice_example([3, 4], [0], [1], [2], [0])
    names = list(FIXED)
    for i, n in enumerate(names):
        FIXED[n].id = i
    runs = {m: K.run_mode(m, list(FIXED.values()))["results"] for m in K.MODES}
    return {m: {n: runs[m].get(i) for i, n in enumerate(names)} for m in K.MODES}


def _judge(fixed, mode, name):
    return K.judge(FIXED[name], fixed[mode][name])


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


def test_fill_constant_str_value_lost_by_the_pir_translation(fixed):
    """The reproducer of the fill_constant finding: the legacy executor reads
    str_value, the PIR-translated one the float32 value; the row (str_value)
    agrees with the first, and the proof refuses the op."""
    got = {n: (fixed["legacy"][n]["outs"][0]["data"][0],
               fixed["legacy_pir"][n]["outs"][0]["data"][0])
           for n in ("fill_int64", "fill_float64", "fill_float32")}
    assert got["fill_int64"] == (2 ** 40 + 1, 2 ** 40)
    assert got["fill_float64"] == (0.1, 0.10000000149011612)
    assert got["fill_float32"][0] == got["fill_float32"][1]  # twin: float32 0.1 in both
    for name, want in (("fill_int64", True), ("fill_float64", True), ("fill_float32", False)):
        res = fixed["legacy"][name]
        rec = res["snap"]["ops"][0]
        op = Op(0, rec["type"], rec["inputs"], rec["outputs"], rec["attrs"])
        assert bool(refusal(op, [FIXED[name].dtype])) == want, rec["attrs"]
        assert K.listed_refusal(res) == refusal(op, [FIXED[name].dtype])
        assert _judge(fixed, "legacy", name)[0] == ("unsupported" if want else "agree")


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


def test_a_wrong_row_is_caught_with_its_example(sweep, fixed, monkeypatch):
    """Teeth: the sweep's own Paddle results judged again with a scale row
    that ignores bias_after_scale (and the reproducer x [2, 3, 4] + y [3] at
    axis 1 with an elementwise_add row that drops ``axis``): they disagree,
    naming output, row value and Paddle's."""
    right_scale = S.ROWS["scale"]

    def wrong_scale(op, ins, k):
        return right_scale(Op(0, op.type, op.inputs, op.outputs,
                              {**op.attrs, "bias_after_scale": True}), ins, k)
    right_add = S.ROWS["elementwise_add"]

    def wrong_add(op, ins, k):
        x, y = ins["X"][0], ins["Y"][0]
        if y.arr.ndim < x.arr.ndim:  # numpy's trailing alignment, whatever axis says
            return {"Out": [S.Tensor(x.arr + y.arr, x.dims, x.dtype)]}
        return right_add(op, ins, k)

    def caught():
        out = {}
        for e in sweep.examples:
            if e.spec in ("scale", "elementwise_add"):
                for m in ("legacy", "legacy_pir", "pir"):
                    o, why = K.judge(e, sweep.runs[m].get(e.id))
                    if o == "disagree":
                        out.setdefault((e.spec, m), why)
        for m in ("legacy", "legacy_pir"):
            o, why = _judge(fixed, m, "add_axis")
            if o == "disagree":
                out[("elementwise_add", m)] = why
        return out
    assert caught() == {}  # twin: the real rows agree
    monkeypatch.setitem(S.ROWS, "scale", wrong_scale)
    monkeypatch.setitem(S.ROWS, "elementwise_add", wrong_add)
    got = caught()
    assert {("scale", "legacy"), ("scale", "legacy_pir"), ("elementwise_add", "legacy"),
            ("elementwise_add", "legacy_pir")} <= set(got), got
    assert ("scale", "pir") not in got  # pd_op.scale's row is its own (not patched)
    assert "row" in got[("scale", "legacy")] and "Paddle" in got[("scale", "legacy")]


def _slice_example(shape, axes, starts, ends, decrease, dtype="float32"):
    data = [float(i) / 8 for i in range(int(__import__("math").prod(shape)))]
    e = K.Example("slice", dtype, {"in0": (data, list(shape), dtype)})
    e.legacy = {"type": "slice", "inputs": {"Input": ["in0"]}, "outputs": {"Out": 1},
                "attrs": {"axes": axes, "starts": starts, "ends": ends,
                          "decrease_axis": decrease, "infer_flags": [1] * len(axes)}}
    e.pir = {"op": "pd_op.slice", "ins": ["in0"], "args": [axes, starts, ends, decrease]}
    return e


def test_a_slice_decreasing_every_axis_is_0d_as_paddles(fixed):
    """Found by the sweep: ``slice`` with every axis in decrease_axis is a
    0-D tensor on 3.3.1's three executors; the row kept shape [1].  Twin:
    one axis of two decreased keeps the other."""
    for mode in K.MODES:
        for name in ("slice_1d", "slice_3d", "slice_one_axis"):
            assert _judge(fixed, mode, name) == ("agree", ""), (mode, name)
        assert fixed[mode]["slice_1d"]["outs"][0]["shape"] == []


def test_tensor_valued_attrs(fixed):
    """Found by the sweep: reshape2 reads a ``Shape`` / ``ShapeTensor`` input
    over its ``shape`` attr (x [3, 4], Shape [2, 6], attr [4, 3]: Paddle
    [2, 6]); the row used the attr.  Now Unsupported.  Twins: a
    ``ValueTensor`` fill_constant (modelled: the cast of the tensor) agrees;
    a ``ScaleTensor`` scale is Unsupported."""
    for mode in ("legacy", "legacy_pir"):
        assert fixed[mode]["reshape_Shape"]["outs"][0]["shape"] == [2, 6]
        assert fixed[mode]["fill_ValueTensor"]["outs"][0]["data"] == [-2, -2]
        got = [_judge(fixed, mode, n)[0] for n in ("reshape_Shape", "reshape_ShapeTensor",
                                                   "fill_ValueTensor", "scale_ScaleTensor")]
        assert got == ["unsupported", "unsupported", "agree", "unsupported"], (mode, got)


def test_layer_norm_stats_shape_and_the_bf16_divide_grad(fixed):
    """Found by the sweep.  (1) layer_norm's Mean/Variance are
    x.shape[:begin_norm_axis] ([2, 2] for x [2, 2, 2], begin 2); the row
    flattened them to [4].  (2) CPU bfloat16 divide_grad gives y_grad the
    wrong sign on every executor: the proof refuses it (a kernel finding);
    the float32 twin agrees."""
    assert fixed["legacy"]["layer_norm"]["outs"][1]["shape"] == [2, 2]
    assert _judge(fixed, "legacy", "layer_norm") == ("agree", "")
    bf16, f32 = fixed["pir"]["div_bf16"], fixed["pir"]["div_f32"]
    assert bf16["outs"][1]["data"][0] == 0.390625 and f32["outs"][1]["data"][0] == -0.390625
    outcome, why = _judge(fixed, "pir", "div_bf16")
    assert outcome == "unsupported" and "not the op's definition" in why
    assert _judge(fixed, "pir", "div_f32") == ("agree", "")


def test_tables_are_consistent():
    for d in TABLE:
        assert d.op in S.ROWS and d.condition and d.legacy and d.pir and d.found


def _rotary_wrong_rows():
    """A plausible wrong row for each of ERNIE 4.5's rotary ops: tiling for
    repeating in place, the lanes reversed, the merged dim reversed, the
    stacked pieces swapped, a grad's sign flipped."""
    import numpy as np

    real = {t: S.ROWS[t] for t in ("pd_op.strided_slice", "pd_op.flatten", "pd_op.stack_grad",
                                   "pd_op.strided_slice_grad", "pd_op.flatten_grad")}

    def tiled(op, ins, k):
        x = ins["x"][0]
        axis = int(op.attrs["axis"]) % x.arr.ndim
        arr = np.concatenate([x.arr] * int(op.attrs["repeats"]), axis=axis)
        return {"out": [S.Tensor(arr, S.leaf_dims(arr.shape), x.dtype)]}

    def last_reversed(t, slot, axis_of):
        def row(op, ins, k):
            out = real[t](op, ins, k)[slot][0]
            arr = np.flip(out.arr, axis_of(op, ins))
            return {slot: [S.Tensor(np.ascontiguousarray(arr), out.dims, out.dtype)]}
        return row

    def negated(t, slot):
        def row(op, ins, k):
            out = real[t](op, ins, k)[slot][0]
            return {slot: [S.Tensor(out.arr * k.const(-1), out.dims, out.dtype)]}
        return row
    return {
        "pd_op.repeat_interleave": tiled,
        "pd_op.strided_slice": last_reversed(
            "pd_op.strided_slice", "out",
            lambda op, ins: int(op.attrs["axes"][-1]) % ins["x"][0].arr.ndim),
        "pd_op.flatten": last_reversed(  # the merged dim: start_axis of x
            "pd_op.flatten", "out",
            lambda op, ins: int(op.attrs["start_axis"]) % ins["x"][0].arr.ndim),
        "pd_op.stack_grad": last_reversed("pd_op.stack_grad", "x_grad", lambda op, ins: 0),
        "pd_op.strided_slice_grad": negated("pd_op.strided_slice_grad", "x_grad"),
        "pd_op.flatten_grad": negated("pd_op.flatten_grad", "x_grad"),
    }


def test_a_wrong_rotary_row_is_caught_with_its_example(sweep, monkeypatch):
    """Teeth for ERNIE 4.5's rotary rows (repeat_interleave, strided_slice,
    flatten, their grads, stack_grad): on the sweep's own Paddle results
    every example of each agrees (or Paddle refuses the dtype); with each
    row replaced by a plausible wrong one (tiled, lanes reversed, pieces
    swapped, the grad's sign flipped) some example of each disagrees, naming
    the row's value and Paddle's."""
    wrong = _rotary_wrong_rows()

    def outcomes():
        got = {}
        for e in sweep.examples:
            if e.spec in wrong:
                o, why = K.judge(e, sweep.runs["pir"].get(e.id))
                got.setdefault(e.spec, []).append((o, why))
        return got
    right = outcomes()
    assert set(right) == set(wrong), sorted(right)
    for spec, res in right.items():
        assert {o for o, _ in res} <= {"agree", "refused"}, (spec, res)
        assert any(o == "agree" for o, _ in res), spec
    for t, row in wrong.items():
        monkeypatch.setitem(S.ROWS, t, row)
    for spec, res in outcomes().items():
        bad = [why for o, why in res if o == "disagree"]
        assert bad, (spec, res)
        assert "row" in bad[0] and "Paddle" in bad[0], bad[0]


def test_the_grad_clip_rows_are_paddles_and_a_wrong_one_is_caught(monkeypatch):
    """The global-norm clip's PIR rows (pd_op.squared_l2_norm, sqrt, maximum,
    minimum, stack) on their own sample, in PIR mode: the real rows agree
    with Paddle's kernels; each broken row disagrees on some example: the
    norm as a sum of |x|, sqrt as the identity, maximum and minimum swapped,
    stack ignoring its axis."""
    names = ["squared_l2_norm", "sqrt", "elementwise_max", "elementwise_min", "stack"]
    exs = K.build_examples(2, 0, names)
    runs = K.run_mode("pir", exs)["results"]

    def outcomes():
        got = {}
        for e in exs:
            o, why = K.judge(e, runs.get(e.id))
            got.setdefault(e.spec, set()).add(o)
        return got
    real = outcomes()
    assert all("agree" in real[n] and "disagree" not in real[n] for n in names), real
    right_max, right_min = S.ROWS["pd_op.maximum"], S.ROWS["pd_op.minimum"]

    def sum_abs(op, ins, k):
        x = ins["x"][0]
        arr = np.empty([1], dtype=object)
        arr[0] = sum((abs(e) for e in x.arr.reshape(-1)), k.const(0))
        return {"out": [S.Tensor(arr, [((1, 1),)], x.dtype)]}

    def identity(op, ins, k):
        return {"out": [ins["x"][0]]}

    monkeypatch.setitem(S.ROWS, "pd_op.squared_l2_norm", sum_abs)
    monkeypatch.setitem(S.ROWS, "pd_op.sqrt", identity)
    monkeypatch.setitem(S.ROWS, "pd_op.maximum", right_min)
    monkeypatch.setitem(S.ROWS, "pd_op.minimum", right_max)
    right_stack = S.ROWS["pd_op.stack"]
    monkeypatch.setitem(S.ROWS, "pd_op.stack", lambda op, ins, k: right_stack(
        Op(op.idx, op.type, op.inputs, op.outputs, {**op.attrs, "axis": 0}), ins, k))
    wrong = outcomes()
    assert all("disagree" in wrong[n] for n in names), wrong


class _SiluForItsDerivative:
    """``k`` whose ``silu.d`` is ``silu``: a grad row that forgets the
    product rule (the gate's grad as dout * value * silu(gate))."""

    def __init__(self, k):
        self.k = k

    def uf(self, kernel, args, attrs=()):
        return self.k.uf("silu" if kernel == "silu.d" else kernel, args, attrs)

    def __getattr__(self, name):
        return getattr(self.k, name)


def test_the_swiglu_rows_are_paddles_and_a_wrong_one_is_caught(monkeypatch):
    """``pd_op.swiglu`` and its grad, both forms (with y: ``silu(x) * y``;
    without: ``silu(x1) * x2`` of x's halves along the last axis), on their
    own sample in PIR mode: the rows agree with Paddle's kernels (float16 /
    bfloat16 are refused by the CPU build); with the gate and the value
    swapped (the halves taken the other way round) and the gate's grad
    without the product rule, every float32/float64 example disagrees,
    naming the row's value and Paddle's."""
    names = ["swiglu", "swiglu_halves", "swiglu_grad", "swiglu_halves_grad"]
    exs = K.build_examples(2, 0, names)
    runs = K.run_mode("pir", exs)["results"]

    def outcomes():
        got = {}
        for e in exs:
            o, why = K.judge(e, runs.get(e.id))
            got.setdefault((e.spec, e.dtype), []).append((o, why))
        return got
    real = outcomes()
    assert {sp for sp, _ in real} == set(names)
    for (spec, dtype), res in real.items():
        want = {"refused"} if dtype in ("float16", "bfloat16") else {"agree"}
        assert {o for o, _ in res} == want, (spec, dtype, res)
    right, right_grad = S.ROWS["pd_op.swiglu"], S.ROWS["pd_op.swiglu_grad"]

    def swapped(row):
        def wrong(op, ins, k):
            x = ins["x"][0]
            if ins.get("y") and ins["y"][0] is not None:
                return row(op, {**ins, "x": ins["y"], "y": ins["x"]}, k)
            a, b = np.split(x.arr, 2, axis=-1)
            flipped = S.Tensor(np.concatenate([b, a], axis=-1), x.dims, x.dtype)
            return row(op, {**ins, "x": [flipped]}, k)
        return wrong

    monkeypatch.setitem(S.ROWS, "pd_op.swiglu", swapped(right))
    monkeypatch.setitem(S.ROWS, "pd_op.swiglu_grad",
                        lambda op, ins, k: right_grad(op, ins, _SiluForItsDerivative(k)))
    for (spec, dtype), res in outcomes().items():
        if dtype in ("float16", "bfloat16"):
            continue
        bad = [why for o, why in res if o == "disagree"]
        assert bad, (spec, dtype, res)
        assert "row" in bad[0] and "Paddle" in bad[0], bad[0]


def test_the_tanh_rows_are_paddles_and_a_wrong_one_is_caught(monkeypatch):
    """``pd_op.tanh`` (uninterpreted, replayed with ``kernels.reference``'s
    tanh) and ``pd_op.tanh_grad`` (``dout (1 - out^2)``, exact in the
    forward's out) on their own sample against Paddle's CPU kernels in PIR
    mode: they agree (float16 is refused by the build: Paddle's tanh has no
    CPU float16 kernel).  Wrong twins -- tanh of -x (the sign lost), and
    the grad as ``dout (1 - out)`` -- disagree on some float32 and float64
    example, naming the row's value and Paddle's (bfloat16's tolerance,
    ``kernel_differential.tolerance``, scales with |input|^2 times the
    longest dim for accumulating kernels: wider than tanh's range here)."""
    names = ["tanh", "tanh_grad"]
    exs = K.build_examples(2, 0, names)
    runs = K.run_mode("pir", exs)["results"]

    def outcomes():
        got = {}
        for e in exs:
            o, why = K.judge(e, runs.get(e.id))
            got.setdefault(("grad" in e.pir, e.dtype), []).append((o, why))
        return got
    real = outcomes()
    assert {g for g, _ in real} == {False, True}
    for (grad, dtype), res in real.items():
        want = {"refused"} if dtype == "float16" else {"agree"}
        assert {o for o, _ in res} == want, (grad, dtype, res)
    right = S.ROWS["pd_op.tanh"]

    def tanh_of_minus_x(op, ins, k):
        x = ins["x"][0]
        return right(op, {"x": [S.Tensor(x.arr * k.const(-1), x.dims, x.dtype)]}, k)

    def one_minus_out(op, ins, k):
        y, g = ins["out"][0], ins["out_grad"][0]
        return {"x_grad": [S.Tensor(g.arr - g.arr * y.arr, y.dims, y.dtype)]}

    monkeypatch.setitem(S.ROWS, "pd_op.tanh", tanh_of_minus_x)
    monkeypatch.setitem(S.ROWS, "pd_op.tanh_grad", one_minus_out)
    wrong = outcomes()
    assert {(g, d) for g, d in wrong if d in ("float32", "float64")} == {
        (g, d) for g in (False, True) for d in ("float32", "float64")}
    for (grad, dtype), res in wrong.items():
        if dtype not in ("float32", "float64"):
            continue
        bad = [why for o, why in res if o == "disagree"]
        assert bad, (grad, dtype, res)
        assert "row" in bad[0] and "Paddle" in bad[0], bad[0]


# -- the references of the LLaMA model's kernels (verify/value/kernels.py) ------
_KERNEL_SPECS = ["rsqrt", "sin", "cos", "pow", "pow_grad", "tril", "where", "not_equal",
                 "bitwise_and", "arange", "set_value_", "cross_entropy", "cross_entropy_grad"]


def _with(attrs, **new):
    """An attrs key with ``new`` values (reprs, as kernel keys hold them)."""
    return tuple((k, repr(new[k]) if k in new else v) for k, v in attrs)


def _wrong_reference(real):
    """Plausible wrong kernels: rsqrt as sqrt, sin and cos swapped, pow
    ignoring its exponent, pow's grad without the factor y, tril dropping
    its diagonal, where's branches swapped, not_equal as equal, bitwise or
    for and, arange one step ahead, set_value_ writing value + 1, the cross
    entropy's loss (and grad) with the sign flipped."""
    from verify.value.kernels import _attrs, _dtypes, _signed

    def ref(kernel, attrs, args):
        at = _attrs(attrs)
        if kernel == "rsqrt":
            return real("sqrt", attrs, args)
        if kernel in ("sin", "cos"):
            return real({"sin": "cos", "cos": "sin"}[kernel], attrs, args)
        if kernel == "pow":
            return real(kernel, _with(attrs, y=2.0), args)
        if kernel == "pow_grad":
            return real(kernel, attrs, args) / Fraction(float(at["y"]))
        if kernel.startswith("tril."):
            return real(kernel, _with(attrs, diagonal=int(at.get("diagonal", 0)) - 1), args)
        if kernel == "where":
            return real(kernel, attrs, (args[0], args[2], args[1]))
        if kernel == "not_equal":
            return 1 - real(kernel, attrs, args)
        if kernel == "bitwise_and":
            a, b = (_signed(v, d) for v, d in zip(args, _dtypes(at, 2)))
            return Fraction(int(a) | int(b))
        if kernel == "arange":
            return real(kernel, _with(attrs, index=int(at["index"]) + 1), args)
        if kernel.startswith("set_value_."):
            return real(kernel, _with(attrs, values=[v + 1 for v in at["values"]]), args)
        if kernel.startswith("cross_entropy_with_softmax"):
            return -real(kernel, attrs, args)
        return real(kernel, attrs, args)
    return ref


def test_the_model_kernels_references_are_paddles_and_a_wrong_one_is_caught(monkeypatch):
    """The references of rsqrt, sin, cos, pow (and its grad), tril, where,
    not_equal, bitwise_and, arange, set_value_ and the cross entropy with
    softmax (and its grad), through their rows, on their own sample in PIR
    mode: every example agrees with Paddle's CPU kernel or Paddle refuses
    the dtype, some agree for each; with each reference replaced by a
    plausible wrong one, some example of each disagrees, naming the row's
    value and Paddle's."""
    from verify.value import kernels

    exs, spec_of = [], {}
    for name in _KERNEL_SPECS:
        for e in K.build_examples(2, 0, [name]):
            e.id = len(exs)
            spec_of[e.id] = name
            exs.append(e)
    runs = K.run_mode("pir", exs)["results"]

    def outcomes():
        got = {}
        for e in exs:
            got.setdefault(spec_of[e.id], []).append(K.judge(e, runs.get(e.id)))
        return got
    real = outcomes()
    assert set(real) == set(_KERNEL_SPECS), sorted(real)
    for name, res in real.items():
        assert {o for o, _ in res} <= {"agree", "refused"}, (name, [r for r in res
                                                                    if r[0] != "agree"][:3])
        assert sum(o == "agree" for o, _ in res) >= 2, (name, res)
    monkeypatch.setattr(kernels, "reference", _wrong_reference(kernels.reference))
    for name, res in outcomes().items():
        bad = [why for o, why in res if o == "disagree"]
        assert bad, (name, res)
        assert "row" in bad[0] and "Paddle" in bad[0], bad[0]
