"""Aliasing and regions (issue 34 item 6).

* A PIR in-place op writes the buffer it aliases: ``%d = pd_op.scale_(%c)``
  writes ``%c``, and a later read of ``%c`` reads the write (Paddle's
  executor says so here).  A rewrite that drops the write, or moves the read
  before it, is not proved; a rewrite that computes the same is.
* An op with nested blocks (``pd_op.if``, ``pd_op.while``, a legacy
  ``while`` with its ``sub_block``) carries its blocks' ops in the snapshot:
  a changed branch is a changed program (never "identical by identity"),
  and the value proof refuses it naming the op; an unchanged one is
  identical.
* A legacy in-place op writes the name it reads (``scale`` with Out = X):
  the later read already reads the write.
"""
from __future__ import annotations

import numpy as np

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

from verify.ir.inplace import resolved  # noqa: E402
from verify.ir.pir_snapshot import from_pir_programs, value_names  # noqa: E402
from verify.ir.snapshot import Op, ProgramSnapshot, Var, changed, from_programs  # noqa: E402
from verify.value.proof import prove_application  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402


def _pir(build, edit=None):
    """``(original snapshot, rewritten snapshot, main, fetched value name)``:
    ``build()`` makes the program (returns the fetched Value); the rewritten
    one is a clone named from the original's table, ``edit(clone ops)``
    applied to it."""
    import paddle

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            out = build()
        names = value_names(main)
        clone = main.clone()
        carried = names.carried(main, clone)
        before = from_pir_programs(main, startup, names)
        if edit is not None:
            with paddle.static.program_guard(clone, startup):
                edit(clone.global_block().ops)
        after = from_pir_programs(clone, startup, carried)
        fetched = names.name(out)
    return before, after, main, fetched


def _prove(before, after, fetched):
    (res,) = prove_application("aliasing test", [0], {}, {0: before}, {0: after},
                               {0: [fetched]})
    return res


# -- PIR in-place ------------------------------------------------------------------
def _scale_then_read():
    """c = relu(x); scale_(c, 2) writes c; e = c + x reads the write."""
    import paddle

    x = paddle.static.data("x", [2, 3], "float32")
    c = paddle.nn.functional.relu(x)
    paddle._C_ops.scale_(c, 2.0, 0.0, True)
    return paddle.add(c, x)


def _op(ops, name):
    return next(o for o in ops if o.name() == name)


def _drop_scale(ops):
    """The rewrite loses the in-place write (its result had no reader)."""
    _op(ops, "pd_op.scale_").erase()


def _read_before_write(ops):
    """The rewrite moves the read of c before the write: it reads 1x, not 2x."""
    _op(ops, "pd_op.add").move_before(_op(ops, "pd_op.scale_"))


def _out_of_place(ops):
    """A faithful rewrite: d = scale(c, 2) out of place, the read reads d."""
    import paddle

    scale, add = _op(ops, "pd_op.scale_"), _op(ops, "pd_op.add")
    block = add.get_parent_block()
    n = len(block.ops)
    d = paddle.scale(scale.operand_source(0), 2.0)
    for new in list(block.ops)[n:]:  # the new ops (scale and its constant) go before the read
        new.move_before(add)
    add.operand(0).set_source(d)
    scale.erase()


def test_paddle_reads_the_inplace_write_and_the_snapshot_records_it():
    import paddle

    before, _, main, fetched = _pir(_scale_then_read)
    with paddle.pir_utils.IrGuard():
        exe = paddle.static.Executor(paddle.CPUPlace())
        xv = np.array([[1, -2, 3], [0.5, 0, -1]], "float32")
        out_value = next(o for o in main.global_block().ops if o.name() == "pd_op.add").result(0)
        (got,) = exe.run(main, feed={"x": xv}, fetch_list=[out_value])
    np.testing.assert_allclose(got, 2 * np.maximum(xv, 0) + xv)  # the write, not relu(x)
    scale = before.ops_of_type("pd_op.scale_")[0]
    c, d = scale.inputs["x"][0], scale.outputs["out"][0]
    assert before.meta["inplace"] == {d: c}  # Paddle's op info, not a name rule
    add = before.ops_of_type("pd_op.add")[0]
    assert add.inputs["x"] == [c]  # the literal operand stays
    assert resolved(before).ops_of_type("pd_op.add")[0].inputs["x"] == [d]


def test_a_rewrite_that_drops_the_inplace_write_is_refuted():
    before, after, _, fetched = _pir(_scale_then_read, _drop_scale)
    assert not after.ops_of_type("pd_op.scale_")
    res = _prove(before, after, fetched)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == fetched


def test_a_rewrite_that_reads_before_the_write_is_refuted():
    before, after, _, fetched = _pir(_scale_then_read, _read_before_write)
    # the same ops, only their order differs: literal operands alone hide it
    assert sorted(o.render() for o in before.ops) == sorted(o.render() for o in after.ops)
    res = _prove(before, after, fetched)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["var"] == fetched


def test_twin_an_out_of_place_rewrite_computing_the_write_is_proved():
    before, after, _, fetched = _pir(_scale_then_read, _out_of_place)
    assert not after.ops_of_type("pd_op.scale_") and after.ops_of_type("pd_op.scale")
    res = _prove(before, after, fetched)
    assert res.verdict == Verdict.EQUIVALENT, res.message
    assert fetched in res.details["proved"]


# -- PIR regions -------------------------------------------------------------------
def _with_if():
    """y = if p: cumsum(x) else: x + 1."""
    import paddle

    x = paddle.static.data("x", [4], "float32")
    p = paddle.static.data("p", [1], "bool")
    return paddle.static.nn.cond(p, lambda: paddle.cumsum(x, axis=0), lambda: x + 1)


def _reverse_the_true_branch(ops):
    """The rewrite changes the true branch only: cumsum reversed."""
    if_op = _op(ops, "pd_op.if")
    true_block = list(if_op.blocks())[0]
    _op(true_block.ops, "pd_op.cumsum").set_bool_attr("reverse", True)


def test_a_changed_branch_is_a_changed_program_the_proof_refuses():
    before, after, _, fetched = _pir(_with_if, _reverse_the_true_branch)
    (op,) = after.ops_of_type("pd_op.if")
    assert changed(before, after)  # not "identical by identity"
    true_ops = op.attrs["blocks"][0]["ops"]
    assert [o["attrs"].get("reverse") for o in true_ops if o["type"] == "pd_op.cumsum"] \
        == [True]
    res = _prove(before, after, fetched)
    assert res.verdict == Verdict.INCONCLUSIVE, res.message
    assert f"main op {op.idx} (pd_op.if)" in res.message
    assert res.details["reason"] == "nested regions"


def test_twin_an_unchanged_program_with_if_is_identical():
    before, after, _, fetched = _pir(_with_if)
    assert not changed(before, after)
    res = _prove(before, after, fetched)
    assert res.verdict == Verdict.EQUIVALENT and res.details["by_identity"], res.message
    (op,) = before.ops_of_type("pd_op.if")
    assert [[o["type"] for o in b["ops"]] for b in op.attrs["blocks"]] == \
        [["pd_op.full", "pd_op.cumsum", "cf.yield"],
         ["pd_op.full", "pd_op.scale", "cf.yield"]]


def _with_while():
    """i, y = while i < 3: (i + 1, 2 y) from (0, x)."""
    import paddle

    x = paddle.static.data("x", [4], "float32")
    i = paddle.full([1], 0, "int64")
    n = paddle.full([1], 3, "int64")
    _, y = paddle.static.nn.while_loop(lambda i, y: i < n, lambda i, y: [i + 1, y * 2], [i, x])
    return y


def test_a_changed_loop_body_is_a_changed_program_and_block_arguments_are_named():
    def edit(ops):
        body = list(_op(ops, "pd_op.while").blocks())[0]
        # the body's y * 2 (the last scale; the first is i + 1) changed:
        # bias_after_scale flipped (its bias is 0: the same values, yet a
        # changed body is no "identical" program)
        scales = [o for o in body.ops if o.name() == "pd_op.scale"]
        scales[-1].set_bool_attr("bias_after_scale", False)

    before, after, _, fetched = _pir(_with_while, edit)
    (op,) = before.ops_of_type("pd_op.while")
    (body,) = op.attrs["blocks"]
    assert len(body["args"]) == 2
    reads = {n for o in body["ops"] for names in o["inputs"].values() for n in names}
    assert set(body["args"]) <= reads  # the body reads its arguments by name
    assert not any(n.startswith("<unnamed") for n in reads)
    assert changed(before, after)
    res = _prove(before, after, fetched)
    assert res.verdict == Verdict.INCONCLUSIVE and "(pd_op.while)" in res.message


# -- legacy ------------------------------------------------------------------------
def _legacy_while(scale_in_body):
    paddle = legacy_ir.paddle_module()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 3, "int64")
        _, y = paddle.static.nn.while_loop(lambda i, y: i < n,
                                           lambda i, y: [i + 1, y * scale_in_body], [i, x])
    return main, startup, y.name


def test_legacy_sub_block_ops_are_in_the_snapshot():
    """A legacy ``while``'s body is recorded op by op (before: the BlockDesc's
    address text, and the step-scopes var broke the snapshot)."""
    m2, s2, y = _legacy_while(2.0)
    a, b = from_programs(m2, s2), from_programs(m2.clone(), s2)
    m3, s3, _ = _legacy_while(3.0)
    c = from_programs(m3, s3)
    assert not changed(a, b)  # a clone is identical
    (op,) = a.ops_of_type("while")
    sub = op.attrs["sub_block"]
    assert sub["block"] == 1 and "scale" in [o["type"] for o in sub["ops"]]
    assert changed(a, c)  # another body is another program
    res = prove_application("legacy while", [0], {}, {0: a}, {0: c}, {0: [y]})[0]
    assert res.verdict == Verdict.INCONCLUSIVE and f"main op {op.idx} (while)" in res.message


def _legacy(ops):
    vars_ = {n: Var(n, [3], "float32", is_data=(n == "x")) for n in ("x", "c", "e")}
    return ProgramSnapshot([Op(i, *o) for i, o in enumerate(ops)], vars_, feeds=["x"])


def test_legacy_inplace_write_of_the_read_name_is_already_read():
    """``scale`` with Out = X writes the name later ops read: dropping it is
    refuted, an out-of-place rewrite is proved (no meta needed)."""
    relu = ("relu", {"X": ["x"]}, {"Out": ["c"]}, {})
    scale = ("scale", {"X": ["c"]}, {"Out": ["c"]}, {"scale": 2.0, "bias": 0.0,
                                                   "bias_after_scale": True})
    add = ("elementwise_add", {"X": ["c"], "Y": ["x"]}, {"Out": ["e"]}, {"axis": -1})
    before = _legacy([relu, scale, add])
    assert resolved(before) is before
    dropped = _legacy([relu, add])
    res = prove_application("legacy", [0], {}, {0: before}, {0: dropped}, {0: ["e"]})[0]
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    out_of_place = _legacy([relu, ("scale", {"X": ["c"]}, {"Out": ["d"]}, scale[3]),
                            ("elementwise_add", {"X": ["d"], "Y": ["x"]}, {"Out": ["e"]},
                             {"axis": -1})])
    out_of_place.vars["d"] = Var("d", [3], "float32")
    res = prove_application("legacy", [0], {}, {0: before}, {0: out_of_place},
                            {0: ["e"]})[0]
    assert res.verdict == Verdict.EQUIVALENT, res.message


def test_nested_value_names_travel_with_an_exported_program():
    """The isolation workers' transport (export/import) keeps the names of the
    values inside the branches: an imported program with ``if`` is the one
    exported, not a changed one."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, import_programs

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            _with_if()
        names = value_names(main)
        before = from_pir_programs(main, startup, names)
        main2, startup2, names2 = import_programs(export_programs(main, startup, names))
        after = from_pir_programs(main2, startup2, names2)
    assert not changed(before, after), [o.render() for o in after.ops]


def test_a_value_only_a_branch_reads_is_a_read_def_use_sees():
    """The branches read c = relu(x) from outside: the if op reads it (slot
    ``region@reads``), so a rewrite that deletes relu is caught by
    def-before-use naming the if op; the original has no such read."""
    import paddle

    from verify.checks import CheckContext
    from verify.checks.def_use import run as def_use

    def build():
        x = paddle.static.data("x", [4], "float32")
        p = paddle.static.data("p", [1], "bool")
        c = paddle.nn.functional.relu(x)
        return paddle.static.nn.cond(p, lambda: c * 2, lambda: c + 1)

    before, _, _, _ = _pir(build)
    (relu,) = before.ops_of_type("pd_op.relu")
    (if_op,) = before.ops_of_type("pd_op.if")
    c = relu.outputs["out"][0]
    assert if_op.inputs["region@reads"] == [c]
    after = before.with_ops([o for o in before.ops if o is not relu])

    def check(snap):
        return def_use(CheckContext("t", "t", 0, before, snap))

    (bad,) = check(after)
    assert bad.verdict == Verdict.NOT_EQUIVALENT, bad.message
    assert bad.counterexample["op_type"] == "pd_op.if" and bad.counterexample["var"] == c
    (ok,) = check(before)
    assert ok.verdict == Verdict.EQUIVALENT, ok.message
