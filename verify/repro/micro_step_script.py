"""Self-contained reproducers of the PIR gradient merge
(``passes/pir_gradient_merge.py``): the micro-step oracle of
``verify/numeric/micro_steps.py`` in a script that needs only Paddle.

The script embeds the case module's ``build_programs(params)`` (and its
``REPRO_SOURCES`` / ``REPRO_CONSTANTS``), builds the program twice, applies
the installed ``auto_parallel_gradient_merge_pass`` (or the ``--pass-file``
source embedded in the script, registered in its place) to the second build with
the attrs ``Engine._parallel_pir`` passes (``params_grads`` of that build),
then drives the merged program as the Engine's jobs (forward+backward on
each of k micro-batches, then the optimize-role ops once; ops in program
order) and the original once on the concatenated micro-batches, for two
optimizer steps, and compares every persistable the startup writes.  Each
side runs its own startup program (seeded) and gets its parameters as the
suite's runs draw them (``verify/repro/init_source.py``, embedded): a
parameter the merged startup initialises differently gets what that
initialisation draws, and a difference names the changed initialisation.  It
prints ``DEFECT`` with a traceback (the pass raised), two in-place writes of
one accumulator that no data dependence orders (``NOT_EQUIVALENT``: op
indices; the executor may run them either way), or the first differing state
(``NOT_EQUIVALENT``: tensor, step, index, both values) and exits 1;
``no defect`` and 0 when they agree; 2 when it cannot judge.
"""
from __future__ import annotations

import inspect
import os
import textwrap

from verify.repro.embedded import pass_loader
from verify.repro.init_source import pir_source

BODY = r'''
import sys
import traceback
import zlib

import numpy as np
import paddle

SEED, CYCLES = __SEED__, 2


def _rng(name, *more):
    return np.random.default_rng([SEED, zlib.crc32(name.encode()), *more])


def _job(main, keep_optimize):
    from paddle.distributed.passes.pass_utils import forward_complete_op_role

    forward_complete_op_role(main)
    job = main.clone()
    for idx, op in reversed(list(enumerate(job.global_block().ops))):
        if (op.op_role == 2) == keep_optimize:
            continue
        used = any(r.initialized() and not r.use_empty() for r in op.results())
        source = op.name() == "builtin.parameter" or (
            op.name() == "pd_op.data" and op.result(0).persistable)
        if used and keep_optimize and source:
            continue
        if used:
            raise ValueError(f"op {idx} ({op.name()}) feeds another job")
        op.erase()
    return job


def _feeds(main, micro):
    out = []
    for op in main.global_block().ops:
        if op.name() == "pd_op.data" and not op.result(0).persistable:
            shape = [micro if d < 0 else d for d in op.attrs()["shape"]]
            out.append((op.attrs()["name"], shape))
    return out


def run(main, startup, k, merged, names=None, inits=None):
    """The persistables the startup writes (or ``names``), after each
    optimizer step.  The startup runs seeded, then every parameter gets the
    seeded draw; ``inits`` = (the original's, this startup's) initialisations
    (``pir_startup_inits``): mapped onto this startup's where it differs
    (``init_like``), as the suite's micro-step runs draw them."""
    with paddle.pir_utils.IrGuard():
        main, startup = main.clone(), startup.clone()
        for prog in (main, startup):
            paddle.base.libpaddle.pir.apply_dist2dense_pass(prog)
        watch, params = [], []
        for op in startup.global_block().ops:
            if op.name() == "builtin.set_parameter":
                watch.append(op.attrs()["parameter_name"])
                params.append(op.attrs()["parameter_name"])
            if op.name() == "builtin.shadow_output" and "@GRAD@MERGE" not in \
                    op.attrs()["output_name"]:
                watch.append(op.attrs()["output_name"])
        watch = list(names or watch)
        feeds = _feeds(main, B)
        if merged:
            acc, opt = _job(main, False), _job(main, True)
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        paddle.set_flags({"FLAGS_new_executor_sequential_run": True})
        out = []
        with paddle.static.scope_guard(scope):
            paddle.seed(SEED)
            exe.run(startup)
            for n in params:
                t = scope.find_var(n).get_tensor()
                shape = np.array(t).shape
                bound = 1.0 / np.sqrt(max(shape[0], 1))
                v = _rng(n, 0).uniform(-bound, bound, size=shape).astype("float32")
                if inits is not None:
                    v = init_like(v, n, SEED, inits[0].get(n), inits[1].get(n))
                t.set(v, paddle.CPUPlace())
            for c in range(CYCLES):
                micro = [{n: _rng(n, c * k + i).standard_normal(size=s).astype("float32")
                          for n, s in feeds} for i in range(k)]
                if merged:
                    for m in micro:
                        exe.run(acc, feed=m, fetch_list=[])
                    exe.run(opt, feed={}, fetch_list=[])
                else:
                    exe.run(main, feed={n: np.concatenate([m[n] for m in micro])
                                        for n, _ in feeds}, fetch_list=[])
                out.append({n: np.array(scope.find_var(n).get_tensor()) for n in watch})
    return out


def unordered_inplace(main):
    """(accumulator, op i, op j): two optimize-role ops writing one keyword
    block argument in place with no data dependence between them."""
    ops = list(main.global_block().ops)
    index = {op.id(): i for i, op in enumerate(ops)}

    def reach(a):
        seen, todo = set(), [ops[a]]
        while todo:
            for r in todo.pop().results():
                if not r.initialized():
                    continue
                for u in r.all_used_ops():
                    j = index.get(u.id())
                    if j is not None and j not in seen:
                        seen.add(j)
                        todo.append(ops[j])
        return seen

    for name, kw in main.global_block().kwargs().items():
        writers = [i for i, op in enumerate(ops) if op.name().endswith("_")
                   and op.num_operands() and op.operand_source(0).is_same(kw)
                   and op.op_role == 2]
        for x, a in enumerate(writers):
            for b in writers[x + 1:]:
                if b not in reach(a) and a not in reach(b):
                    return name, a, b
    return None


def main_():
    print("reproducer:", "".join(c if c.isprintable() else repr(c)[1:-1] for c in TITLE))
    print("pass from:", load_pass_source())
    paddle.enable_static()  # static names: both builds name their states alike
    k, avg = PARAMS.get("k", 2), PARAMS.get("avg", True)
    with paddle.utils.unique_name.guard():  # both builds name their states alike
        original = build_programs(PARAMS)
    with paddle.utils.unique_name.guard():
        merged = build_programs(PARAMS)
    with paddle.pir_utils.IrGuard():
        from paddle.distributed.passes import new_pass

        try:
            p = new_pass("auto_parallel_gradient_merge_pass",
                         {"k_steps": k, "avg": avg, "params_grads": merged[3],
                          "gradient_sync_after_accumulate": True})
            with paddle.static.program_guard(merged[0], merged[1]):
                p.apply([merged[0]], [merged[1]])
        except Exception:
            traceback.print_exc(file=sys.stdout)
            print("DEFECT: the pass raised (Traceback above)")
            return 1
    want = "mean" if avg else "sum"
    if PARAMS.get("reduction", "mean") != want:
        print(f"cannot judge: avg={avg} needs a {want} loss")
        return 2
    try:
        ref = run(original[0], original[1], k, False)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("cannot judge: the ORIGINAL program does not run")
        return 2
    with paddle.pir_utils.IrGuard():  # each side's own startup initialisations
        inits = (pir_startup_inits(original[1]), pir_startup_inits(merged[1]))
        params = [op.attrs()["parameter_name"] for op in merged[1].global_block().ops
                  if op.name() == "builtin.set_parameter"]
    changed = init_changes(inits[0], inits[1], params, 0)
    why = f"\nthe merged startup program: {describe_init_changes(changed)}" if changed else ""
    try:
        got = run(merged[0], merged[1], k, True, names=list(ref[0]), inits=inits)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("NOT_EQUIVALENT: the merged program fails where the original runs" + why)
        print("DEFECT")
        return 1
    for c, (a, b) in enumerate(zip(ref, got)):
        for name in a:
            r, m = a[name].astype(np.float64), b[name].astype(np.float64)
            tol = 1e-5 * (np.abs(r) + np.sqrt(np.mean(r * r)) + 1e-30) + 1e-7
            bad = np.abs(r - m) > tol
            if bad.any():
                i = tuple(int(j) for j in np.argwhere(bad)[0])
                print(f"NOT_EQUIVALENT: {name} after optimizer step {c} index {list(i)}: "
                      f"{k} merged micro-steps give {m[i]:.6g}, one step on the "
                      f"concatenated micro-batches {r[i]:.6g} ({int(bad.sum())} of "
                      f"{bad.size} elements differ){why}")
                print("DEFECT: the merged program computes other values")
                return 1
    with paddle.pir_utils.IrGuard():
        race = unordered_inplace(merged[0])
    if race:
        name, a, b = race
        ops = merged[0].global_block().ops
        print(f"NOT_EQUIVALENT: ops {a} ({ops[a].name()}) and {b} ({ops[b].name()}) both "
              f"write the accumulator {name} in place in the optimize job, and no data "
              "dependence orders them: the executor may run them in either order")
        print("DEFECT: unordered in-place writes of one buffer")
        return 1
    print(f"no defect: parameters and optimizer states agree over {CYCLES} optimizer steps")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
'''


def script(adapter, case, pass_file=None, seed=None) -> str:
    """The reproducer's source text for ``adapter`` (the PIR gradient merge)
    on a PIR ``case``."""
    from verify.repro.embedded import literal
    from verify.repro.errors import ReproError
    from verify.repro.embedded import constants

    mod = inspect.getmodule(case.builder)
    if not hasattr(mod, "build_programs"):
        raise ReproError(f"case {case.name}'s module has no build_programs(params)")
    title = adapter.name + " on case " + case.name + (
        f" (pass from {os.path.abspath(pass_file)})" if pass_file else "")
    # every value from input is a literal (verify/repro/embedded.py), never
    # text in the docstring: the pass and the case are TITLE
    parts = ['"""Reproducer (PIR) of the application named by TITLE below. Needs only '
             'Paddle.\nExit 1 while the defect is present, 0 once the merge is '
             'faithful, 2 when it cannot judge."""',
             f"TITLE = {literal(title)}", f"PARAMS = {literal(dict(case.params))}",
             # embedded, registered in place of the installed pass
             pass_loader(pass_file).strip()]
    consts = dict(getattr(mod, "REPRO_CONSTANTS", {}))
    consts.setdefault("B", 2)
    parts += constants(consts)
    for fn in list(getattr(mod, "REPRO_SOURCES", ())) + [mod.build_programs]:
        parts.append(textwrap.dedent(inspect.getsource(fn)))
    parts.append(pir_source())  # draws parameters as the suite does
    body = BODY.replace("__SEED__", str(0 if seed is None else int(seed)))
    return "\n\n".join(parts) + "\n" + body
