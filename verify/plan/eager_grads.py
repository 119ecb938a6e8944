"""Which trainable parameters the model's loss gives a gradient in dygraph
(eager) mode: the reference of the lost-gradient check
(``verify/checks/lost_gradients.py``), recorded in ``planner.json`` as
``eager_gradients``.

Run inside the planning process, before the plan's own model is built (and
before the model file's ``configure``: no fleet group exists yet): the model
is built a second time, under a fresh unique-name scope, on a one-process
mesh of the same dim names holding this rank only (every dist tensor is then
whole and local: no communicator is needed), one forward and ``backward()``
on the plan's first batch.  The parameters are named by their structured
name (``named_parameters``), which the plan's own build shares whatever
unique names Paddle gives either; :func:`by_param_name` maps them to the
plan's parameter names.  The RNG is re-seeded by the caller afterwards, so
the plan's parameters are initialised as without this step.
"""
from __future__ import annotations

import traceback


def eager_gradients(model, dim_names: list, rank: int, first_batch: list) -> dict:
    """``{"with_grad": [structured names], "without_grad": [...], "error"}``:
    the trainable parameters (not ``stop_gradient``) with and without a
    gradient after one eager step on ``first_batch`` (inputs then labels, numpy
    arrays with the batch dim); ``error`` the traceback when the step could not
    run (then both lists are empty)."""
    import numpy as np
    import paddle
    import paddle.distributed as dist

    try:
        with paddle.utils.unique_name.guard():
            mesh = dist.ProcessMesh(np.array([rank]).reshape([1] * len(dim_names)).tolist(),
                                    dim_names=list(dim_names))
            layer = model.build_model(mesh)
            # replicated on the one-process mesh: dist ops take no dense operand
            whole = [dist.Replicate()] * len(dim_names)
            n_in = len(list(model.inputs))
            tensors = [dist.shard_tensor(paddle.to_tensor(a), mesh, whole)
                       for a in first_batch]
            for t in tensors[:n_in]:
                # a float input needs a gradient: Paddle's eager recompute
                # (fleet.utils.recompute) runs no backward, so its block's
                # parameters get none, when none of its inputs needs one
                if t.dtype in (paddle.float32, paddle.float64, paddle.float16,
                               paddle.bfloat16):
                    t.stop_gradient = False
            outs = layer(*tensors[:n_in])
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            loss = model.loss(*(outs + tensors[n_in:]))
            loss.backward()
            with_grad, without = [], []
            for sname, p in layer.named_parameters():
                if p.stop_gradient:
                    continue  # not trainable: no update expected
                (with_grad if p.grad is not None else without).append(sname)
        return {"with_grad": with_grad, "without_grad": without, "error": None}
    except Exception:
        return {"with_grad": [], "without_grad": [], "error": traceback.format_exc(limit=4)}


def by_param_name(record: dict, layer) -> dict:
    """``record`` with ``with_grad`` / ``without_grad`` as the plan's
    parameter names (``layer``: the plan's model); a structured name the plan's
    model lacks is kept in ``unmatched``."""
    names = {sname: p.name for sname, p in layer.named_parameters()}
    out = dict(record)
    for key in ("with_grad", "without_grad"):
        out[key] = sorted(names[s] for s in record[key] if s in names)
    out["unmatched"] = sorted(s for key in ("with_grad", "without_grad")
                              for s in record[key] if s not in names)
    return out
