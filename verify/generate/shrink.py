"""A greedy shrinker of a failing spec (Hypothesis is not used: its
shrinker starts from examples it generated itself, and a plan costs seconds,
so a short greedy walk over the spec's own structure is cheaper): drop
blocks, drop the strategy, shrink the sizes, replicate placements; a
candidate is kept when it fails the same way (same status, verdict and
failing check names), and the walk restarts from it until no candidate
does or the budget of plans is spent."""
from __future__ import annotations

import copy


def _valid(spec: dict) -> bool:
    blocks = spec["blocks"]
    if not blocks or any(b["kind"] == "embedding" for b in blocks[1:]):
        return False
    if spec.get("pipeline"):
        stages = [b.get("stage", 0) for b in blocks]
        return stages[0] == 0 and stages[-1] == 1 and stages == sorted(stages)
    return True


def _drop_block(spec, i):
    s = copy.deepcopy(spec)
    gone = s["blocks"].pop(i)
    if spec.get("pipeline") and gone.get("cross"):  # the next stage's first block crosses
        nxt = next((b for b in s["blocks"] if b.get("stage") == gone["stage"]), None)
        if nxt is not None:
            nxt["cross"] = gone["cross"]
    return s


def candidates(spec: dict):
    """Smaller specs, the biggest cuts first."""
    for i in range(len(spec["blocks"])):
        yield _drop_block(spec, i)
    for key, small in (("gradient_merge", None), ("shard_optimizer", 0), ("optimizer", "sgd")):
        if spec.get(key) != small:
            yield {**copy.deepcopy(spec), key: small}
    for key, small in (("hidden", 4), ("seq", 2)):
        if spec[key] != small:
            yield {**copy.deepcopy(spec), key: small}
    for i, b in enumerate(spec["blocks"]):
        for key in ("out", "ffn", "vocab"):
            if key in b and b[key] != 4 and not (b["kind"] == "embedding" and key == "out"):
                s = copy.deepcopy(spec)
                s["blocks"][i][key] = 4
                yield s
        for key, val in b.items():  # a placement list: every parameter replicated
            if isinstance(val, list) and key not in ("placements", "cross") and \
                    any(c != "R" for c in val):
                s = copy.deepcopy(spec)
                s["blocks"][i][key] = ["R"] * len(val)
                yield s


def shrink(spec: dict, same_failure, budget: int = 12, log=print):
    """The smallest spec found that ``same_failure(spec)`` still holds for,
    trying at most ``budget`` candidates; ``(spec, tries)``."""
    tries = 0
    best = spec
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in candidates(best):
            if not _valid(cand):
                continue
            if tries >= budget:
                break
            tries += 1
            if same_failure(cand):
                log(f"  shrunk: {len(cand['blocks'])} block(s), hidden {cand['hidden']}")
                best, improved = cand, True
                break
    return best, tries
