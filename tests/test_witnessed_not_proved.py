"""An EQUIVALENT application whose value check did not prove every rank
(the gradient merge's advisory INCONCLUSIVE: in-place accumulators are not
modelled) is reported apart as "witnessed, not proved" (issue 19): on the
application, its matrix line, the summary table and the report summary."""
from __future__ import annotations

from cases.base import Expect
from verify.engine.application import Application
from verify.engine.matrix_runner import line
from verify.report.terminal import summary_table
from verify.report.write import summarize
from verify.value.proof import prove_application
from verify.verdicts import CheckResult, Verdict, combine
from verify.ir.snapshot import Op, ProgramSnapshot, Var


def _app(value_checks):
    app = Application("p", "c", [0], Expect(True, "EQUIVALENT"))
    app.checks = [CheckResult("numeric", "simulated run", None, Verdict.EQUIVALENT, "same")]
    app.checks += value_checks
    app.verdict = combine(app.checks)
    return app


def _kwarg_snapshot():
    """A one-op program reading a keyword block argument: the proof's
    advisory INCONCLUSIVE, as for the gradient merge's accumulators."""
    s = ProgramSnapshot([Op(0, "assign", {"X": ["x"]}, {"Out": ["y"]}, {})],
                        {"x": Var("x", [2], "float32"), "y": Var("y", [2], "float32")},
                        feeds=["x"], meta={"block_kwargs": ["acc"]})
    return s


def test_an_advisory_inconclusive_proof_leaves_the_verdict_witnessed_not_proved():
    s = _kwarg_snapshot()
    value = prove_application("gm", [0], {}, {0: s}, {0: s}, {0: ["y"]})
    assert value[0].advisory and value[0].verdict == Verdict.INCONCLUSIVE
    app = _app(value)
    assert app.verdict == Verdict.EQUIVALENT and app.proof == "witnessed"
    assert "witnessed, not proved" in line(app)
    assert app.to_dict(False)["proof"] == "witnessed"
    assert summarize([app])["witnessed_not_proved"] == ["p on c"]
    table = summary_table([app], styled=False)
    col = next(c for c in table.columns if c.header == "witnessed, not proved")
    assert [str(x) for x in col._cells] == ["1"]


def test_a_proof_on_every_rank_is_proved():
    s = _kwarg_snapshot()
    s.meta = {}
    value = prove_application("plain", [0], {}, {0: s}, {0: s}, {0: ["y"]})
    assert value[0].verdict == Verdict.EQUIVALENT
    app = _app(value)
    assert app.proof == "proved" and "witnessed" not in line(app)
    assert summarize([app])["witnessed_not_proved"] == []
    assert summarize([app])["value_proofs_by_rank"]["proved"] == 1
