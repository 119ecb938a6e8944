"""Train examples/planner_fused_ffn_qkv.py's model for 3 steps on one process
with ``dist.to_static`` and print the losses as JSON (a helper of
tests/test_fused_ffn_qkv.py, run in a subprocess of its own).

    python tests/ffn_qkv_run.py FLAG MESH [PIR_PASS_FILE]

FLAG sets ``FLAGS_enable_fused_ffn_qkv_pass``; MESH is ``2d`` (``[[0]]``, dims
dp x mp) or ``1d`` (``[0]``, dim mp); PIR_PASS_FILE, a test-time edit of the
installed ``auto_parallel/static/pir_pass.py``, replaces the fusion function
the Engine calls.
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
import planner_fused_ffn_qkv as m  # noqa: E402

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
dm = dist.to_static(model, loader, m.loss, m.optimizer(model.parameters()))
dm.train()
ops = [op.name() for op in dm._engine._pir_dense_main_progs["train"].global_block().ops]
losses = [float(np.array(dm(x, y))) for x, y in loader]
print(json.dumps({"losses": losses, "matmuls": ops.count("pd_op.matmul"),
                  "fused": sorted(dm._engine.fused_ffn_qkv or {})}))
