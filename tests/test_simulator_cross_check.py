"""The simulator is cross-checked against real ranks on the rewritten programs
too: where its reading of an op differs from Paddle's kernel on the rewrite
only, the application is INCONCLUSIVE naming the op and both values, and the
simulator's own findings on that rank stop deciding; agreeing runs stay
EQUIVALENT."""
import cases
import passes
from verify.engine.application import run_application
from verify.engine.matrix_runner import pick_backend
from verify.numeric import simulated_ranks
from verify.verdicts import Verdict

# sharding stage 1 on a DP2 case: the rewrite adds `broadcast` ops (each
# parameter's owner sends its update); the original programs have none
CASE = "engine_shard_dp2_sgd_s1"


def _keep_own(kind, xs, colls, group):
    """A wrong reading of a broadcast: every member keeps its own value."""
    return list(xs)


def _run(monkeypatch):
    from verify.engine import isolation

    # the override lives in this process: run the simulator here too
    monkeypatch.setitem(isolation._SETTINGS, "enabled", False)
    _, both = pick_backend("both", 11)
    return run_application(passes.get("auto_parallel_sharding"), cases.all_cases()[CASE],
                           numeric=both)


def _cross(app, which):
    name = "simulator vs ranks" + ("" if which == "original" else " (rewritten)")
    return [c for c in app.checks if c.name == name]


def test_simulator_misreading_an_op_of_the_rewrite_only_is_inconclusive(monkeypatch):
    with simulated_ranks.overridden("broadcast", _keep_own):
        app = _run(monkeypatch)
    # the original has no broadcast: there the two backends agree
    assert all(c.verdict == Verdict.EQUIVALENT for c in _cross(app, "original"))
    parted = [c for c in _cross(app, "rewritten") if c.verdict == Verdict.INCONCLUSIVE]
    assert parted, [c.message for c in app.checks]
    c = parted[0]
    cex = c.counterexample
    assert cex["program"] == "rewritten" and cex["rank"] == c.rank
    assert cex["op_type"] == "broadcast" and isinstance(cex["op_index"], int)
    assert f"op {cex['op_index']} (broadcast)" in c.message
    assert cex["simulator"] != cex["ranks"]
    assert f"simulator {cex['simulator']:.6g} vs real ranks {cex['ranks']:.6g}" in c.message
    # the simulator's NOT_EQUIVALENT on the rewrite is its own misreading:
    # advisory; the real ranks' runs agree with the original
    sim = [x for x in app.checks if x.details.get("backend") == "simulated"
           and x.rank == c.rank]
    assert sim and all(x.advisory for x in sim)
    real = [x for x in app.checks if x.name == "ranks run"]
    assert real and all(x.verdict == Verdict.EQUIVALENT for x in real)
    assert app.verdict == Verdict.INCONCLUSIVE


def test_agreeing_simulator_and_ranks_stay_equivalent(monkeypatch):
    app = _run(monkeypatch)
    for which in ("original", "rewritten"):
        cross = _cross(app, which)
        assert len(cross) == len(cases.all_cases()[CASE].ranks)
        assert all(c.verdict == Verdict.EQUIVALENT for c in cross), [c.message for c in cross]
    assert not any(c.advisory for c in app.checks if c.kind == "numeric")
    assert app.verdict == Verdict.EQUIVALENT
