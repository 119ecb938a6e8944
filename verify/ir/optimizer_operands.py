"""The optimizer ops of a live PIR program, by their operands: every op with
a ``param`` and a ``grad`` operand (sgd_, adam_, adamw_, momentum_, ... by
their operand names, never their op names).  The planner's records
(``verify/plan/stages.py``) and the job plan runs
(``verify/numeric/job_plan_runs.py``) both find optimizer updates this way."""
from __future__ import annotations


def param_grad_operands(program) -> list:
    """``[(op, param operand, grad operand)]`` of ``program``'s global block."""
    out = []
    for op in program.global_block().ops:
        try:
            slots = list(op.get_input_names())
        except Exception:  # an op without an op-info (builtin ops)
            continue
        if "param" in slots and "grad" in slots:
            out.append((op, op.operand_source(slots.index("param")),
                        op.operand_source(slots.index("grad"))))
    return out
