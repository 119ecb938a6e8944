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

Observed on 3.3.1 (CPU, TP 2): 154 ops per rank; the overlap pass is
NOT_APPLIED (the planner spells the dX allreduce ``all_reduce``); the
promotion pass fires on both ranks (rank 1 154 -> 142 ops) and every
numeric comparison and contract check holds, but the verdict is
INCONCLUSIVE: the shape check and the value proof have no rule for
``lookup_table_v2`` yet (``verify/checks/shape_rules.py``,
``verify/value/semantics.py``).
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
    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh
        self.qkv = nn.Linear(H, 3 * H)
        self.out = nn.Linear(H, H)

    def forward(self, x):
        auto.shard_tensor(self.qkv.weight, self.mesh, [None, "mp"])
        auto.shard_tensor(self.qkv.bias, self.mesh, ["mp"])
        auto.shard_tensor(self.out.weight, self.mesh, ["mp", None])
        qkv = reshape(self.qkv(x), [0, 0, HEADS, 3 * H // HEADS])
        qkv = transpose(qkv, [0, 2, 1, 3])
        q, k, v = (_op("slice", {"Input": [qkv]},
                       {"axes": [3], "starts": [i * H // HEADS],
                        "ends": [(i + 1) * H // HEADS], "decrease_axis": []})
                   for i in range(3))
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
