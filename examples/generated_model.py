"""The one model file of every generated plan (``python -m verify generate``,
``verify/generate/``): it builds the model its JSON spec describes, and no
code is ever generated.  The spec is the ``.json`` file beside this file with
its stem (``examples/generated_model.json`` here; ``DIR/plan_0003/model.py``
and ``model.json`` for a generated plan: this file copied verbatim).

    python -m verify plan examples/generated_model.py --ir pir --ranks 2 --out /tmp/g

A built-in case's model file is a stub calling :func:`fill` with its own
spec (``examples/planner_gen_*.py``).

A spec (``verify/generate/models.py`` draws them) names the mesh
(``mesh``, ``mesh_dims``), the sizes (``batch``, ``seq``, ``hidden``:
uneven ones included), the blocks in order (``linear``, ``mlp``,
``attention``, ``norm``, ``embedding`` first only, ``reshard`` of the
activation to placements of its own, ``sub``: a linear on a sub-mesh holding
the mesh's first process), each parameter's placements (one per mesh dim of
the block's mesh: ``"R"``, ``"S<d>"``, ``"P"``), each block's pipeline
``stage`` and the placements the activation crosses to the next stage with
(``cross``), the optimizer (``sgd``, ``adamw``), ``shard_optimizer`` (0, or
the ``ShardingStage`` 1-3 over ``dp``) and the strategy (``gradient_merge``
``{k_steps, avg}`` or ``pipeline`` ``{schedule, acc_steps}``).
"""
import json
import math
import os

import paddle
import paddle.distributed as dist
from paddle import nn
from paddle.static import InputSpec



def placements(codes):
    """``["R", "S1", "P"]`` -> Paddle's placements."""
    out = []
    for c in codes:
        if c == "R":
            out.append(dist.Replicate())
        elif c == "P":
            out.append(dist.Partial())
        elif c.startswith("S"):
            out.append(dist.Shard(int(c[1:])))
        else:
            raise ValueError(f"spec placement {c!r}: expected R, P or S<dim>")
    return out


def place(param, mesh, codes):
    return dist.shard_tensor(param, mesh, placements(codes))


class Linear(nn.Layer):
    def __init__(self, mesh, din, spec):
        super().__init__()
        self.fc = nn.Linear(din, spec["out"], bias_attr=spec.get("bias") is not None)
        self.fc.weight = place(self.fc.weight, mesh, spec["weight"])
        if spec.get("bias") is not None:
            self.fc.bias = place(self.fc.bias, mesh, spec["bias"])
        self.relu = spec.get("relu", False)

    def forward(self, x):
        y = self.fc(x)
        return nn.functional.relu(y) if self.relu else y


class MLP(nn.Layer):
    def __init__(self, mesh, din, spec):
        super().__init__()
        self.up = nn.Linear(din, spec["ffn"])
        self.down = nn.Linear(spec["ffn"], din)
        self.up.weight = place(self.up.weight, mesh, spec["up"])
        self.up.bias = place(self.up.bias, mesh, spec["up_bias"])
        self.down.weight = place(self.down.weight, mesh, spec["down"])

    def forward(self, x):
        return self.down(nn.functional.relu(self.up(x)))


class Attention(nn.Layer):
    """One head: softmax(q k^T / sqrt(h)) v, then an output projection."""

    def __init__(self, mesh, din, spec):
        super().__init__()
        self.scale = 1.0 / math.sqrt(din)
        self.proj = nn.LayerList()
        for name in ("q", "k", "v", "o"):
            fc = nn.Linear(din, din, bias_attr=False)
            fc.weight = place(fc.weight, mesh, spec[name])
            self.proj.append(fc)

    def forward(self, x):
        q, k, v, o = self.proj
        scores = paddle.matmul(q(x), k(x), transpose_y=True) * self.scale
        return o(paddle.matmul(nn.functional.softmax(scores, axis=-1), v(x)))


class Norm(nn.Layer):
    def __init__(self, mesh, din, spec):
        super().__init__()
        self.norm = nn.LayerNorm(din)
        self.norm.weight = place(self.norm.weight, mesh, spec["weight"])
        self.norm.bias = place(self.norm.bias, mesh, spec["bias"])

    def forward(self, x):
        return self.norm(x)


class Embedding(nn.Layer):
    def __init__(self, mesh, din, spec):
        super().__init__()
        self.emb = nn.Embedding(spec["vocab"], spec["out"])
        self.emb.weight = place(self.emb.weight, mesh, spec["weight"])

    def forward(self, x):
        return self.emb(x)


class Reshard(nn.Layer):
    def __init__(self, mesh, din, spec):
        super().__init__()
        self.mesh, self.to = mesh, spec["placements"]

    def forward(self, x):
        return dist.reshard(x, self.mesh, placements(self.to))


class Sub(nn.Layer):
    """A linear on the sub-mesh of the mesh's first process: the activation
    moved onto it (global_to_sub) and its output back (sub_to_global)."""

    def __init__(self, mesh, din, spec):
        super().__init__()
        self.mesh = mesh
        self.sub = dist.ProcessMesh([mesh.process_ids[0]], dim_names=mesh.dim_names[-1:])
        self.fc = nn.Linear(din, din)
        self.fc.weight = place(self.fc.weight, self.sub, ["R"])
        self.fc.bias = place(self.fc.bias, self.sub, ["R"])

    def forward(self, x):
        x = dist.reshard(x, self.sub, [dist.Replicate()])
        return dist.reshard(self.fc(x), self.mesh, [dist.Replicate()] * len(self.mesh.dim_names))


KINDS = {"linear": Linear, "mlp": MLP, "attention": Attention, "norm": Norm,
         "embedding": Embedding, "reshard": Reshard, "sub": Sub}


def width(spec, din):
    """The activation's last dim after a block."""
    return spec["out"] if spec["kind"] in ("linear", "embedding") else din


class Generated(nn.Layer):
    def __init__(self, mesh, spec):
        super().__init__()
        piped = "pp" in spec["mesh_dims"]  # stage meshes, with or without a pipeline schedule
        self.meshes = [mesh.get_mesh_with_dim("pp")[s] for s in range(2)] if piped else [mesh]
        self.stages = [b.get("stage", 0) for b in spec["blocks"]]
        self.cross = [b.get("cross") for b in spec["blocks"]]
        layers, din = [], spec["hidden"]
        for b, s in zip(spec["blocks"], self.stages):
            layers.append(KINDS[b["kind"]](self.meshes[s], din, b))
            din = width(b, din)
        self.blocks = nn.LayerList(layers)

    def forward(self, x):
        here = self.stages[0]
        for s, cross, block in zip(self.stages, self.cross, self.blocks):
            if s != here:  # to the next stage's mesh (a cross-mesh reshard)
                x = dist.reshard(x, self.meshes[s], placements(cross or ["R"]))
                here = s
            x = block(x)
        return x


def _out_width(spec):
    din = spec["hidden"]
    for b in spec["blocks"]:
        din = width(b, din)
    return din


def fill(namespace: dict, spec: dict) -> None:
    """Fill ``namespace`` (a model file's ``globals()``) with the model of
    ``spec``: ``build_model``, ``loss``, ``optimizer``, ``inputs``, ``labels``,
    ``BATCH``, ``MESH_DIMS`` and, as the spec asks, ``VOCAB``,
    ``wrap_optimizer`` and ``configure``."""
    BATCH = spec["batch"]
    ns = {"MESH_DIMS": spec["mesh_dims"], "BATCH": BATCH, "loss": nn.MSELoss(),
          "build_model": lambda mesh: Generated(mesh, spec),
          "labels": [InputSpec([-1, spec["seq"], _out_width(spec)], "float32", "y")]}
    if spec["blocks"] and spec["blocks"][0]["kind"] == "embedding":
        ns["VOCAB"] = spec["blocks"][0]["vocab"]
        ns["inputs"] = [InputSpec([-1, spec["seq"]], "int64", "x")]
    else:
        ns["inputs"] = [InputSpec([-1, spec["seq"], spec["hidden"]], "float32", "x")]

    def optimizer(parameters):
        if spec["optimizer"] == "adamw":
            return paddle.optimizer.AdamW(learning_rate=0.01, parameters=parameters)
        return paddle.optimizer.SGD(learning_rate=0.1, parameters=parameters)
    ns["optimizer"] = optimizer

    if spec.get("shard_optimizer"):
        def wrap_optimizer(opt, mesh):
            stage = {1: dist.ShardingStage1, 2: dist.ShardingStage2,
                     3: dist.ShardingStage3}[spec["shard_optimizer"]]
            return dist.shard_optimizer(opt, stage("dp", mesh))
        ns["wrap_optimizer"] = wrap_optimizer

    if spec.get("gradient_merge") or spec.get("pipeline"):
        def configure(strategy):
            gm, pp = spec.get("gradient_merge"), spec.get("pipeline")
            if gm:
                strategy.gradient_merge.enable = True
                strategy.gradient_merge.k_steps = gm["k_steps"]
                strategy.gradient_merge.avg = gm["avg"]
            if pp:
                strategy.pipeline.enable = True
                strategy.pipeline.pp_degree = 2
                strategy.pipeline.accumulate_steps = pp["acc_steps"]
                strategy.pipeline.micro_batch_size = BATCH // pp["acc_steps"]
                strategy.pipeline.schedule_mode = pp["schedule"]
        ns["configure"] = configure
    namespace.update(ns)


def spec_beside(path: str) -> dict:
    """The spec of a model file: the ``.json`` beside it with its stem."""
    with open(os.path.splitext(os.path.abspath(path))[0] + ".json") as f:
        return json.load(f)


# planned as the model file itself: the spec beside it (a stub importing this
# module fills its own namespace from its own spec)
fill(globals(), spec_beside(__file__))
