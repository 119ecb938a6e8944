"""Planner coverage: which of Paddle's reshard functions and which lines
(branches) of them and of the partition / reshard / remove passes ran,
aggregated from the ranks' ``coverage.json`` traces
(``verify/plan/coverage_trace.py``) of any number of plans.

The universe is read from the installed sources (``ast``): every class of
``reshard_funcs/*.py`` that defines ``reshard`` (a reshard function; it "ran"
when its ``reshard`` ran), and the functions of ``pir_pass.py`` that
partition, reshard and remove (``PASS_FUNCS``).  A function's executable
lines are its code object's line table (nested functions apart), so "lines
run / lines" counts the statements a plan reached, a branch's body included.
"""
from __future__ import annotations

import ast
import json
import os
import types
from pathlib import Path

PASS_FUNCS = ("reshard_single_value", "reshard_combine_value", "apply_partition_pass",
              "ReshardPasses.decompose_reshard_pass", "ReshardPasses.fold_reshard_pass",
              "ReshardPasses.reshard_op_pass", "ReshardPasses.apply_reshard_pass",
              "RemovePasses.remove_other_rank_op_pass",
              "RemovePasses.remove_other_rank_op_pass.<locals>.prune_op",
              "RemovePasses.remove_no_need_in_startup",
              "RemovePasses.remove_other_rank_input_output_pass",
              "RemovePasses.remove_other_rank_params_grads_pass", "RemovePasses.apply_all",
              "remove_unuseful_comm_op_pass")


def static_root() -> str:
    from verify.plan.coverage_trace import traced_root

    return traced_root()


def reshard_functions(root: str | None = None) -> list:
    """``[(file relative to root, class name)]`` of every installed reshard
    function (a class of ``reshard_funcs/`` defining ``reshard``)."""
    root = root or static_root()
    out = []
    for f in sorted(Path(root, "reshard_funcs").glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name != "ReshardFunction" and any(
                    isinstance(b, ast.FunctionDef) and b.name == "reshard" for b in node.body):
                out.append((os.path.relpath(f, root), node.name))
    return out


def executable_lines(path: str) -> dict:
    """``{qualname: set(lines)}`` of every function of the file."""
    src = Path(path).read_text()
    out = {}

    def walk(code):
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                out[getattr(c, "co_qualname", c.co_name)] = {
                    ln for _, _, ln in c.co_lines() if ln is not None}
                walk(c)
    walk(compile(src, path, "exec"))
    return out


def merge_traces(files) -> dict:
    """``{"file::qualname": set(lines)}`` over every trace file given."""
    got: dict = {}
    for f in files:
        data = json.loads(Path(f).read_text())
        for key, lines in data["lines"].items():
            got.setdefault(key, set()).update(lines)
    return got


def traces_under(folders) -> list:
    return [p for d in folders for p in sorted(Path(d).glob("rank*/coverage.json"))]


def report(got: dict, root: str | None = None) -> dict:
    """``{"reshard": [{function, file, ran, lines_run, lines, missed}],
    "passes": [...]}`` for the traces merged in ``got``."""
    root = root or static_root()
    table = {"reshard": [], "passes": []}
    cache: dict = {}

    def row(rel, qual, label):
        if rel not in cache:
            cache[rel] = executable_lines(os.path.join(root, rel))
        lines = cache[rel].get(qual, set())
        ran = got.get(f"{rel}::{qual}", set()) & lines
        return {"function": label, "file": rel, "ran": bool(got.get(f"{rel}::{qual}")),
                "lines_run": len(ran), "lines": len(lines),
                "missed": sorted(lines - ran)}
    for rel, cls in reshard_functions(root):
        table["reshard"].append(row(rel, f"{cls}.reshard", cls))
        for qual in sorted(cache[rel]):  # its helpers (padding, transpose paths)
            if qual.startswith(cls + ".") and qual not in (f"{cls}.reshard", f"{cls}.is_suitable") \
                    and "<locals>" not in qual:
                table["reshard"].append(row(rel, qual, qual))
    for qual in PASS_FUNCS:
        table["passes"].append(row("pir_pass.py", qual, qual))
    return table


def _ranges(lines) -> str:
    out, start, prev = [], None, None
    for ln in lines:
        if start is None:
            start = prev = ln
        elif ln == prev + 1:
            prev = ln
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = ln
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(out)


def format_table(table: dict, width: int = 60) -> str:
    rows = ["planner coverage (runtime trace of the planning processes):",
            f"  {'reshard function':<44} {'ran':<4} {'lines':>7}  not run (lines)"]
    for r in table["reshard"]:
        rows.append(f"  {r['function']:<44} {'yes' if r['ran'] else 'NO':<4} "
                    f"{r['lines_run']:>3}/{r['lines']:<3}  {_ranges(r['missed'])[:width]}")
    rows.append(f"  {'partition / reshard / remove (pir_pass.py)':<44} {'ran':<4} {'lines':>7}")
    for r in table["passes"]:
        rows.append(f"  {r['function']:<44} {'yes' if r['ran'] else 'NO':<4} "
                    f"{r['lines_run']:>3}/{r['lines']:<3}  {_ranges(r['missed'])[:width]}")
    funcs = [r for r in table["reshard"] if "." not in r["function"]]
    rows.append(f"  reshard functions run: {sum(r['ran'] for r in funcs)}/{len(funcs)}; "
                f"not run: {', '.join(r['function'] for r in funcs if not r['ran']) or 'none'}")
    return "\n".join(rows)
