"""The ``ranks`` numeric backend: real processes under Paddle's launcher."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from verify import legacy_ir  # noqa: F401  (before paddle)
from verify.legacy_ir import paddle_module
from verify.numeric import rank_pool
from verify.numeric.run_spec import BackendError, RankSpec

paddle = paddle_module()


def _program(collective: bool = True, ring: int = 0, shape=(2, 3)):
    """x (fed) -> y = all_reduce(x) on ``ring`` (or y = x, without it)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", list(shape), "float32")
        block = main.global_block()
        y = block.create_var(name="y", shape=list(shape), dtype="float32")
        if collective:
            block.append_op(type="all_reduce", inputs={"x": [x]},
                            outputs={"out": [y]},
                            attrs={"ring_id": ring, "reduce_type": 0})
        else:
            block.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [y]},
                            attrs={"scale": 1.0})
    return main.desc.serialize_to_string(), startup.desc.serialize_to_string()


def _specs(world=2, programs=None, feeds=None, rings=None, steps=1):
    specs = {}
    for r in range(world):
        main, startup = programs[r] if programs else _program()
        rank_feeds = feeds[r] if feeds else [
            {"x": np.full([2, 3], (r + 1) * 10.0 ** k, "float32")} for k in range(steps)]
        specs[r] = RankSpec(rank=r, main=main, startup=startup, params={},
                            feeds=rank_feeds, watch=["x", "y", "not_a_var"],
                            rings=rings if rings is not None else {0: [list(range(world))]})
    return specs


def _my_workers() -> list[int]:
    """Live rank_worker / launcher processes started on behalf of this process."""
    mine = f"RANK_POOL_CONTROLLER_PID={os.getpid()}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if mine in env and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def _pools(world: int = 2) -> list:
    return [p for p in rank_pool.pools() if p.world == world]


@pytest.fixture(scope="module", autouse=True)
def _no_pools_left():
    yield
    rank_pool.shutdown_pools()
    assert _my_workers() == []


@pytest.mark.slow
def test_all_reduce_sums_on_both_ranks():
    results = rank_pool.run_ranks(_specs(steps=2), timeout=60)
    assert sorted(results) == [0, 1]
    for r, res in results.items():
        assert res.error is None, res.error
        assert res.rank == r and len(res.steps) == 2
        for k, step in enumerate(res.steps):
            assert "not_a_var" not in step
            np.testing.assert_array_equal(step["x"], np.full([2, 3], (r + 1) * 10.0 ** k))
            np.testing.assert_array_equal(step["y"], np.full([2, 3], 3 * 10.0 ** k))


@pytest.mark.slow
def test_pool_is_reused_for_the_next_job():
    rank_pool.shutdown_pools()
    start = time.perf_counter()
    first = rank_pool.run_ranks(_specs(), timeout=60)
    cold = time.perf_counter() - start
    pool = _pools()[0]
    start = time.perf_counter()
    second = rank_pool.run_ranks(_specs(), timeout=60)
    warm = time.perf_counter() - start
    print(f"\nfirst job (launch + job): {cold:.3f} s; second job (warm pool): {warm:.3f} s")
    for res in list(first.values()) + list(second.values()):
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))
    assert _pools() == [pool] and pool.jobs == 2


@pytest.mark.slow
def test_other_ring_on_the_world_group_reuses_the_pool():
    rank_pool.run_ranks(_specs(), timeout=60)
    pool = _pools()[0]
    programs = {r: _program(ring=5) for r in range(2)}
    results = rank_pool.run_ranks(_specs(programs=programs, rings={5: [[0, 1]]}),
                                  timeout=60)
    for res in results.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))
    assert _pools() == [pool] and 5 in pool.registered[0]


@pytest.mark.slow
def test_rank_that_raises_is_reported_and_pool_recovers():
    feeds = {0: [{"x": np.ones([2, 3], "float32")}],
             1: [{"x": np.ones([5], "float32")}]}  # wrong shape: rank 1 raises
    results = rank_pool.run_ranks(_specs(feeds=feeds), timeout=30)
    assert results[1].error and "rank 1 raised" in results[1].error
    assert "shape" in results[1].error.lower()
    # rank 0 waited in the all_reduce for rank 1: abandoned, and says why
    assert results[0].error and "rank 1" in results[0].error
    assert _pools() == []

    with pytest.raises(BackendError, match="rank 1 failed: rank 1 raised"):
        rank_pool.raise_for_errors(results)

    again = rank_pool.run_ranks(_specs(), timeout=60)
    for res in again.values():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], 3.0))


@pytest.mark.slow
def test_hang_is_killed_after_timeout_and_no_process_is_left():
    rank_pool.run_ranks(_specs(), timeout=60)  # make sure a pool is up
    pool = _pools()[0]
    assert rank_pool.processes_with(pool.id)
    programs = {0: _program(collective=True), 1: _program(collective=False)}
    start = time.perf_counter()
    results = rank_pool.run_ranks(_specs(programs=programs), timeout=3)
    took = time.perf_counter() - start
    assert took < 30  # the 3 s timeout, not the default 120 s
    assert results[0].error and "rank 0" in results[0].error
    assert "did not finish within 3 s" in results[0].error
    assert results[1].error is None  # rank 1 had no collective and finished
    assert rank_pool.processes_with(pool.id) == []
    assert _pools() == []
    others = {pid for p in rank_pool.pools() for pid in rank_pool.processes_with(p.id)}
    assert set(_my_workers()) <= others  # nothing but other live pools' processes


@pytest.mark.slow
def test_sub_group_ring_on_four_ranks():
    rings = {1: [[0, 1], [2, 3]]}
    programs = {r: _program(ring=1) for r in range(4)}
    results = rank_pool.run_ranks(_specs(world=4, programs=programs, rings=rings),
                                  timeout=60)
    for r, res in results.items():
        assert res.error is None, res.error
        expected = 1 + 2 if r < 2 else 3 + 4
        np.testing.assert_array_equal(res.steps[0]["y"], np.full([2, 3], expected))
    # the same pool then also runs ring 0 as a sub-group (bound already)
    pool = _pools(4)[0]
    programs0 = {r: _program(ring=0) for r in range(4)}
    results = rank_pool.run_ranks(
        _specs(world=4, programs=programs0, rings={0: [[0, 1], [2, 3]]}), timeout=60)
    for r, res in results.items():
        assert res.error is None, res.error
        np.testing.assert_array_equal(res.steps[0]["y"],
                                      np.full([2, 3], 3 if r < 2 else 7))
    assert pool.jobs == 2


def test_two_groups_on_one_rank_are_unsupported_on_gloo():
    if rank_pool._is_gpu():
        pytest.skip("NCCL honours every ring")
    dp_mp = {0: [[0, 1], [2, 3]], 1: [[0, 2], [1, 3]]}

    def two_rings():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [2], "float32")
            block = main.global_block()
            y = block.create_var(name="y", shape=[2], dtype="float32")
            z = block.create_var(name="z", shape=[2], dtype="float32")
            block.append_op(type="all_reduce", inputs={"x": [x]}, outputs={"out": [y]},
                            attrs={"ring_id": 0, "reduce_type": 0})
            block.append_op(type="all_reduce", inputs={"x": [y]}, outputs={"out": [z]},
                            attrs={"ring_id": 1, "reduce_type": 0})
        return main.desc.serialize_to_string(), startup.desc.serialize_to_string()

    programs = {r: two_rings() for r in range(4)}
    with pytest.raises(rank_pool.UnsupportedJob, match="first communicator"):
        rank_pool.run_ranks(_specs(world=4, programs=programs, rings=dp_mp))
    assert rank_pool.used_rings(programs[0][0]) == {0, 1}
