"""A planned program that no longer runs where the serial program runs is a
finding: a planner mutant (``tests/planner_mutant_edits.py``) that drops a
parameter's initialisation from every rank's startup program is
NOT_EQUIVALENT "the rewritten program no longer runs", naming the rank, the
phase and the missing parameter; the twin where the serial program cannot
run either stays INCONCLUSIVE, and so does a failure of the checker's own
environment."""
from __future__ import annotations

import json
import re
import shutil

from test_planner import _apply  # noqa: E402

from verify.verdicts import Verdict

CASE = "planner_tp2"
MUTANT = "remove_drops_startup_param"


def _missing(app):
    bad = [c for c in app.checks if c.name == "planner relation"
           and c.verdict == Verdict.NOT_EQUIVALENT]
    assert bad, [c.message for c in app.checks if not c.ok]
    return bad[0], re.search(r"Cannot find (\S+?)\.? in scope", bad[0].message).group(1)


def test_a_rank_startup_without_a_parameter_no_longer_runs(monkeypatch):
    app = _apply(CASE, [MUTANT], monkeypatch)
    assert app.verdict == Verdict.NOT_EQUIVALENT, [c.message for c in app.checks if not c.ok]
    check, name = _missing(app)
    assert "the rewritten program no longer runs: rank " in check.message
    assert "the serial program runs" in check.message
    assert f"{name}: a parameter rank {check.rank}'s main program reads and its startup " \
           "program does not initialise" in check.message
    cex = check.counterexample
    assert cex["rank"] == check.rank and cex["phase"] == "the ranks' steps"
    assert "Cannot find" in cex["error"]


def test_the_same_failure_where_the_serial_program_fails_too_is_inconclusive(
        monkeypatch, tmp_path):
    """The twin: the serial program given the same fault (its startup and its
    inputs without that parameter) cannot run either: nothing is shown."""
    import cases
    from passes.planner import planner_dir, relation_run

    monkeypatch.setenv("VERIFY_PLANNER_RUN_MEMO", "0")
    app = _apply(CASE, [MUTANT], monkeypatch)
    _, name = _missing(app)
    case = cases.all_cases()[CASE]
    folder = tmp_path / "plan"
    shutil.copytree(planner_dir(case), folder)
    r0 = case.ranks[0]
    serial = folder / f"rank{r0}" / "serial.json"
    data = json.loads(serial.read_text())
    startup = json.loads(data["startup"])
    ops = startup["program"]["regions"][0]["blocks"][0]["ops"]
    kept = [op for op in ops if not (op["#"].endswith("set_parameter")
                                     and op["A"][0]["AT"]["D"] == name)]
    assert len(kept) == len(ops) - 1
    startup["program"]["regions"][0]["blocks"][0]["ops"] = kept
    data["startup"] = json.dumps(startup)
    serial.write_text(json.dumps(data))
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    del records[r0]["serial_relation"]["parameters"][name]
    out = relation_run(case, folder, records, [])
    assert [c.verdict for c in out] == [Verdict.INCONCLUSIVE], [c.message for c in out]
    assert "the runs did not complete" in out[0].message and name in out[0].message


def test_an_environment_failure_of_the_ranks_stays_inconclusive(tmp_path):
    from passes.planner import no_longer_runs

    fail = {"rank": 1, "phase": "the ranks' steps",
            "error": "ranks step 0: rank 1 raised: OSError: [Errno 11] Resource temporarily "
                     "unavailable\nTraceback ..."}
    c = no_longer_runs("planner on x", fail, tmp_path, 0)
    assert c.verdict == Verdict.INCONCLUSIVE and "checker environment" in c.message
    fail["error"] = "ranks step 0: rank 1 raised: RuntimeError: boom\nTraceback ..."
    c = no_longer_runs("planner on x", fail, tmp_path, 0)
    assert c.verdict == Verdict.NOT_EQUIVALENT and c.rank == 1
    assert "the rewritten program no longer runs: rank 1, the ranks' steps: " \
           "ranks step 0: rank 1 raised: RuntimeError: boom" in c.message


def test_a_send_addressed_to_its_sender_deadlocks_and_no_longer_runs(monkeypatch):
    """A pipeline whose cross-mesh send is addressed to the sender itself:
    the ranks wait on receives nobody serves.  The serial program runs, so
    this is NOT_EQUIVALENT naming the ranks and the ops they wait in."""
    app = _apply("planner_pp2", ["p2p_send_to_itself"], monkeypatch)
    assert app.verdict == Verdict.NOT_EQUIVALENT, [c.message for c in app.checks if not c.ok]
    bad = [c for c in app.checks if c.name == "planner relation"
           and c.verdict == Verdict.NOT_EQUIVALENT]
    assert bad and bad[0].details["no_longer_runs"]
    msg = bad[0].message
    assert "the rewritten program no longer runs: rank " in msg
    assert re.search(r"waiting: rank \d+ in pd_op\.recv_v2 \(op \d+, ring \d+\)", msg), msg


def test_a_rank_startup_without_a_parameter_is_caught_before_any_run(monkeypatch):
    """The same mutant, read statically: each rank's programs as run are
    checked as the backend reads them (``passes/planner.py:backend_validity``):
    the main program reads ``linear_1.b_0``, which no startup op stores."""
    app = _apply("planner_tp2", ["remove_drops_startup_param"], monkeypatch)
    got = [c for c in app.checks if c.kind == "dataflow" and c.name == "startup init"
           and c.verdict == Verdict.NOT_EQUIVALENT and not c.advisory]
    assert sorted(c.rank for c in got) == [0, 1], [c.message[:200] for c in app.checks]
    assert all(c.counterexample["var"] == "linear_1.b_0" for c in got), got[0].counterexample
