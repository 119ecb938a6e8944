"""Self-contained reproducers of PIR applications (``python -m verify repro``
on a case with ``ir = "pir"``).

The script needs only Paddle: it embeds the case's own program builder
(``build_programs(params)`` of the case's module, plus the helpers named in
its ``REPRO_SOURCES``) and the adapter's ``repro_apply_source()`` (a function
``apply_pass(main)`` doing what the adapter does), builds the program, applies
the pass to a clone, and runs both with identical seeded parameters and
inputs for three SGD steps under PIR.  It prints ``DEFECT`` with a
traceback (the pass raised) or the first differing value (``NOT_EQUIVALENT``:
tensor, step, index, both values) and exits 1; ``no defect`` and exit 0 when
every loss and parameter agrees; 2 when it cannot judge.
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

STEPS, SEED = 3, __SEED__


def _rng(name, *more):
    return np.random.default_rng([SEED, zlib.crc32(name.encode()), *more])


def run(main, startup, loss, x_shape):
    """[{"loss", "w0", "w1", ...}] per step."""
    out = []
    with paddle.pir_utils.IrGuard():
        scope = paddle.static.Scope()
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(scope):
            paddle.seed(SEED)  # the startup's own draws, the same on every run
            exe.run(startup)
            names = sorted(op.attrs()["parameter_name"] for op in main.global_block().ops
                           if op.name() == "builtin.parameter")
            for n in names:
                t = scope.find_var(n).get_tensor()
                shape = np.array(t).shape
                bound = 1.0 / np.sqrt(max(shape[0], 1))
                t.set(_rng(n, 0).uniform(-bound, bound, size=shape).astype("float32"),
                      paddle.CPUPlace())
            for k in range(STEPS):
                x = _rng("x", k).standard_normal(size=x_shape).astype("float32")
                got = exe.run(main, feed={"x": x}, fetch_list=[loss])
                step = {"loss": np.array(got[0])}
                for n in names:
                    step[n] = np.array(scope.find_var(n).get_tensor())
                out.append(step)
    return out


def main_():
    print("reproducer:", "".join(c if c.isprintable() else repr(c)[1:-1] for c in TITLE))
    print("pass from:", load_pass_source())
    built = build_programs(PARAMS)  # (main, startup, loss[, params_grads], x_fed_shape)
    main, startup, loss, x_shape = built[0], built[1], built[2], built[-1]
    with paddle.pir_utils.IrGuard():
        mapping = paddle.pir.IrMapping()
        rewritten = main.clone(mapping)
        loss2 = mapping.look_up(loss)
        try:
            apply_pass(rewritten)
        except Exception:
            traceback.print_exc(file=sys.stdout)
            print("DEFECT: the pass raised (Traceback above)")
            return 1
    try:
        ref = run(main, startup, loss, x_shape)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("cannot judge: the ORIGINAL program does not run")
        return 2
    try:
        got = run(rewritten, startup, loss2, x_shape)
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("NOT_EQUIVALENT: the rewritten program fails where the original runs")
        print("DEFECT")
        return 1
    for k, (a, b) in enumerate(zip(ref, got)):
        for name in a:
            r, c = a[name].astype(np.float64), b[name].astype(np.float64)
            if r.shape != c.shape:
                print(f"NOT_EQUIVALENT: {name} at step {k}: shape {list(c.shape)} vs "
                      f"{list(r.shape)}")
                print("DEFECT")
                return 1
            tol = 1e-5 * (np.abs(r) + np.sqrt(np.mean(r * r)) + 1e-30)
            bad = np.abs(r - c) > tol
            if bad.any():
                i = tuple(int(j) for j in np.argwhere(bad)[0])
                print(f"NOT_EQUIVALENT: {name} after step {k} index {list(i)}: rewritten "
                      f"{c[i]:.6g} vs original {r[i]:.6g} ({int(bad.sum())} of {bad.size} "
                      "elements differ)")
                print("DEFECT: the rewritten program computes other values")
                return 1
    print(f"no defect: loss and parameters agree over {STEPS} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
'''


def _ranks_script(adapter, case, pass_file, seed):
    from verify.repro.pir_ranks_script import script as ranks_script

    return ranks_script(adapter, case, pass_file, seed)


def _micro_step_script(adapter, case, pass_file, seed):
    from verify.repro.micro_step_script import script as micro_script

    return micro_script(adapter, case, pass_file, seed)


# ``PassAdapter.repro_kind`` -> the writer of that kind of reproducer
_KINDS = {"pir_ranks": _ranks_script, "micro_steps": _micro_step_script}


def kind(adapter, case) -> str:
    """Which kind of reproducer a PIR application gets: the adapter's own
    (``repro_kind``), the lock-step one for a case of several ranks
    (``pir_ranks``), else this module's (``pir``)."""
    own = getattr(adapter, "repro_kind", None)
    if own is not None:
        return own
    return "pir_ranks" if len(getattr(case, "ranks", ())) > 1 else "pir"


def _names(code) -> set:
    """Every global name ``code`` (and the code nested in it) reads."""
    out = set(code.co_names)
    for c in code.co_consts:
        if inspect.iscode(c):
            out |= _names(c)
    return out


def referenced_constants(mod, fns, given) -> dict:
    """The case module's plain-data globals (``H = 8``) the embedded
    functions read but ``REPRO_CONSTANTS`` does not name: without them the
    reproducer dies of a NameError before it applies the pass.  Anything
    that is not plain data (modules, functions, classes) is left out."""
    from verify.repro.embedded import literal
    from verify.repro.errors import ReproError

    embedded = {fn.__name__ for fn in fns}
    out = {}
    for fn in fns:
        for name in sorted(_names(fn.__code__)):
            if name in given or name in embedded or name in out or not name.isidentifier():
                continue
            if name not in vars(mod):
                continue
            value = vars(mod)[name]
            if not isinstance(value, (int, float, str, bytes, bool, tuple, list, dict)):
                continue
            try:
                literal(value)
            except ReproError:
                continue
            out[name] = value
    return out


def script(adapter, case, pass_file=None, seed=None, found=None) -> str:
    """The reproducer's source text for a PIR ``case``; a ``pass_file`` is
    embedded and registered in place of the installed pass (verify/repro/embedded.py)."""
    from verify.repro.embedded import literal, pass_loader
    from verify.repro.errors import ReproError

    which = kind(adapter, case)
    if which != "pir":  # an oracle that needs its own kind of reproducer
        return _KINDS[which](adapter, case, pass_file, seed)
    get = getattr(adapter, "repro_apply_source", None)
    if get is None:
        raise ReproError(f"{adapter.name} gives no apply source for a PIR reproducer")
    mod = inspect.getmodule(case.builder)
    if not hasattr(mod, "build_programs"):
        raise ReproError(f"case {case.name}'s module has no build_programs(params)")
    title = adapter.name + " on case " + case.name + (
        f" (pass from {os.path.abspath(pass_file)})" if pass_file else "") + (
        f"; the suite found: {found} (baseline {case.expectation(adapter.name).verdict})"
        if found else "")
    # every value from input is a literal (verify/repro/embedded.py), never
    # text in the docstring: the pass and the case are TITLE
    parts = ['"""Reproducer (PIR) of the application named by TITLE below. Needs only '
             'Paddle.\nExit 1 while the defect is present, 0 once the rewrite is '
             'faithful, 2 when it cannot judge."""',
             f"TITLE = {literal(title)}", f"PARAMS = {literal(dict(case.params))}",
             pass_loader(pass_file).strip()]
    from verify.repro.embedded import constants

    table = dict(getattr(mod, "REPRO_CONSTANTS", {}))
    fns = list(getattr(mod, "REPRO_SOURCES", ())) + [mod.build_programs]
    table.update(referenced_constants(mod, fns, table))
    parts += constants(table)
    for fn in fns:
        parts.append(textwrap.dedent(inspect.getsource(fn)))
    parts.append(textwrap.dedent(get()))
    body = BODY.replace("__SEED__", str(0 if seed is None else int(seed)))
    return "\n\n".join(parts) + "\n" + body
