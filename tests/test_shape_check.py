"""The Z3 shape check: it must catch wrong folds and impossible reshapes with
concrete dims, and must not cry wolf on the correct rewrite."""
from conftest import context, snapshots

from verify.checks import shape_check
from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.verdicts import Verdict


def _fold_program(target):
    """x[B,S,H] and dOut[B,S,N] folded by two inserted reshapes into a matmul."""
    vars_ = {"x": Var("x", [-1, 4, 8], "float32", is_data=True),
             "dout": Var("dout", [-1, 4, 6], "float32", is_data=True),
             "x2": Var("x2", [-1, -1], "float32"),
             "d2": Var("d2", [-1, 6], "float32"),
             "dy": Var("dy", [8, 6], "float32")}
    ops = [Op(0, "reshape2", {"X": ["x"]}, {"Out": ["x2"]}, {"shape": target}),
           Op(1, "reshape2", {"X": ["dout"]}, {"Out": ["d2"]}, {"shape": [-1, 6]}),
           Op(2, "matmul_v2", {"X": ["x2"], "Y": ["d2"]}, {"Out": ["dy"]},
              {"trans_x": True, "trans_y": False})]
    return ProgramSnapshot(ops, vars_, feeds=["x", "dout"])


def _run(snap, inserted=frozenset({0, 1})):
    return shape_check.check_snapshot(snap, 0, "test", {"x": ("B", None, None),
                                                        "dout": ("B", None, None)},
                                      set(inserted))


def test_correct_fold_passes_for_all_batch_sizes():
    results = _run(_fold_program([-1, 8]))
    assert [r.verdict for r in results] == [Verdict.EQUIVALENT]
    assert "B" in results[0].message


def test_fold_of_the_wrong_dims_is_caught_with_dims():
    # [B, S*H]: same element count as [B*S, H], but not FoldInitDims
    results = _run(_fold_program([0, 32]))
    bad = [r for r in results if r.verdict == Verdict.NOT_EQUIVALENT]
    assert bad, results
    fold = [r for r in bad if r.counterexample.get("rule") == "FoldInitDims"]
    assert fold and fold[0].counterexample["op_index"] == 0
    assert fold[0].counterexample["expected"][1] == 8
    assert "B" in fold[0].counterexample["dims"]


def test_element_count_change_is_caught():
    results = _run(_fold_program([3, 8]))
    assert any("element count" in r.message for r in results
               if r.verdict == Verdict.NOT_EQUIVALENT)


def test_op_without_rule_is_inconclusive_naming_it():
    snap = _fold_program([-1, 8])
    snap.ops.insert(0, Op(0, "mystery_op", {"X": ["x"]}, {"Out": ["y"]}))
    snap = snap.with_ops(snap.ops)
    results = _run(snap, inserted={1, 2})
    assert any(r.verdict == Verdict.INCONCLUSIVE and "mystery_op" in r.message
               for r in results)


def test_real_overlap_rewrite_passes_shape_check():
    case, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    results = shape_check.run(context(case, before, after, 0))
    assert [r.verdict for r in results] == [Verdict.EQUIVALENT]


def test_real_pass_on_dynamic_batch_predicted_with_dims():
    import passes

    case, before, _, run = snapshots("overlap", "col_3d_dynamic_batch", 0)
    assert run.error  # 3.3.1 raises inside the pass
    pred = passes.get("overlap").predict(case, 0, before)
    bad = [r for r in pred if r.verdict == Verdict.NOT_EQUIVALENT]
    assert bad
    cex = bad[0].counterexample
    assert cex["op_type"] == "reshape2" and "B" in cex["dims"]
    assert "-4" in bad[0].message


def test_real_pass_on_2d_input_predicted():
    import passes

    case, before, _, run = snapshots("overlap", "col_2d", 0)
    assert run.error
    pred = passes.get("overlap").predict(case, 0, before)
    rules = {r.counterexample.get("rule") for r in pred if r.counterexample}
    assert "FoldInitDims" in rules
    assert any("element count" in (r.counterexample.get("rule") or "") for r in pred
               if r.counterexample)


def test_prediction_is_clean_where_the_pass_works():
    import passes

    case, before, _, _ = snapshots("overlap", "col_3d_static", 0)
    pred = passes.get("overlap").predict(case, 0, before)
    assert pred and all(r.verdict == Verdict.EQUIVALENT for r in pred)


def test_pir_scale_keeps_its_input_shape_and_a_wrong_declared_shape_is_caught():
    """pd_op.scale's row, on a program Paddle itself built (its own shape
    inference declared the result), then with the result's declared shape
    broken."""
    import paddle

    from verify.ir.pir_snapshot import from_pir_programs

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2, 3, 4], "float32")
            paddle._C_ops.scale(x, 0.5, 0.25, True)
        snap = from_pir_programs(main, startup)
    scale = next(o for o in snap.ops if o.type == "pd_op.scale")
    assert snap.var(scale.outputs["out"][0]).shape == [2, 3, 4]
    every = set(range(len(snap.ops)))
    ok = shape_check.check_snapshot(snap, 0, "test", {}, every)
    assert all(r.verdict == Verdict.EQUIVALENT for r in ok), [r.message for r in ok]
    snap.vars[scale.outputs["out"][0]] = Var(scale.outputs["out"][0], [2, 4, 3], "float32")
    bad = shape_check.check_snapshot(snap, 0, "test", {}, every)
    assert any(r.verdict != Verdict.EQUIVALENT for r in bad)


def _stale_scale(declared_out, declared_z=(2, 3)):
    """x[2,3] -> scale -> y -> scale -> z, with y's and z's declared shapes given."""
    vars_ = {"x": Var("x", [2, 3], "float32", is_data=True),
             "y": Var("y", list(declared_out), "float32"),
             "z": Var("z", list(declared_z), "float32")}
    ops = [Op(0, "pd_op.scale", {"x": ["x"]}, {"out": ["y"]}, {"scale": 2.0, "bias": 0.0}),
           Op(1, "pd_op.scale", {"x": ["y"]}, {"out": ["z"]}, {"scale": 1.0, "bias": 0.0})]
    return ProgramSnapshot(ops, vars_, feeds=["x"], meta={"ir": "pir"})


def test_a_finding_the_original_already_has_is_inherited_not_the_passs():
    """A stale declared shape in the program the pass was given, kept by the
    pass: reported, advisory, marked inherited (the pass did not make it);
    the same stale shape made by the pass (absent before) decides."""
    from verify.checks import CheckContext

    def run(before, after):
        ctx = CheckContext(pass_name="p", case_name="c", rank=0, before=before, after=after,
                           symbols={})
        return [c for c in shape_check.run(ctx) if c.verdict in (Verdict.NOT_EQUIVALENT,
                                                                  Verdict.CONTRACT_BROKEN)]

    kept = run(_stale_scale([3, 2]), _stale_scale([3, 2]))
    assert kept and all(c.advisory and c.details["inherited"] for c in kept), \
        [c.message for c in kept]
    assert "inherited" in kept[0].message and kept[0].verdict == Verdict.CONTRACT_BROKEN
    made = run(_stale_scale([2, 3]), _stale_scale([3, 2]))
    assert made and not any(c.advisory for c in made), [c.message for c in made]
    # another stale shape beside an inherited one is the pass's
    both = run(_stale_scale([3, 2]), _stale_scale([3, 2], declared_z=(6,)))
    assert {c.advisory for c in both} == {True, False}, [c.message for c in both]
