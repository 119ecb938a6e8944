"""The value proof on real pass applications: PROVED where the rewrite is
faithful, REFUTED with a confirmed counterexample where it is not; each
refutation beside its equivalent twin (the same case, the real pass)."""
from __future__ import annotations

import copy
import os
from fractions import Fraction

import pytest

from verify.ir import legacy_ir  # noqa: F401

import cases  # noqa: E402
import passes  # noqa: E402
from verify.ir.pass_files import load_pass_file  # noqa: E402
from verify.ir.snapshot import Op, Var, from_programs  # noqa: E402
from verify.value.proof import prove_application  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402
from verify.engine.isolation import run_pass  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(pass_name, case_name, mutant_file=None):
    """(case, befores, afters, watched, feed_key) for every rank."""
    case = cases.all_cases()[case_name]
    loaded = load_pass_file(os.path.join(ROOT, "tests", "mutants", mutant_file)) \
        if mutant_file else None
    try:
        befores, afters, watched, per_tp = {}, {}, {}, set()
        for r in case.ranks:
            run = run_pass(passes.get(pass_name), case, r)
            assert run.error is None, run.error
            befores[r] = from_programs(run.original.main, run.original.startup)
            afters[r] = from_programs(run.rewritten.main, run.rewritten.startup)
            befores[r].feeds = afters[r].feeds = sorted(f.name for f in run.original.feeds)
            watched[r] = list(run.original.fetches) + [run.original.loss]
            per_tp |= {f.name for f in run.original.feeds if getattr(f, "per_tp_rank", False)}
    finally:
        if loaded is not None:
            loaded.restore()

    def feed_key(rank, name):  # as the numeric runs choose inputs
        return f"dp{case.dp_index(rank)}" + (f"tp{case.tp_index(rank)}" if name in per_tp else "")
    return case, befores, afters, watched, feed_key


def prove(case, befores, afters, watched, feed_key):
    return prove_application(f"test on {case.name}", case.ranks, case.rings, befores, afters,
                             watched, feed_key=feed_key)


def verdicts(results):
    return {r.rank: r.verdict for r in results}


def assert_proved(results):
    assert all(r.verdict == Verdict.EQUIVALENT for r in results), \
        [r.message for r in results if r.verdict != Verdict.EQUIVALENT]
    for r in results:
        assert "ignores rounding" in r.message
        assert r.details["proved"] and not r.details["refuted"]


def assert_refuted(results, rank=None, var=None):
    bad = [r for r in results if r.verdict == Verdict.NOT_EQUIVALENT]
    assert bad, [r.message for r in results]
    if rank is not None:
        assert rank in [r.rank for r in bad]
        bad = [r for r in bad if r.rank == rank]
    cex = bad[0].counterexample
    assert cex["rank"] == bad[0].rank
    if var is not None:
        assert var in bad[0].details["refuted"], bad[0].details["refuted"]
    if "original_value" in cex:  # confirmed exactly: two different rationals
        assert Fraction(cex["original_value"]) != Fraction(cex["rewritten_value"])
        assert cex["inputs"] and cex["first_differing_subterm"]
    return bad[0]


PROVED = [
    ("overlap", "col_3d_static"), ("overlap", "col_3d_inplace"),
    ("overlap", "col_cast_window"), ("overlap", "col_two_layers"),
    ("overlap", "col_3d_static_tp4"), ("overlap", "stack_2_layers"),
    ("overlap", "stack_1_layer_tp4"),
    ("promotion", "row_mp_o0_sgd_tp2"), ("promotion", "row_mp_o0_adamw_tp2"),
    ("promotion", "row_mp_o1_sgd_tp2"), ("promotion", "row_mp_o2_adamw_tp2"),
    ("promotion", "row_mp_o0_sgd_tp4"), ("promotion", "row_dp_mp_o0_sgd"),
    ("promotion", "row_dp_mp_o1_adamw"), ("promotion", "row_dp_mp_o2_adamw"),
    ("promotion", "stack_2_layers"), ("promotion", "engine_mlp_tp2_adamw"),
]


@pytest.mark.parametrize("pass_name,case_name", PROVED)
def test_faithful_rewrites_are_proved_on_every_rank(pass_name, case_name):
    assert_proved(prove(*build(pass_name, case_name)))


def test_overlap_with_trans_y_is_proved_on_a_snapshot_edit():
    """col_trans_y is left alone by the pass; the split with trans_y is
    checked by swapping in its by-hand rewrite: dX = dO @ Y (trans_y)."""
    case, b, a, w, fk = build("overlap", "col_trans_y")
    assert_proved(prove(case, b, a, w, fk))  # the untouched program, a twin
    for r in case.ranks:
        ops = a[r].ops
        i = next(j for j, o in enumerate(ops) if o.type == "matmul_v2_grad")
        g = ops[i]
        assert g.attrs.get("trans_y")
        dx = Op(0, "matmul_v2", {"X": g.inputs["Out@GRAD"], "Y": g.inputs["Y"]},
                {"Out": g.outputs["X@GRAD"]}, {"trans_x": False, "trans_y": False})
        dy = copy.deepcopy(g)  # the grad op keeps only its dY output
        dy.outputs = {"X@GRAD": [], "Y@GRAD": g.outputs["Y@GRAD"]}
        ok = a[r].with_ops(ops[:i] + [dx, dy] + ops[i + 1:])
        bad_dx = Op(0, "matmul_v2", dx.inputs, dx.outputs, {"trans_x": False, "trans_y": True})
        a[r] = ok
        a[("bad", r)] = ok.with_ops(ops[:i] + [bad_dx, dy] + ops[i + 1:])
    assert_proved(prove(case, b, {r: a[r] for r in case.ranks}, w, fk))
    # the dY matmul with X and dOut swapped (the fold bug class): refuted
    assert_refuted(prove(case, b, {r: a[("bad", r)] for r in case.ranks}, w, fk))


def test_bias_on_every_rank_is_refuted():
    assert_proved(prove(*build("promotion", "row_mp_o0_sgd_tp2")))
    res = prove(*build("promotion", "row_mp_o0_sgd_tp2", "promotion_bias_every_rank.py"))
    bad = assert_refuted(res)
    assert bad.counterexample["first_differing_subterm"]


def test_bias_removed_everywhere_is_refuted():
    res = prove(*build("promotion", "row_mp_o0_sgd_tp2", "promotion_bias_removed_everywhere.py"))
    assert_refuted(res, rank=0)


def test_dp_broadcast_deleted_is_refuted():
    assert_proved(prove(*build("promotion", "row_dp_mp_o0_sgd")))
    res = prove(*build("promotion", "row_dp_mp_o0_sgd", "promotion_dp_broadcast_deleted.py"))
    assert_refuted(res, rank=2, var="linear_0.b_0")


def test_window_reading_reduced_dx_is_refuted():
    assert_proved(prove(*build("overlap", "col_3d_inplace")))
    res = prove(*build("overlap", "col_window_reads_xgrad"))
    bad = assert_refuted(res)
    assert "original_value" in bad.counterexample


def _edit_first_rank_transpose(after):
    """Rank 0's matmul output, first two axes swapped before the promoted
    bias add (shape preserving: B == S in the case)."""
    ops = list(after.ops)
    i = next(j for j, o in enumerate(ops) if o.type == "elementwise_add"
             and any("b_0" in n for n in o.inputs["Y"]))
    add = ops[i]
    x = add.inputs["X"][0]
    shape = after.vars[x].shape
    assert shape[0] == shape[1]
    vars_ = dict(after.vars)
    vars_[x + ".swapped"] = Var(x + ".swapped", list(shape), after.vars[x].dtype)
    tr = Op(0, "transpose2", {"X": [x]}, {"Out": [x + ".swapped"], "XShape": []},
            {"axis": [1, 0, 2]})
    new_add = copy.deepcopy(add)
    new_add.inputs["X"] = [x + ".swapped"]
    out = after.with_ops(ops[:i] + [tr, new_add] + ops[i + 1:])
    out.vars = vars_
    return out


def test_first_rank_transposed_matmul_output_is_refuted():
    case, b, a, w, fk = build("promotion", "row_mp_o0_sgd_tp2")
    assert_proved(prove(case, b, a, w, fk))
    a[0] = _edit_first_rank_transpose(a[0])
    assert_refuted(prove(case, b, a, w, fk), rank=0)


def _set_collective(afters, attr, value):
    for r, s in afters.items():
        ops = []
        for o in s.ops:
            o = copy.deepcopy(o)
            if o.type == "all_reduce" and o.attrs.get("ring_id") == 0:
                o.attrs[attr] = value
            ops.append(o)
        afters[r] = s.with_ops(ops)


def test_allreduce_max_is_refuted():
    case, b, a, w, fk = build("promotion", "row_mp_o0_sgd_tp2")
    _set_collective(a, "reduce_type", 0)  # SUM, unchanged: twin
    assert_proved(prove(case, b, a, w, fk))
    _set_collective(a, "reduce_type", 1)  # MAX
    bad = assert_refuted(prove(case, b, a, w, fk))
    assert "max" in bad.counterexample.get("kernels", [])


def test_allreduce_on_the_wrong_ring_is_refuted():
    case, b, a, w, fk = build("promotion", "row_dp_mp_o0_sgd")
    assert_proved(prove(case, b, a, w, fk))
    # the TP all_reduce of every rank moved to the DP rings (12: [0, 2], 13: [1, 3])
    for r, s in a.items():
        ops = []
        for o in s.ops:
            o = copy.deepcopy(o)
            if o.type == "all_reduce" and o.attrs.get("ring_id") == 0:
                o.attrs["ring_id"] = 12 if r in (0, 2) else 13
            ops.append(o)
        a[r] = s.with_ops(ops)
    assert_refuted(prove(case, b, a, w, fk))


def test_sequence_parallel_o1_finding_is_refuted_on_rank_0():
    assert_proved(prove(*build("promotion", "row_mp_o1_sgd_tp2")))
    res = prove(*build("promotion", "row_mp_sp_o1_sgd_tp2"))
    bad = [r for r in res if r.verdict == Verdict.NOT_EQUIVALENT]
    assert [r.rank for r in bad] == [0]
    assert "elementwise_add_grad" in bad[0].message
    assert all(r.verdict != Verdict.EQUIVALENT for r in res)  # rank 1 not passed silently


def test_clip_finding_is_refuted_on_rank_1():
    assert_proved(prove(*build("promotion", "row_mp_o0_adamw_gclip_tp2")))
    res = prove(*build("promotion", "row_mp_o0_sgd_clip_tp2"))
    assert_refuted(res, rank=1, var="linear_0.w_0@GRAD")


def test_op_without_semantics_is_inconclusive():
    case, b, a, w, fk = build("overlap", "col_3d_static")
    for r, s in a.items():
        ops = [copy.deepcopy(o) for o in s.ops]
        ops[1].type = "mystery_op"
        a[r] = s.with_ops(ops)
    res = prove(case, b, a, w, fk)
    assert all(r.verdict == Verdict.INCONCLUSIVE for r in res)
    assert "mystery_op" in res[0].message
