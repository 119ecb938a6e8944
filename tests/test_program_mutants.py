"""Program-level mutants: each must be caught, by the check that can see it.

Two families (``verify.selfcheck.program_mutants``):

* legacy whole-program operators, on a fixed sample (``LEGACY_SAMPLE``);
* in-region operators: well-formed, shape-preserving edits inside the region
  the pass rewrote.  For each, a real application: the mutated program is
  checked to be well formed (every read has a writer in main, startup or
  the feeds; no declared shape or dtype changed), and the application must
  be killed by the check kind named, with a counterexample on the mutated
  rank.  These assert what must hold; none is marked xfail.
"""
import io
import time

import pytest

import cases
import passes
from verify.selfcheck import mutate
from verify.selfcheck import program_mutants as pm
from verify.engine.application import run_application
from verify.ir.snapshot import Op, ProgramSnapshot, Var

from verify.engine.matrix_runner import pick_backend
from verify.engine.isolation import run_pass  # noqa: E402

KILLING = set(mutate.KILLING)

LEGACY_SAMPLE = [
    # the dropped op depends on the program's length: a dataflow or a contract finding
    ("overlap", "col_3d_static", pm.drop_op, ("dataflow", "contract")),
    ("overlap", "col_3d_static", pm.swap_dependent, "dataflow"),
    ("overlap", "col_3d_static", pm.swap_across_collective, "contract"),
    ("overlap", "col_3d_static", pm.rename_input, "numeric"),
    ("overlap", "col_3d_static", pm.reshape_target, "shape"),
    # a ring that does not exist: the backend-validity check sees it before any run
    ("overlap", "col_3d_static", pm.collective_attr, ("numeric", "dataflow")),
    ("overlap", "col_3d_static", pm.delete_startup_init, "dataflow"),
    ("overlap", "col_3d_static", pm.remove_collective, "contract"),
    ("overlap", "col_3d_static", pm.flip_trans, "numeric"),
    ("overlap", "col_cast_window", pm.cast_dtype, "shape"),
    ("promotion", "row_mp_o0_sgd_tp2", pm.duplicate_bias_add, "numeric"),
    ("promotion", "engine_mlp_tp2_sgd", pm.collective_attr, ("numeric", "dataflow")),
]

# (pass, case, rank, operator, kind that must catch it, words of the description)
IN_REGION_SAMPLE = [
    ("promotion", "row_mp_o1_sgd_tp2", 0, pm.swap_axes, "numeric",
     ["op 2", "matmul_v2", "linear_0.tmp_0@promote_0", "axes 0 and 1"]),
    ("overlap", "col_3d_static", 0, pm.swap_axes, "numeric",
     ["op 11", "reshape2", "linear_0.x_id@reshape.out"]),
    ("promotion", "row_mp_o1_sgd_tp2", 1, pm.scale_half, "numeric",
     ["op 3", "all_reduce", "scaled by 0.5"]),
    ("overlap", "col_3d_static", 1, pm.scale_half, "numeric",
     ["op 11", "reshape2", "scaled by 0.5"]),
    ("promotion", "row_mp_o1_sgd_tp2", 0, pm.sign_flip, "numeric",
     ["op 4", "elementwise_add", "linear_0.tmp_2@promote_0", "-1.0"]),
    ("overlap", "col_3d_static", 1, pm.sign_flip, "numeric",
     ["op 12", "linear_0.out@GRAD@reshape.out", "-1.0"]),
    ("promotion", "row_mp_o1_sgd_tp2", 0, pm.sibling_operand, "numeric",
     ["op 5", "all_reduce", "reads linear_0.tmp_0@promote_0 instead of "
      "linear_0.tmp_2@promote_0"]),
    ("overlap", "col_3d_static", 1, pm.sibling_operand, "numeric",
     ["op 10", "c_allreduce_sum", "reads linear_0.out@GRAD instead of linear_0.x_id@GRAD"]),
    ("promotion", "row_mp_o1_sgd_tp2", 0, pm.write_past_reader, "numeric",
     ["op 5", "all_reduce", "linear_0.tmp_2@promote_0", "op 6 (cast)"]),
    ("promotion", "row_mp_o0_sgd_tp2", 1, pm.write_past_reader, "numeric",
     ["op 1", "all_reduce", "op 2 (elementwise_sub)"]),
    ("promotion", "row_mp_o1_sgd_tp2", 0, pm.wrong_ring, "numeric",
     ["op 5", "all_reduce", "SUM -> MAX"]),
    ("promotion", "row_dp_mp_o0_sgd", 0, pm.wrong_ring, "numeric",
     ["op 2", "all_reduce", "ring 0 -> 12"]),
]


@pytest.fixture(scope="module")
def numeric():
    return pick_backend("simulated", 3)[1]


_UNMUTATED = {}


def unmutated_is_equivalent(adapter, case, numeric):
    """A kill proves something only where the application without the mutant
    is EQUIVALENT (else the existing finding would 'kill' every mutant)."""
    key = (adapter.name, case.name)
    if key not in _UNMUTATED:
        app = run_application(adapter, case, numeric=numeric)
        _UNMUTATED[key] = (app.verdict.value, [(c.kind, c.name, c.rank, c.message[:160])
                                               for c in app.checks if not c.ok])
    verdict, bad = _UNMUTATED[key]
    assert verdict == "EQUIVALENT", (f"{case.name} is {verdict} without any mutant", bad)


def killing_kinds(app):
    return {c.kind for c in app.checks if c.verdict.value in KILLING}


@pytest.mark.parametrize("short,case_name,operator,kind", LEGACY_SAMPLE,
                         ids=[f"{s[2].__name__}-{s[1]}" for s in LEGACY_SAMPLE])
def test_legacy_mutant_is_caught(short, case_name, operator, kind, numeric):
    case = cases.all_cases()[case_name]
    unmutated_is_equivalent(passes.get(short), case, numeric)
    app = run_application(passes.get(short), case, numeric=numeric,
                          mutator=(case.ranks[0], operator))
    assert app.mutation is not None, "operator found no site"
    assert app.mutation.scope == "legacy"
    assert app.verdict.value in KILLING, app.mutation.description
    kinds = (kind,) if isinstance(kind, str) else kind
    assert set(kinds) & killing_kinds(app), (app.mutation.description, killing_kinds(app))
    cex = next(c.counterexample for c in app.checks
               if c.kind in kinds and c.verdict.value in KILLING and c.counterexample)
    assert cex.get("rank") == case.ranks[0] or "first" in cex, cex


@pytest.mark.parametrize("short,case_name,rank,operator,kind,words", IN_REGION_SAMPLE,
                         ids=[f"{s[3].__name__}-{s[1]}-r{s[2]}" for s in IN_REGION_SAMPLE])
def test_in_region_mutant_is_well_formed_and_caught(short, case_name, rank, operator, kind,
                                                     words, numeric):
    adapter, case = passes.get(short), cases.all_cases()[case_name]
    unmutated_is_equivalent(adapter, case, numeric)
    mutator = pm.prepare(operator, adapter, case, rank)
    assert mutator is not None, f"{operator.__name__} found no site on {case_name} rank {rank}"
    m = mutator.mutation
    assert m.scope == "in_region"
    for w in words:  # the description names op index, type and var
        assert w in m.description, (w, m.description)
    reg = pm.region(mutator.before, mutator.after)
    assert m.site["op_index"] in reg.sites(), "the site is inside the rewritten region"

    app = run_application(adapter, case, numeric=numeric, mutator=(rank, mutator))
    assert app.mutation is not None and app.mutation.description == m.description
    assert mutator.replays and all(mutator.replays), "edit not replayed on every copy"
    # well formed: every read has a writer; no declared shape or dtype changed
    mutated = next(o.after for o in app.outcomes if o.rank == rank)
    assert [o.render() for o in mutated.ops] != [o.render() for o in mutator.after.ops]
    assert pm.well_formedness(mutator.after, mutated) == []
    assert pm.structure_problems(mutated) == pm.structure_problems(mutator.after) == []
    # killed, by the kind that sees values, with the mutated rank in the evidence
    assert app.verdict.value in KILLING, (m.description, [
        (c.kind, c.name, c.rank, c.verdict.value, c.message[:200]) for c in app.checks])
    assert kind in killing_kinds(app), (m.description, killing_kinds(app))
    ranks = {c.counterexample.get("rank") for c in app.checks
             if c.kind == kind and c.verdict.value in KILLING and c.counterexample}
    assert rank in ranks, (rank, ranks)


def test_in_region_operators_need_the_original():
    with pytest.raises(ValueError, match="original snapshot"):
        pm.swap_axes(None, None, ProgramSnapshot([], {}), 0)


@pytest.mark.parametrize("operator", [pm.write_past_reader, pm.wrong_ring],
                         ids=lambda o: o.__name__)
def test_no_site_gives_none(operator):
    # overlap's new ops write fresh vars (nothing to move past a reader
    # without leaving a read unwritten) and col_3d_static has one ring and
    # c_allreduce_sum has no reduce_type
    case = cases.all_cases()["col_3d_static"]
    for rank in case.ranks:
        assert pm.prepare(operator, passes.get("overlap"), case, rank) is None


def test_legacy_operators_are_marked_apart():
    assert {pm.scope_of(o) for o in pm.LEGACY_OPERATORS} == {"legacy"}
    assert {pm.scope_of(o) for o in pm.IN_REGION_OPERATORS} == {"in_region"}
    assert pm.OPERATORS == pm.LEGACY_OPERATORS + pm.IN_REGION_OPERATORS


def test_legacy_drop_op_is_not_well_formed():
    """The well-formedness check itself sees a read left without a writer."""
    adapter, case = passes.get("overlap"), cases.all_cases()["col_3d_static"]
    run = run_pass(adapter, case, 0)
    _, ref = pm.snapshots(run)
    block = run.rewritten.main.global_block()
    i = next(o.idx for o in ref.ops if o.type == "matmul_v2" and o.role == 1)
    block._remove_op(i)
    _, mutated = pm.snapshots(run)
    problems = pm.well_formedness(ref, mutated)
    assert any("linear_0.x_id@GRAD" in p and "nothing wrote" in p for p in problems), problems


# -- site choice on hand-written snapshots (no Paddle) --------------------
def _snap(ops, shapes, feeds=("x",), startup=("w",)):
    ops = [Op(i, t, ins, outs) for i, (t, ins, outs) in enumerate(ops)]
    vars_ = {n: Var(n, s, "float32", is_parameter=n in startup) for n, s in shapes.items()}
    sops = [Op(i, "uniform_random", {}, {"Out": [n]}) for i, n in enumerate(startup)]
    return ProgramSnapshot(ops, vars_, sops, list(feeds))


SHAPES = {"x": [3, 3], "w": [3, 3], "a": [3, 3], "b": [3, 3], "c": [3, 3], "g": [3, 3],
          "gx": [3, 3], "loss": []}
BEFORE = [("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["a"]}),
          ("relu", {"X": ["a"]}, {"Out": ["b"]}),
          ("mean", {"X": ["b"]}, {"Out": ["loss"]}),
          ("elementwise_add_grad", {"Out@GRAD": ["g"], "X": ["b"], "Y": ["b"]},
           {"X@GRAD": ["gx"]})]
AFTER = [("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["a"]}),
         ("assign", {"X": ["a"]}, {"Out": ["c"]}),  # added by "the pass"
         ("relu", {"X": ["c"]}, {"Out": ["b"]}),  # changed (reads c)
         ("mean", {"X": ["b"]}, {"Out": ["loss"]}),
         ("elementwise_add_grad", {"Out@GRAD": ["g"], "X": ["b"], "Y": ["b"]},
          {"X@GRAD": ["gx"]})]


def test_region_is_added_changed_ops_and_neighbours():
    reg = pm.region(_snap(BEFORE, SHAPES), _snap(AFTER, SHAPES))
    assert reg.core == [1, 2]
    assert reg.neighbours == [0, 3, 4]  # a's writer; b's readers (shape-only ones too)


def test_sites_skip_shape_only_reads_and_equal_values():
    after = _snap(AFTER[:2] + [("relu", {"X": ["a"]}, {"Out": ["b"]}), AFTER[4]], SHAPES)
    reg = pm.Region(core=[1], neighbours=[0])
    # c (the assign's output) is read by nothing: no site; a is read by relu
    sites = [(op.idx, n) for op, n, _, _ in pm._tensor_sites(after, reg)]
    assert sites == [(0, "a")]
    # b is read only for its shape by elementwise_add_grad: no site
    assert pm._tensor_sites(after, pm.Region([2], [])) == []
    # c equals a in value (assign): never a sibling of a
    classes = pm._value_classes(after)
    assert classes["c"] == classes["a"] != classes["x"]


def test_mutant_results_classify_kills():
    def r(verdict, scope="in_region", why=""):
        return mutate.MutantResult("program", "p", "c", 0, "op", "d", verdict,
                                   ["numeric/run"] if verdict in KILLING else [], why, scope)

    rs = [r("NOT_EQUIVALENT"), r("CONTRACT_BROKEN"), r("PASS_CRASHED"), r("NOT_APPLIED"),
          r("INCONCLUSIVE"), r("EQUIVALENT"), r("EQUIVALENT", why="changes nothing"),
          r("NOT_EQUIVALENT", scope="legacy")]
    assert [x.killed for x in rs] == [True] * 4 + [False] * 3 + [True]
    assert mutate.in_region_rate(rs) == (4, 6)  # INCONCLUSIVE counts, never as a kill
    assert mutate.kill_rate(rs) == (5, 7)
    table = mutate.kind_table(rs)
    assert "in_region" in table and "legacy" in table and "numeric" in table


def test_mutate_sample_prints_table_and_rates():
    """``python -m verify mutate --sample`` keeps working (a tiny sample)."""
    start = time.perf_counter()
    buf = io.StringIO()
    assert mutate.main(["--sample", "3", "--no-pass-mutants"], out=buf) == 0
    out = buf.getvalue()
    lines = out.strip().splitlines()
    assert lines[-1].startswith("in-region kill rate ")
    assert lines[-2].startswith("kill rate ")
    assert "kills per check kind" in out and "in_region" in out
    assert time.perf_counter() - start < 30


def test_scale_before_adam_is_argued_equivalent_and_avoided():
    """AdamW's update is invariant to a positive scale of its gradient: such
    a site is an equivalent mutant, so scale_half picks another one."""
    adapter, case = passes.get("promotion"), cases.all_cases()["row_mp_o2_adamw_tp4"]
    before, after = pm.snapshots(run_pass(adapter, case, 3))
    grad = next(op for op in after.ops if op.type == "matmul_v2_grad")
    assert "adamw" in pm.scale_invariance(after, grad.outputs["Y@GRAD"][0], grad.idx)
    # the output gradient reaches a compared parameter gradient: not invariant
    assert pm.scale_invariance(after, grad.inputs["Out@GRAD"][0], grad.idx - 1) == ""
    m = pm.prepare(pm.scale_half, adapter, case, 3).mutation
    assert m.site["op_type"] != "matmul_v2_grad" and not m.equivalent_by_argument
