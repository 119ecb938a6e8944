"""``fuse_attention_ffn_qkv_pass`` (``FLAGS_enable_fused_ffn_qkv_pass``;
``auto_parallel/static/pir_pass.py``, called by ``Engine._parallel_pir`` on
the forward program before anything else) on CPU.

It runs on a 2-D (dp x mp) mesh: examples/planner_fused_ffn_qkv.py's q/k/v
projections and gate/up pair become one matmul each (6 -> 3), and 3 training
steps give the same losses as with the flag off (the fused parameters are made
from the dygraph ones by ``fuse_param_func``, outside the programs, which is
why the planner family's serial reference -- already fused -- cannot judge
it).  A test-time edit of the installed ``pir_pass.py`` that swaps the k and v
parts of the fused projection changes the first loss.  On a 1-D mesh the
pass's hard-coded two placements (Replicate, Shard) kill the process
(SIGSEGV in ``CreateTensorDistAttribute``), where the flag off trains.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from planner_mutant_edits import write as write_mutant  # noqa: E402


def _train(flag, mesh, mutant=None):
    args = [sys.executable, os.path.join(ROOT, "tests", "ffn_qkv_run.py"), flag, mesh]
    if mutant:
        args.append(str(mutant))
    # Paddle's default IR (PIR): this process runs legacy programs (verify.ir.legacy_ir)
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
    return p, out


def test_fusion_keeps_the_training_losses():
    _, off = _train("0", "2d")
    _, on = _train("1", "2d")
    assert off["fused"] == [] and off["matmuls"] == 6
    assert on["fused"] == ["ffn", "qkv"] and on["matmuls"] == 3
    assert on["losses"] == pytest.approx(off["losses"], rel=1e-6, abs=1e-7)


def test_k_and_v_parts_swapped_change_the_first_loss(tmp_path):
    _, off = _train("0", "2d")
    _, bad = _train("1", "2d", write_mutant("ffn_qkv_k_v_swapped", tmp_path))
    assert bad["fused"] == ["ffn", "qkv"]
    assert abs(bad["losses"][0] - off["losses"][0]) > 1e-3, (bad, off)


def test_one_dimensional_mesh_kills_the_process():
    p, _ = _train("1", "1d")
    assert p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), p.returncode
    assert "fusion: start" in p.stderr and "fusion: done" not in p.stderr, p.stderr[-2000:]
    q, off = _train("0", "1d")
    assert q.returncode == 0 and len(off["losses"]) == 3
