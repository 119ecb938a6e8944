# -*- coding: utf-8 -*-
"""Reproducer of one pass application: the pass and the case are TITLE below.

Written by ``python -m verify repro`` (paddle-pass-verify).  Self-contained:
it needs only the installed PaddlePaddle (legacy static programs, CPU is
enough) and numpy; it imports nothing of the suite that wrote it.

What it does, for every rank of the case:

1. rebuilds the rank's original main and startup programs from the
   serialized ProgramDescs below, and the DistributedContext the pass reads
   (process mesh, dims mappings of every var and op, execution streams),
   recorded when the file was written because ProgramDescs do not carry dist
   attrs;
2. applies the pass (the installed one, or the pass source embedded below)
   to a copy, with the attrs the suite gave it;
3. prints the evidence:
   * the pass raised: its traceback;
   * the pass did nothing on a rank where its pattern is present, or
     changed a rank where it is absent;
   * otherwise it runs the original and the rewritten programs of all
     ranks with Paddle's executor, the collectives done between pieces by a
     small lock-step simulator below, with identical seeded parameters and
     inputs for STEPS training steps, and prints every watched value
     (outputs, loss, gradients, parameters) that differs: rank, variable,
     step, index and both values.
   * before that, the contract findings the suite recorded (a collective
     on the wrong stream, an op no longer right after the writer of its
     input, a stale declared shape or dtype, or a rewritten program the
     contract rejected): each re-evaluated on the program the pass builds
     here, printed with rank, op and var while it still holds.

Exit status: 1 while the defect is present, 0 when the pass's rewrite is
faithful here (fixed), 2 when it cannot judge (the original does not run).
"""
import base64
import json
import os
import sys
import traceback
import zlib

TITLE = __TITLE__  # the pass and the case (from input: a literal, never code)

os.environ["FLAGS_enable_pir_api"] = "0"  # legacy ProgramDesc programs
os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402

PAYLOAD = json.loads(zlib.decompress(base64.b64decode("""
__PAYLOAD__
""")).decode())
if PAYLOAD.get("planner", {}).get("world_size"):
    # the job's size, as the planning process saw it (get_world_size())
    os.environ["PADDLE_TRAINERS_NUM"] = str(PAYLOAD["planner"]["world_size"])
    paddle.distributed.parallel._global_parallel_env = None

# ---------------------------------------------------------------------------
# c_allreduce_sum: Paddle 3.3.1 has no op definition for it, yet the overlap
# pass matches exactly that type.  Register a kernel-less proto (all_reduce's,
# with the old X/Out slots) so programs holding it parse and can be
# rewritten; for execution it is translated to all_reduce(SUM) below.
# ---------------------------------------------------------------------------
from paddle.base import core, framework  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

paddle.enable_static()


def register_c_allreduce_sum():
    holder = framework.OpProtoHolder.instance()
    if holder.has_op_proto("c_allreduce_sum"):
        return
    proto = framework_pb2.OpProto()
    proto.CopyFrom(holder.get_op_proto("all_reduce"))
    proto.type = "c_allreduce_sum"
    proto.inputs[0].name = "X"
    proto.outputs[0].name = "Out"
    attrs = [a for a in proto.attrs if a.name != "reduce_type"]
    del proto.attrs[:]
    proto.attrs.extend(attrs)
    for name in ("use_calc_stream", "use_model_parallel"):
        a = proto.attrs.add()
        a.name, a.type, a.comment = name, framework_pb2.BOOLEAN, "legacy attr"
    holder.op_proto_map["c_allreduce_sum"] = proto
    framework.Operator.OP_WITHOUT_KERNEL_SET.add("c_allreduce_sum")
    check = core.OpDesc.check_attrs

    def check_attrs(desc):
        return None if desc.type() == "c_allreduce_sum" else check(desc)

    core.OpDesc.check_attrs = check_attrs


register_c_allreduce_sum()

from paddle.distributed.auto_parallel.process_mesh import ProcessMesh  # noqa: E402
from paddle.distributed.auto_parallel.static.dist_attribute import (  # noqa: E402
    OperatorDistAttr,
)
from paddle.distributed.auto_parallel.static.dist_context import (  # noqa: E402
    DistributedContext,
)
from paddle.distributed.auto_parallel.static.process_group import (  # noqa: E402
    new_process_group,
)
from paddle.distributed.auto_parallel.static.utils import (  # noqa: E402
    set_var_dist_attr,
)


# the pass under review (verify/repro/embedded.py)
__PASS_LOADER__


# ---------------------------------------------------------------------------
# programs and their dist attrs
# ---------------------------------------------------------------------------
_MESHES = {}


def mesh_of(rec, ctx):
    if rec is None:
        rec = PAYLOAD["mesh"]
    key = json.dumps(rec, sort_keys=True)
    if key not in _MESHES:
        ids = np.array(rec["process_ids"]).reshape(rec["shape"]).tolist()
        _MESHES[key] = ProcessMesh(ids, dim_names=rec["dim_names"])
    ctx.add_process_mesh(_MESHES[key])
    return _MESHES[key]


def annotate(program, record, ctx):
    """Put the recorded dist attrs back on ``program``'s vars and ops."""
    block = program.global_block()
    for var in block.vars.values():
        rec = record["vars"].get(var.name)
        mapping = rec["dims_mapping"] if rec else [-1] * len(var.shape)
        set_var_dist_attr(ctx, var, list(mapping), mesh_of(rec and rec["mesh"], ctx),
                          chunk_id=(rec or {}).get("chunk_id", 0))
    for op, rec in zip(block.ops, record["ops"]):
        if rec.get("mesh") is None:
            continue
        attr = OperatorDistAttr()
        for n, m in rec["inputs"].items():
            attr.set_input_dims_mapping(n, list(m))
        for n, m in rec["outputs"].items():
            attr.set_output_dims_mapping(n, list(m))
        attr.process_mesh = mesh_of(rec["mesh"], ctx)
        attr.execution_stream = rec["execution_stream"]
        attr.impl_type = rec["impl_type"]
        attr.impl_idx = rec["impl_idx"]
        attr.chunk_id = rec["chunk_id"]
        attr.is_recompute = rec["is_recompute"]
        ctx.set_op_dist_attr_for_program(op, attr)


def parse(b64):
    return paddle.static.Program.parse_from_string(base64.b64decode(b64))


def build(rank):
    """(main, startup, dist_context) of ``rank``, as the case built them."""
    r = PAYLOAD["ranks"][str(rank)]
    main, startup = parse(r["main"]), parse(r["startup"])
    main.random_seed = startup.random_seed = r.get("random_seed", 0)
    ctx = DistributedContext(serial_main_prog=main, serial_startup_prog=startup)
    mesh_of(None, ctx)
    annotate(main, r["dist"]["main"], ctx)
    annotate(startup, r["dist"]["startup"], ctx)
    clip = PAYLOAD.get("planner", {}).get("serial_grad_clip")
    if clip:  # the user's optimizer the planner records (its clip is what passes read)
        ctx._serial_optimizer = paddle.optimizer.SGD(
            learning_rate=0.1, grad_clip=paddle.nn.ClipGradByGlobalNorm(float(clip)))
    return main, startup, ctx


def pass_attrs(rank, main, ctx, record=None):
    r = PAYLOAD["ranks"][str(rank)]
    attrs = {}
    for k, v in (r["attrs"] if record is None else record).items():
        if v == {"$": "dist_context"}:
            attrs[k] = ctx
        elif v == {"$": "params_grads"}:
            block = main.global_block()
            attrs[k] = [(block.var(p), block.var(g)) for p, g in r["params_grads"]]
        elif isinstance(v, dict) and v.get("$") == "var" and set(v) == {"$", "name"}:
            attrs[k] = main.global_block().var(v["name"])
        else:
            attrs[k] = v
    return attrs


def signature(program):
    out = []
    for op in program.global_block().ops:
        d = op.desc
        out.append((op.type, sorted((s, tuple(d.input(s))) for s in d.input_names()),
                    sorted((s, tuple(d.output(s))) for s in d.output_names())))
    return out


CONTEXTS = {}  # rank -> the DistributedContext the pass rewrote


def apply_pass(rank):
    """(original (main, startup), rewritten (main, startup), traceback or None)."""
    import logging

    from paddle.distributed.passes import PassContext, new_pass

    def preceding(main, startup, ctx, context):
        # the passes the planner applies before this one, in the same context
        for step in PAYLOAD["ranks"][str(rank)].get("preceding", []):
            new_pass(step["pass"], pass_attrs(rank, main, ctx, step["attrs"])).apply(
                [main], [startup], context)

    original = build(rank)
    logging.disable(logging.WARNING)
    preceding(*original, PassContext())
    main, startup, ctx = build(rank)
    CONTEXTS[rank] = ctx
    try:
        context = PassContext()
        preceding(main, startup, ctx, context)
        p = new_pass(PAYLOAD["pass"], pass_attrs(rank, main, ctx))
        p.apply([main], [startup], context)
        for prog in (main, startup):
            prog.global_block()._sync_with_cpp()
        tb = None
    except (Exception, SystemExit):
        tb = traceback.format_exc()
    finally:
        logging.disable(logging.NOTSET)
    return original[:2], (main, startup), tb


# ---------------------------------------------------------------------------
# execution: translation, float32 twin, lock-step simulator
# ---------------------------------------------------------------------------
LOW = {int(core.VarDesc.VarType.FP16), int(core.VarDesc.VarType.BF16)}
FP32 = core.VarDesc.VarType.FP32

# op type -> (input slot, output slot, what it computes across the ring)
COLLECTIVES = {
    "all_reduce": ("x", "out", None),  # by reduce_type
    "c_allreduce_sum": ("X", "Out", "sum"), "mp_allreduce_sum": ("X", "Out", "sum"),
    "c_allreduce_max": ("X", "Out", "max"), "c_allreduce_min": ("X", "Out", "min"),
    "c_allreduce_prod": ("X", "Out", "prod"),
    "reduce_scatter": ("x", "out", "reduce_scatter"),
    "c_reducescatter": ("X", "Out", "reduce_scatter"),
    "all_gather": ("x", "out", "all_gather"), "c_allgather": ("X", "Out", "all_gather"),
    "broadcast": ("x", "out", "broadcast"), "c_broadcast": ("X", "Out", "broadcast"),
    "reduce": ("x", "out", "reduce"),  # to root_id only; the others keep x
}
REDUCE_TYPES = {0: "sum", 1: "max", 2: "min", 3: "prod", 4: "avg"}


def for_execution(program):
    """A copy that runs on this build: c_allreduce_sum -> all_reduce(SUM),
    c_identity -> assign (no CPU kernel; the identity on values) and, for an
    AMP case on a build without float16 kernels, float16 -> float32."""
    prog = program.clone()
    for block in prog.blocks:
        for op in block.ops:
            d = op.desc
            if op.type == "c_identity":
                for a in ("ring_id", "use_calc_stream", "use_model_parallel"):
                    if d.has_attr(a):
                        d.remove_attr(a)
                d.set_type("assign")
            elif op.type == "c_allreduce_sum":
                x, out = d.input("X"), d.output("Out")
                ring = d.attr("ring_id") if d.has_attr("ring_id") else 0
                role = d.attr("op_role") if d.has_attr("op_role") else 0
                d.set_type("all_reduce")
                d.remove_input("X")
                d.remove_output("Out")
                d.set_input("x", x)
                d.set_output("out", out)
                for a in ("use_calc_stream", "use_model_parallel"):
                    if d.has_attr(a):
                        d.remove_attr(a)
                d._set_int32_attr("ring_id", int(ring))
                d._set_int32_attr("reduce_type", 0)
                d._set_int32_attr("op_role", int(role))
            if PAYLOAD["fp32_twin"]:
                for a in ("dtype", "in_dtype", "out_dtype", "out_dtype"):
                    if d.has_attr(a) and isinstance(d.attr(a), int) and d.attr(a) in LOW:
                        d._set_attr(a, int(FP32))
        if PAYLOAD["fp32_twin"]:
            for v in block.desc.all_vars():
                try:
                    if int(v.dtype()) in LOW:
                        v.set_dtype(FP32)
                except Exception:
                    pass
        block._sync_with_cpp()
    return prog


class Coll:
    def __init__(self, op, index):
        slot_in, slot_out, kind = COLLECTIVES[op.type]
        d = op.desc
        self.type, self.index = op.type, index
        self.x, self.out = d.input(slot_in)[0], d.output(slot_out)[0]
        self.ring = int(d.attr("ring_id")) if d.has_attr("ring_id") else 0
        self.kind = kind or REDUCE_TYPES.get(int(d.attr("reduce_type")), "?")
        if kind == "reduce":
            self.kind = "reduce_" + REDUCE_TYPES.get(int(d.attr("reduce_type")), "?")
        self.root = int(d.attr("root")) if d.has_attr("root") else \
            int(d.attr("root_id")) if d.has_attr("root_id") else 0


def pieces(program):
    """The program cut at its collectives: [("ops", Program) | ("coll", Coll)]."""
    ops = program.global_block().ops
    out, start = [], 0
    cuts = [i for i, op in enumerate(ops) if op.type in COLLECTIVES] + [len(ops)]
    for c in cuts:
        if c > start:
            piece = program.clone()
            blk = piece.global_block()
            for i in reversed(range(len(blk.ops))):
                if not start <= i < c:
                    blk._remove_op(i, sync=False)
            for v in blk.vars.values():
                v.desc.set_persistable(True)  # values live in the scope between pieces
            blk._sync_with_cpp()
            out.append(("ops", piece))
        if c < len(ops):
            out.append(("coll", Coll(ops[c], c)))
        start = c + 1
    return out


class RunError(Exception):
    def __init__(self, msg, rank):
        super().__init__(msg)
        self.rank = rank


class Rank:
    def __init__(self, rank, main, startup):
        self.rank, self.place = rank, paddle.CPUPlace()
        self.scope = paddle.static.Scope()
        self.exe = paddle.static.Executor(self.place)
        self.main, self.startup = pieces(main), pieces(startup)
        self.items, self.pos = [], 0

    def get(self, name):
        v = self.scope.find_var(name)
        if v is None or not v.get_tensor()._is_initialized():
            return None
        return np.array(v.get_tensor())

    def set(self, name, value):
        self.scope.var(name).get_tensor().set(np.ascontiguousarray(value), self.place)

    def advance(self):
        while self.pos < len(self.items):
            kind, val = self.items[self.pos]
            if kind == "coll":
                return val
            try:
                self.exe.run(val, scope=self.scope)
            except Exception as exc:
                lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
                # Paddle's C++ errors: "(Kind) what ... [operator < op > error]"
                said = [x for x in lines if x.startswith(("(", "[operator"))] or lines[:3]
                raise RunError(f"{type(exc).__name__}: {' '.join(said)[:800]}", self.rank)
            self.pos += 1
        return None


def group_of(ring, rank):
    for g in PAYLOAD["rings"].get(str(ring), []):
        if rank in g:
            return g
    raise RunError(f"rank {rank} runs a collective on ring {ring}, which the case "
                   "does not declare for it", rank)


def perform(group, colls, states):
    xs = []
    for m, c in zip(group, colls):
        x = states[m].get(c.x)
        if x is None:
            raise RunError(f"rank {m} op {c.index} ({c.type}) reads {c.x}, which holds "
                           "no value", m)
        xs.append(x)
    kind, n = colls[0].kind, len(group)
    if kind != "all_gather" and kind != "broadcast" and len({x.shape for x in xs}) > 1:
        raise RunError(f"{colls[0].type} over ranks {group} gets shapes "
                       f"{[list(x.shape) for x in xs]}", group[0])
    for i, (m, c) in enumerate(zip(group, colls)):
        if kind in ("sum", "avg", "reduce_scatter"):
            out = np.sum(xs, axis=0).astype(xs[0].dtype)
            if kind == "avg":
                out = (out / n).astype(xs[0].dtype)
            if kind == "reduce_scatter":
                out = np.split(out, n, axis=0)[i]
        elif kind == "max":
            out = np.max(xs, axis=0)
        elif kind == "min":
            out = np.min(xs, axis=0)
        elif kind == "prod":
            out = np.prod(xs, axis=0).astype(xs[0].dtype)
        elif kind == "all_gather":
            out = np.concatenate(xs, axis=0)
        elif kind == "broadcast":  # root: an index in the group, as the backend reads it
            if not 0 <= c.root < n:
                raise RunError(f"{c.type} root {c.root} is not an index in group {group}", m)
            out = xs[c.root]
        elif kind in ("reduce_sum", "reduce_avg"):  # root_id: index in the group
            out = xs[i] if i != c.root else np.sum(xs, axis=0).astype(xs[0].dtype) / \
                (n if kind == "reduce_avg" else 1)
            out = out.astype(xs[0].dtype)
        else:
            raise RunError(f"unsupported collective {c.type} ({kind})", m)
        states[m].set(c.out, out)


def lockstep(states, which):
    for st in states.values():
        st.items, st.pos = getattr(st, which), 0
    blocked, done = {}, set()
    while len(done) < len(states):
        moved = False
        for r, st in states.items():
            if r in done or r in blocked:
                continue
            c = st.advance()
            moved = True
            if c is None:
                done.add(r)
            else:
                blocked[r] = c
        for r, c in sorted(blocked.items()):
            if r not in blocked:
                continue
            group = group_of(c.ring, r)
            if not all(m in blocked and blocked[m].ring == c.ring for m in group):
                continue
            colls = [blocked[m] for m in group]
            if len({(x.type, x.kind) for x in colls}) != 1:
                raise RunError("ranks meet different collectives on ring "
                               f"{c.ring}: {[(x.type, x.index) for x in colls]}", r)
            perform(group, colls, states)
            for m in group:
                states[m].pos += 1
                del blocked[m]
            moved = True
        if not moved:
            raise RunError(f"collectives do not match up; waiting: "
                           f"{ {r: (c.type, c.index, c.ring) for r, c in blocked.items()} }",
                           min(blocked))


def rng(name, *more):
    return np.random.default_rng([PAYLOAD["seed"], zlib.crc32(name.encode()), *more])


def param_value(name, shape, dtype, shard):
    shape = [int(d) for d in shape]
    bound = 1.0 / np.sqrt(max(shape[0] if shape else 1, 1))
    return rng(name, shard, 1).uniform(-bound, bound, size=shape).astype(dtype)


def feed_value(name, shape, dtype, replica, step):
    shape = [int(d) for d in shape]
    if dtype.startswith("int"):
        return rng(name, replica, step, 2).integers(0, 4, size=shape).astype(dtype)
    return rng(name, replica, step, 2).standard_normal(size=shape).astype(
        "float32" if dtype in ("float16", "bfloat16") and PAYLOAD["fp32_twin"] else dtype)


# ---------------------------------------------------------------------------
# initialisations: how each side's startup program initialises a parameter
# (the suite's own functions, copied here when the file was written), so a
# parameter the rewritten startup initialises differently gets what that
# initialisation draws, as in the suite's runs
# ---------------------------------------------------------------------------
__INIT_SOURCE__


def parameters(main):
    from paddle.base.framework import Parameter

    return [n for n, v in main.global_block().vars.items() if isinstance(v, Parameter)]


def changed_inits(originals, rewrittens):
    """What each rank's rewritten startup program initialises differently
    (``init_changes``: rank, parameter, startup op, attrs)."""
    out = []
    for r in sorted(rewrittens):
        out += init_changes(startup_inits(originals[r][1]), startup_inits(rewrittens[r][1]),
                            parameters(rewrittens[r][0]), r)
    return out


def simulate(programs, inits_of=None):
    """Run ``{rank: (main, startup)}`` for STEPS steps; {rank: [{var: value}]}.
    Each side's own startup program runs (seeded), then every parameter gets
    the seeded draw; ``inits_of`` (the ORIGINAL programs, when these are the
    rewritten ones): mapped onto the rewritten startup's initialisation
    where it differs (``init_like``)."""
    states = {r: Rank(r, for_execution(m), for_execution(s))
              for r, (m, s) in sorted(programs.items())}
    paddle.seed(PAYLOAD["seed"])
    lockstep(states, "startup")
    for r, st in states.items():
        info = PAYLOAD["ranks"][str(r)]
        src = startup_inits(inits_of[r][1]) if inits_of and r in inits_of else None
        dst = startup_inits(programs[r][1]) if src is not None else None
        for name in parameters(programs[r][0]):
            have = st.get(name)
            if have is not None:
                shard = info["tp_index"] if name in PAYLOAD["sharded_params"] else 0
                v = param_value(name, have.shape, have.dtype, shard)
                if src is not None:
                    v = init_like(v, name, PAYLOAD["seed"], src.get(name), dst.get(name))
                st.set(name, v)
    results = {r: [] for r in states}
    for k in range(PAYLOAD["steps"]):
        for r, st in states.items():
            info = PAYLOAD["ranks"][str(r)]
            for f in info["feeds"]:
                replica = info["dp_index"] if f["split"] == "dp" else \
                    info["dp_index"] * 1000 + info["tp_index"]
                st.set(f["name"], feed_value(f["name"], f["shape"], f["dtype"], replica, k))
        lockstep(states, "main")
        for r, st in states.items():
            results[r].append({n: v for n in watched(r, programs[r][0])
                               for v in [st.get(n)] if v is not None})
    return results


def watched(rank, main):
    info = PAYLOAD["ranks"][str(rank)]
    names = list(info["fetches"]) + ([info["loss"]] if info["loss"] else [])
    names += [g for _, g in info["params_grads"]] + parameters(main)
    names += list(RENAMES.get(rank, {}).values())
    # stale on purpose and read by nothing in the rewritten program
    dead = set(info.get("unobserved", []))
    return [n for n in dict.fromkeys(names) if n not in dead]


RENAMES = {}


def consumer_renames(before, after):
    """{original var: rewritten var} for vars that vanished from ``after``
    while an op of the same type and outputs reads another var in their slot."""
    present = {n for op in after.global_block().ops
               for n in op.desc.input_arg_names() + op.desc.output_arg_names()}
    present |= set(after.global_block().vars)

    def sig(op):
        return (op.type, tuple(sorted((s, tuple(op.desc.output(s)))
                                      for s in op.desc.output_names())))

    seen, by_sig = {}, {}
    for op in before.global_block().ops:
        k = sig(op)
        by_sig[(k, seen.get(k, 0))] = op
        seen[k] = seen.get(k, 0) + 1
    seen, out = {}, {}
    for op in after.global_block().ops:
        k = sig(op)
        orig = by_sig.get((k, seen.get(k, 0)))
        seen[k] = seen.get(k, 0) + 1
        if orig is None:
            continue
        for slot in orig.desc.input_names():
            new = op.desc.input(slot) if slot in op.desc.input_names() else []
            for old_n, new_n in zip(orig.desc.input(slot), new):
                if old_n != new_n and old_n not in present and old_n not in out:
                    out[old_n] = new_n
    return out


EPS = {"float16": 9.77e-4, "bfloat16": 7.82e-3, "float32": 1.19e-7, "float64": 2.22e-16}


def differs(ref, cand, depth):
    """None when ``cand`` equals ``ref`` within rounding, else (index, ref, cand)."""
    if ref.shape != cand.shape:
        return ("shape", list(ref.shape), list(cand.shape))
    r, c = ref.astype(np.float64), cand.astype(np.float64)
    rt = 16.0 * EPS.get(str(ref.dtype), 1.19e-7) * np.sqrt(max(depth, 1))
    rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
    tol = rt * np.abs(r) + max(rt * rms, 1e-30)
    bad = np.abs(r - c) > tol
    if not bad.any():
        return None
    i = np.unravel_index(int(np.argmax(np.abs(r - c) - tol)), r.shape)
    return (list(int(x) for x in i), float(r[i]), float(c[i]))


def depth_of(main):
    k = 1
    for op in main.global_block().ops:
        if op.type in ("matmul_v2", "matmul_v2_grad"):
            shape = main.global_block().var(op.input("X")[0]).shape
            k = max(k, abs(int(shape[-1])) if len(shape) else 1)
    return k * len(PAYLOAD["ranks"]) * PAYLOAD["steps"]


def first_tp_rank(rank):
    dp = PAYLOAD["ranks"][str(rank)]["dp_index"]
    for r, info in PAYLOAD["ranks"].items():
        if info["dp_index"] == dp and info["tp_index"] == 0:
            return int(r)
    return None


# ---------------------------------------------------------------------------
# contract claims: the observations that broke the pass's contract, recorded
# by the suite, re-evaluated on the program the pass builds here
# ---------------------------------------------------------------------------
def fingerprint(program):
    import hashlib

    sig = []
    for op in program.global_block().ops:
        d = op.desc
        attrs = sorted([a, op.attr(a)] for a in d.attr_names()
                       if isinstance(op.attr(a), (bool, int, float)) and a != "op_role")
        sig.append([op.type, sorted([s, len(d.input(s))] for s in d.input_names()),
                    sorted([s, len(d.output(s))] for s in d.output_names()), attrs])
    return hashlib.sha256(json.dumps(sig).encode()).hexdigest()[:16]


def locate(ops, claim):
    """Index of the claim's op: at its recorded index when it is still that
    op, else the first op of its type reading its var; None if gone."""
    i, kind, var = claim.get("op_index"), claim.get("op_type"), claim.get("var")

    def fits(op):
        return op.type == kind and (not var or var in op.input_arg_names
                                    or var in op.output_arg_names)
    if i is not None and 0 <= i < len(ops) and fits(ops[i]):
        return i
    return next((j for j, op in enumerate(ops) if fits(op)), None)


def judge(claim, main, startup, ctx):
    """(True, evidence) while the claim holds, (False, why) once it does not,
    (None, why) when it cannot be judged here."""
    r, kind = claim["rank"], claim["kind"]
    block = main.global_block()
    ops = block.ops
    if kind == "program":
        if claim.get("fingerprint") is None:
            return None, "no rank to compare"
        if fingerprint(main) + fingerprint(startup) == claim["fingerprint"]:
            return True, (f"rank {r}: the pass builds the same program the suite's "
                          f"{claim['check']} check rejected: {claim['message']}")
        return False, f"rank {r}: the rewritten program differs from the rejected one"
    if kind == "declared_shape":
        if not block.has_var(claim["var"]):
            return None, f"rank {r}: {claim['var']} is gone"
        shape = [int(d) for d in block.var(claim["var"]).shape]
        if shape == claim["broken"]:
            return True, (f"rank {r}: {claim['var']} is declared {shape}, a stale shape "
                          f"({claim['message']})")
        return False, f"rank {r}: {claim['var']} is declared {shape} now"
    i = locate(ops, claim)
    if i is None:
        return None, f"rank {r}: no {claim['op_type']} op of {claim['var']} in the program"
    op = ops[i]
    where = f"rank {r} op {i} ({op.type} of {claim['var']})"
    if kind == "stream":
        attr = ctx.get_op_dist_attr_for_program(op)
        stream = getattr(attr, "execution_stream", None) if attr is not None else None
        if stream == claim["broken"]:
            return True, f"{where} runs on stream {stream!r}: {claim['message']}"
        return False, f"{where} runs on stream {stream!r} now"
    if kind == "follows_writer":
        prev = ops[i - 1] if i else None
        if prev is None or claim["var"] not in prev.output_arg_names:
            return True, (f"{where} does not directly follow the op writing "
                          f"{claim['var']}: op {i - 1} is "
                          f"{prev.type if prev else 'nothing'} ({claim['message']})")
        return False, f"{where} directly follows {prev.type}, which writes {claim['var']}"
    if kind == "order":
        j = locate(ops, claim["later"])
        if j is None:
            return None, f"rank {r}: no {claim['later']['op_type']} op of {claim['later']['var']}"
        then = f"op {j} ({ops[j].type} of {claim['later']['var']})"
        if i < j:
            return True, f"{where} runs before {then}: {claim['message']}"
        return False, f"{where} runs after {then} now"
    if kind == "cast_dtype":
        out = block.var(op.output("Out")[0])
        want = int(op.attr("out_dtype"))
        if int(out.dtype) != want:
            return True, (f"{where}: the cast produces dtype {want} but {out.name} is "
                          f"declared {out.dtype}")
        return False, f"{where}: {out.name} is declared with the cast's dtype"
    return None, f"claim kind {kind!r} is not known to this reproducer"


def shown(text):
    """``text`` with its control characters escaped (a case name on a terminal)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def main():
    print(f"reproducer: {PAYLOAD['pass']} on case {shown(PAYLOAD['case'])} "
          f"(ranks {sorted(int(r) for r in PAYLOAD['ranks'])}); the suite found: "
          f"{PAYLOAD.get('found') or 'not recorded (written on its own)'} "
          f"(baseline {PAYLOAD['expected']})")
    print("pass from:", load_pass_source())
    for gid, ranks in sorted(PAYLOAD["process_groups"].items(), key=lambda kv: int(kv[0])):
        if int(gid) != 0:
            new_process_group(list(ranks), group_id=int(gid))
    ranks = sorted(int(r) for r in PAYLOAD["ranks"])
    originals, rewrittens = {}, {}
    for r in ranks:
        orig, rew, tb = apply_pass(r)
        if tb is not None:
            print(f"\nDEFECT (PASS_CRASHED): {PAYLOAD['pass']} raised on rank {r}:\n")
            print(tb.rstrip())
            return 1
        originals[r], rewrittens[r] = orig, rew
    contract = []
    for r in ranks:
        fired = any(signature(a) != signature(b)
                    for a, b in zip(originals[r], rewrittens[r]))
        present = PAYLOAD["ranks"][str(r)]["pattern"]
        if present and not fired:
            contract.append(f"rank {r}: the pass did nothing, though its pattern is "
                            f"present ({present}); main program unchanged "
                            f"({len(originals[r][0].global_block().ops)} ops)")
        elif not present and fired:
            contract.append(f"rank {r}: the pass rewrote the program, though its "
                            "pattern is absent")
        print(f"rank {r}: main {len(originals[r][0].global_block().ops)} -> "
              f"{len(rewrittens[r][0].global_block().ops)} ops, startup "
              f"{len(originals[r][1].global_block().ops)} -> "
              f"{len(rewrittens[r][1].global_block().ops)} ops"
              + ("" if fired else " (unchanged)"))
    if contract:
        print("\nDEFECT (NOT_APPLIED / contract):")
        for line in contract:
            print("  " + line)
        return 1
    held, notes = [], []
    for claim in PAYLOAD.get("contract", []):
        r = claim["rank"]
        if r is None or r not in rewrittens:
            notes.append(f"not judged here: {claim['message']}")
            continue
        holds, text = judge(claim, *rewrittens[r], CONTEXTS.get(r))
        (held if holds else notes).append(text)
    for line in notes:
        print("contract finding recorded when written, not present now: " + line)
    if held:  # the evidence; the runs below may show differing values too
        print(f"\nDEFECT (CONTRACT_BROKEN): the pass does not do what it exists for "
              f"({len(held)} finding(s)):")
        for line in held:
            print("  " + line)
    for r in ranks:
        RENAMES[r] = consumer_renames(originals[r][0], rewrittens[r][0])
    twin = " (float16 run as float32: no float16 CPU kernels)" if PAYLOAD["fp32_twin"] else ""
    print(f"\nrunning original and rewritten programs of every rank, "
          f"{PAYLOAD['steps']} steps{twin}")
    try:
        ref = simulate(originals)
    except RunError as exc:
        print(f"cannot judge the values: the ORIGINAL program does not run here (rank "
              f"{exc.rank}): {exc}")
        return 1 if held else 2
    inits = changed_inits(originals, rewrittens)
    why = f"\n  {describe_init_changes(inits)}" if inits else ""
    try:
        got = simulate(rewrittens, originals)
    except RunError as exc:
        print(f"\nDEFECT (NOT_EQUIVALENT): the original runs, the rewritten program "
              f"fails on rank {exc.rank}:\n  {exc}{why}")
        return 1
    bad = []
    for r in ranks:
        depth = depth_of(originals[r][0])
        removed = set(parameters(originals[r][0])) - set(parameters(rewrittens[r][0]))
        grads = dict(PAYLOAD["ranks"][str(r)]["params_grads"])
        for k, (ref_k, got_k) in enumerate(zip(ref[r], got[r])):
            for name, value in ref_k.items():
                new = RENAMES[r].get(name)
                if name in got_k:
                    cand, note = got_k[name], ""
                elif new in got_k:
                    cand, note = got_k[new], f" (renamed by the pass to {new})"
                elif name in removed or name in {grads.get(p) for p in removed}:
                    src = first_tp_rank(r)
                    if name in removed and src is not None and name in got[src][k]:
                        cand, note = got[src][k][name], f" (removed here; rank {src}'s copy)"
                    else:
                        continue  # the gradient of a parameter removed on this rank
                else:
                    bad.append((r, name, k, "vanished from the rewritten program"))
                    continue
                d = differs(value, cand, depth)
                if d is not None:
                    bad.append((r, name, k, d, note))
    if bad:
        print(f"\nDEFECT (NOT_EQUIVALENT): {len(bad)} watched value(s) differ "
              "between the original and the rewritten programs:")
        for item in bad[:40]:
            r, name, k = item[:3]
            if isinstance(item[3], str):
                print(f"  rank {r} step {k} {name}: {item[3]}")
            elif item[3][0] == "shape":
                print(f"  rank {r} step {k} {name}: shape {item[3][1]} vs {item[3][2]}")
            else:
                idx, a, b = item[3]
                print(f"  rank {r} step {k} {name}{item[4]} at {idx}: original {a!r}, "
                      f"rewritten {b!r}")
        if inits:
            print("the rewritten startup programs initialise parameters differently:")
            for c in inits:
                print(f"  {describe_init_changes([c])}")
        return 1
    n = sum(len(v) for res in ref.values() for v in res)
    if held:
        print(f"\nevery watched value ({n} tensor-steps over {len(ranks)} ranks) is equal "
              "within rounding, but the contract finding(s) above hold: exit 1")
        return 1
    print(f"no defect: every watched value ({n} tensor-steps over {len(ranks)} ranks) "
          "is equal within rounding")
    return 0


if __name__ == "__main__":
    sys.exit(main())
