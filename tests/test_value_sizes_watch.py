"""Issue 34, items 5 and 7: sizes proved, not sampled; what a program dir watches.

5. A -1 dim proved at a few sizes covers those sizes only: the application
   is "proved at sizes B in ...", counted apart, never "proved" (a rewrite
   adding ``(n-1)(n-2)(n-3) * x``, n the batch, is equal at 1, 2 and 3 and
   wrong at 4); the numeric runs' own size is left out of the proved ones
   (there the rewrite is refuted at 4).  A program without -1 dims stays
   "proved".  Each declared size symbol is independent: dividing by S
   instead of B is refuted where B and S are separate symbols; dividing by B
   stays proved (at sizes).  End to end, a built-in case with a dynamic
   batch is "proved at sizes B in 1, 3, 4" (its numeric runs feed B = 2).
7. On a planned PIR program dir the value proof watches every gradient, the
   parameters after the update and the optimizer states, not only the loss
   and the initial parameters: a pass file running the real VPP split and
   then scaling a bias gradient by 1.001 inside ``sgd_`` is refuted; the
   plain pass file stays proved; the watched values are listed per rank.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from cases.base import Expect
from verify.engine.application import Application
from verify.engine.matrix_runner import line
from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.report.terminal import summary_table
from verify.report.write import summarize
from verify.value.proof import prove_application
from verify.verdicts import CheckResult, Verdict, combine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def snap(ops, vars_, feeds=()):
    vs = {n: Var(n, list(v), "float32") for n, v in vars_.items()}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vs, [], list(feeds))


def _app(value_checks):
    app = Application("p", "c", [0], Expect(True, "EQUIVALENT"))
    app.checks = [CheckResult("numeric", "simulated run", None, Verdict.EQUIVALENT, "same")]
    app.checks += value_checks
    app.verdict = combine(app.checks)
    return app


def _ones_count(src, out, dims=(0,)):
    """ops: ``out`` = the size of ``src``'s dim(s) ``dims``, per column (a
    reduce_sum of ones)."""
    return [("scale", {"X": [src]}, {"Out": [out + "_1"]},
             {"scale": 0.0, "bias": 1.0, "bias_after_scale": True}),
            ("reduce_sum", {"X": [out + "_1"]}, {"Out": [out]},
             {"dim": list(dims), "keep_dim": False, "reduce_all": False})]


# -- 5. sizes -----------------------------------------------------------------------
def _cubic(batch):
    """(before, after): y = x, and y = x + (n-1)(n-2)(n-3) x, n x's dim 0
    (``batch``: -1, or a fixed size)."""
    vars_ = {"x": [batch, 4], "n": [4], "n_1": [batch, 4], "a": [4], "b": [4], "c": [4],
             "ab": [4], "abc": [4], "t": [batch, 4], "y": [batch, 4]}
    before = snap([("scale", {"X": ["x"]}, {"Out": ["y"]},
                    {"scale": 1.0, "bias": 0.0, "bias_after_scale": True})], vars_, ["x"])
    ops = _ones_count("x", "n")
    for name, k in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        ops.append(("scale", {"X": ["n"]}, {"Out": [name]},
                    {"scale": 1.0, "bias": -k, "bias_after_scale": True}))
    ops += [("elementwise_mul", {"X": ["a"], "Y": ["b"]}, {"Out": ["ab"]}, {"axis": -1}),
            ("elementwise_mul", {"X": ["ab"], "Y": ["c"]}, {"Out": ["abc"]}, {"axis": -1}),
            ("elementwise_mul", {"X": ["x"], "Y": ["abc"]}, {"Out": ["t"]}, {"axis": -1}),
            ("elementwise_add", {"X": ["x"], "Y": ["t"]}, {"Out": ["y"]}, {"axis": -1})]
    return before, snap(ops, vars_, ["x"])


def test_a_rewrite_wrong_only_at_batch_4_is_not_labelled_proved():
    before, after = _cubic(-1)
    res = prove_application("cubic", [0], {}, {0: before}, {0: after}, {0: ["y"]})
    # equal at 1, 2 and 3: a proof at those sizes, and it says so
    assert res[0].verdict == Verdict.EQUIVALENT, res[0].message
    assert "for B in 1, 2, 3" in res[0].message
    assert res[0].details["sizes_proved"] == [{"B": 1}, {"B": 2}, {"B": 3}]
    assert res[0].details["all_sizes"] is False
    app = _app(res)
    assert app.verdict == Verdict.EQUIVALENT
    assert app.proof == "proved at sizes B in 1, 2, 3", app.proof
    assert "(proved at sizes B in 1, 2, 3)" in line(app)
    summ = summarize([app])
    assert summ["proved_at_sizes_only"] == ["p on c (proved at sizes B in 1, 2, 3)"]
    assert summ["witnessed_not_proved"] == []
    table = summary_table([app], styled=False)
    col = next(c for c in table.columns if c.header == "proved at sizes only")
    assert [str(x) for x in col._cells] == ["1"]


def test_the_numeric_size_is_left_out_of_the_proved_ones_and_batch_4_refutes():
    from verify.value.proof import size_instances

    # the numeric runs feed B = 2: the proof takes 1, 3 and 4, and 4 refutes
    assert size_instances(["B"], avoid={"B": [2]}) == [{"B": 1}, {"B": 3}, {"B": 4}]
    before, after = _cubic(-1)
    res = prove_application("cubic", [0], {}, {0: before}, {0: after}, {0: ["y"]},
                            avoid_sizes={"B": [2]})[0]
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["shapes"] == "with every -1 dim = 4"


def test_twin_a_program_without_minus_one_dims_stays_proved():
    before, after = _cubic(3)  # at n = 3 the added term is 0: equal at the real shapes
    res = prove_application("cubic", [0], {}, {0: before}, {0: after}, {0: ["y"]})
    assert res[0].verdict == Verdict.EQUIVALENT, res[0].message
    assert res[0].details["all_sizes"] is True and not res[0].details["sizes_proved"]
    assert _app(res).proof == "proved"


def _divided(by, tag):
    """m = sum of x over its dim 0 (x[B, 4]) divided by the size of ``by``'s
    dim 0 (z[S, 4], or x itself: the mean); ``tag`` names the temporaries."""
    vars_ = {"x": [-1, 4], "z": [-1, 4], "m": [4], "s" + tag: [4], "cnt" + tag: [4],
             "cnt" + tag + "_1": [-1, 4]}
    return snap([("reduce_sum", {"X": ["x"]}, {"Out": ["s" + tag]},
                  {"dim": [0], "keep_dim": False, "reduce_all": False})]
                + _ones_count(by, "cnt" + tag)
                + [("elementwise_div", {"X": ["s" + tag], "Y": ["cnt" + tag]}, {"Out": ["m"]},
                    {"axis": -1})], vars_, ["x", "z"])


SYMBOLS = {"x": ("B", None), "z": ("S", None)}


def test_dividing_by_s_instead_of_b_is_refuted_when_they_are_separate_symbols():
    before, after = _divided("x", "a"), _divided("z", "b")
    res = prove_application("div", [0], {}, {0: before}, {0: after}, {0: ["m"]},
                            symbols=SYMBOLS)[0]
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    from verify.value.proof import size_instances

    sizes = res.counterexample["batch"]
    assert sizes["B"] != sizes["S"], res.counterexample
    # instances where the symbols differ, each symbol at several sizes
    insts = size_instances(["B", "S"])
    assert any(i["B"] != i["S"] for i in insts)
    assert {i["B"] for i in insts} >= {1, 2, 3} and {i["S"] for i in insts} >= {1, 2, 3}


def test_twin_dividing_by_b_stays_proved_at_sizes():
    before, after = _divided("x", "a"), _divided("x", "b")
    res = prove_application("div", [0], {}, {0: before}, {0: after}, {0: ["m"]},
                            symbols=SYMBOLS)[0]
    assert res.verdict == Verdict.EQUIVALENT, res.message
    assert "(B, S) in" in res.message and res.details["size_symbols"] == ["B", "S"]
    assert _app([res]).proof.startswith("proved at sizes (B, S) in ")


# -- 7. watched values of a PIR program dir ------------------------------------------
PASS_FILE = '''
"""The VPP split, then a 1-D (bias) gradient scaled by {factor} inside sgd_."""
import paddle

from .pass_base import register_pass
from .pipeline_scheduler_pass.pipeline_vpp import PipelineVirtualPipelinePass

FACTOR = {factor!r}

@register_pass("pipeline_scheduler_VPP")
class SplitThenScaledGrad(PipelineVirtualPipelinePass):
    def _pir_split_matmul_grad_ops_to_matmul(self, program):
        grad_op = next(o for o in program.global_block().ops if o.name() == "pd_op.matmul_grad")
        role, chunk = grad_op.op_role, grad_op.chunk_id  # what the contract asks of new ops
        PipelineVirtualPipelinePass._pir_split_matmul_grad_ops_to_matmul(self, program)
        if FACTOR is None:
            return
        for op in program.global_block().ops:
            if op.name() == "pd_op.sgd_" and len(op.operand_source(0).shape) == 1:
                seen = {{o.id() for o in program.global_block().ops}}
                paddle.pir.set_insertion_point(op)
                scaled = paddle._C_ops.scale(op.operand_source(2), FACTOR, 0.0, True)
                op.operand(2).set_source(scaled)
                for new in program.global_block().ops:  # the split's role and chunk
                    if new.id() not in seen:
                        new.op_role, new.chunk_id = role, chunk
                break
'''


@pytest.fixture(scope="module")
def pir_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny_mlp_pir")
    p = subprocess.run([sys.executable, "-m", "verify", "plan",
                        os.path.join(ROOT, "examples", "tiny_mlp_pir.py"), "--ir", "pir",
                        "--ranks", "2", "--out", str(out / "dir")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    return str(out / "dir")


def _apply(pir_dir, tmp_path, factor):
    import cases  # noqa: F401
    import passes
    from cases.program_dirs import load_program_dir
    from verify.engine import isolation
    from verify.engine.application import run_application
    from verify.ir.pass_files import load_pass_file

    path = tmp_path / "vpp_scaled.py"
    path.write_text(textwrap.dedent(PASS_FILE.format(factor=factor)))
    before = isolation.settings()
    isolation.configure(enabled=False)
    loaded = load_pass_file(str(path))
    try:
        return run_application(passes.get("vpp_split"), load_program_dir(pir_dir),
                               source=loaded.path)
    finally:
        loaded.restore()
        isolation.configure(**before)


def test_a_gradient_scaled_inside_sgd_on_a_pir_program_dir_is_refuted(pir_dir, tmp_path):
    app = _apply(pir_dir, tmp_path, 1.001)
    assert app.verdict == Verdict.NOT_EQUIVALENT, [c.message for c in app.checks]
    value = [c for c in app.checks if c.kind == "value"]
    assert value and all(c.verdict == Verdict.NOT_EQUIVALENT for c in value)


def test_twin_the_plain_split_on_a_pir_program_dir_stays_proved(pir_dir, tmp_path):
    app = _apply(pir_dir, tmp_path, None)
    assert app.verdict == Verdict.EQUIVALENT and app.proof == "proved", \
        [c.message for c in app.checks]
    value = {c.rank: c for c in app.checks if c.kind == "value"}
    assert sorted(value) == [0, 1]
    for rank, c in value.items():
        watched = c.details["watched"]  # listed per rank
        snap = next(o.before for o in app.outcomes if o.rank == rank)
        sgd = [op for op in snap.ops if op.type == "pd_op.sgd_"]
        assert len(sgd) == 6
        for op in sgd:  # each gradient, each parameter after the update
            assert op.inputs["grad"][0] in watched and op.outputs["param_out"][0] in watched
            assert op.outputs["param_out"][0] in c.details["proved"]


def test_an_application_with_a_dynamic_batch_is_proved_at_sizes_the_runs_do_not_use():
    """End to end (the engine): the case's declared symbols reach the proof,
    whose sizes leave out the numeric runs' batch (its FeedSpec, B = 2)."""
    import cases
    import passes
    from verify.engine.application import run_application

    case = cases.all_cases()["engine_mlp_tp2_adamw"]
    app = run_application(passes.get("promotion"), case)
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks]
    assert app.proof == "proved at sizes B in 1, 3, 4", app.proof
    fed = {f.shape[0] for f in case.build(0).feeds if f.name in case.symbols}
    assert fed == {2}  # what the numeric runs feed
    for c in app.checks:
        if c.kind == "value":
            assert c.details["sizes_proved"] == [{"B": 1}, {"B": 3}, {"B": 4}]
            assert not fed & {s["B"] for s in c.details["sizes_proved"]}
