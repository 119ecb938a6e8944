"""Train examples/fused_ffn_qkv_net.py's model for 3 steps on one process
with ``dist.to_static`` and print the losses as JSON (a helper of
tests/test_fused_ffn_qkv.py, run in a subprocess of its own).

    python tests/ffn_qkv_run.py FLAG MESH [PIR_PASS_FILE]

FLAG sets ``FLAGS_enable_fused_ffn_qkv_pass``; MESH is ``2d`` (``[[0]]``, dims
dp x mp) or ``1d`` (``[0]``, dim mp); PIR_PASS_FILE, a test-time edit of the
installed ``auto_parallel/static/pir_pass.py``, replaces the fusion function
the Engine calls.  The output also holds, with the flag on, how each fused
parameter was made from the unfused ones (``examples/fused_ffn_qkv_of.py``),
and (``probe``) the losses of 3 more steps from fresh values of the unfused
parameters, each fused parameter made from them by that record.
"""
import json
import os
import sys

os.environ["FLAGS_enable_fused_ffn_qkv_pass"] = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.distributed as dist  # noqa: E402

if len(sys.argv) > 3:  # the mutant: its text as the module the Engine took the pass from
    import types

    from paddle.distributed.auto_parallel.static import engine, pir_pass

    mutant = types.ModuleType(pir_pass.__name__)
    mutant.__file__ = pir_pass.__file__
    with open(sys.argv[3]) as f:
        exec(compile(f.read(), pir_pass.__file__, "exec"), mutant.__dict__)
    engine.fuse_attention_ffn_qkv_pass = mutant.fuse_attention_ffn_qkv_pass

from paddle.distributed.auto_parallel.static import engine as _engine  # noqa: E402

_fuse = _engine.fuse_attention_ffn_qkv_pass


def _marked(*args, **kwargs):
    """The fusion the Engine calls, marked on stderr: a crash between the
    marks is the fusion's (Paddle's own signal handler replaces Python's)."""
    print("fusion: start", file=sys.stderr, flush=True)
    out = _fuse(*args, **kwargs)
    print("fusion: done", file=sys.stderr, flush=True)
    return out


_engine.fuse_attention_ffn_qkv_pass = _marked
sys.path.insert(0, os.path.join(ROOT, "examples"))
from fused_ffn_qkv_of import install_recorder  # noqa: E402

from verify.numeric.fused_params import fuse_by_record  # noqa: E402

fusion = []
install_recorder(fusion)
import fused_ffn_qkv_net as m  # noqa: E402

mesh = dist.ProcessMesh([[0]], dim_names=["dp", "mp"]) if sys.argv[2] == "2d" else \
    dist.ProcessMesh([0], dim_names=["mp"])
paddle.seed(7)
model = m.build_model(mesh)
rng = np.random.RandomState(0)
data = [(rng.randn(m.SEQ, m.H).astype("float32"), rng.randn(m.SEQ, m.H).astype("float32"))
        for _ in range(3 * m.BATCH)]


class Data(paddle.io.Dataset):
    def __len__(self):
        return len(data)

    def __getitem__(self, i):
        return data[i]


loader = dist.shard_dataloader(paddle.io.DataLoader(Data(), batch_size=m.BATCH),
                               meshes=[mesh])
prng = np.random.RandomState(1)  # distinct columns (the zero biases are not), so
for p in model.parameters():  # the record can tell every fused column's source
    p.set_value((0.3 * prng.randn(*p.shape)).astype("float32"))
initial = {p.name: np.array(p.numpy()) for p in model.parameters()}
dm = dist.to_static(model, loader, m.loss, m.optimizer(model.parameters()))
dm.train()
broken = [rec for rec in fusion if "error" in rec]
if broken:  # a fused value that is no permutation of its parts
    print(json.dumps({"layout_error": broken[0]["error"],
                      "counterexample": broken[0]["counterexample"]}))
    sys.exit(0)
ops = [op.name() for op in dm._engine._pir_dense_main_progs["train"].global_block().ops]
losses = [float(np.array(dm(x, y))) for x, y in loader]


def probe_losses():
    """3 more steps from fresh unfused values (another seed than the ones the
    fusion saw): set by name, and with the flag on each fused parameter made
    from them by its record (the relation's claim: fused program of
    record(P) == flag-off program of P, for any P)."""
    rs = np.random.RandomState(2)
    values = {n: (0.3 * rs.randn(*v.shape)).astype("float32") for n, v in initial.items()}
    for rec in fusion:
        values[rec["name"]] = fuse_by_record(rec, values)
    scope = paddle.static.global_scope()
    seen = set()
    for name, value in values.items():
        var = scope.find_var(name)
        if var is not None and var.get_tensor()._is_initialized():
            var.get_tensor().set(value, paddle.CPUPlace())
            seen.add(name)
    params = {p.name for p in dm._engine._pir_dense_main_progs["train"]
              .global_block().all_parameters()}
    missing = sorted(params - seen)
    assert not missing, f"parameters the probe did not set: {missing}"
    return [float(np.array(dm(x, y))) for x, y in loader]


probe = probe_losses()
print(json.dumps({"losses": losses, "matmuls": ops.count("pd_op.matmul"),
                  "fused": sorted(dm._engine.fused_ffn_qkv or {}), "fusion": fusion,
                  "probe": probe}))
