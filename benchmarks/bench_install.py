"""How long installing the project with its ``models`` group takes in a
fresh venv: pip against uv (what ``.ci/run`` uses).

    python benchmarks/bench_install.py               # both, into temp venvs (~5-10 min)
    python benchmarks/bench_install.py --tool uv

Each run: ``python3 -m venv`` into an empty temp dir, then
``pip install -e '.[models]'``, or ``pip install uv`` and ``uv pip install
--python VENV/bin/python -e '.[models]'`` (the uv install included in its
time).  Prints wall time, the venv's size, numpy's and paddleformers'
versions, and whether torch came along (it must not: nothing needs it).
The package caches (~/.cache/pip, ~/.cache/uv) are left as they are: say
whether they were warm when quoting a figure.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _size_mb(path: str) -> float:
    out = subprocess.run(["du", "-sm", path], capture_output=True, text=True).stdout
    return float(out.split()[0])


def install(tool: str) -> None:
    with tempfile.TemporaryDirectory(prefix=f"install-{tool}-") as tmp:
        venv = os.path.join(tmp, "venv")
        py = os.path.join(venv, "bin", "python")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        if tool == "pip":
            steps = [[py, "-m", "pip", "install", "--quiet", "-e", ".[models]"]]
        else:
            steps = [[py, "-m", "pip", "install", "--quiet", "uv"],
                     [os.path.join(venv, "bin", "uv"), "pip", "install", "--quiet",
                      "--python", py, "-e", ".[models]"]]
        for step in steps:
            subprocess.run(step, cwd=ROOT, check=True)
        wall = time.perf_counter() - t
        probe = ("import importlib.util as u, importlib.metadata as m;"
                 "print(m.version('numpy'), m.version('paddleformers'),"
                 " u.find_spec('torch') is not None)")
        numpy, pf, torch = subprocess.run([py, "-c", probe], capture_output=True,
                                          text=True, check=True).stdout.split()
        print(f"{tool:4s} install -e '.[models]'  {wall:6.1f} s  venv {_size_mb(venv):6.0f} MB  "
              f"numpy {numpy}  paddleformers {pf}  torch installed: {torch}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", action="append", choices=["pip", "uv"], default=[])
    a = ap.parse_args(argv)
    print(f"cores: {os.cpu_count()}")
    for tool in a.tool or ["pip", "uv"]:
        install(tool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
