"""How much the persistent rank pool saves over one launch per case.

    /work/venv/bin/python benchmarks/bench_rank_pool.py [--world 2] [--jobs 5]

Prints the time of a cold launch + one job (what a launch per case costs),
the median time of a job on the warm pool, and their ratio (the goal is a
pool at least 5x cheaper than a launch per case).  Each job is a small
legacy program per rank: y = matmul(x, w) -> all_reduce(y) on ring 0 ->
scale, run for 3 steps, with w set from ``params``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verify.ir import legacy_ir  # noqa: E402,F401  (before paddle)
from verify.ir.legacy_ir import paddle_module  # noqa: E402

import numpy as np  # noqa: E402

from verify.numeric import rank_pool  # noqa: E402
from verify.numeric.run_spec import RankSpec  # noqa: E402

paddle = paddle_module()


def build(hidden: int = 16):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4, hidden], "float32")
        w = paddle.static.create_parameter([hidden, hidden], "float32", name="w")
        block = main.global_block()
        y = block.create_var(name="y", shape=[4, hidden], dtype="float32")
        z = block.create_var(name="z", shape=[4, hidden], dtype="float32")
        out = block.create_var(name="out", shape=[4, hidden], dtype="float32")
        block.append_op(type="matmul_v2", inputs={"X": [x], "Y": [w]},
                        outputs={"Out": [y]}, attrs={"trans_x": False, "trans_y": False})
        block.append_op(type="all_reduce", inputs={"x": [y]}, outputs={"out": [z]},
                        attrs={"ring_id": 0, "reduce_type": 0})
        block.append_op(type="scale", inputs={"X": [z]}, outputs={"Out": [out]},
                        attrs={"scale": 0.5})
    return main.desc.serialize_to_string(), startup.desc.serialize_to_string()


def specs(world: int, seed: int):
    main, startup = build()
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((16, 16)).astype("float32")
    return {r: RankSpec(rank=r, main=main, startup=startup, params={"w": w},
                        feeds=[{"x": rng.standard_normal((4, 16)).astype("float32")}
                               for _ in range(3)],
                        watch=["y", "z", "out", "w"], rings={0: [list(range(world))]})
            for r in range(world)}


def job(world: int, seed: int) -> float:
    spec = specs(world, seed)
    start = time.perf_counter()
    results = rank_pool.run_ranks(spec, timeout=120)
    took = time.perf_counter() - start
    expect = sum(spec[r].feeds[-1]["x"] @ spec[r].params["w"] for r in range(world))
    for res in results.values():
        assert res.error is None, res.error
        np.testing.assert_allclose(res.steps[-1]["z"], expect, rtol=1e-5, atol=1e-5)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=5)
    args = parser.parse_args()

    rank_pool.shutdown_pools()
    cold = job(args.world, 0)
    pool = rank_pool.pools()[0]
    warm = [job(args.world, k + 1) for k in range(args.jobs)]
    median = statistics.median(warm)
    rank_pool.shutdown_pools()

    print(f"world size                        : {args.world}")
    print(f"cold launch + 1 job               : {cold:8.3f} s "
          f"(of which pool launch {pool.launch_seconds:.3f} s)")
    print(f"warm pool, median of {args.jobs} jobs      : {median * 1000:8.1f} ms "
          f"(min {min(warm) * 1000:.1f}, max {max(warm) * 1000:.1f})")
    print(f"launch per case / warm pool ratio : {cold / median:8.1f}x "
          f"(goal >= 5x: {'met' if cold / median >= 5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
