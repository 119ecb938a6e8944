"""Report facts in words, shared by the views (index.html, junit.xml): a
counterexample as a sentence, the commands that rerun or reproduce an
application, a check's message without what its section already says."""
from __future__ import annotations

import shlex

from verify.ir.paddle_overlay import command_flags


def fmt(value) -> str:
    """A short, readable rendering of a report value (numbers to 6 digits)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    return "" if value is None else str(value)


def repro_command(app: dict) -> str:
    """The command that reproduces this one application."""
    cmd = (f"python -m verify run --pass {shlex.quote(str(app.get('pass', '')))} "
           f"--case {shlex.quote(str(app.get('case', '')))}")
    cmd += command_flags(str(app.get("source") or "installed"))
    if app.get("case_file"):
        cmd += f" --case-file {shlex.quote(str(app['case_file']))}"
    return cmd


def reproducer_command(app: dict) -> str:
    """The command that writes this application's self-contained reproducer
    (``python -m verify repro``; the script needs only Paddle)."""
    cmd = (f"python -m verify repro --pass {shlex.quote(str(app.get('pass', '')))} "
           f"--case {shlex.quote(str(app.get('case', '')))}")
    # --pass-file PATH, or --paddle-file PATH per overlaid module (embedded in the script)
    cmd += command_flags(str(app.get("source") or "installed"))
    if app.get("case_file"):
        cmd += f" --case-file {shlex.quote(str(app['case_file']))}"
    return cmd


def _op(cex: dict) -> str:
    where = f"op {cex['op_index']}"
    if cex.get("op_type"):
        where += f" ({cex['op_type']})"
    if cex.get("program") == "startup":
        where = "startup " + where
    return where


def describe_counterexample(check: dict) -> tuple[str, str | None]:
    """(one plain sentence, optional long text) for a check's counterexample."""
    cex = dict(check.get("counterexample") or {})
    if not cex:
        return "", None
    used = set()

    def take(*keys):
        used.update(keys)
        return [cex.get(k) for k in keys]

    rank = cex.get("rank", check.get("rank"))
    used.add("rank")
    on_rank = f" on rank {rank}" if rank is not None else ""
    dims = cex.get("dims") or {}
    used.add("dims")
    with_dims = ("with " + ", ".join(f"{k}={fmt(v)}" for k, v in sorted(dims.items())) + ", "
                 if dims else "")
    long_text = None

    if "error" in cex and "tensor" not in cex:
        (error,) = take("error")
        first = str(error).strip().splitlines()[0] if str(error).strip() else "an error"
        text = f"the rewritten program fails to run where the original runs: {first}"
        long_text = str(error)
    elif "tensor" in cex:
        backend, tensor, step, index, orig, rew, err, tol = take(
            "backend", "tensor", "step", "index", "original", "rewritten", "abs_err", "tol")
        text = (f"{backend + ' run' if backend else 'run'}{on_rank}: tensor {tensor} at step "
                f"{fmt(step)}, index {fmt(index)}: original {fmt(orig)}, rewritten {fmt(rew)}, "
                f"abs err {fmt(err)}" + (f" > tol {fmt(tol)}" if tol is not None else ""))
    elif isinstance(cex.get("first"), dict) and isinstance(cex.get("second"), dict):
        a, b, var = take("first", "second", "var")

        def part(o):
            return f"op {o.get('op_index')} ({o.get('op_type')}) on stream {o.get('stream')!s}"

        text = (f"stream race{on_rank}: {part(a)} and {part(b)} both touch {var} and "
                f"nothing orders them; a schedule the executor allows: op {a.get('op_index')} "
                f"runs from t={fmt(a.get('start'))} to t={fmt(a.get('end'))}, op "
                f"{b.get('op_index')} from t={fmt(b.get('start'))} to t={fmt(b.get('end'))}, "
                "so they overlap")
    elif "op_index" in cex:
        take("op_index", "op_type", "program")
        head = f"{with_dims}{_op(cex)}{on_rank}"
        if "declared" in cex and "inferred" in cex:
            var, declared, inferred = take("var", "declared", "inferred")
            text = (f"{head}: output {var} is declared {fmt(declared)} but the op makes "
                    f"{fmt(inferred)}")
        elif "target" in cex and "expected" in cex:
            var, src, target, expected, rule = take("var", "input", "target", "expected", "rule")
            text = (f"{head}: reshapes {var} from {fmt(src)} to {fmt(target)}, but the "
                    f"matmul's {rule or 'FoldInitDims'} needs {fmt(expected)}")
        elif "writes_seen_rewritten" in cex:
            var, n_rew, n_orig = take("var", "writes_seen_rewritten", "writes_seen_original")
            text = (f"{head} reads {var} after {fmt(n_rew)} write(s) in the rewritten program "
                    f"but after {fmt(n_orig)} in the original, so it sees another value")
        elif "rule" in cex:
            (rule,) = take("rule")
            text = f"{head}: {rule}"
        elif check.get("kind") == "dataflow" and "var" in cex:
            (var,) = take("var")
            text = f"{head} reads {var} before anything writes it"
        else:
            text = head
        if isinstance(cex.get("inputs"), dict):
            (inputs,) = take("inputs")
            text += "; inputs: " + ", ".join(
                f"{k} {fmt(v[0] if isinstance(v, list) and len(v) == 1 else v)}"
                for k, v in inputs.items())
        if "planned_for_op" in cex:
            (planned,) = take("planned_for_op")
            text += (f" (in the ops the pass will build for op {planned}, "
                     "found before the pass runs)")
    else:
        text = f"{with_dims}{on_rank.strip() or 'all ranks'}"
    rest = [f"{k} = {fmt(v)}" for k, v in cex.items() if k not in used]
    if rest:
        text += ("; " if text else "") + "; ".join(rest)
    return text, long_text


def short_message(app: dict, check: dict) -> str:
    """A check's message without the pass/case/rank the section already shows."""
    msg = str(check.get("message") or "")
    p, c, r = app.get("pass"), app.get("case"), check.get("rank")
    if r is None:
        return msg
    for prefix in (f"{p} on {c} rank {r}: ", f"{p} on case {c} rank {r}: "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    if p and msg.startswith(f"{p} "):
        msg = msg[len(p) + 1:]
    for inner in (f" on case {c} rank {r}", f" on {c} rank {r}", f" of {c} rank {r}"):
        if inner in msg:
            return msg.replace(inner, "", 1)
    return str(check.get("message") or "")
