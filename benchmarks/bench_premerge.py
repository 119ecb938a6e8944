"""``verify premerge``: a cold run (empty result cache) against a warm rerun.

    python benchmarks/bench_premerge.py [--pass vpp_split --pass overlap]
                                        [--backend simulated] [--case GLOB]

Builds a small Paddle checkout from the installed files
(``tests/premerge_checkout.py``) with one commit mending the fold in
``pass_utils.py``, then runs ``python -m verify premerge`` on it twice with
a fresh private cache: cold (every application runs, the import-graph index
is built, the vocabulary audit runs), warm (the same change: every result
is a lookup) and after an unrelated commit (a C++ comment: the sources the
passes reach are the same, so it is a lookup too).  Each is a whole process
timed from outside; printed with the ratio of the slower rerun to the cold
run (goal: < 10%) and the applications each ran.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import premerge_checkout as co  # noqa: E402


def run(args, env) -> tuple:
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "verify", "premerge", *args], cwd=str(ROOT),
                       env=env, capture_output=True, text=True)
    return time.perf_counter() - start, p


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pass", dest="passes", action="append", default=[])
    ap.add_argument("--case", dest="cases", action="append", default=[])
    ap.add_argument("--backend", default="simulated")
    a = ap.parse_args()
    passes = a.passes or ["vpp_split", "overlap"]
    tmp = Path(tempfile.mkdtemp(prefix="bench_premerge_"))
    repo = co.make(tmp / "paddle")
    co.mend_fold(repo)
    env = dict(os.environ, VERIFY_PREMERGE_CACHE=str(tmp / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [
                   os.environ.get("PYTHONPATH")] if p]))
    first = co.git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    common = [repo, "--base", first, "--backend", a.backend]
    for p in passes:
        common += ["--pass", p]
    for c in a.cases:
        common += ["--case", c]
    rows = []
    for label in ("cold", "warm", "unrelated"):
        if label == "unrelated":  # one more commit the passes do not reach
            co.touch_kernel(repo)
        out = tmp / label
        seconds, p = run(common + ["--out", str(out)], env)
        if p.returncode not in (0, 1):
            print(p.stdout, p.stderr, file=sys.stderr)
            return 2
        data = json.loads((out / "premerge.json").read_text())
        apps = data["applications"]
        rows.append((label, seconds, len(apps), sum(x["cached"] for x in apps), data["cache"],
                     p.returncode))
    print(f"premerge on {repo} (mended fold), passes {', '.join(passes)}, "
          f"backend {a.backend}")
    for label, seconds, n, cached, cache, rc in rows:
        print(f"  {label}: {seconds:7.1f} s  {n} applications ({cached} cached; {cache}); "
              f"exit {rc}")
    ratio = max(rows[1][1], rows[2][1]) / rows[0][1]
    met = "met" if ratio < 0.10 else "NOT met"
    print(f"warm / cold (worst of the two reruns) = {ratio:.1%}  (goal < 10%: {met})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
