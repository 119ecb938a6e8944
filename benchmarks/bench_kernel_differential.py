"""The full kernel differential: every spec, every dtype its rows model,
``--n`` Hypothesis examples each (fixed seeds), in the three executor modes
(figures, not a test; the gate's sample is tests/test_kernel_differential.py).

    python benchmarks/bench_kernel_differential.py            # --n 8
    python benchmarks/bench_kernel_differential.py --n 3 --seed 1 --spec scale,cast

Prints: rows covered (applied in a run that agreed with Paddle) of all
ROWS, examples per mode and their outcomes (agree, disagree, refused by
Paddle, unsupported by the row, no reference kernel, not an input), every
row-vs-Paddle disagreement with its example, every executor-vs-executor
difference (legacy vs legacy_pir: the same program; vs pir: the pd_op
program), the seconds.  Exit status 1 when a row disagrees with Paddle or
the two executors disagree somewhere the table
(verify/value/executor_disagreements.py) does not list.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from verify.selfcheck import kernel_differential as K  # noqa: E402
from verify.value import semantics as S  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="examples a spec and dtype")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spec", default="", help="comma-separated spec names (default all)")
    args = ap.parse_args(argv)
    names = set(args.spec.split(",")) if args.spec else None
    sw = K.sweep(args.n, args.seed, names)
    rows = sw.rows_agreeing & set(S.ROWS)
    print(f"kernel differential: n={args.n} seed={args.seed}, {len(sw.examples)} examples, "
          f"{len(K.specs()) if not names else len(names)} specs, {sw.seconds:.1f} s")
    print(f"rows covered: {len(rows)} / {len(S.ROWS)} (applied in a run agreeing with Paddle)")
    print(f"executor translations (proof the flag took effect): {sw.translations}")
    kinds = ("agree", "disagree", "refused", "unsupported", "no_reference", "not_input")
    print(f"{'mode':<12}" + "".join(f"{k:>14}" for k in ("examples",) + kinds))
    for m in K.MODES:
        print(f"{m:<12}{sw.examples_run(m):>14}" +
              "".join(f"{sw.outcomes.get((m, k), 0):>14}" for k in kinds))
    bad = 0
    for m, spec, dtype, why, ex in sw.disagreements:
        bad += 1
        print(f"ROW DISAGREES {m} {spec} {dtype}: {why}\n    {json.dumps(ex)[:600]}")
    groups = collections.Counter()
    for a, b, spec, dtype, why, ex, refused in sw.executor:
        listed = True
        if (a, b) == ("legacy", "legacy_pir"):
            listed = bool(refused)
            bad += not listed
        groups[(a, b, spec, dtype, why[:160], listed)] += 1
    for (a, b, spec, dtype, why, listed), n in sorted(groups.items()):
        tag = "" if (a, b) != ("legacy", "legacy_pir") else \
            (" [in the table]" if listed else " [NOT IN THE TABLE]")
        print(f"EXECUTORS {a} vs {b} {spec} {dtype} x{n}: {why}{tag}")
    untested = sorted(set(S.ROWS) - rows)
    print(f"rows not covered ({len(untested)}): {', '.join(untested)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
