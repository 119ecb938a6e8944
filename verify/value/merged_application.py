"""The value proof of a gradient-merge pass's own application: the rewritten
program of a rank run as the Engine runs a merged program, the job schedule
``[forward, backward] * k + [optimize]``, against the ORIGINAL program's
``k`` micro-steps with its gradients merged (the sum, times ``1/k`` when
``avg``: the strategy's definition), for ALL parameters, optimizer states
and micro-batches (``passes/pir_gradient_merge.py`` calls it).

The relation and its proof are ``merged_relation``'s (the planner family
proves a merged plan against its serial program with it): the original
program plays the serial program, the rewritten one the rank's, each value
the whole of its counterpart (one rank: every placement is the replicated
whole).  What is compared: the loss of every micro-step, every parameter
and persistable state after every micro-step (the original's are still its
start values: the update waits for the optimize job) and after the step,
the gradient each optimizer reads against the merged one, and the merge's
accumulators (rank-only states) back at their start values after the step,
so the proof of one optimizer step is a proof of every step (induction); an
accumulator not back triggers a second step (``merged_relation``).

The relation tables (``verify/plan/stages.relation_table``'s format) are
read off the snapshots: parameters are ``builtin.parameter`` results, feeds
``pd_op.data`` results (persistable ones are states carried between
steps), the optimizer ops those reading a parameter as ``param`` and a
``grad`` (the value they read: after an in-place write of the operand, that
write's, ``inplace.resolved``).  The programs take a dynamic batch (-1
dims): the proof runs one micro-batch size at a time
(``proof.size_instances``, the numeric runs' sizes left out, as
``proof.prove_application`` does) and claims those sizes only
(``details["sizes_proved"]``: "proved at sizes").

The relation starts both programs from the same parameters and states
(symbols), so it says nothing of the startup programs: each of those
values must start the same on both sides (both startups executed
symbolically, a random draw a symbol keyed by its op and attrs, as the value
proof keys it).  Where the rewritten startup initialises one differently
(or not at all), the proof does not decide (INCONCLUSIVE, naming it): the
numeric runs, which execute both startups, do.

What one SSA execution models: program order.  Two in-place writes of one
buffer in one job that no data dependence orders may run in either order on
Paddle's executor; the pass's ``in-place order`` check judges that, not
this proof (its message says so).
"""
from __future__ import annotations

from verify.ir.inplace import resolved
from verify.verdicts import CheckResult, Verdict

from .merged_relation import prove_merged_relation
from .proof import BATCH_SIZES, KIND, NAME, _size_symbols, size_instances, sizes_label
from .semantics import Unsupported
from .symbolic import Budget, ExecError, Executor, Rank, Store, T, ids, size_symbol


def whole(ndim: int, rank: int) -> dict:
    """The placement of a value that is its counterpart's whole (one rank)."""
    return {"dims_mapping": [-1] * ndim, "mesh_shape": [1], "process_ids": [rank],
            "partial": {}}


def _shape(snap, name, inst, symbols):
    """``name``'s declared shape with each -1 dim at its size symbol's size."""
    v = snap.vars.get(name)
    if v is None:
        return None
    return [int(inst.get(size_symbol(symbols, name, i), 1)) if int(d) < 0 else int(d)
            for i, d in enumerate(v.shape or [])]


def relation_table(snap, loss, rank, inst=None, symbols=None) -> dict:
    """``stages.relation_table``'s record of ``snap`` (one rank's whole
    values), read off the snapshot; -1 dims at ``inst`` ``{symbol: size}``."""
    inst, symbols = inst or {}, symbols or {}

    def entry(name):
        shape = _shape(snap, name, inst, symbols)
        v = snap.vars.get(name)
        return {"shape": shape if shape is not None else [],
                "dtype": v.dtype if v is not None else "",
                "placement": whole(len(shape or []), rank)}

    parameters, feeds = {}, {}
    for op in snap.ops:
        if op.type == "builtin.parameter":
            for n in op.writes():
                parameters[n] = entry(n)
        elif op.type == "pd_op.data":
            for n in op.writes():
                v = snap.vars.get(n)
                feeds[n] = {**entry(n), "persistable": bool(v is not None and v.persistable)}
    params = {}
    # the gradient an optimizer reads is its operand as one SSA execution reads
    # it: an accumulator an in-place scale_ wrote before it is that write
    for op in resolved(snap).ops:
        p = (op.inputs.get("param") or [None])[0]
        g = (op.inputs.get("grad") or [None])[0]
        if p in parameters and g:
            gshape = _shape(snap, g, inst, symbols)
            gshape = gshape if gshape is not None else parameters[p]["shape"]
            params[p] = {"param": p, "grad": g, "placement": parameters[p]["placement"],
                         "grad_placement": whole(len(gshape), rank),
                         "shape": parameters[p]["shape"], "dtype": parameters[p]["dtype"],
                         "optimizer": op.type}
    lshape = _shape(snap, loss, inst, symbols) if loss else None
    return {"params": params, "feeds": feeds, "parameters": parameters,
            "loss": loss if loss and lshape is not None else None,
            "loss_placement": whole(len(lshape), rank) if lshape is not None else None}


def final_ops(before, after, pass_name, rank=0) -> list:
    """``stages.final_ops``'s record of ``after`` for the first-divergence
    search (``numeric/divergence.py``): an op whose results the original
    has, of the same type, is the original's ("serial", each result its own
    counterpart); any other the pass made.  Operands as one SSA execution
    reads them (``inplace.resolved``)."""
    made = {n: op.type for op in before.ops for n in op.writes()}
    out = []
    for op in resolved(after).ops:
        res = [n for ns in op.outputs.values() for n in ns]
        kept = bool(res) and all(made.get(n) == op.type for n in res if n)
        plcs = [whole(len(after.vars[n].shape or []), rank) if n in after.vars else None
                for n in res]
        out.append({"type": op.type, "results": res, "placements": plcs,
                    "operands": [n for ns in op.inputs.values() for n in ns],
                    "origin": "serial" if kept else pass_name,
                    "serial": res if kept else None})
    return out


def startup_differences(before, after, names, rank=0) -> list:
    """Names of ``names`` whose startup value differs between the two
    programs (the rewritten startup computes another term, or none), the
    startups executed symbolically with one term store."""
    store = Store()
    T.store = store
    ex = Executor(store, {}, 1, None)
    envs = []
    for snap in (before, after):
        st = Rank(rank, snap, list(snap.startup_ops), {})
        ex.run({rank: st}, startup=True)
        envs.append(st.env)
    a, b = envs
    return [n for n in names if n in a and (n not in b or ids(a[n].arr) != ids(b[n].arr))]


def prove_merged_application(where, rank, before, after, loss, k, avg, rings=None,
                             symbols=None, avoid_sizes=None, pass_name="the pass") -> list:
    """One CheckResult (kind "value", ``value proof``) for ``rank``: see
    the module docstring.  ``loss``: the loss value's name (None: no loss
    compared); ``avoid_sizes`` ``{symbol: sizes}`` the numeric runs use."""
    symbols = dict(symbols or {})
    start = relation_table(before, loss, rank)
    roots = sorted(set(start["parameters"]) | {n for n, v in start["feeds"].items()
                                               if v["persistable"]})
    try:
        moved = startup_differences(before, after, roots, rank)
    except (Unsupported, ExecError, Budget) as exc:
        moved, why = None, f"the startup programs do not execute symbolically: {exc}"
    if moved is None or moved:
        why = why if moved is None else (
            f"the rewritten startup program initialises {', '.join(moved)} differently "
            "from the original's (or not at all)")
        return [CheckResult(KIND, NAME, rank, Verdict.INCONCLUSIVE,
                            f"{where} rank {rank}: not proved: {why}; the proof relates the "
                            "programs from equal parameters and states only (the numeric "
                            "runs execute both startups)", advisory=True,
                            details={"not_proved": True, "reason": why,
                                     "startup_differs": moved or []})]
    syms = _size_symbols([before, after], symbols)
    instances = size_instances(syms, BATCH_SIZES, avoid_sizes) if syms else [None]
    ops = final_ops(before, after, pass_name, rank)
    results = []
    for inst in instances:
        got = prove_merged_relation(
            where, before, {rank: after}, relation_table(before, loss, rank, inst, symbols),
            {rank: relation_table(after, loss, rank, inst, symbols)}, {rank: ops},
            dict(rings or {}), int(k), bool(avg), sizes=inst, symbols=symbols)
        (c,) = got
        c.name = NAME
        # merged_relation's words: its "serial program" is the original here
        c.message = c.message.replace("the serial program", "the original program").replace(
            "the serial micro-step gradients", "the original's micro-step gradients")
        if inst:
            c.details["sizes"] = dict(inst)
        results.append(c)
        if c.verdict != Verdict.EQUIVALENT:
            break  # a refutation, or what was not proved, at this size decides
    last = results[-1]
    if last.verdict == Verdict.INCONCLUSIVE:
        last.advisory = True  # never counted as a proof; the numeric oracle decides
    if last.verdict != Verdict.EQUIVALENT:
        if inst and last.verdict == Verdict.NOT_EQUIVALENT and last.counterexample:
            last.counterexample["sizes"] = dict(inst)
            last.counterexample["shapes"] = "with " + ", ".join(
                f"{n} = {v}" for n, v in sorted(inst.items()))
        return [_program_order(last)]
    if not syms:
        return [_program_order(last)]
    proved = [dict(i) for i in instances]
    at_last = "with " + ", ".join(f"{n} = {v}" for n, v in sorted(inst.items()))
    c = CheckResult(KIND, NAME, rank, Verdict.EQUIVALENT,
                    last.message.replace(f"PROVED {at_last}", f"PROVED for "
                                         f"{sizes_label(proved)} (one proof per size)", 1),
                    details={**last.details, "sizes_proved": proved,
                             "per_size": [r.details.get("seconds") for r in results]})
    return [_program_order(c)]


def _program_order(c):
    """What a proof of one SSA execution claims about in-place writes."""
    if c.verdict == Verdict.EQUIVALENT:
        c.message += ("; in program order (in-place writes of one job no data dependence "
                      "orders are the in-place order check's)")
    return c
