"""Plans per minute of ``python -m verify generate``: N generated models
(default 200) planned by Paddle's planner (every rank in its own process,
traced for coverage) and judged by the planner family, each plan fresh
(a cache of its own, so no earlier plan is reused).

    python benchmarks/bench_generate.py                  # 200 plans, seed 0
    python benchmarks/bench_generate.py --count 10 --seed 3

Printed: every plan's verdict line, then the plans, the outcomes and
verdicts, plans per minute, and the planner-coverage table of the run.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_generate")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-cache", action="store_true",
                    help="reuse the user's plan cache (plans already made are not timed fairly)")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    if not a.keep_cache:
        os.environ["PADDLE_PASS_VERIFY_CACHE"] = str(work / "cache")
    from verify.generate.cli import main as generate

    return generate(["--count", str(a.count), "--seed", str(a.seed), "--out",
                     str(work / "out"), "--no-shrink"])


if __name__ == "__main__":
    sys.exit(main())
