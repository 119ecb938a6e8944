"""Every reshard function of the installed Paddle is run by a case, or
``docs/planner.md`` says why none can ("Reshard functions no case runs",
with the error or the code path that keeps it out of reach).

``RUN_BY`` names, per reshard function (a class of ``reshard_funcs/`` with a
``reshard``: ``verify/generate/coverage.py``), a built-in case whose
planning runs its ``reshard``; each claim is checked by planning that case
with the runtime trace on (``verify/plan/coverage_trace.py``).  A function a
new Paddle adds, which no case runs and the docs do not explain, fails
``test_every_reshard_function_is_run_or_explained``.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from verify.generate.coverage import merge_traces, report, reshard_functions, traces_under

DOC = Path(__file__).resolve().parents[1] / "docs" / "planner.md"
SECTION = "## Reshard functions no case runs"

RUN_BY = {
    "PToRReshardFunction": "planner_tp2",
    "GlobalToSubMeshFunction": "planner_sub_mesh_ids23",
    "SubToGlobalMeshFunction": "planner_sub_mesh_ids23",
    "SameStatusReshardFunction": "planner_pp2",
    "RToSReshardFunction": "planned_row_sp_pir",
    "SToRReshardFunction": "planned_row_sp_pir",
    "PToSReshardFunction": "planner_gen_p_to_s_transpose",
    "SToSReshardFunction": "planner_gen_s_to_s",
    "NdMeshReshardFunction": "planner_gen_nd_mesh_p_to_r",
    "RToPReshardFunction": "planner_gen_cross_p_to_r",
}
# branches a case is listed for: (function's qualname, a line's text it runs)
BRANCHES = {
    "planner_gen_p_to_s_transpose": [("PToSReshardFunction.reshard", "transpose")],
    "planner_gen_nd_mesh_r_to_p": [("NdMeshReshardFunction.reshard",
                                    "RToPReshardFunction().reshard(")],
    "planner_gen_p_to_s_padding": [("PToSReshardFunction.reshard_p_to_s_with_padding",
                                    "reduce_scatter")],
    "planner_gen_nd_mesh_p_to_r": [("NdMeshReshardFunction.reshard",
                                    "in_partial_status = src_dist_attr.partial_status")],
}


# the cases beside RUN_BY's that the pass functions' coverage counts
PASS_CASES = ("planner_dp2", "planner_gen_pp2_attention")


def explained() -> dict:
    """``{function: reason}`` from the docs' section."""
    text = DOC.read_text()
    assert SECTION in text, f"docs/planner.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^- `(\w+)`: (.+)$", body, re.M))


def test_every_reshard_function_is_run_or_explained():
    installed = {cls for _, cls in reshard_functions()}
    assert len(installed) >= 14  # 3.3.1's reshard_funcs/
    why = explained()
    missing = sorted(installed - set(RUN_BY) - set(why))
    assert not missing, (f"reshard functions no case runs and docs/planner.md does not "
                         f"explain: {missing}")
    assert not set(RUN_BY) & set(why), "a function both run and explained"
    assert set(why) <= installed, f"docs explain functions Paddle lacks: {set(why) - installed}"
    for name, reason in why.items():  # a reason, not a placeholder
        assert len(reason) > 80 and "`" in reason, (name, reason)


@pytest.mark.parametrize("case_name", sorted(set(RUN_BY.values()) | set(BRANCHES)))
def test_a_listed_case_runs_its_reshard_functions(case_name):
    import cases
    from cases.planner_models import planned_dir

    case = cases.all_cases()[case_name]
    traced = dataclasses.replace(case, params={**case.params, "trace": True})
    folder = planned_dir(traced)
    table = report(merge_traces(traces_under([folder])))
    ran = {r["function"] for r in table["reshard"] if r["ran"]}
    want = {f for f, c in RUN_BY.items() if c == case_name}
    assert want <= ran, f"{case_name} no longer runs {sorted(want - ran)} (ran {sorted(ran)})"
    got = merge_traces(traces_under([folder]))
    for qual, needle in BRANCHES.get(case_name, []):
        rel = next(f for f, cls in reshard_functions() if cls == qual.split(".")[0])
        src = (Path(table_root()) / rel).read_text().splitlines()
        lines = got.get(f"{rel}::{qual}", set())
        assert any(needle in src[n - 1] for n in lines), (case_name, qual, needle)


def table_root():
    from verify.generate.coverage import static_root

    return static_root()


def _traced_dir(case_name):
    import cases
    from cases.planner_models import planned_dir

    case = cases.all_cases()[case_name]
    return planned_dir(dataclasses.replace(case, params={**case.params, "trace": True}))


def test_the_built_in_cases_run_every_pass_function_and_the_comm_removal():
    """Together the listed cases run every partition / reshard / remove
    function of ``pir_pass.py`` the planner calls, and the branch of
    ``remove_unuseful_comm_op_pass`` that erases a collective on a ring of
    one rank (``PASS_CASES``: a DP x TP mesh of 2 x 1, whose ``mp`` ring is
    one rank; a pipeline resharding an operand list)."""
    from verify.generate.coverage import PASS_FUNCS

    folders = [_traced_dir(c) for c in sorted(set(RUN_BY.values()) | set(PASS_CASES))]
    got = merge_traces(traces_under(folders))
    table = report(got)
    not_run = [r["function"] for r in table["passes"] if not r["ran"]]
    assert not not_run, f"pass functions no listed case runs: {not_run}"
    assert len(table["passes"]) == len(PASS_FUNCS)
    src = (Path(table_root()) / "pir_pass.py").read_text().splitlines()
    guard = next(i + 1 for i, ln in enumerate(src) if "process_group.nranks == 1" in ln)
    assert guard + 1 in got["pir_pass.py::remove_unuseful_comm_op_pass"], \
        "no listed case erases a collective on a ring of one rank"
