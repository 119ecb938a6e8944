"""Contracts state values, not op spellings: each is fed, on the real pass's
rewritten program, a value-identical variant (independent ops reordered, a
scale by exactly 1.0) that must hold, and a value-changing one (a reduce to
the wrong rank, a norm piece counted twice, a scale by 2) that must be
caught, with the rank, op and var.  The variants are written from each
contract's statement (passes/*.py docstrings), not from a known bug."""
from __future__ import annotations

import copy
import json
import os

import pytest

from verify.ir import legacy_ir  # noqa: F401  (before paddle)

import cases  # noqa: E402
import passes  # noqa: E402
from passes.auto_parallel_grad_clip import global_norm_checks  # noqa: E402
from verify.engine import isolation  # noqa: E402
from verify.ir.rank_snapshot import snapshot_of as _snapshot  # noqa: E402
from verify.ir.snapshot import Op  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = json.load(open(os.path.join(ROOT, "verify", "baseline.json")))["entries"]
_CACHE = {}


def real(short, case_name, rank):
    """(case, before, after) of the real pass on ``rank`` (cached)."""
    key = (short, case_name, rank)
    if key not in _CACHE:
        adapter, case = passes.get(short), cases.all_cases()[case_name]
        run = isolation.run_pass(adapter, case, rank)
        assert not run.error, run.error
        _CACHE[key] = (case, _snapshot(run.original, case, rank, "original"),
                       _snapshot(run.rewritten, case, rank, "rewritten"))
    case, before, after = _CACHE[key]
    return case, before, copy.deepcopy(after)


def renumber(snap):
    for i, op in enumerate(snap.ops):
        op.idx = i
    return snap


def independent(a, b) -> bool:
    """Neither op reads or writes what the other writes (so swapping them
    keeps every value)."""
    wa, wb = set(a.writes()), set(b.writes())
    return not (wa & (set(b.reads()) | wb)) and not (wb & set(a.reads()))


def swap_first_independent(snap, types=None):
    """Swap the first adjacent pair of independent ops (of ``types``, if
    given) in ``snap``; returns the index swapped, or None."""
    ops = snap.ops
    for i in range(len(ops) - 1):
        a, b = ops[i], ops[i + 1]
        if types and not (a.type in types and b.type in types):
            continue
        if a.type == b.type and a.render() == b.render():
            continue
        if independent(a, b):
            ops[i], ops[i + 1] = b, a
            renumber(snap)
            return i
    return None


def contract_verdicts(short, case, rank, before, after):
    return [(c.name, c.verdict) for c in passes.get(short).contract(case, rank, before, after)]


def broken(results):
    return [c for c in results if c.verdict != Verdict.EQUIVALENT]


# -- every adapter: a reordering of independent ops changes no contract verdict
def _firing(adapter):
    return sorted(k.split("::", 1)[1] for k, v in BASELINE.items()
                  if k.startswith(adapter.name + "::") and v["fires"]
                  and v["verdict"] not in ("PASS_CRASHED", "NOT_APPLIED"))


# (an adapter judging whole applications, the planner, has no contract on a
# rank's (before, after) pair: its stage checks are tested in test_planner.py)
REORDER = [(a.short, _firing(a)[0]) for a in passes.adapters().values()
           if _firing(a) and getattr(a, "whole_application", None) is None]


@pytest.mark.parametrize("short,case_name", REORDER, ids=[s for s, _ in REORDER])
def test_reordering_independent_ops_changes_no_contract_verdict(short, case_name):
    """Value-identical: adjacent independent ops swapped (first among the
    ops the pass inserted or kept around its rewrite, else anywhere)."""
    case, before, after = real(short, case_name, cases.all_cases()[case_name].ranks[0])
    rank = case.ranks[0]
    want = contract_verdicts(short, case, rank, before, after)
    new_types = {o.type for o in after.ops} - {o.type for o in before.ops}
    at = swap_first_independent(after, new_types) if new_types else None
    if at is None:
        at = swap_first_independent(after)
    assert at is not None, f"no independent adjacent ops in {short} on {case_name}"
    got = contract_verdicts(short, case, rank, before, after)
    # the same checks with the same verdicts ("fired" stays fired)
    assert sorted(got, key=str) == sorted(want, key=str), (at, want, got)


# -- sharding stage 2: each gradient reduced (summed) to its owner ---------
S2 = "engine_shard_dp2_adamw_s2"


def _reduces(after):
    return [o for o in after.ops if o.type == "reduce"]


@pytest.mark.parametrize("rank", [0, 1])
def test_sharding_stage_2_reduce_to_the_owner_holds_when_reordered(rank):
    case, before, after = real("sharding", S2, rank)
    reduces = _reduces(after)
    assert len(reduces) >= 2
    # move the first reduce just before the second (no op between reads its output)
    first, second = reduces[0], reduces[1]
    between = after.ops[first.idx + 1:second.idx]
    if not any(set(first.writes()) & set(o.reads()) for o in between):
        after.ops.remove(first)
        after.ops.insert(after.ops.index(second), first)
        renumber(after)
    res = passes.get("sharding").contract(case, rank, before, after)
    assert not broken(res), [(c.name, c.message) for c in broken(res)]


@pytest.mark.parametrize("rank", [0, 1])
def test_sharding_stage_2_reduce_to_another_rank_is_caught(rank):
    case, before, after = real("sharding", S2, rank)
    red = _reduces(after)[0]
    g = red.inputs["x"][0]
    owner = int(red.attrs["root_id"])
    red.attrs["root_id"] = 1 - owner  # the other rank of the DP2 ring
    res = broken(passes.get("sharding").contract(case, rank, before, after))
    hit = [c for c in res if c.name == "gradient reduced to its owner"]
    assert hit, [(c.name, c.message) for c in res]
    cex = hit[0].counterexample
    assert cex["var"] == g and cex["root"] == 1 - owner and cex["owner"] == owner
    assert cex["rank"] == rank and cex["op_index"] == red.idx


# -- grad clip: every gradient piece counted once (a multiset) -------------
CLIP = "engine_dp2_sgd_clip"


def _clip_snaps(mutate=None):
    snaps = {}
    for r in cases.all_cases()[CLIP].ranks:
        case, before, after = real("grad_clip", CLIP, r)
        if mutate is not None:
            mutate(r, after)
        snaps[r] = after
    return case, snaps


def test_grad_clip_global_norm_holds_with_its_squared_norms_reordered():
    def reorder(r, after):
        assert swap_first_independent(after, {"squared_l2_norm"}) is not None or \
            swap_first_independent(after) is not None

    case, snaps = _clip_snaps(reorder)
    for r in case.ranks:
        res = global_norm_checks(case, r, snaps)
        assert not broken(res), [c.message for c in broken(res)]


def test_grad_clip_a_piece_counted_twice_on_one_rank_is_caught():
    """One rank's fold reads one squared norm twice: the set of pieces is
    unchanged, the norm is not."""
    dup = {}

    def twice(r, after):
        if r != 0:
            return
        fold = next(o for o in after.ops if o.type in ("stack", "sum")
                    and sum(len(v) for v in o.inputs.values()) >= 2)
        slot = next(k for k, v in fold.inputs.items() if len(v) >= 2)
        fold.inputs[slot] = fold.inputs[slot] + [fold.inputs[slot][0]]
        sq = next(o for o in after.ops if fold.inputs[slot][0] in o.writes())
        dup["grad"] = sq.inputs["X"][0]

    case, snaps = _clip_snaps(twice)
    res = broken(global_norm_checks(case, 0, snaps))
    assert res, "a piece counted twice passed"
    hit = [c for c in res if c.counterexample.get("var") == dup["grad"]]
    assert hit and hit[0].counterexample["counted_on"] == [0, 0], \
        [(c.message, c.counterexample) for c in res]


# -- gradient merge, avg=False: the optimizer reads the sum itself ---------
SUM = "pir_gm_sgd_sum_k2"


def _scale_before_optimizer(after, factor, bias=0.0):
    """Insert ``pd_op.scale(acc) * factor + bias`` before the first
    optimizer op and have it read the result."""
    opt = next(o for o in after.ops if o.type == "pd_op.sgd_")
    acc = opt.inputs["grad"][0]
    out = "%scaled_" + acc
    scale = Op(opt.idx, "pd_op.scale", {"x": [acc]}, {"out": [out]},
               {"scale@value": factor, "bias": bias, "bias_after_scale": True}, role=opt.role)
    after.ops.insert(opt.idx, scale)
    opt.inputs["grad"] = [out]
    renumber(after)
    return scale, acc


def test_gradient_merge_sum_with_an_identity_scale_holds():
    case, before, after = real("grad_merge", SUM, 0)
    _scale_before_optimizer(after, 1.0)
    res = passes.get("grad_merge").contract(case, 0, before, after)
    assert not broken(res), [(c.name, c.message) for c in broken(res)]


@pytest.mark.parametrize("factor,bias", [(2.0, 0.0), (0.5, 0.0), (1.0, 1.0)])
def test_gradient_merge_sum_with_a_value_changing_scale_is_caught(factor, bias):
    case, before, after = real("grad_merge", SUM, 0)
    scale, acc = _scale_before_optimizer(after, factor, bias)
    res = broken(passes.get("grad_merge").contract(case, 0, before, after))
    hit = [c for c in res if c.name == "no scale when avg=False"]
    assert hit and hit[0].counterexample["op_index"] == scale.idx and \
        hit[0].counterexample["var"] == acc, [(c.name, c.message) for c in res]
    assert f"{factor:g}" in hit[0].message
