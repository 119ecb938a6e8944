"""Snapshots: a plain record that round-trips through JSON and diffs."""
from conftest import snapshots

from verify.ir.snapshot import ProgramSnapshot, diff


def test_json_round_trip_keeps_everything():
    _, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    again = ProgramSnapshot.from_json(after.to_json())
    assert again.to_dict() == after.to_dict()
    assert [o.stream for o in again.ops].count("auto_parallel_mp") == 1


def test_snapshot_records_roles_streams_and_startup():
    _, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    ar = after.ops_of_type("c_allreduce_sum")[0]
    assert ar.role == 1 and ar.attrs["ring_id"] == 0 and ar.stream == "auto_parallel_mp"
    assert "linear_0.w_0" in after.startup_writes()
    assert after.var("linear_0.w_0").is_parameter
    assert after.feeds == ["loss.target", "x"]


def test_diff_shows_the_split():
    _, before, after, _ = snapshots("overlap", "col_3d_static", 0)
    text = diff(before, after)
    assert "-matmul_v2_grad(" in text
    assert "+reshape2(" in text and "@auto_parallel_mp" in text
    assert diff(before, before) == ""


def test_unknown_schema_is_rejected():
    import pytest

    with pytest.raises(ValueError):
        ProgramSnapshot.from_dict({"schema": "other"})
