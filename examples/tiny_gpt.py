"""A small GPT in plain Paddle, after the model of Paddle's own
``mp_allreduce_matmul_grad_overlapping`` pass test (written anew): hidden 64,
2 layers, 8 heads, the output projection tied to the word embedding
(``matmul_v2`` with ``transpose_y``), tensor parallel over ``mp``.

    python -m verify plan examples/tiny_gpt.py --ranks 2 --out /tmp/tiny_gpt
    python -m verify run --program-dir /tmp/tiny_gpt

Adapted to 3.3.1's legacy static mode: functional APIs that reject legacy
Variables (``paddle.matmul``, ``F.softmax``, ``paddle.reshape`` ...) are
spelled as single ops with ``LayerHelper``; the loss is MSE of the logits
against a fed target.  (See ``examples/tiny_mlp.py`` for what a model file
defines.)

Observed on 3.3.1 (CPU, TP 2): 186 ops per rank; the overlap pass is
NOT_APPLIED (the planner spells the dX allreduce ``all_reduce``, the pass
looks for ``c_allreduce_sum``); the promotion pass fires on both ranks
(rank 1 186 -> 174 ops) and is EQUIVALENT (value proof on both ranks,
simulated numeric run, contract).  The attention has separate q/k/v
projections (no ``slice``), as the pass test's GPT has when unfused.
"""
import paddle
from paddle import nn
from paddle.base.layer_helper import LayerHelper
from paddle.distributed.fleet import auto
from paddle.static import InputSpec

VOCAB, H, HEADS, LAYERS, SEQ = 32, 64, 8, 2, 8
BATCH = 2


def _op(kind, inputs, attrs=None, out_slot="Out", extra_outs=()):
    helper = LayerHelper(kind)
    x = next(iter(inputs.values()))[0]
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    outs = {out_slot: [out]}
    for slot in extra_outs:
        outs[slot] = [helper.create_variable_for_type_inference(dtype=x.dtype)]
    helper.append_op(type=kind, inputs=inputs, outputs=outs, attrs=attrs or {})
    return out


def reshape(x, shape):
    return _op("reshape2", {"X": [x]}, {"shape": shape}, extra_outs=("XShape",))


def transpose(x, perm):
    return _op("transpose2", {"X": [x]}, {"axis": perm}, extra_outs=("XShape",))


def matmul(x, y, trans_y=False):
    return _op("matmul_v2", {"X": [x], "Y": [y]}, {"trans_x": False, "trans_y": trans_y})


class Attention(nn.Layer):
    """Separate q, k, v projections (as the pass test's GPT builds them when
    its attention is not fused), each column parallel; the output
    projection row parallel.  k has no bias: its gradient would be zero
    analytically (softmax is invariant to a shift of a row, and a k bias
    shifts each row of q k^T by q.b), so both runs would carry only
    cancellation noise (~1e-12), which the numeric check's floor (the
    tensor's own RMS) cannot tell from a difference; the value proof
    proves such a grad equal, the numeric check would cry wolf."""

    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.q, self.v = nn.Linear(H, H), nn.Linear(H, H)
        self.k = nn.Linear(H, H, bias_attr=False)
        self.out = nn.Linear(H, H)

    def _heads(self, x):
        return transpose(reshape(x, [0, 0, HEADS, H // HEADS]), [0, 2, 1, 3])

    def forward(self, x):
        for proj in (self.q, self.k, self.v):
            auto.shard_tensor(proj.weight, self.mesh, [None, "mp"])
            if proj.bias is not None:
                auto.shard_tensor(proj.bias, self.mesh, ["mp"])
        auto.shard_tensor(self.out.weight, self.mesh, ["mp", None])
        q, k, v = (self._heads(proj(x)) for proj in (self.q, self.k, self.v))
        scores = _op("scale", {"X": [matmul(q, k, trans_y=True)]},
                     {"scale": (H // HEADS) ** -0.5, "bias": 0.0})
        ctx = matmul(_op("softmax", {"X": [scores]}, {"axis": -1}), v)
        ctx = reshape(transpose(ctx, [0, 2, 1, 3]), [0, 0, H])
        return self.out(ctx)


class Block(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.ln1, self.ln2 = nn.LayerNorm(H), nn.LayerNorm(H)
        self.attn = Attention(mesh)
        self.up, self.down = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)

    def forward(self, x):
        auto.shard_tensor(self.up.weight, self.mesh, [None, "mp"])
        auto.shard_tensor(self.up.bias, self.mesh, ["mp"])
        auto.shard_tensor(self.down.weight, self.mesh, ["mp", None])
        x = _op("elementwise_add", {"X": [x], "Y": [self.attn(self.ln1(x))]})
        h = _op("gelu", {"X": [self.up(self.ln2(x))]}, {"approximate": True})
        return _op("elementwise_add", {"X": [x], "Y": [self.down(h)]})


class TinyGPT(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, H)
        # learned absolute positions, one row per position
        self.pos = self.create_parameter([SEQ, H])
        self.blocks = nn.LayerList([Block(mesh) for _ in range(LAYERS)])
        self.ln = nn.LayerNorm(H)

    def forward(self, x):
        h = _op("lookup_table_v2", {"Ids": [x], "W": [self.embed.weight]})
        h = _op("elementwise_add", {"X": [h], "Y": [self.pos]}, {"axis": -1})
        for block in self.blocks:
            h = block(h)
        # the output projection tied to the word embedding
        return matmul(self.ln(h), self.embed.weight, trans_y=True)


def build_model(mesh):
    return TinyGPT(mesh)


loss = nn.MSELoss()


def optimizer(parameters):
    return paddle.optimizer.SGD(learning_rate=0.01, parameters=parameters)


inputs = [InputSpec([BATCH, SEQ], "int64", "tokens")]
labels = [InputSpec([BATCH, SEQ, VOCAB], "float32", "target")]
