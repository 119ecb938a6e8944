"""Lost gradients: every trainable parameter the model's loss gives a gradient
in dygraph (eager) mode is updated by the serial program Paddle built from it.

The planner family relates the ranks to the serial program, so a parameter
whose gradient the static backward never produces (an op whose grad does
not pass it on) is missing from both alike and no relation sees it: the
parameter silently never trains.  The reference here is the model itself:
one eager forward and backward in the planning process
(``verify/plan/eager_grads.py``, ``planner.json``'s ``eager_gradients``).
The serial program's updates are its optimizer ops by parameter
(``serial_relation["params"]``, ``verify/plan/stages.py``).  Plain data in,
one result out.

Verdict: CONTRACT_BROKEN.  The values the relation compares are kept (the
ranks agree with the serial program), but the training program does not do
what it is built for, update every parameter the loss depends on.  No value
of the missed update is computed here, so NOT_EQUIVALENT (a witnessed
difference) is not claimed.  A parameter without an eager gradient (unused,
``stop_gradient``) is not expected to be updated and is not flagged.
"""
from __future__ import annotations

from verify.verdicts import CheckResult, Verdict

NAME = "lost gradients"


BACKWARD = 1  # op role


def gradient_frontier(ops, lost) -> dict | None:
    """Where the backward stops short of the ``lost`` parameters, in the
    serial program's ``ops`` (snapshot ops: ``type``, ``role``, ``reads()``,
    ``writes()``): ``{"reads_param": [lost parameters a backward op reads]}``
    when the backward reaches some (their gradient is computed, the update
    is what is missing); else the first forward op fed by a lost parameter
    whose result a backward op reads, ``{"op_index", "op_type", "value"}``:
    the backward reads none of the values the lost parameters feed upstream
    of it (the gradient stops at that op, or at an op feeding it whose grad
    reads none of its forward values, e.g. a cast, an identity: ``feeding``,
    the ops writing its fed operands); None when the backward reads none."""
    back = {n for op in ops if op.role == BACKWARD for n in op.reads()}
    reached = sorted(p for p in lost if p in back)
    if reached:
        return {"reads_param": reached}
    fed, writer = set(lost), {}
    for i, op in enumerate(ops):
        if op.role == BACKWARD or not fed.intersection(op.reads()):
            continue
        hit = [n for n in op.writes() if n in back]
        if hit:
            feeding = sorted({writer[n] for n in op.reads() if n in writer})
            return {"op_index": i, "op_type": op.type, "value": hit[0],
                    "feeding": [[k, ops[k].type] for k in feeding]}
        fed.update(op.writes())
        writer.update((n, i) for n in op.writes())
    return None


def _frontier_text(front) -> str:
    if front is None:
        return "the backward reads none of the values they feed"
    if "reads_param" in front:
        return (f"the backward reads {', '.join(front['reads_param'])} (a gradient is "
                "computed) but no optimizer op updates it")
    feeding = ", ".join(f"op {k} ({t})" for k, t in front["feeding"])
    return (f"the backward reads none of the values they feed upstream of serial op "
            f"{front['op_index']} ({front['op_type']})'s result {front['value']}: their "
            "gradient stops at that op" + (f" or one feeding it ({feeding})" if feeding
                                           else ""))


def lost_gradient_check(where: str, eager: dict | None, serial_rel: dict | None,
                        serial_ops=None) -> list:
    """``[CheckResult]`` (empty when no eager step was recorded: the plan
    predates it; a step that could not run, e.g. a model whose build needs
    the plan's whole mesh, is an advisory INCONCLUSIVE: reported, and
    deciding nothing, since the check did not run)."""
    if eager is None:
        return []
    if eager.get("error"):
        last = eager["error"].strip().splitlines()[-1]
        return [CheckResult("contract", NAME, None, Verdict.INCONCLUSIVE,
                            f"{where}: the eager reference step did not run ({last}); which "
                            "parameters should train is unknown",
                            counterexample={"error": last}, advisory=True)]
    if not serial_rel:
        return [CheckResult("contract", NAME, None, Verdict.INCONCLUSIVE,
                            f"{where}: the serial program's updates were not recorded")]
    wanted = sorted(eager.get("with_grad", []))
    updated = set(serial_rel.get("params", {}))
    lost = [p for p in wanted if p not in updated]
    if lost and serial_ops is not None:
        # a parameter no op of the serial program reads was replaced before it
        # (fuse_attention_ffn_qkv_pass's fused parameters stand for the parts):
        # its training is that rewrite's relation to judge, not a lost gradient
        read = {n for op in serial_ops for n in op.reads()}
        replaced = [p for p in lost if p not in read]
        lost = [p for p in lost if p in read]
        if replaced and not lost:
            return [CheckResult(
                "contract", NAME, None, Verdict.INCONCLUSIVE,
                f"{where}: {len(replaced)} of the {len(wanted)} trainable parameters with "
                f"an eager gradient are read by no op of the serial program (replaced by "
                f"a rewrite before it): {', '.join(replaced[:6])}; the others are updated",
                counterexample={"replaced": replaced}, advisory=True)]
    if lost:
        front = gradient_frontier(serial_ops, lost) if serial_ops is not None else None
        return [CheckResult(
            "contract", NAME, None, Verdict.CONTRACT_BROKEN,
            f"{where}: {len(lost)} of the {len(wanted)} trainable parameters with an eager "
            f"gradient get no update in the serial program Paddle built ({len(updated)} "
            f"optimizer op(s)): {', '.join(lost)}; "
            + (_frontier_text(front) + "; " if serial_ops is not None else "")
            + "every rank, related to that program, never trains them",
            counterexample={"parameters": lost, "eager_with_grad": len(wanted),
                            "serial_updates": sorted(updated), "stops_at": front})]
    unmatched = list(eager.get("unmatched", []))
    if unmatched:  # an eager parameter the plan's model does not have by that name
        return [CheckResult("contract", NAME, None, Verdict.INCONCLUSIVE,
                            f"{where}: the {len(wanted)} matched parameters with an eager "
                            f"gradient are updated, but {len(unmatched)} eager parameter(s) "
                            f"have no parameter of the plan's model by name: "
                            f"{', '.join(unmatched[:5])}", counterexample={
                                "unmatched": unmatched}, advisory=True)]
    return [CheckResult("contract", NAME, None, Verdict.EQUIVALENT,
                        f"{where}: each of the {len(wanted)} trainable parameters with an "
                        "eager gradient is updated by an optimizer op of the serial program")]
