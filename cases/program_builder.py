"""Appends ops to a legacy program one by one, with their dist attrs.

Cases spell out every forward, backward and optimizer op themselves (no
``append_backward``) so that the op sequence is exactly the pattern a pass
looks for, and every op and var carries the dist attrs the passes read from
the ``DistributedContext``.
"""
from __future__ import annotations

import numpy as np

from verify.ir.legacy_ir import paddle_module

paddle = paddle_module()

from paddle.base import core  # noqa: E402

from paddle.distributed.auto_parallel.process_mesh import ProcessMesh  # noqa: E402
from paddle.distributed.auto_parallel.static.dist_context import (  # noqa: E402
    DistributedContext,
)
from paddle.distributed.auto_parallel.static.utils import (  # noqa: E402
    naive_set_dist_op_attr_for_program_by_mesh,
    set_var_dist_attr,
)

from .base import FeedSpec, RankProgram  # noqa: E402

# op_role values of paddle's OpRole enum
FORWARD, BACKWARD, OPTIMIZE, LOSS = 0, 1, 2, 256


class ProgramBuilder:
    """Builds one rank's main and startup programs and their dist context."""

    def __init__(self, case, rank: int):
        self.case = case
        self.rank = rank
        self.main = paddle.static.Program()
        self.startup = paddle.static.Program()
        self.main.random_seed = 1234
        self.startup.random_seed = 1234
        self.block = self.main.global_block()
        self.sblock = self.startup.global_block()
        arr = np.array(case.mesh)
        names = ["dp", "mp"][-arr.ndim:] if arr.ndim <= 2 else [f"d{i}" for i in range(arr.ndim)]
        self.mesh = ProcessMesh(arr.tolist(), dim_names=names)
        self.ctx = DistributedContext(serial_main_prog=self.main,
                                      serial_startup_prog=self.startup)
        self.ctx.add_process_mesh(self.mesh)
        self.feeds: list[FeedSpec] = []
        self.params_grads: list = []
        self.fetches: list[str] = []
        self.loss: str | None = None

    # -- variables -------------------------------------------------------
    def _annotate(self, var, mapping):
        if mapping is None:
            mapping = [-1] * len(var.shape)
        set_var_dist_attr(self.ctx, var, list(mapping), self.mesh)
        return var

    def data(self, name, shape, concrete_shape, dtype="float32", mapping=None):
        """A fed input; ``shape`` may hold -1, ``concrete_shape`` may not."""
        var = self.block.create_var(name=name, shape=list(shape), dtype=dtype,
                                    persistable=False, stop_gradient=True,
                                    need_check_feed=True)
        var.is_data = True
        self.feeds.append(FeedSpec(name, tuple(concrete_shape), dtype))
        return self._annotate(var, mapping)

    def var(self, name, shape, dtype="float32", mapping=None, persistable=False):
        var = self.block.create_var(name=name, shape=list(shape), dtype=dtype,
                                    persistable=persistable, stop_gradient=False)
        return self._annotate(var, mapping)

    def param(self, name, shape, dtype="float32", mapping=None, init_value=None):
        """A trainable parameter, initialised by the startup program."""
        p = self.block.create_parameter(name=name, shape=list(shape), dtype=dtype,
                                        trainable=True)
        self._annotate(p, mapping)
        sp = self.sblock.create_parameter(name=name, shape=list(shape), dtype=dtype,
                                          trainable=True)
        if init_value is None:
            self.sblock.append_op(type="uniform_random", outputs={"Out": [sp]},
                                  attrs={"shape": list(shape), "dtype": sp.dtype,
                                         "min": -0.5, "max": 0.5, "seed": 7})
        else:
            self.fill_startup(name, shape, dtype, init_value)
        return p

    def persistable(self, name, shape, dtype="float32", value=0.0, mapping=None):
        """A persistable non-parameter (lr, optimizer state), filled in startup."""
        v = self.var(name, shape, dtype, mapping=mapping, persistable=True)
        v.stop_gradient = True
        self.fill_startup(name, shape, dtype, value)
        return v

    def fill_startup(self, name, shape, dtype, value):
        if not self.sblock.has_var(name):
            self.sblock.create_var(name=name, shape=list(shape), dtype=dtype,
                                   persistable=True)
        sv = self.sblock.var(name)
        self.sblock.append_op(type="fill_constant", outputs={"Out": [sv]},
                              attrs={"shape": list(shape), "dtype": sv.dtype,
                                     "value": float(value)})

    def grad_of(self, var, name=None):
        return self.var(name or var.name + "@GRAD", var.shape, var.dtype,
                        mapping=self.ctx.get_tensor_dist_attr_for_program(var).dims_mapping)

    # -- ops -------------------------------------------------------------
    def op(self, type, inputs, outputs, attrs=None, role=FORWARD):
        """Append one op with ``op_role`` and a dist attr on the case's mesh."""
        attrs = dict(attrs or {})
        attrs["op_role"] = role
        op = self.block.append_op(type=type, inputs=inputs, outputs=outputs,
                                  attrs=attrs)
        naive_set_dist_op_attr_for_program_by_mesh(op, self.mesh, self.ctx)
        return op

    def grad_op(self, fwd_op, inputs=None, outputs=None, role=BACKWARD):
        """Append the grad op Paddle's own grad maker makes for ``fwd_op``.

        ``inputs``/``outputs`` override slots (slot -> [var names]); every
        var the grad op writes must already exist in the block.
        """
        descs, _ = core.get_grad_op_desc(fwd_op.desc, set(), [])
        if len(descs) != 1:
            raise ValueError(f"{fwd_op.type}: expected one grad op, got {len(descs)}")
        desc = self.block.desc.append_op()
        desc.copy_from(descs[0])
        for slot, names in (inputs or {}).items():
            desc.set_input(slot, [getattr(n, "name", n) for n in names])
        for slot, names in (outputs or {}).items():
            desc.set_output(slot, [getattr(n, "name", n) for n in names])
        desc._set_int32_attr("op_role", role)
        missing = [n for n in desc.output_arg_names() if not self.block.has_var(n)]
        if missing:
            raise ValueError(f"{fwd_op.type} grad writes {missing}, not in the block")
        # Wrap the one new desc instead of Block._sync_with_cpp, which re-reads
        # every op and var of the block (O(n^2) over a build of n ops).
        op = paddle.base.framework.Operator(self.block, desc)
        self.block.ops.append(op)
        naive_set_dist_op_attr_for_program_by_mesh(op, self.mesh, self.ctx)
        return op

    def mse_loss(self, h, name="loss", split="dp"):
        """``loss = reduce_mean(square(h - target))`` against a fed, seeded
        ``target`` of ``h``'s shape, and the head of the backward pass;
        returns ``h@GRAD``.

        Why MSE and not ``mean(h)``: with a linear loss the gradients do not
        depend on the forward values, so a wrong forward value that keeps
        the loss's mean would be invisible to every compared gradient.  Here
        ``h@GRAD = 2 (h - target) / numel`` carries every element of ``h``
        into the backward pass.  ``split`` says how the target differs across
        ranks ("dp": per data-parallel replica; "tp": per rank, for an ``h``
        that is sharded over the tensor-parallel axis).  ``h`` and the loss
        become fetched outputs.
        """
        from paddle.base.data_feeder import convert_dtype

        target = self.data(f"{name}.target", h.shape, [abs(int(d)) for d in h.shape],
                           dtype=convert_dtype(h.dtype), mapping=self.mapping_of(h))
        self.feeds[-1].split = split
        # a -1 dim of the target is the same symbolic dim as h's (the batch)
        if any(int(d) < 0 for d in h.shape) and self.feeds:
            first = self.feeds[0].name
            syms = tuple(self.case.symbols.get(first, ()))
            self.case.symbols.setdefault(target.name, tuple(
                (syms[i] if i < len(syms) else None) if int(d) < 0 else None
                for i, d in enumerate(h.shape)))
        # a -1 dim of h has the concrete size of the feed that carries it
        self.feeds[-1].shape = tuple(self._concrete(h))
        diff = self.var(f"{name}.diff", h.shape, h.dtype, mapping=self.mapping_of(h))
        sub = self.op("elementwise_sub", {"X": [h], "Y": [target]}, {"Out": [diff]},
                      {"axis": -1}, FORWARD | LOSS)
        sq = self.var(f"{name}.sq", h.shape, h.dtype, mapping=self.mapping_of(h))
        square = self.op("square", {"X": [diff]}, {"Out": [sq]}, {}, FORWARD | LOSS)
        loss = self.var(name, [], h.dtype)
        mean = self.op("reduce_mean", {"X": [sq]}, {"Out": [loss]},
                       {"dim": [], "keep_dim": False, "reduce_all": True}, FORWARD | LOSS)
        self.loss = loss.name
        self.fetches += [h.name, loss.name]
        loss_g = self.grad_of(loss)
        self.op("fill_constant", {}, {"Out": [loss_g]},
                {"shape": [], "dtype": loss.dtype, "value": 1.0}, BACKWARD | LOSS)
        self.grad_of(sq)
        self.grad_op(mean, role=BACKWARD | LOSS)
        self.grad_of(diff)
        self.grad_op(square, role=BACKWARD | LOSS)
        h_g = self.grad_of(h)
        # the target is data: no gradient flows into it
        self.grad_op(sub, outputs={"Y@GRAD": []}, role=BACKWARD | LOSS)
        return h_g

    def _concrete(self, var):
        """``var``'s shape with each -1 replaced by the concrete size of the
        same dim of the first feed (the batch dim rides along from it)."""
        shape = [int(d) for d in var.shape]
        if all(d >= 0 for d in shape) or not self.feeds:
            return shape
        first = self.feeds[0]
        declared = self.block.var(first.name).shape
        sizes = {i: c for i, (d, c) in enumerate(zip(declared, first.shape)) if d < 0}
        return [sizes.get(i, 1) if d < 0 else d for i, d in enumerate(shape)]

    def sgd(self, param, grad, lr, master=None):
        """SGD step; with ``master`` (an fp32 master weight) it is multi-precision."""
        ins = {"Param": [param], "Grad": [grad], "LearningRate": [lr]}
        outs = {"ParamOut": [param]}
        attrs = {}
        if master is not None:
            ins["MasterParam"] = [master]
            outs["MasterParamOut"] = [master]
            attrs["multi_precision"] = True
        self.op("sgd", ins, outs, attrs, role=OPTIMIZE)

    def mapping_of(self, var):
        return self.ctx.get_tensor_dist_attr_for_program(var).dims_mapping

    def master_weight(self, param):
        """The fp32 master copy of a low-precision parameter, as Paddle's
        optimizers name it; the startup program casts the parameter into it."""
        name = f"{param.name}_fp32_master_0"
        m = self.var(name, param.shape, "float32", mapping=self.mapping_of(param),
                     persistable=True)
        m.stop_gradient = True
        sp = self.sblock.var(param.name)
        sm = self.sblock.create_var(name=name, shape=list(param.shape),
                                    dtype="float32", persistable=True)
        self.sblock.append_op(type="cast", inputs={"X": [sp]}, outputs={"Out": [sm]},
                              attrs={"in_dtype": sp.dtype, "out_dtype": sm.dtype})
        return m

    def adamw(self, param, grad, lr, master=None, coeff=0.01,
              beta1=0.9, beta2=0.999, epsilon=1e-8):
        """AdamW step with its accumulators named as Paddle's AdamW names them
        (``<param>_moment1_0`` ...), all initialised by the startup program."""
        mapping = self.mapping_of(param)
        m1 = self.persistable(f"{param.name}_moment1_0", param.shape, "float32",
                              0.0, mapping=mapping)
        m2 = self.persistable(f"{param.name}_moment2_0", param.shape, "float32",
                              0.0, mapping=mapping)
        b1 = self.persistable(f"{param.name}_beta1_pow_acc_0", [1], "float32", beta1)
        b2 = self.persistable(f"{param.name}_beta2_pow_acc_0", [1], "float32", beta2)
        ins = {"Param": [param], "Grad": [grad], "LearningRate": [lr],
               "Moment1": [m1], "Moment2": [m2], "Beta1Pow": [b1], "Beta2Pow": [b2]}
        outs = {"ParamOut": [param], "Moment1Out": [m1], "Moment2Out": [m2],
                "Beta1PowOut": [b1], "Beta2PowOut": [b2]}
        if master is not None:
            ins["MasterParam"] = [master]
            outs["MasterParamOut"] = [master]
        self.op("adamw", ins, outs,
                {"beta1": beta1, "beta2": beta2, "epsilon": epsilon, "lr_ratio": 1.0,
                 "coeff": coeff, "with_decay": True, "lazy_mode": False,
                 "min_row_size_to_use_multithread": 1000,
                 "multi_precision": master is not None,
                 "use_global_beta_pow": False, "amsgrad": False},
                role=OPTIMIZE)

    # -- collectives (3.3.1 spellings) ------------------------------------
    def all_reduce(self, x, out, ring_id, role=FORWARD):
        """``all_reduce`` with SUM (``out`` may be ``x``: in place)."""
        return self.op("all_reduce", {"x": [x]}, {"out": [out]},
                       {"ring_id": ring_id, "reduce_type": 0}, role)

    def all_gather(self, x, out, ring_id, nranks, role=FORWARD):
        """``all_gather``: concatenates the ranks' ``x`` along dim 0."""
        return self.op("all_gather", {"x": [x]}, {"out": [out]},
                       {"ring_id": ring_id, "nranks": nranks}, role)

    def reduce_scatter(self, x, out, ring_id, nranks, role=FORWARD):
        """``reduce_scatter``: sums the ranks' ``x``, keeps this rank's dim-0 chunk."""
        return self.op("reduce_scatter", {"x": [x]}, {"out": [out]},
                       {"ring_id": ring_id, "nranks": nranks}, role)

    def startup_broadcast(self, name, ring_id, root=0):
        """A startup ``broadcast`` of a parameter, as Paddle's partitioner
        emits one per mesh axis along which the parameter is replicated."""
        sv = self.sblock.var(name)
        self.sblock.append_op(type="broadcast", inputs={"x": [sv]},
                              outputs={"out": [sv]},
                              attrs={"ring_id": ring_id, "root": root,
                                     "op_role": FORWARD})

    def finish(self) -> RankProgram:
        return RankProgram(rank=self.rank, main=self.main, startup=self.startup,
                           dist_context=self.ctx, params_grads=self.params_grads,
                           feeds=self.feeds, loss=self.loss, fetches=self.fetches)
