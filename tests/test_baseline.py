"""The baseline file is the reviewed view of what the cases state."""
from verify.engine import baseline


def test_baseline_file_is_up_to_date():
    want = baseline.render(baseline.current(baseline.load()))
    with open(baseline.PATH) as f:
        assert f.read() == want, "verify/baseline.json is stale: run python -m verify baseline"


def test_classify_names_the_direction():
    # one vocabulary (run, gate, premerge)
    assert baseline.classify("EQUIVALENT", "EQUIVALENT") == "unchanged"
    assert baseline.classify("EQUIVALENT", "NOT_EQUIVALENT") == "NEW"
    assert baseline.classify("PASS_CRASHED", "EQUIVALENT") == "FIXED"
    assert baseline.classify("PASS_CRASHED", "NOT_APPLIED") == "NEW"
    assert baseline.classify("PASS_CRASHED", "INCONCLUSIVE") == "UNPROVED"
