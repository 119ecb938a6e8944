"""Run by tests/test_not_checked_passes.py in a fresh process as rank 1 of 2:
one eager ``paddle.base.core.reshard`` -- the call
``auto_parallel_sync_shared_params`` makes in ``sync_shared_parameters`` --
of a tensor placed on ``argv[1]``'s mesh onto ``argv[2]``'s (JSON lists of
ranks), Replicate on both.  Prints ``before``, then ``after`` if it returns."""
import json
import sys

import paddle
import paddle.distributed as dist
from paddle.base.core import TensorDistAttr

src, dst = (dist.ProcessMesh(json.loads(a), dim_names=["pp"]) for a in sys.argv[1:3])
t = dist.shard_tensor(paddle.ones([2, 2]), src, [dist.Replicate()])
attr = TensorDistAttr()
attr.process_mesh, attr.dims_mapping = dst, [-1, -1]
print("before", flush=True)
with paddle.no_grad():
    out = paddle.base.core.reshard(t, attr)
print("after", out._is_initialized(), flush=True)
