"""The PIR gradient merge: ``auto_parallel_gradient_merge_pass`` (3.3.1's
``auto_parallel_gradient_merge.py``, its PIR path ``_pir_parse_program``).

``Engine._parallel_pir`` applies it to the dist program after partition,
reshard and the remove passes, with ``strategy.gradient_merge.to_dict()``
(``k_steps``, ``avg``), ``gradient_sync_after_accumulate=True`` and
``params_grads`` (the Values of the program's parameter gradients); then it
splits the dense program into ``forward``/``backward``/``optimize`` jobs by
``op_role`` and runs ``[forward, backward] * k_steps + [optimize]``.  So the
"k-th step condition" of a PIR merge is the job schedule: an op runs once
per k micro-steps exactly when its ``op_role`` is Optimize (2).

Documented pattern (the strategy's docs: "accumulate gradients over
k_steps micro-batches, then update; avg: average the merged gradients"): a
training program, i.e. optimizer ops (role Optimize) updating parameters
from their gradients.  What the merge must build (the contract):

* every optimizer op reads a merged gradient: a persistable accumulator
  (``<param>@GRAD@MERGE``, zero in the startup program), accumulated by a
  backward-role op every micro-step;
* ``avg=True``: the optimizer reads the accumulator scaled by ``1/k``; the
  scale is ordered before the optimizer and before the zeroing.  ``avg=False``:
  no scale;
* the accumulator is zeroed after the update, by an optimize-role op;
* the update and the zeroing run under the k-th step condition (role
  Optimize), the accumulation every micro-step (not Optimize).

The oracle (``verify/numeric/micro_steps.py``): k micro-steps of the merged
program equal one step of the original on the concatenated micro-batches
(mean or sum of the k gradients, per ``avg``), and the states do not move
before the optimize job.
The value proof (``verify/value/merged_application.py``): the planner's
proof of a merged schedule (``verify/value/merged_relation.py``) with the
original program as the serial one: the rewritten program as the jobs
``[forward, backward] * k + [optimize]`` against the original's k
micro-steps with the gradients merged, for all parameters, states and
micro-batches, at sampled micro-batch sizes, in program order.

Applied in this process: the adapter's numeric runs re-apply the pass in a
worker and run both programs live there (``micro_steps.run_rebuilt``).  (The
merged program reads its accumulators as keyword block arguments, which
PIR's serializer drops on 3.3.1; ``pir_snapshot.export_programs`` now records
and restores them, so a merged program travels whole, as a planned merged
program does: ``verify/numeric/merged_relation.py``.)

A program that already holds a merge (each optimizer reads a persistable
accumulator that a backward-role ``add_`` accumulates in place, directly or
through a scale: the pass's own output, e.g. a rank of a plan made with
``strategy.gradient_merge`` on) is not the pass's input: the Engine applies
the merge once, to the program before it.  On such a program 3.3.1's pass,
given the ``params_grads`` a planned dir has (none), merges nothing but still
appends a second ``1/k`` ``scale_`` before every Adam/SGD step (its
``_append_scale_op_after_comm`` scales every optimizer it finds, not the ones
it merged); the adapter does not apply it there and says so (INCONCLUSIVE:
nothing about the pass was shown).  Which program is which is read from the
program (:func:`merged_reads`), not from the case.  A program without
``params_grads`` (a planned dir's) is given its optimizers' own pairs
(:func:`program_params_grads`), as the Engine gives them; on a dense rank
program (after dist2dense) the pass then raises reading ``_local_shape``, as
on the ``pir_mm_*`` cases: outside its domain.

Several ranks: not paired here.  The pass needs the dist program (its
gradients' local shapes and op dist attrs), which a planned case's dense
rank programs no longer are; a merge on several ranks is checked where the
Engine applies it, in the planner family (cases planned with gradient merge,
``passes/planner.py``).
"""
from __future__ import annotations

import traceback

from passes.base import PassAdapter, PassRun, finding, holds
from verify.verdicts import CheckResult, Verdict

OPTIMIZERS = ("pd_op.sgd_", "pd_op.momentum_", "pd_op.adam_", "pd_op.adamw_",
              "pd_op.lamb_", "pd_op.merged_adam_", "pd_op.merged_momentum_")
OPTIMIZE = 2
SCALES = ("pd_op.scale_", "pd_op.scale")
ZEROINGS = ("pd_op.set_value_with_tensor_", "pd_op.full_", "pd_op.fill_")


def merge_settings(case, rp=None) -> dict:
    """``{"k_steps", "avg"}`` of the case (its programs carry them as
    ``rp.merge``; else the case's params, else k=2 and avg=True)."""
    got = getattr(rp, "merge", None) if rp is not None else None
    if got:
        return dict(got)
    return {"k_steps": int(case.params.get("k", 2)), "avg": bool(case.params.get("avg", True))}


class PirGradientMerge(PassAdapter):
    name = "auto_parallel_gradient_merge_pass"
    short = "grad_merge"
    ir = "pir"

    def handles(self, case) -> bool:
        """PIR cases of one rank (see the module docstring: several ranks are
        checked through the planner family's merged plans)."""
        return super().handles(case) and len(case.ranks) == 1

    def attrs(self, case, rp) -> dict:
        """What ``Engine._parallel_pir`` passes: ``params_grads`` the case's,
        else the program's own (each optimizer op's parameter and gradient
        operands: the Engine always hands the pass the pairs its optimizer
        updates; a planned dir's rank program carries none)."""
        return {**merge_settings(case, rp),
                "params_grads": rp.params_grads or program_params_grads(rp.main),
                "gradient_sync_after_accumulate": True}

    # always applied in this process (see the module docstring)
    isolated = False

    def apply_local(self, case, rank: int) -> PassRun:
        import logging

        import paddle
        from paddle.distributed.passes import new_pass

        original = case.build(rank)
        rewritten = case.build(rank)
        tb = etype = None
        oom = False
        if already_merged(_snapshot(original)):
            # the pass's own output, not its input (module docstring): left as built
            return PassRun(original, rewritten)
        with paddle.pir_utils.IrGuard():
            rewritten.names = original.names.carried(original.main, rewritten.main)
            logging.disable(logging.WARNING)
            try:
                p = new_pass(self.name, self.attrs(case, rewritten))
                with paddle.static.program_guard(rewritten.main, rewritten.startup):
                    p.apply([rewritten.main], [rewritten.startup])
            except (Exception, SystemExit) as exc:  # the pass's bug: keep the program
                tb, etype = traceback.format_exc(), type(exc).__name__
                oom = isinstance(exc, MemoryError)
            finally:
                logging.disable(logging.NOTSET)
        return PassRun(original, rewritten, tb, etype, out_of_memory=oom)

    def numeric_checks(self, case, outcomes, backends=("simulated",), seed=0, notes=None,
                       mutator=None):
        """The merge oracle (``verify/numeric/micro_steps.py``) instead of the
        step-by-step comparison: a merged program is not meant to equal the
        original step for step.  With a program mutant (``mutator``) the runs
        use the live, mutated programs in this process."""
        from verify.numeric.micro_steps import micro_step_checks

        merged = [o for o in outcomes if o.before is not None and already_merged(o.before)]
        # the oracle compares a merge with the program before it: none there
        skipped = [CheckResult("numeric", "micro-steps", o.rank, Verdict.INCONCLUSIVE,
                               f"{self.name} on {case.name} rank {o.rank}: not run: the "
                               "program already holds a merge (not the pass's input)")
                   for o in merged]
        outcomes = [o for o in outcomes if not any(o is m for m in merged)]
        if not outcomes:
            return skipped
        s = merge_settings(case, outcomes[0].run.original if outcomes else None)
        if notes is not None and "ranks" in backends:
            notes.append("ranks backend not run: PIR programs run on Paddle's executor in "
                         "one process (micro-step oracle)")
        return skipped + micro_step_checks(
            self, case, outcomes, s["k_steps"], case.params.get("reduction", "mean"), s["avg"],
            seed=seed, backends=backends, live=mutator is not None)

    def value_checks(self, case, outcomes) -> list:
        """The value proof of the merge itself (``verify/value/merged_application.py``):
        the rewritten program run as the Engine's job schedule ``[forward,
        backward] * k + [optimize]`` against the original's k micro-steps
        with the gradients merged, for all parameters, states and
        micro-batches (at sampled micro-batch sizes), in program order."""
        from verify.value.merged_application import prove_merged_application

        out = []
        for o in outcomes:
            rp = o.run.original if o.run is not None else None
            s = merge_settings(case, rp)
            avoid = {}
            for f in (rp.feeds if rp is not None else []):
                v = o.before.vars.get(f.name)
                for i, d in enumerate(v.shape if v is not None and v.shape and
                                      len(v.shape) == len(f.shape) else []):
                    if int(d) < 0:  # the numeric runs' size: left to them
                        avoid.setdefault(_size_symbol(case, f.name, i), []).append(
                            int(f.shape[i]))
            out += prove_merged_application(
                f"{self.name} on {case.name}", o.rank, o.before, o.after,
                rp.loss if rp is not None else None, s["k_steps"], s["avg"],
                rings=dict(getattr(case, "rings", None) or {}), symbols=dict(case.symbols),
                avoid_sizes=avoid, pass_name=self.name)
        return out

    # its reproducer runs the micro-step oracle (verify/repro/micro_step_script.py)
    repro_kind = "micro_steps"

    def pattern_present(self, snap) -> bool:
        """A training program whose optimizer ops (role Optimize) update
        parameters from their gradients: at least one optimizer that does
        not already read a merged-gradient accumulator (:func:`merged_reads`)."""
        opts = _optimizers(snap)
        return len(merged_reads(snap)) < len(opts)

    # -- the contract ---------------------------------------------------
    def contract(self, case, rank, before, after) -> list:
        got = already_merged(before)
        if got:
            reads = "; ".join(f"op {i} ({next(o.type for o in before.ops if o.idx == i)}) "
                              f"reads {acc}" for i, acc in sorted(got.items()))
            return [CheckResult(
                "contract", "the pass's input", rank, Verdict.INCONCLUSIVE,
                f"{self.name} on {case.name} rank {rank}: not applied: the program already "
                f"holds a merge ({reads}, each accumulated in place every micro-step), the "
                "pass's own output; the Engine applies the merge once, to the program "
                "before it, so nothing about the pass is shown here",
                details={"merged_reads": {str(i): a for i, a in got.items()}})]
        out = [self.fired_check(case, rank, before, after)]
        opts = _optimizers(after)
        if not opts or not _optimizers(before):
            return out
        s = merge_settings(case)
        k, avg = s["k_steps"], s["avg"]
        accs = _accumulators(before, after)
        writers = _inplace_writers(after, accs)
        where = f"{self.name} on {case.name} rank {rank}"
        for op in opts:
            g = (op.inputs.get("grad") or [None])[0]
            src, scale = _through_scale(after, g, op.idx)
            acc = src if src in accs else None
            if acc is not None and scale is None:
                # it reads the accumulator itself: an in-place scale_ of it
                # after its last accumulation and before the optimizer scales
                # what the optimizer reads, in program order
                last_add = max((w.idx for w in writers[acc] if w.type.startswith("pd_op.add")),
                               default=-1)
                pre = [w for w in writers[acc] if w.type in SCALES and last_add < w.idx < op.idx]
                scale = pre[-1] if pre else None
            if acc is None:
                out.append(finding(
                    "optimizer reads the merged gradient", rank,
                    f"{where}: op {op.idx} ({op.type}) reads {g}, not a merged-gradient "
                    f"accumulator", op_index=op.idx, var=g))
                continue
            role_bad = [w for w in writers[acc] if w.type.startswith("pd_op.add")
                        and w.role == OPTIMIZE]
            if role_bad:
                out.append(finding("accumulate every micro-step", rank,
                                   f"{where}: op {role_bad[0].idx} accumulates {acc} in the "
                                   "optimize job (once per k micro-steps)",
                                   op_index=role_bad[0].idx, var=acc))
            late = [w for w in writers[acc] if w.type in SCALES and w.idx > op.idx]
            if avg and scale is None:
                msg = (f"{where}: avg=True but op {op.idx} ({op.type}) reads {acc} unscaled"
                       + (f"; the 1/k scale op(s) on it are at {[w.idx for w in late]}, after "
                          f"the optimizer" if late else "; no 1/k scale on it"))
                zero = [w.idx for w in writers[acc] if _is_zeroing(w) and w.idx > op.idx]
                if late and zero and min(w.idx for w in late) > min(zero):
                    msg += f" and after the zeroing op {min(zero)}"
                out.append(CheckResult(
                    "contract", "1/k scale before the optimizer", rank, Verdict.CONTRACT_BROKEN,
                    msg, counterexample={"rank": rank, "optimizer_op": op.idx,
                                         "optimizer": op.type, "accumulator": acc,
                                         "scale_ops": [w.idx for w in late],
                                         "zeroing_ops": zero, "k_steps": k}))
            elif avg and scale is not None and not _is_inverse_k(scale, k):
                out.append(finding("1/k scale before the optimizer", rank,
                                   f"{where}: op {scale.idx} scales {acc} by "
                                   f"{scale.attrs.get('scale@value', scale.attrs.get('scale'))}"
                                   f", not 1/{k}", op_index=scale.idx, var=acc))
            elif not avg and scale is not None and _factor(scale) != (1.0, 0.0):
                # the statement is about values: the optimizer reads the sum
                # itself; an identity scale (by exactly 1, no bias) keeps it
                f = _factor(scale)
                by = f"by {f[0]:g} (bias {f[1]:g})" if f else "by a factor not known here"
                out.append(finding("no scale when avg=False", rank,
                                   f"{where}: avg=False but op {scale.idx} scales {acc} {by} "
                                   "before the optimizer: it reads that, not the sum of the "
                                   f"{k} gradients", op_index=scale.idx, var=acc,
                                   factor=f[0] if f else None))
            else:
                out.append(holds("1/k scale before the optimizer" if avg else
                                 "no scale when avg=False", rank,
                                 f"op {op.idx} ({op.type}) reads {acc}"
                                 + (f" scaled by 1/{k} at op {scale.idx}" if avg else "")))
            zero = [w for w in writers[acc] if _is_zeroing(w)]
            early = [w for w in zero if (scale.idx if scale is not None else -1) < w.idx < op.idx]
            if early:
                out.append(finding("accumulator zeroed after the update", rank,
                                   f"{where}: {acc} zeroed at op {early[0].idx}, before op "
                                   f"{op.idx} ({op.type}) reads it", op_index=early[0].idx,
                                   var=acc))
            after_upd = [w for w in zero if w.idx > op.idx and w.role == OPTIMIZE]
            if not after_upd:
                out.append(finding("accumulator zeroed after the update", rank,
                                   f"{where}: no optimize-role op zeroes {acc} after op "
                                   f"{op.idx} ({op.type})"
                                   + (f" (zeroing ops: {[w.idx for w in zero]})" if zero
                                      else ""), op_index=op.idx, var=acc))
            elif scale is not None and any(w.idx < scale.idx for w in after_upd):
                out.append(finding("accumulator zeroed after the update", rank,
                                   f"{where}: {acc} zeroed at op {after_upd[0].idx}, before "
                                   f"its scale at op {scale.idx}", op_index=after_upd[0].idx,
                                   var=acc))
            else:
                out.append(holds("accumulator zeroed after the update", rank,
                                 f"{acc} zeroed at op {after_upd[0].idx}, after op {op.idx}"))
            race = _unordered_inplace(after, acc, writers[acc], op)
            if race:
                a, b, why = race
                out.append(CheckResult(
                    "dataflow", "in-place order", rank, Verdict.NOT_EQUIVALENT,
                    f"{where}: op {a.idx} ({a.type}) and op {b.idx} ({b.type}) {why} the "
                    f"accumulator {acc} in the same job and no data dependence orders them: "
                    "Paddle's executor may run them in either order (on 3.3.1 CPU the "
                    "default asynchronous scheduler gave run-to-run different parameters; "
                    "the micro-step runs use program order)",
                    counterexample={"rank": rank, "accumulator": acc, "ops": [a.idx, b.idx],
                                    "types": [a.type, b.type], "optimizer_op": op.idx}))
            else:
                out.append(CheckResult("dataflow", "in-place order", rank, Verdict.EQUIVALENT,
                                       f"the in-place writes of {acc} and the reads of them "
                                       "are ordered by data dependences"))
            if op.role != OPTIMIZE:
                out.append(finding("update under the k-th step condition", rank,
                                   f"{where}: op {op.idx} ({op.type}) has op_role {op.role}, "
                                   "so it runs every micro-step, not once per k",
                                   op_index=op.idx))
        return out

    def intended_changes(self, case, rank, before, after) -> dict:
        accs = _accumulators(before, after)
        out = {a: "the merged gradient the optimizer reads (micro-step oracle decides)"
               for a in accs}
        for op in _optimizers(after):
            for n in op.inputs.get("grad") or []:
                out.setdefault(n, "the merged gradient the optimizer reads")
        return out


def _size_symbol(case, var, i) -> str:
    from verify.value.symbolic import size_symbol

    return size_symbol(dict(case.symbols), var, i)


def _optimizers(snap) -> list:
    return [op for op in snap.ops if op.type in OPTIMIZERS]


def program_params_grads(main) -> list:
    """``[(param, grad)]`` Values of ``main``'s optimizer ops (PIR)."""
    out = []
    for op in main.global_block().ops:
        if op.name() in OPTIMIZERS:
            names = list(op.get_input_names())
            if "param" in names and "grad" in names:
                out.append((op.operand_source(names.index("param")),
                            op.operand_source(names.index("grad"))))
    return out


def _snapshot(rp):
    from verify.ir.pir_snapshot import snapshot_rank

    return snapshot_rank(rp)


def merged_reads(snap) -> dict:
    """``{optimizer op index: accumulator}`` for each optimizer op whose
    gradient is a merged-gradient accumulator: a persistable non-parameter
    (a block keyword argument or a persistable var) that a backward-role
    in-place ``add_`` accumulates, read directly or through scale ops."""
    persist = set(snap.meta.get("block_kwargs", [])) | {
        n for n, v in snap.vars.items() if v.persistable and not v.is_parameter}
    accumulated = set()
    writer = {}
    for op in snap.ops:
        first = next(iter(op.inputs.values()), [])
        if op.type == "pd_op.add_" and op.role != OPTIMIZE and first and first[0] in persist:
            accumulated.add(first[0])
        for n in op.writes():
            writer.setdefault(n, op)
    out = {}
    for op in _optimizers(snap):
        g = (op.inputs.get("grad") or [None])[0]
        seen = set()
        while g is not None and g not in accumulated and g not in seen:
            seen.add(g)
            w = writer.get(g)
            g = (w.inputs.get("x") or [None])[0] if w is not None and w.type in SCALES \
                and w.idx < op.idx else None
        if g in accumulated:
            out[op.idx] = g
    return out


def already_merged(snap) -> dict:
    """:func:`merged_reads` when every optimizer op of ``snap`` reads a merged
    accumulator (the program holds a merge: the pass's output), else ``{}``."""
    got = merged_reads(snap)
    return got if got and len(got) == len(_optimizers(snap)) else {}


def _accumulators(before, after) -> set:
    """Persistables of the rewritten program that the original lacks (the
    merge's accumulators), by name."""
    kw = set(after.meta.get("block_kwargs", []))
    new = {n for n, v in after.vars.items() if v.persistable and n not in before.vars
           and not v.is_parameter}
    return kw | new


def _inplace_writers(snap, accs) -> dict:
    """``{acc: [ops writing it in place]}``: an in-place op (``*_``) whose
    first operand is the accumulator."""
    out = {a: [] for a in accs}
    for op in snap.ops:
        if not op.type.endswith("_"):
            continue
        first = next(iter(op.inputs.values()), [])
        if first and first[0] in out:
            out[first[0]].append(op)
    return out


def _unordered_inplace(snap, acc, writers, optimizer):
    """``(op a, op b, how)``: two ops of one job (same ``op_role``) touching
    the buffer of ``acc`` with no data-dependence path between them, where
    one writes it in place: two in-place writers, or an in-place writer and
    a reader of another writer's result (an alias of the same buffer), the
    optimizer's read among them.  Ops of different roles are ordered by the
    job schedule.  None when every such pair is ordered."""
    by_name = {}
    for op in snap.ops:
        for n in op.writes():
            by_name[n] = op
    succ = {op.idx: set() for op in snap.ops}
    for op in snap.ops:
        for n in op.reads():
            w = by_name.get(n)
            if w is not None and w.idx != op.idx:
                succ[w.idx].add(op.idx)
    reach = {}

    def reaches(a, b):
        if a not in reach:
            seen, todo = set(), [a]
            while todo:
                for m in succ.get(todo.pop(), ()):
                    if m not in seen:
                        seen.add(m)
                        todo.append(m)
            reach[a] = seen
        return b in reach[a]

    def ordered(a, b):
        return a.role != b.role or reaches(a.idx, b.idx) or reaches(b.idx, a.idx)

    ws = [w for w in writers if w.role == optimizer.role]
    for i, a in enumerate(ws):
        for b in ws[i + 1:]:
            if not ordered(a, b):
                return a, b, "both write"
    for w in ws:
        aliases = set(w.writes())
        readers = [o for o in snap.ops if o.idx != w.idx and aliases & set(o.reads())]
        for r in readers:
            for b in ws:
                if b.idx not in (w.idx, r.idx) and not ordered(r, b):
                    return (r, b, "read (through op %d's in-place result) and write" % w.idx)
    return None


def _through_scale(snap, name, before_idx):
    """``(source, scale op)``: ``name`` is the result of a scale op (of source)
    defined before ``before_idx``, or ``(name, None)``."""
    for op in snap.ops:
        if op.idx >= before_idx:
            break
        if op.type in SCALES and name in op.writes():
            return (op.inputs.get("x") or [None])[0], op
    return name, None


def _is_zeroing(op) -> bool:
    if op.type not in ZEROINGS:
        return False
    v = op.attrs.get("values@value", op.attrs.get("value@value", op.attrs.get("value")))
    try:
        return float(v if not isinstance(v, list) else v[0]) == 0.0
    except (TypeError, ValueError, IndexError):
        return False


def _factor(scale_op):
    """``(scale, bias)`` of a scale op as floats, or None when not attrs."""
    v = scale_op.attrs.get("scale@value", scale_op.attrs.get("scale"))
    try:
        v = float(v if not isinstance(v, list) else v[0])
        return v, float(scale_op.attrs.get("bias", 0.0) or 0.0)
    except (TypeError, ValueError, IndexError):
        return None


def _is_inverse_k(scale_op, k) -> bool:
    f = _factor(scale_op)
    return f is not None and abs(f[0] * k - 1.0) < 1e-6 and f[1] == 0.0


ADAPTER = PirGradientMerge()
