"""3.3.1's r_to_p keeps the value where the GLOBAL rank is 0
(``planner_gen_r_to_p_rank0``: a dp x mp mesh [[0], [1]], an output gradient
resharded to [Replicate, Partial], the replicate-to-partial step run on each
rank's mp sub-mesh): rank 1's sub-mesh [1] holds pd_op.full(0) where rank 0's
[0] holds the value, the value proof refutes the weight gradient and the
numeric relation blames the zero fill (``verify/numeric/divergence.py``:
the op a chain of reshard ops starts from), which is what generate's Known
``r_to_p_zeros_off_rank0`` matches.  With r_to_p mended (the value kept on
the mesh's first process: ``tests/planner_mutant_edits.py``
``r_to_p_mesh_first``, a test-time edit through ``--paddle-file``'s
overlay) the same plan relates and is proved: the defect is the one line."""
from __future__ import annotations

from tests.test_planner import _apply
from verify.generate.run import KNOWN
from verify.verdicts import Verdict

CASE = "planner_gen_r_to_p_rank0"


def _check(app, name, rank):
    (c,) = [c for c in app.checks if c.name == name and c.rank == rank]
    return c


def test_the_zeros_off_rank0_are_refuted_and_known():
    app = _apply(CASE)
    assert app.verdict == Verdict.NOT_EQUIVALENT
    proof = _check(app, "planner relation proof", 1)
    assert proof.verdict == Verdict.NOT_EQUIVALENT, proof.message
    assert any(lb.endswith("@GRAD") for lb in proof.details["refuted"]), proof.details
    num = _check(app, "planner relation", 1)
    assert num.verdict == Verdict.NOT_EQUIVALENT, num.message
    blamed = num.counterexample["first_divergence"]["stage_op"]
    assert num.counterexample["stage"] == "reshard", num.counterexample
    assert blamed.get("from", blamed)["op_type"] == "pd_op.full", blamed
    text = " ".join(c.message for c in app.checks if not c.ok)
    assert [k.name for k in KNOWN if k.matches("NOT_EQUIVALENT", text)] == \
        ["r_to_p_zeros_off_rank0"]


def test_the_value_kept_on_the_mesh_first_process_relates(monkeypatch):
    app = _apply(CASE, ["r_to_p_mesh_first"], monkeypatch)
    for rank in (0, 1):
        for name in ("planner relation proof", "planner relation"):
            c = _check(app, name, rank)
            assert c.verdict == Verdict.EQUIVALENT, c.message
    assert app.verdict == Verdict.EQUIVALENT, [c.message for c in app.checks if not c.ok]
