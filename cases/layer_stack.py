"""Generated stacks of N transformer-MLP-like blocks: both passes' patterns, N times.

Each block (tensor parallel over a 1-D mesh, ring 0) is, per rank::

    n    = elementwise_mul(h, g_i)             # layer-norm-free scale; g_i [H], replicated
    n_id = c_identity(n)                        # forward of column parallel
    a    = matmul_v2(n_id, W1_i)                # W1 [H, F/tp], column-sharded
    z    = gelu(a) | relu(a)                    # activation (``acts`` cycles per block)
    m    = matmul_v2(z, W2_i)                   # W2 [F/tp, H], row-sharded; m partial
    r    = all_reduce(m)                        # row parallel (ring 0)
    o    = elementwise_add(r, b_i)              # b [H], replicated: the promoted bias
    o    = scale(o) x pad                       # padding: elementwise work of a real
                                                # layer (norms, dropout, ...), so that
                                                # a block is ~100 ops per rank
    h'   = elementwise_add(h, o)                # residual

    backward, Paddle's own grad ops (``ProgramBuilder.grad_op``):
    h@G.res, o@G = elementwise_add_grad(h'@G)
    o@G = scale(o@G) x pad
    r@G, b@G     = elementwise_add_grad(o@G)    # } the promotion pass's MP pattern:
    z@G, W2@G    = matmul_v2_grad(z, W2, r@G)   # } elementwise_add_grad -> matmul_v2_grad
    a@G          = gelu_grad | relu_grad
    n_id@G, W1@G = matmul_v2_grad(n_id, W1, a@G)  # } the overlap pass's pattern:
    n@G          = c_allreduce_sum(n_id@G)         # } dX allreduced right after
    h@G.mul, g@G = elementwise_mul_grad(n@G)
    h@G          = sum(h@G.res, h@G.mul)
    sgd per parameter (g, W1, W2, b of every block)

So ``allreduce_matmul_grad_overlapping`` splits every block's W1 grad and
``auto_parallel_fused_linear_promotion`` promotes every block's bias (first
TP rank: bias added before the all_reduce; other ranks: bias, its grad, its
sgd and its startup init/broadcast deleted).  As Paddle's partitioner does,
the startup program broadcasts every replicated parameter over the TP ring.

A block is ``20 + 2 * pad`` main ops per rank (+1 loss, +2 loss-grad ops for
the stack); the default ``pad=40`` gives 100 ops per block, so 48 blocks
are ~4,800 ops, the size of a real 48-layer program's rank.

The dX allreduce is spelled ``c_allreduce_sum`` (as in ``column_parallel``),
the one spelling the overlap pass matches; 3.3.1's planner emits
``all_reduce`` there, on which the pass does nothing (see
``col_all_reduce_spelling``).

Observed on Paddle 3.3.1 (CPU) for ``stack_2_layers``: both passes fire on
both ranks (overlap 203 -> 211 ops per rank; promotion 203 -> 203 on rank 0,
203 -> 197 on rank 1) and every check holds, the simulated runs included.
Applied one after the other on the same programs (promotion then overlap, as
Paddle's parallelizer orders them, or the reverse) the shape, dataflow and
simulated numeric checks hold too: the two passes do not interfere here.
"""
from __future__ import annotations

from .base import Case, Expect
from .program_builder import BACKWARD, ProgramBuilder

OVERLAP = "allreduce_matmul_grad_overlapping"
PROMOTION = "auto_parallel_fused_linear_promotion"
B, S, H, F = 2, 4, 8, 16  # batch, sequence, hidden, MLP width (F % tp == 0)
TP_RING = 0
DEFAULT_PAD = 40
DEFAULT_ACTS = ("gelu", "relu")


def ops_per_block(pad: int = DEFAULT_PAD) -> int:
    """Main-program ops one block adds to a rank's program (before any pass)."""
    return 20 + 2 * pad


def _pad_scale(k: int) -> float:
    # 0.5, 2.0, 0.5, ...: exact in binary, and the chain stays bounded
    return 0.5 if k % 2 == 0 else 2.0


def build(case: Case, rank: int):
    p = case.params
    b = ProgramBuilder(case, rank)
    n_layers, tp, pad = p["layers"], p["tp"], p["pad"]
    acts = p["acts"]
    fl = F // tp
    shape = [B, S, H]

    x = b.data("x", shape, shape)
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)
    h = x
    blocks = []
    # -- forward ------------------------------------------------------------
    for i in range(n_layers):
        act = acts[i % len(acts)]
        g = b.param(f"block_{i}.scale_0", [H], mapping=[-1])
        w1 = b.param(f"linear_{2 * i}.w_0", [H, fl], mapping=[-1, 0])
        w2 = b.param(f"linear_{2 * i + 1}.w_0", [fl, H], mapping=[0, -1])
        bias = b.param(f"linear_{2 * i + 1}.b_0", [H], mapping=[-1])
        # the partitioner broadcasts replicated parameters over the TP ring
        b.startup_broadcast(g.name, TP_RING)
        b.startup_broadcast(bias.name, TP_RING)

        n = b.var(f"block_{i}.tmp_0", shape)
        mul = b.op("elementwise_mul", {"X": [h], "Y": [g]}, {"Out": [n]}, {"axis": -1})
        n_id = b.var(f"block_{i}.tmp_1", shape)
        b.op("c_identity", {"X": [n]}, {"Out": [n_id]}, {"ring_id": TP_RING})
        a = b.var(f"linear_{2 * i}.tmp_0", [B, S, fl], mapping=[-1, -1, 0])
        mm1 = b.op("matmul_v2", {"X": [n_id], "Y": [w1]}, {"Out": [a]},
                   {"trans_x": False, "trans_y": False})
        z = b.var(f"{act}_{i}.tmp_0", [B, S, fl], mapping=[-1, -1, 0])
        act_op = b.op(act, {"X": [a]}, {"Out": [z]},
                      {"approximate": False} if act == "gelu" else {})
        m = b.var(f"linear_{2 * i + 1}.tmp_0", shape)
        mm2 = b.op("matmul_v2", {"X": [z], "Y": [w2]}, {"Out": [m]},
                   {"trans_x": False, "trans_y": False})
        r = b.var(f"linear_{2 * i + 1}.tmp_1", shape)
        b.all_reduce(m, r, TP_RING)
        o = b.var(f"linear_{2 * i + 1}.tmp_2", shape)
        add = b.op("elementwise_add", {"X": [r], "Y": [bias]}, {"Out": [o]}, {"axis": -1})
        chain = [o]
        scales = []
        for k in range(pad):
            nxt = b.var(f"block_{i}.pad_{k}", shape)
            scales.append(b.op("scale", {"X": [chain[-1]]}, {"Out": [nxt]},
                               {"scale": _pad_scale(k), "bias": 0.0,
                                "bias_after_scale": True}))
            chain.append(nxt)
        h_next = b.var(f"block_{i}.out", shape)
        res = b.op("elementwise_add", {"X": [h], "Y": [chain[-1]]}, {"Out": [h_next]},
                   {"axis": -1})
        blocks.append(dict(h=h, g=g, w1=w1, w2=w2, bias=bias, n=n, n_id=n_id, a=a, z=z,
                           r=r, o=o, chain=chain, mul=mul, mm1=mm1, act=act_op, mm2=mm2,
                           add=add, scales=scales, res=res, out=h_next))
        h = h_next

    # the last hidden state and the loss: names no pass renames or deletes
    b.mse_loss(h, "mean_0.tmp_0")

    # -- backward -------------------------------------------------------------
    for i in reversed(range(n_layers)):
        blk = blocks[i]
        out_g = f"{blk['out'].name}@GRAD"
        h_g = b.grad_of(blk["h"])  # the sum of both contributions
        h_g_res = b.grad_of(blk["h"], f"{blk['h'].name}@GRAD@RENAME@res")
        chain = blk["chain"]
        last_g = b.grad_of(chain[-1])
        b.grad_op(blk["res"], inputs={"Out@GRAD": [out_g]},
                  outputs={"X@GRAD": [h_g_res], "Y@GRAD": [last_g]})
        for k in reversed(range(len(blk["scales"]))):
            b.grad_of(chain[k])
            b.grad_op(blk["scales"][k])
        r_g, b_g = b.grad_of(blk["r"]), b.grad_of(blk["bias"])
        b.grad_op(blk["add"])
        # the backward of the row-parallel all_reduce is the identity
        b.grad_of(blk["z"])
        w2_g = b.grad_of(blk["w2"])
        b.grad_op(blk["mm2"], inputs={"Out@GRAD": [r_g]})
        b.grad_of(blk["a"])
        b.grad_op(blk["act"])
        n_id_g, w1_g = b.grad_of(blk["n_id"]), b.grad_of(blk["w1"])
        b.grad_op(blk["mm1"])
        n_g = b.grad_of(blk["n"])
        b.op("c_allreduce_sum", {"X": [n_id_g]}, {"Out": [n_g]},
             {"ring_id": TP_RING, "use_calc_stream": True, "use_model_parallel": True},
             BACKWARD)
        h_g_mul, g_g = b.grad_of(blk["h"], f"{blk['h'].name}@GRAD@RENAME@mul"), \
            b.grad_of(blk["g"])
        b.grad_op(blk["mul"], outputs={"X@GRAD": [h_g_mul], "Y@GRAD": [g_g]})
        b.op("sum", {"X": [h_g_res, h_g_mul]}, {"Out": [h_g]}, {}, BACKWARD)
        b.params_grads += [(blk["g"], g_g), (blk["w1"], w1_g), (blk["w2"], w2_g),
                           (blk["bias"], b_g)]
    b.fetches.append(f"{x.name}@GRAD")

    # -- optimizer --------------------------------------------------------------
    for param, grad in b.params_grads:
        b.sgd(param, grad, lr)
    return b.finish()


_OVERLAP_OK = ("fires on every block: each W1 matmul_v2_grad is split, its dX "
               "c_allreduce_sum moved right after the dX matmul on the mp stream")
_PROMOTION_OK = ("fires on every block: the first TP rank adds each bias before its "
                 "all_reduce; the other ranks drop each bias's elementwise_add(+_grad), "
                 "sgd and startup init/broadcast")


def make_case(n_layers: int, name: str | None = None, tp: int = 2,
              pad: int = DEFAULT_PAD, acts=DEFAULT_ACTS) -> Case:
    """A stack of ``n_layers`` blocks on TP ``tp`` (mesh ``[0..tp-1]``, ring 0).

    ``pad`` scale ops per block in the forward (and as many in the
    backward) bring a block to ``20 + 2 * pad`` ops; ``acts`` cycles the
    activation over the blocks.
    """
    if n_layers < 1:
        raise ValueError("a stack has at least one block")
    if F % tp:
        raise ValueError(f"tp {tp} does not divide the MLP width {F}")
    name = name or f"stack_{n_layers}_layers_tp{tp}"
    mesh = list(range(tp))
    sharded = frozenset([f"linear_{2 * i}.w_0" for i in range(n_layers)] +
                        [f"linear_{2 * i + 1}.w_0" for i in range(n_layers)])
    return Case(
        name=name, family="layer_stack",
        summary=f"{n_layers} MLP blocks (column- then row-parallel linear, "
                f"{'/'.join(acts)}, residual, {pad} pad ops), TP {tp}, SGD",
        mesh=mesh, builder=build,
        expect={OVERLAP: Expect(True, "EQUIVALENT", _OVERLAP_OK),
                PROMOTION: Expect(True, "EQUIVALENT", _PROMOTION_OK)},
        rings={TP_RING: [list(mesh)]}, sharded_params=sharded,
        params=dict(layers=n_layers, tp=tp, pad=pad, acts=tuple(acts)))


CASES = [make_case(2, "stack_2_layers"), make_case(1, "stack_1_layer"),
         make_case(4, "stack_4_layers"), make_case(2, "stack_2_layers_tp4", tp=4),
         make_case(1, "stack_1_layer_tp4", tp=4)]
