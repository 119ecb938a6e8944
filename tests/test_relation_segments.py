"""The planner relation proved by segments (``verify/value/relation.py``
``_prove_segmented``, cuts and boundaries in ``verify/value/segments.py``):
run where the serial program's inputs are over ``relation_input_elements``
(forced here with ``by_segments=True`` on the small ``planner_tp2`` plan:
three segments, cut after each all-reduce).

* the faithful plan is PROVED on every rank, by segments;
* a program edited in a middle segment (a wrong all-reduce, a dropped one,
  a wrong op) is not proved by segments, while the whole proof (beside it)
  REFUTES it: the edit is real;
* a boundary mis-stated (a rank's record naming the wrong serial value or a
  wrong placement for a value live across a cut) yields no proof;
* ranks whose programs differ in op types are not cut: INCONCLUSIVE;
* recompute: the backward's clones read values generalized at the forward's
  cuts; each stated clone is compared with its serial value computed again
  from them: a plain block then a recomputed one (an example planned here)
  and the zoo's LLaMA DP2 x TP2 recomputed are PROVED; a backward reading
  the recomputed pre-activation, or a clone reading another generalized
  value, is not.
"""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest


@pytest.fixture(scope="module")
def plan():
    import cases
    from passes.planner import _relation_snapshots, planner_dir

    case = cases.all_cases()["planner_tp2"]
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    serial, snaps = _relation_snapshots(folder, case.ranks, case.ranks[0])
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    return case.ranks, serial, snaps, records, rings


def _prove(plan, snaps=None, final_ops=None, whole=False):
    from verify.value.relation import prove_relation

    ranks, serial, snaps0, records, rings = plan
    r0 = ranks[0]
    return prove_relation("planner on planner_tp2", serial, snaps or snaps0,
                          records[r0]["serial_relation"],
                          {r: records[r]["relation"] for r in ranks},
                          final_ops or {r: records[r]["final_ops"] for r in ranks}, rings,
                          max_inputs=10**9, by_segments=not whole)


def _edited(plan, edit, ranks=None):
    """Every rank's (or ``ranks``') program with ``edit(op) -> op`` applied."""
    all_ranks, _, snaps, _, _ = plan
    out = {}
    for r in all_ranks:
        s = snaps[r]
        ops = [edit(op) if ranks is None or r in ranks else op for op in s.ops]
        out[r] = dataclasses.replace(s, ops=ops)
    return out


def _all_reduces(plan):
    _, _, snaps, _, _ = plan
    return [op.idx for op in snaps[min(snaps)].ops if op.type == "pd_op.all_reduce"]


def test_the_faithful_plan_is_proved_by_segments(plan):
    out = _prove(plan)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * 2, [c.message for c in out]
    assert all(c.details["segments"] == 3 and c.details["boundary_values"] > 0 for c in out)
    assert "by 3 segments" in out[0].message
    assert "loss" in out[0].details["proved"]


def _max_reduce(idx):
    def edit(op):
        if op.idx == idx:
            return dataclasses.replace(op, attrs={**op.attrs, "reduce_type": 1})
        return op
    return edit


def _dropped(idx):
    """The all-reduce at ``idx`` dropped: every later op reads its operand
    (the partial piece) for its result (the op stays, unread: the op types,
    and so the records, still follow the program)."""
    state = {}

    def edit(op):
        if op.idx == idx:
            state["map"] = {op.outputs["out"][0]: op.inputs["x"][0]}
            return op
        if op.idx > idx and state.get("map"):
            m = state["map"]
            return dataclasses.replace(op, inputs={k: [m.get(v, v) for v in vs]
                                                   for k, vs in op.inputs.items()})
        return op
    return edit


def _swapped_subtract(op):
    if op.type == "pd_op.subtract":
        return dataclasses.replace(op, inputs={"x": op.inputs["y"], "y": op.inputs["x"]})
    return op


@pytest.mark.parametrize("what", ["max all-reduce", "dropped all-reduce", "wrong op"])
def test_an_edit_in_a_middle_segment_is_not_proved(plan, what):
    second = _all_reduces(plan)[1]  # the op ending segment 2 of 3
    edit = {"max all-reduce": _max_reduce(second), "dropped all-reduce": _dropped(second),
            "wrong op": _swapped_subtract}[what]
    snaps = _edited(plan, edit)
    whole = _prove(plan, snaps, whole=True)  # the edit is a real difference
    assert any(c.verdict.value == "NOT_EQUIVALENT" for c in whole), [c.message for c in whole]
    out = _prove(plan, snaps)
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message and c.details.get("not_proved")
               for c in out)  # cut, run, and a value or boundary not related
    assert all(c.counterexample is None for c in out)  # no refutation under the abstraction


def test_a_wrong_piece_on_one_rank_in_a_middle_segment_is_not_proved(plan):
    second = _all_reduces(plan)[1]
    snaps = _edited(plan, _max_reduce(second), ranks=[1])
    out = _prove(plan, snaps)
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]


def _restated(plan, how):
    """Every rank's final_ops with the first all-reduce's result (live
    across the first cut) restated by ``how(record)``."""
    ranks, _, _, records, _ = plan
    first = _all_reduces(plan)[0]
    out = {}
    for r in ranks:
        recs = copy.deepcopy(records[r]["final_ops"])
        how(recs[first], recs)
        out[r] = recs
    return out


def _other_serial(rec, recs):
    # the layer norm's output: the same shape, defined before the cut (so the
    # statement is used: the serial value is replaced there), another value
    norm = next(x for x in recs if x["type"] == "pd_op.layer_norm")
    rec["serial"] = [norm["serial"][0]]


def _sharded(rec, recs):
    rec["placements"] = [dict(rec["placements"][0], dims_mapping=[0] + [-1] * (
        len(rec["placements"][0]["dims_mapping"]) - 1))]


@pytest.mark.parametrize("how", [_other_serial, _sharded])
def test_a_boundary_misstated_yields_no_proof(plan, how):
    out = _prove(plan, final_ops=_restated(plan, how))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all(c.details.get("not_proved") for c in out)


def test_ranks_with_other_op_sequences_are_not_cut(plan):
    first = _all_reduces(plan)[0]
    snaps = _edited(plan, lambda op: dataclasses.replace(op, type="pd_op.assign", attrs={})
                    if op.idx == first else op, ranks=[1])
    out = _prove(plan, snaps)
    assert [c.verdict.value for c in out] == ["INCONCLUSIVE"] * 2
    assert "different op sequences" in out[0].message


# -- the real model: LLaMA (1 decoder layer, TP2), cached plan -----------------------
from cases import zoo  # noqa: E402


_ZOO = {"all": False}


@pytest.fixture(scope="module", autouse=True)
def _zoo_option(request):
    """``--zoo all`` plans every zoo model; the default only those the tests plan."""
    _ZOO["all"] = request.config.getoption("verify_zoo", default="sample") == "all"


def _zoo_plan(name):
    if zoo.UNAVAILABLE:
        pytest.skip(f"zoo: {zoo.UNAVAILABLE}")
    from passes.planner import _relation_snapshots

    case = next(c for c in zoo.DECLARED if c.name == name)
    if not _ZOO["all"] and zoo.left_to_the_benchmark(case):  # a cold plan: minutes
        pytest.skip(zoo.left_to_the_benchmark(case))
    folder = zoo.planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    serial, snaps = _relation_snapshots(folder, case.ranks, case.ranks[0])
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    return case.ranks, serial, snaps, records, rings


@pytest.fixture(scope="module")
def llama():
    return _zoo_plan("zoo_llama_tp2")


def test_llama_is_proved_by_segments_and_a_dropped_mlp_all_reduce_is_not(llama):
    """The default path (inputs over relation_input_elements): PROVED by
    segments; the MLP's row-parallel all-reduce (the second of the forward,
    a middle segment) made an identity on every rank: not proved."""
    from verify.value.relation import input_elements, input_limit

    ranks, _, snaps, records, _ = llama
    assert input_elements(records[ranks[0]]["serial_relation"]) > input_limit()
    out = _prove(llama)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * 2, [c.message for c in out]
    assert out[0].details["segments"] > 3
    second = _all_reduces(llama)[1]
    out = _prove(llama, _edited(llama, _dropped(second)))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message for c in out)  # cut and run


def test_llama_dp2_tp2_is_proved_by_segments_and_a_max_loss_all_reduce_is_not():
    """DP2 x TP2: each data-parallel rank computes the cross entropy of its
    half of the batch (proved because the cross entropy is row by row:
    ``semantics.uf_rows``; an opaque kernel of the whole tensor left the
    loss's cut unproved), then all-reduces the loss's sums over dp.  That
    all-reduce (the first on a scalar) made a MAX on every rank: not proved."""
    plan = _zoo_plan("zoo_llama_dp2_tp2")
    ranks, _, snaps, records, _ = plan
    out = _prove(plan)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * len(ranks), \
        [c.message for c in out]
    assert out[0].details["segments"] > 3
    fops = records[ranks[0]]["final_ops"]
    scalar = next(i for i in _all_reduces(plan)
                  if (fops[i].get("placements") or [{}])[0].get("dims_mapping") == [])
    out = _prove(plan, _edited(plan, _max_reduce(scalar)))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message for c in out)  # cut and run


def _swapped_combine(idx):
    def edit(op):
        if op.idx == idx:
            return dataclasses.replace(op, inputs={"operands": op.inputs["operands"][::-1]})
        return op
    return edit


def test_llama_tp2_sp_is_proved_by_segments_and_a_swapped_combine_is_not():
    """TP2 with sequence parallelism: pieces cut at a reduce-scatter's or
    all-gather's end meet ``builtin.combine`` (the rotary's concat of halves)
    as fresh symbols whose dims differ from the serial value's only in size-1
    bookkeeping (``semantics._same_layout``): PROVED.  The first combine of
    two different values after the first cut with its operands swapped on
    every rank (the rotary's halves in the wrong order): not proved."""
    plan = _zoo_plan("zoo_llama_tp2_sp")
    ranks, _, snaps, _, _ = plan
    out = _prove(plan)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * len(ranks), \
        [c.message for c in out]
    first_cut = out[0].details["cuts"][0][0]
    ops = snaps[ranks[0]].ops
    idx = next(op.idx for op in ops if op.type == "builtin.combine" and op.idx > first_cut
               and len(set(op.inputs["operands"])) == 2)
    out = _prove(plan, _edited(plan, _swapped_combine(idx)))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message for c in out)  # cut and run


@pytest.mark.parametrize("name", ["zoo_phi3_tp2", "zoo_gemma3_tp2"])
def test_empty_pieces_are_proved_by_segments_and_a_max_all_reduce_is_not(name):
    """Phi-3's partial rotary slices a pass-through of no lanes and concats
    it; Gemma 3 concats an empty prefix and slices from -4095: both run
    (``tests/test_empty_pieces.py``) and the plans are PROVED by segments;
    the second all-reduce (a middle segment) made a MAX on every rank: not
    proved."""
    plan = _zoo_plan(name)
    ranks = plan[0]
    out = _prove(plan)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * len(ranks), \
        [c.message for c in out]
    out = _prove(plan, _edited(plan, _max_reduce(_all_reduces(plan)[1])))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message for c in out)  # cut and run


def test_a_value_stated_again_at_a_later_cut_is_proved_and_a_max_all_reduce_is_not():
    """Phi-3 DP2 x TP2: a serial value generalized at one cut is stated
    again by a later one (computed again on the ranks); its obligation is
    against its term before the first cut, and its piece becomes a slice of
    the same fresh tensor (``relation._prove_segmented``): PROVED; the
    second all-reduce made a MAX on every rank: not proved."""
    plan = _zoo_plan("zoo_phi3_dp2_tp2")
    ranks = plan[0]
    out = _prove(plan)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * len(ranks), \
        [c.message for c in out]
    out = _prove(plan, _edited(plan, _max_reduce(_all_reduces(plan)[1])))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message for c in out)


# -- recompute: the backward's clones read values generalized at earlier cuts ---------
@pytest.fixture(scope="module")
def recompute_second():
    """``examples/planner_tp2_recompute_second.py``: a plain TP block, then the
    recomputed one (not a built-in case: planned here, cached, ~15 s cold)."""
    from cases.planner_models import RECOMPUTE, _RECOMPUTE, _case
    from passes.planner import _relation_snapshots, planner_dir

    case = _case("planner_tp2_recompute_second", "a plain block, then a recomputed one",
                 "planner_tp2_recompute_second.py", [0, 1], _RECOMPUTE,
                 uses=["planner_tp2_recompute.py"], strategy_passes={RECOMPUTE: _RECOMPUTE})
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    serial, snaps = _relation_snapshots(folder, case.ranks, case.ranks[0])
    rings = {int(k): v for k, v in json.loads((folder / "plan.json").read_text())
             .get("rings", {}).items()}
    return case.ranks, serial, snaps, records, rings


def _clone(plan, types):
    """The first op of the recompute stage's clones whose type is in ``types``."""
    ranks, _, snaps, records, _ = plan
    fops = records[ranks[0]]["final_ops"]
    return next(op for op in snaps[ranks[0]].ops
                if fops[op.idx].get("origin") == "recompute" and op.type in types)


def _reads_instead(after, old, new):
    """Every op past ``after`` reads ``new`` where it read ``old`` (the op types,
    and so the records, still follow the program)."""
    def edit(op):
        if op.idx > after and any(old in vs for vs in op.inputs.values()):
            return dataclasses.replace(op, inputs={k: [new if v == old else v for v in vs]
                                                   for k, vs in op.inputs.items()})
        return op
    return edit


def _pre_activation(plan, types):
    """As the mutant ``recompute_reads_pre_activation`` (tests/planner_mutant_edits.py):
    the backward reads the recomputed activation's input where it read its output."""
    act = _clone(plan, types)
    return _reads_instead(act.idx, act.outputs["out"][0], act.inputs["x"][0])


def _other_generalized_input(plan):
    """The clone of the recomputed block's first op (its layer norm) reads the
    value before the bias add that made its input: a value generalized at a cut
    too, but not the one the serial op reads."""
    ranks, _, snaps, _, _ = plan
    norm = _clone(plan, ("pd_op.layer_norm",))
    ops = snaps[ranks[0]].ops
    made = next(op for op in ops if op.outputs.get("out") == norm.inputs["x"])
    wrong = made.inputs["x"][0]

    def edit(op):
        if op.idx == norm.idx:
            return dataclasses.replace(op, inputs={**op.inputs, "x": [wrong]})
        return op
    return edit


def test_recomputed_clones_reading_generalized_values_are_proved_by_segments(
        recompute_second):
    """The recomputed block reads the first block's output, live across the
    first block's all-reduce (a fresh tensor past that cut): its clones in the
    backward compute their values from it, so each stated clone is compared
    with its serial value computed again from what the cuts generalized
    (``relation._serial_again``), not with the term of the serial forward's
    first run: PROVED by segments, as the whole proof proves it."""
    whole = _prove(recompute_second, whole=True)
    assert [c.verdict.value for c in whole] == ["EQUIVALENT"] * 2, [c.message for c in whole]
    out = _prove(recompute_second)
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * 2, [c.message for c in out]
    assert all(c.details["segments"] > 3 for c in out)
    norm = _clone(recompute_second, ("pd_op.layer_norm",))
    stated = [lb for lb in out[0].details["proved"] if lb.startswith("cut at op")
              and lb.split(": ")[1].split(" ")[0] in norm.outputs["mean"] + norm.outputs["variance"]]
    assert stated  # the clone's statistics, live across a later cut, proved


@pytest.mark.parametrize("how", ["pre-activation", "other generalized input"])
def test_a_recompute_reading_a_wrong_value_is_not_proved_by_segments(recompute_second, how):
    """The backward reads the recomputed pre-activation for the relu's output
    (the mutant's edit), or the layer norm's clone reads another generalized
    value than its serial op's: the whole proof REFUTES (the edit is real);
    by segments: not proved, every rank."""
    edit = (_pre_activation(recompute_second, ("pd_op.relu",)) if how == "pre-activation"
            else _other_generalized_input(recompute_second))
    snaps = _edited(recompute_second, edit)
    whole = _prove(recompute_second, snaps, whole=True)
    assert any(c.verdict.value == "NOT_EQUIVALENT" for c in whole), [c.message for c in whole]
    out = _prove(recompute_second, snaps)
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message and c.counterexample is None for c in out)


def test_llama_dp2_tp2_recompute_is_proved_by_segments_and_a_pre_activation_read_is_not():
    """The zoo's LLaMA at DP2 x TP2 with its decoder layer recomputed (a
    TEST_PLANNED model): the clones read the embedding's pieces and the
    rotary's cos/sin, generalized at the forward's cuts: PROVED by segments
    on the default path (inputs over relation_input_elements).  The MLP's
    silu clone's readers made to read its input: not proved."""
    from verify.value.relation import input_elements, input_limit, prove_relation

    plan = _zoo_plan(zoo.TEST_RECOMPUTE)
    ranks, serial, snaps, records, rings = plan
    assert input_elements(records[ranks[0]]["serial_relation"]) > input_limit()
    out = prove_relation("planner on llama recompute", serial, snaps,
                         records[ranks[0]]["serial_relation"],
                         {r: records[r]["relation"] for r in ranks},
                         {r: records[r]["final_ops"] for r in ranks}, rings)  # the default path
    assert [c.verdict.value for c in out] == ["EQUIVALENT"] * len(ranks), \
        [c.message for c in out]
    assert out[0].details["segments"] > 3 and "by segments" not in out[0].message.split(":")[0]
    out = _prove(plan, _edited(plan, _pre_activation(plan, ("pd_op.silu",))))
    assert not any(c.verdict.value == "EQUIVALENT" for c in out), [c.message for c in out]
    assert all("not proved by segments" in c.message for c in out)
