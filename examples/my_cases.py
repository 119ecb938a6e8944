"""A case file of one's own: a column-parallel and a row-parallel case.

    python -m verify run --case-file examples/my_cases.py --case 'my_*'

Built only with the public case API (``verify.case_api``).  Each builder
spells one rank's main and startup programs op by op, with Paddle's own grad
ops, and every var carries its dims mapping on the case's mesh.
"""
from verify.case_api import (
    BACKWARD,
    OVERLAP,
    PROMOTION,
    Case,
    Expect,
    ProgramBuilder,
    replicated,
    sharded,
    tp_mesh,
    tp_rings,
)

B, S, H, N = 2, 4, 8, 8  # batch, sequence, hidden, features per rank


def column_parallel(case, rank):
    """x -> c_identity -> matmul_v2(W: column shard) ; backward allreduces dX."""
    b = ProgramBuilder(case, rank)
    x = b.data("x", [B, S, H], [B, S, H])
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)
    w = b.param("my_col.w", [H, N], mapping=sharded(2, 1))
    x_id = b.var("my_col.x_id", [B, S, H])
    b.op("c_identity", {"X": [x]}, {"Out": [x_id]}, {"ring_id": 0})
    out = b.var("my_col.out", [B, S, N], mapping=sharded(3, 2))
    mm = b.op("matmul_v2", {"X": [x_id], "Y": [w]}, {"Out": [out]},
              {"trans_x": False, "trans_y": False})
    out_g = b.mse_loss(out, split="tp")  # out is column-sharded: a target per rank
    x_id_g, w_g = b.grad_of(x_id), b.grad_of(w)
    b.grad_op(mm, inputs={"Out@GRAD": [out_g]})
    x_g = b.grad_of(x)
    b.op("c_allreduce_sum", {"X": [x_id_g]}, {"Out": [x_g]},
         {"ring_id": 0, "use_calc_stream": True, "use_model_parallel": True}, BACKWARD)
    b.fetches.append(x_g.name)
    b.params_grads.append((w, w_g))
    b.sgd(w, w_g, lr)
    return b.finish()


def row_parallel(case, rank):
    """x (K shard) -> matmul_v2(W: row shard) -> all_reduce -> + bias."""
    b = ProgramBuilder(case, rank)
    k = 8 // case.world_size
    w = b.param("my_row.w", [k, N], mapping=sharded(2, 0))
    bias = b.param("my_row.b", [N], mapping=replicated(1))
    b.startup_broadcast(bias.name, 0)  # as the partitioner does for replicated params
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)
    x = b.data("x", [B, S, k], [B, S, k], mapping=sharded(3, 2))
    mm = b.var("my_row.mm", [B, S, N])
    mm_op = b.op("matmul_v2", {"X": [x], "Y": [w]}, {"Out": [mm]},
                 {"trans_x": False, "trans_y": False})
    r = b.var("my_row.sum", [B, S, N])
    b.all_reduce(mm, r, 0)
    out = b.var("my_row.out", [B, S, N])
    add = b.op("elementwise_add", {"X": [r], "Y": [bias]}, {"Out": [out]}, {"axis": -1})
    b.mse_loss(out)
    r_g, bias_g = b.grad_of(r), b.grad_of(bias)
    b.grad_op(add)
    w_g = b.grad_of(w)
    # x is fed data: no gradient flows into it
    b.grad_op(mm_op, inputs={"Out@GRAD": [r_g]}, outputs={"X@GRAD": []})
    b.params_grads += [(w, w_g), (bias, bias_g)]
    for p, g in b.params_grads:
        b.sgd(p, g, lr)
    return b.finish()


MESH = tp_mesh(2)

CASES = [
    Case(name="my_column_parallel", family="my_cases",
         summary="one column-parallel linear, TP 2, c_allreduce_sum of dX",
         mesh=MESH, builder=column_parallel, rings=tp_rings(MESH),
         sharded_params=frozenset({"my_col.w"}),
         expect={OVERLAP: Expect(True, "EQUIVALENT",
                                 "the pass splits the grad and moves the allreduce")}),
    Case(name="my_row_parallel", family="my_cases",
         summary="one row-parallel linear with bias, TP 2, SGD",
         mesh=MESH, builder=row_parallel, rings=tp_rings(MESH),
         sharded_params=frozenset({"my_row.w"}),
         expect={PROMOTION: Expect(True, "EQUIVALENT",
                                   "rank 0 adds the bias before the all_reduce; "
                                   "rank 1 loses it")}),
]
