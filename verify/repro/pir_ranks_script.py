"""Self-contained reproducers of multi-rank PIR applications (the
``pir_collectives`` cases): ``python -m verify repro`` on them, and the
reproducer ``verify run`` writes for each finding.

The script needs only Paddle.  It embeds the case module's program builder
(``build_programs(params, rank)``, the one the case's builder names as its
``programs``, with the module's ``REPRO_CONSTANTS`` and ``REPRO_SOURCES``) and
the adapter's ``repro_apply_source()``, builds every rank's program, applies
the pass to a clone, and runs original and rewritten programs of all ranks
for three steps in lock step: each rank's program is cut at its collectives
(stage j: the first j collectives' results fed back as data, the program
truncated before collective j), and the collectives (all-reduce of any
reduce type, reduce_scatter and all_gather along dim 0) are performed by the
script between stages.  Watched: the results of every ``pd_op.scale``,
``pd_op.add_`` and ``pd_op.matmul_grad`` (the k-th op of a type after the
rewrite stands for the k-th before).  It prints ``DEFECT`` and exits 1 with
the first differing rank, value, step and index (``NOT_EQUIVALENT``), the
traceback (the pass raised) or "did nothing" (the all-reduce + split chain is
there and the pass left every rank unchanged); ``no defect`` and exit 0 when
every watched value agrees; 2 when the original cannot run.
"""
from __future__ import annotations

import inspect
import os
import textwrap

BODY = r'''
import sys
import traceback
import zlib

import numpy as np
import paddle

paddle.enable_static()
STEPS, SEED = 3, __SEED__
WATCH_TYPES = ("pd_op.scale", "pd_op.add_", "pd_op.matmul_grad")
COLLECTIVES = {"pd_op.all_reduce", "pd_op.all_reduce_", "pd_op.reduce_scatter",
               "pd_op.all_gather"}
REDUCE = {0: np.sum, 1: np.max, 2: np.min, 3: np.prod}


def _rng(*key):
    return np.random.default_rng([SEED] + [zlib.crc32(str(k).encode()) for k in key])


def stage(main, cuts, j, watch):
    """Stage j of main: the first j collectives' results fed as data
    (__coll_<i>), everything from collective j on erased; its fetch list."""
    prog = main.clone()
    ops = list(prog.global_block().ops)
    fed = {}
    with paddle.static.program_guard(prog):
        paddle.pir.reset_insertion_point_to_start()
        for i in range(min(j, len(cuts))):
            res = ops[cuts[i]].result(0)
            new = paddle.static.data(f"__coll_{i}", list(res.shape),
                                     str(res.dtype).replace("paddle.", ""))
            res.replace_all_uses_with(new)
            fed[cuts[i]] = new
        paddle.pir.reset_insertion_point_to_end()
    fetch = [ops[cuts[j]].operand_source(0)] if j < len(cuts) else \
        [fed[i] if i in fed else ops[i].result(k) for i, k in watch]
    if j < len(cuts):
        for op in reversed(ops[cuts[j]:]):
            op.erase()
    for i in range(min(j, len(cuts))):
        ops[cuts[i]].erase()
    names = [op.attrs()["name"] for op in prog.global_block().ops if op.name() == "pd_op.data"]
    return prog, fetch, names


def watched(main):
    """[(op index, result index)] of the watched results, by type and order."""
    out = []
    for t in WATCH_TYPES:
        for i, op in enumerate(main.global_block().ops):
            if op.name() == t:
                out += [(i, k) for k in range(op.num_results()) if op.result(k).initialized()]
    return out


def perform(op, xs, r):
    attrs = op.attrs()
    if op.name() in ("pd_op.all_reduce", "pd_op.all_reduce_"):
        return REDUCE[int(attrs.get("reduce_type", 0))](np.stack(xs), axis=0)
    if op.name() == "pd_op.reduce_scatter":
        return np.split(np.sum(np.stack(xs), axis=0), len(xs), axis=0)[r]
    return np.concatenate(xs, axis=0)


def run_all(progs):
    """{rank: [[watched arrays] per step]} of every rank's program in lock step."""
    out = {r: [] for r in progs}
    with paddle.pir_utils.IrGuard():
        st = {}
        for r, main in progs.items():
            ops = list(main.global_block().ops)
            cuts = [i for i, op in enumerate(ops) if op.name() in COLLECTIVES]
            w = watched(main)
            st[r] = (ops, cuts, [stage(main, cuts, j, w) for j in range(len(cuts) + 1)])
        counts = {len(c) for _, c, _ in st.values()}
        if len(counts) != 1:
            raise RuntimeError(f"ranks run different numbers of collectives: {counts}")
        ncoll = counts.pop()
        exe = paddle.static.Executor(paddle.CPUPlace())
        for k in range(STEPS):
            feeds = {r: {name: (_rng(name, k) if split == "dp" else _rng(name, k, r))
                         .standard_normal(shape).astype("float32")
                         for name, shape, split in FEEDS} for r in progs}
            for j in range(ncoll + 1):
                got = {}
                for r, (ops, cuts, stages) in st.items():
                    prog, fetch, names = stages[j]
                    scope = paddle.static.Scope()
                    with paddle.static.scope_guard(scope):
                        res = exe.run(prog, feed={m: feeds[r][m] for m in names},
                                      fetch_list=fetch)
                    got[r] = [np.array(a) for a in res]
                if j < ncoll:
                    order = sorted(got)
                    xs = [got[r][0] for r in order]
                    for r, (ops, cuts, _) in st.items():
                        feeds[r][f"__coll_{j}"] = perform(ops[cuts[j]], xs, order.index(r))
                else:
                    for r in progs:
                        out[r].append(got[r])
    return out


def main_():
    print("reproducer:", "".join(c if c.isprintable() else repr(c)[1:-1] for c in TITLE))
    print("pass from:", load_pass_source())
    originals, rewritten = {}, {}
    for r in RANKS:
        main, _ = build_programs(PARAMS, r)
        with paddle.pir_utils.IrGuard():
            originals[r] = main
            rewritten[r] = main.clone()
            try:
                apply_pass(rewritten[r])
            except Exception:
                traceback.print_exc(file=sys.stdout)
                print(f"DEFECT: the pass raised on rank {r} (Traceback above)")
                return 1
    with paddle.pir_utils.IrGuard():
        same = all([o.name() for o in originals[r].global_block().ops] ==
                   [o.name() for o in rewritten[r].global_block().ops] for r in RANKS)
    if same and all(PATTERN.get(str(r)) for r in RANKS):
        print(f"DEFECT: the pass did nothing on every rank, where its pattern is present "
              f"(rank {RANKS[0]}: {PATTERN[str(RANKS[0])]}) (NOT_APPLIED)")
        return 1
    try:
        ref = run_all(originals)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("cannot judge: the ORIGINAL programs do not run")
        return 2
    try:
        got = run_all(rewritten)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("NOT_EQUIVALENT: the rewritten programs fail where the originals run")
        print("DEFECT")
        return 1
    for r in RANKS:
        for k, (a, b) in enumerate(zip(ref[r], got[r])):
            for i, (x, y) in enumerate(zip(a, b)):
                if x.shape != y.shape:
                    print(f"NOT_EQUIVALENT: rank {r} watched value {i} at step {k}: shape "
                          f"{list(y.shape)} vs {list(x.shape)}")
                    print("DEFECT")
                    return 1
                tol = 1e-4 * (np.abs(x) + np.sqrt(np.mean(x * x)) + 1e-30)
                bad = np.abs(x.astype(np.float64) - y) > tol
                if bad.any():
                    idx = tuple(int(j) for j in np.argwhere(bad)[0])
                    print(f"NOT_EQUIVALENT: rank {r} watched value {i} at step {k} index "
                          f"{list(idx)}: rewritten {y[idx]:.6g} vs original {x[idx]:.6g} "
                          f"({int(bad.sum())} of {bad.size} elements differ)")
                    print("DEFECT: the rewritten programs compute other values")
                    return 1
    print(f"no defect: every watched value of every rank agrees over {STEPS} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
'''


def script(adapter, case, pass_file=None, seed=None) -> str:
    """The reproducer's source text for a multi-rank PIR ``case``."""
    from verify.repro.embedded import literal, pass_loader
    from verify.repro.errors import ReproError
    from verify.repro.embedded import constants

    programs = getattr(case.builder, "programs", None)
    if programs is None:
        raise ReproError(f"case {case.name}'s builder names no programs(params, rank) "
                         "function to embed")
    mod = inspect.getmodule(programs)
    rp = case.build(case.ranks[0])
    feeds = [(str(f.name), [int(d) for d in f.shape], f.split) for f in rp.feeds]
    pattern = _pattern(adapter, case)
    title = adapter.name + " on case " + case.name + (
        f" (pass from {os.path.abspath(pass_file)})" if pass_file else "")
    # every value from input is a literal (verify/repro/embedded.py), never
    # text in the docstring: the pass and the case are TITLE
    parts = [f'"""Reproducer (PIR, {int(case.world_size)} ranks) of the application named '
             'by TITLE below. Needs only Paddle.\nExit 1 while the defect is present, 0 once '
             'the rewrite is faithful, 2 when it cannot judge."""',
             f"TITLE = {literal(title)}", pass_loader(pass_file).strip(),
             f"PARAMS = {literal(dict(case.params))}",
             f"RANKS = {literal([int(r) for r in case.ranks])}",
             f"FEEDS = {literal(feeds)}",
             "# where the adapter's matcher found the pass's documented pattern on each",
             "# rank's original when this script was written ('' = absent)",
             f"PATTERN = {literal(pattern)}"]
    parts += constants(getattr(mod, "REPRO_CONSTANTS", {}))
    for fn in list(getattr(mod, "REPRO_SOURCES", ())) + [programs]:
        parts.append(textwrap.dedent(inspect.getsource(fn)))
    parts.append(f"build_programs = {programs.__name__}")
    parts.append(textwrap.dedent(adapter.repro_apply_source()))
    parts.append(BODY.replace("__SEED__", repr(0 if seed is None else int(seed))))
    return "\n\n".join(parts) + "\n"


def _pattern(adapter, case) -> dict:
    """``{rank: text}``: the pass's documented pattern on each rank's
    original, as the adapter's matcher judges it ("" where absent)."""
    from verify.ir.rank_snapshot import snapshot_of

    out = {}
    for r in case.ranks:
        present = adapter.pattern_present(snapshot_of(case.build(r), case, r, "original"))
        out[str(r)] = f"{adapter.name}'s documented pattern, found by the suite's " \
            "matcher on the original" if present else ""
    return out
