"""``fuse_attention_ffn_qkv_pass`` (``FLAGS_enable_fused_ffn_qkv_pass``;
``auto_parallel/static/pir_pass.py``, called by ``Engine._parallel_pir`` on
the forward program before anything else) on CPU.

It runs on a 2-D (dp x mp) mesh: examples/fused_ffn_qkv_net.py's q/k/v
projections and gate/up pair become one matmul each (6 -> 3), and 3 training
steps give the same losses as with the flag off (the fused parameters are made
from the dygraph ones by ``fuse_param_func``, outside the programs, which is
why the planner family's serial reference -- already fused -- cannot judge
it).  A test-time edit of the installed ``pir_pass.py`` that swaps the k and v
parts of the fused projection changes the first loss.  On a 1-D mesh the
pass's hard-coded two placements (Replicate, Shard) kill the process
(SIGSEGV in ``CreateTensorDistAttribute``), where the flag off trains.

How the pass made each fused parameter is recorded from what it did
(``examples/fused_ffn_qkv_of.py``: every fused column matched to the one
unfused column it equals), and the relation is run at a second point: fresh
unfused values P, the flag-off program on P against the fused program on the
fused parameters the record makes of P.  A test-time edit handing
``fuse_param_func`` the parts as q, v, k is recorded as such and refuted by
that relation; one handing it q, q, v is no permutation of the parts (the
record names the fused column).  (q before k or k before q is not told apart
by this model: it multiplies q by k elementwise.)
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from planner_mutant_edits import write as write_mutant  # noqa: E402

from verify.numeric.fused_params import FusionLayoutError, derive_blocks, fuse_by_record  # noqa: E402


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


def _relation_counterexample(off, on, rel=1e-5, abs_=1e-6):
    """The first step whose loss differs (flag off against flag on), or None."""
    for step, (a, b) in enumerate(zip(off, on)):
        if abs(a - b) > abs_ + rel * abs(a):
            return {"step": step, "flag_off": a, "flag_on": b}
    return None


def _by_name(records):
    return {r["name"]: r for r in records}


def test_the_fusion_is_recorded_and_relates_at_fresh_values():
    _, off = _train("0", "2d")
    _, on = _train("1", "2d")
    assert off["fusion"] == []
    recs = _by_name(on["fusion"])
    assert sorted(r["kind"] for r in recs.values()) == ["ffn", "ffn", "qkv", "qkv"]
    q, k, v = (f"linear_{i}.w_0.dist" for i in range(3))
    qkv = recs[f"fused_{q}_{k}_{v}"]
    assert qkv["parts"] == [q, k, v] and qkv["shape"] == [8, 24]
    # measured: per head group (2 heads of 4), q's, k's and v's columns of the group
    assert qkv["blocks"] == [[q, 0, 4, 0], [k, 0, 4, 4], [v, 0, 4, 8],
                             [q, 4, 8, 12], [k, 4, 8, 16], [v, 4, 8, 20]]
    gate, up = "linear_3.w_0.dist", "linear_4.w_0.dist"
    assert recs[f"fused_{gate}_{up}"]["blocks"] == [[gate, 0, 16, 0], [up, 0, 16, 16]]
    assert _relation_counterexample(off["probe"], on["probe"]) is None, (off, on)
    assert _relation_counterexample(off["losses"], on["losses"]) is None


def test_fused_k_and_v_parts_swapped_are_recorded_and_refuted(tmp_path):
    _, off = _train("0", "2d")
    _, bad = _train("1", "2d", write_mutant("ffn_qkv_fused_k_v_parts_swapped", tmp_path))
    q, k, v = (f"linear_{i}.w_0.dist" for i in range(3))
    assert _by_name(bad["fusion"])[f"fused_{q}_{k}_{v}"]["blocks"][:3] == \
        [[q, 0, 4, 0], [v, 0, 4, 4], [k, 0, 4, 8]]
    cex = _relation_counterexample(off["probe"], bad["probe"])
    assert cex is not None and cex["step"] == 0, (off["probe"], bad["probe"])


def test_a_part_fused_twice_is_no_permutation(tmp_path):
    _, bad = _train("1", "2d", write_mutant("ffn_qkv_fused_q_twice", tmp_path))
    q, k, v = (f"linear_{i}.w_0.dist" for i in range(3))
    assert bad["counterexample"] == {"fused": f"fused_{q}_{k}_{v}", "column": 4,
                                     "part": q, "part_column": 0}, bad


def test_derive_blocks_reads_the_layout_and_names_a_foreign_column():
    rs = np.random.RandomState(0)
    a, b = rs.randn(3, 4), rs.randn(3, 2)
    fused = np.concatenate([b, a[:, 2:], a[:, :2]], axis=-1)
    blocks = derive_blocks("f", {"a": a, "b": b}, fused)
    assert blocks == [["b", 0, 2, 0], ["a", 2, 4, 2], ["a", 0, 2, 4]]
    assert np.array_equal(fuse_by_record({"blocks": blocks}, {"a": a, "b": b}), fused)
    fused[:, 3] += 1e-3  # a column of neither part
    with pytest.raises(FusionLayoutError) as err:
        derive_blocks("f", {"a": a, "b": b}, fused)
    assert err.value.counterexample == {"fused": "f", "column": 3, "matches": []}


def test_the_relations_serial_counterparts_of_a_fused_parameter():
    """``with_fused_values``: the fused parameter's serial gradient and update
    are its parts' in the recorded layout (float64 runs too); an optimizer
    that is not elementwise is refused, never fused."""
    from verify.numeric.fused_params import with_fused_values

    rs = np.random.RandomState(1)
    a, b, ga, gb = (rs.randn(2, 3) for _ in range(4))
    rec = {"name": "f", "parts": ["a", "b"], "shape": [2, 6],
           "blocks": [["b", 0, 3, 0], ["a", 0, 3, 3]]}
    rel = {"params": {p: {"param": f"{p}_out", "grad": f"{p}_g", "optimizer": "pd_op.sgd_",
                          "placement": None, "shape": [2, 3]} for p in "ab"},
           "fused": [rec]}
    step = {"a_out": a, "b_out": b, "a_g": ga, "b_g": gb, "a_g@float64": ga}
    params, out = with_fused_values(rel, [step])
    assert params["f"]["grad"] == "f@GRAD@fused" and params["f"]["param"] == "f@fused"
    assert np.array_equal(out[0]["f@GRAD@fused"], np.concatenate([gb, ga], axis=-1))
    assert np.array_equal(out[0]["f@fused"], np.concatenate([b, a], axis=-1))
    assert "f@GRAD@fused@float64" not in out[0]  # b's float64 run is missing
    assert "f@fused" not in step  # the run's outputs are not changed
    rel["params"]["a"]["optimizer"] = "pd_op.lamb_"
    with pytest.raises(ValueError, match="not an elementwise optimizer"):
        with_fused_values(rel, [step])
