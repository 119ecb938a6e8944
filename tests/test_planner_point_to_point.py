"""Send/recv outside a pipeline's job lists in the lock-step relation
(``verify/numeric/planner_runs.py``: each rank's program run once per wave of
its exchanges): a cross-mesh reshard without a pipeline schedule
(``planner_gen_cross_p_to_r``: a same-status send_v2/recv_v2 pair, then p_to_r;
the gradient back through r_to_p) relates on both ranks and is proved; an
r_to_p that zeroes the wrong rank's piece (a planner mutant, well typed) is
refuted by both, naming the rank, the value and the reshard stage."""
from __future__ import annotations

from test_planner import _apply  # noqa: E402


def _by_name(app, name):
    return {c.rank: c for c in app.checks if c.name == name}


def test_a_cross_mesh_send_recv_relates_and_is_proved():
    app = _apply("planner_gen_cross_p_to_r")
    rel = _by_name(app, "planner relation")
    assert set(rel) == {0, 1} and all(c.verdict.value == "EQUIVALENT" for c in rel.values()), \
        [c.message for c in rel.values()]
    assert app.verdict.value == "EQUIVALENT" and app.proof == "proved"


def test_a_wrong_piece_beside_the_send_recv_is_refuted_on_both_ranks(monkeypatch):
    app = _apply("planner_gen_cross_p_to_r", ["r_to_p_zeroes_rank0"], monkeypatch)
    assert app.verdict.value == "NOT_EQUIVALENT"
    for name in ("planner relation", "planner relation proof"):
        bad = {r: c for r, c in _by_name(app, name).items()
               if c.verdict.value == "NOT_EQUIVALENT"}
        assert set(bad) == {0, 1}, [c.message for c in app.checks if c.name == name]
        for r, c in bad.items():
            cex = c.counterexample
            assert cex["rank"] == r and cex["value"] and cex["stage"] == "reshard", cex
