"""Tensor + sequence parallel programs planned by Paddle's own ``Engine``.

The ``engine_planned`` model (LN -> column linear -> gelu -> row linear,
TP2, MSE, SGD; planned per rank in a subprocess, cached: see
``cases/engine_planned.py``) with ``sp=True``: the row-parallel linear has no
bias and its output is marked replicated, goes through a ``relu``, and is
then marked sharded along dim 0 (the sequence-parallel region), as Paddle's
own sequence-parallel test marks it.  The 3.3.1 planner then emits::

    matmul_v2 -> all_reduce(x = out, in place) [tensor_parallel]
              -> split(axis 0, 2 chunks) [/auto_parallel/reshard] -> relu(chunk k)

which is exactly the pattern ``auto_parallel_sequence_parallel_optimization``
fuses into a ``reduce_scatter``.  The programs are taken with
``sp_optimization.enable = False`` (the suite applies the pass itself); with
its 3.3.1 default, True, ``engine.prepare`` itself raises inside the pass
(``(NotFound) Input X cannot be found in operator all_reduce``): a user who
marks sequence parallelism and changes nothing else cannot plan at all.
"""
from __future__ import annotations

from .base import Case, Expect
from .column_parallel import SPELLING_EV
from .engine_planned import MESH, OVERLAP, PROMOTION, RING, build
from .sequence_parallel import SP_OPT_EV

SP_OPT = "auto_parallel_sequence_parallel_optimization"

CASES = [
    Case(name="engine_mlp_sp_tp2_sgd", family="engine_sp",
         summary="Engine-planned LN -> column linear+bias -> gelu -> row linear "
                 "(no bias) -> all_reduce -> reshard split (SP) -> relu, MSE, SGD, TP2",
         mesh=list(MESH), builder=build,
         expect={
             SP_OPT: Expect(True, "PASS_CRASHED",
                            "the planner's all_reduce -> reshard split(axis 0) is the "
                            "pass's pattern; it raises reading allreduce_op.input(\"X\") "
                            "(slot x): RuntimeError (NotFound) Input X cannot be found in "
                            "operator all_reduce, on both ranks, before any rewrite. With "
                            "sp_optimization.enable left at its default (True) the same "
                            "exception stops engine.prepare. With the slot read as x "
                            "(tests/fixed_passes/sp_optimization_x_slot_mended.py) the "
                            "fusion of the planner's program is proved equivalent",
                            evidence=SP_OPT_EV),
             OVERLAP: Expect(True, "NOT_APPLIED",
                             "as on engine_mlp_*: the column-parallel dX all_reduce is "
                             "spelled all_reduce; the pass matches only c_allreduce_sum",
                             evidence=SPELLING_EV),
             PROMOTION: Expect(False, "EQUIVALENT",
                               "the row-parallel linear has no bias: nothing to promote"),
         },
         rings={RING: [list(MESH)]}, symbols={},
         sharded_params=frozenset({"linear_0.w_0", "linear_0.b_0", "linear_1.w_0"}),
         enable_sp=True, amp_level="o0",
         gloo_unfaithful="reduce_scatter (the rewritten program's, once the pass is mended) "
                         "has no CPU (gloo) implementation",
         params={"act": "gelu", "optimizer": "sgd", "sp": True}),
]
