"""Column-parallel linear backward: ``matmul_v2_grad`` then an allreduce of dX.

The family ``allreduce_matmul_grad_overlapping`` exists for.  Per layer::

    x_id  = c_identity(x)                   # forward of column parallel
    out   = matmul_v2(x_id, W)              # W: [H, N/tp], sharded per rank
    ...
    x_id@GRAD, W@GRAD = matmul_v2_grad(x_id, W, out@GRAD)
    [window ops]                             # e.g. AMP master-grad cast
    x@GRAD = c_allreduce_sum(x_id@GRAD)     # backward of c_identity
    W = sgd(W, W@GRAD, lr)

TP 2 on a 1-D mesh, one ring (ring 0), so real gloo ranks run it faithfully.
"""
from __future__ import annotations

from .base import Case, Expect
from .program_builder import BACKWARD, FORWARD, ProgramBuilder

OVERLAP = "allreduce_matmul_grad_overlapping"
H, N, B, S = 8, 8, 2, 4


def build(case: Case, rank: int):
    p = case.params
    b = ProgramBuilder(case, rank)
    seq = p.get("seq", S)
    batch = -1 if p.get("dynamic_batch") else B
    two_d = p.get("two_d", False)
    shape = [B * seq if batch > 0 else -1, H] if two_d else [batch, seq, H]
    concrete = [B * seq, H] if two_d else [B, seq, H]
    spelling = p.get("spelling", "c_allreduce_sum")
    layers = p.get("layers", 1)
    trans_y = p.get("trans_y", False)
    inplace = p.get("inplace", False)
    window = p.get("window")

    x0 = b.data("x", shape, concrete)
    lr = b.persistable("learning_rate_0", [], "float32", 0.1)
    h = x0
    saved = []
    for i in range(layers):
        w_shape = [N, H] if trans_y else [H, N]
        w = b.param(f"linear_{i}.w_0", w_shape, mapping=[-1, 0] if not trans_y else [0, -1])
        x_id = b.var(f"linear_{i}.x_id", shape)
        b.op("c_identity", {"X": [h]}, {"Out": [x_id]}, {"ring_id": 0}, FORWARD)
        out = b.var(f"linear_{i}.out", shape[:-1] + [N])
        mm = b.op("matmul_v2", {"X": [x_id], "Y": [w]}, {"Out": [out]},
                  {"trans_x": False, "trans_y": trans_y}, FORWARD)
        saved.append((h, x_id, w, out, mm))
        h = out
    out_g = b.mse_loss(h, split="tp")  # h is column-sharded: a target per rank
    for i in reversed(range(layers)):
        hin, x_id, w, out, mm = saved[i]
        x_id_g, w_g = b.grad_of(x_id), b.grad_of(w)
        b.grad_op(mm, inputs={"Out@GRAD": [out_g]})
        if window in ("cast", "cast_and_read"):
            # AMP master grad: a cast of Y@GRAD between the grad and allreduce
            w_g16 = b.var(f"{w_g.name}@fp16", w_g.shape, "float16")
            b.op("cast", {"X": [w_g]}, {"Out": [w_g16]},
                 {"in_dtype": w_g.dtype, "out_dtype": w_g16.dtype}, BACKWARD)
            b.fetches.append(w_g16.name)
        if window in ("read_xgrad", "cast_and_read"):
            # an op in the window that reads the *unreduced* dX
            stat = b.var(f"{x_id_g.name}@scaled", shape)
            b.op("scale", {"X": [x_id_g]}, {"Out": [stat]},
                 {"scale": 0.5, "bias": 0.0, "bias_after_scale": True}, BACKWARD)
            b.fetches.append(stat.name)
        x_g = x_id_g if inplace else b.grad_of(hin)
        if spelling == "c_allreduce_sum":
            b.op("c_allreduce_sum", {"X": [x_id_g]}, {"Out": [x_g]},
                 {"ring_id": 0, "use_calc_stream": True, "use_model_parallel": True},
                 BACKWARD)
        else:
            b.op("all_reduce", {"x": [x_id_g]}, {"out": [x_g]},
                 {"ring_id": 0, "reduce_type": 0}, BACKWARD)
        b.fetches.append(x_g.name)
        out_g = x_g
        b.params_grads.append((w, w_g))
    for w, w_g in b.params_grads:
        b.sgd(w, w_g, lr)
    return b.finish()


def _case(name, summary, expect, tp=2, **params):
    symbols = {"x": ("B",) + (None,) * (1 if params.get("two_d") else 2)} \
        if params.get("dynamic_batch") else {}
    mesh = list(range(tp))
    return Case(name=name, family="column_parallel", summary=summary,
                mesh=mesh, builder=build, expect={OVERLAP: expect},
                rings={0: [mesh]}, symbols=symbols,
                sharded_params=frozenset(f"linear_{i}.w_0" for i in range(params.get("layers", 1))),
                params=params)


# what shows each finding (docs/findings.md's evidence column)
_FOLD_EV = ("the pass raises (traceback); the advisory Z3 prediction explains it (B=1) "
            "before it runs. A pass with only that product mended "
            "(`tests/fixed_passes/overlap_fold_mended.py`) is judged on its own program: "
            "EQUIVALENT, proved and run")
_FOLD_2D_EV = "the pass raises; prediction: FoldInitDims and element count broken"
_WINDOW_READ_EV = ("value proof refutes `linear_0.x_id@GRAD@scaled` on both ranks (exact "
                   "counterexample); reaching definitions (the `scale` now sees the moved "
                   "allreduce's write); numeric run")
SPELLING_EV = ("the documented pattern (column-parallel backward: dX summed over the ring) "
               "is present, the program is unchanged")

CASES = [
    _case("col_3d_static", "x [B,S,H] static, one column-parallel layer",
          Expect(True, "EQUIVALENT", "the pass splits the grad and moves the allreduce")),
    _case("col_3d_dynamic_batch", "x [-1,S,H]: dynamic batch",
          Expect(True, "PASS_CRASHED",
                 "3.3.1 builds the reshape target [-1*S, H] = [-4, 8] from static "
                 "shapes and raises inside the pass", evidence=_FOLD_EV),
          dynamic_batch=True),
    _case("col_2d", "x [M,K]: 2-D input",
          Expect(True, "PASS_CRASHED",
                 "3.3.1 folds the first two dims of a 2-D input into a 1-D target "
                 "and the following matmul's shape check raises", evidence=_FOLD_2D_EV),
          two_d=True),
    _case("col_two_layers", "two stacked column-parallel layers",
          Expect(True, "EQUIVALENT", "both layers are split"), layers=2),
    _case("col_cast_window", "AMP master-grad cast of Y@GRAD in the window",
          Expect(True, "EQUIVALENT",
                 "3.3.1 inserts the dY matmul before the window ops, so the cast "
                 "reads a written Y@GRAD"),
          window="cast"),
    _case("col_window_reads_xgrad", "an op in the window reads dX; allreduce in place",
          Expect(True, "NOT_EQUIVALENT",
                 "3.3.1 moves the in-place allreduce ahead of the window op, which "
                 "then reads the reduced dX instead of the local one",
                 evidence=_WINDOW_READ_EV),
          window="read_xgrad", inplace=True),
    _case("col_trans_y", "matmul_v2 with trans_y=True",
          Expect(False, "EQUIVALENT", "trans_y=True is not the pattern; must be left alone"),
          trans_y=True),
    _case("col_all_reduce_spelling", "3.3.1's real spelling: all_reduce(x) of dX",
          Expect(True, "NOT_APPLIED",
                 "3.3.1 emits all_reduce, the pass matches only c_allreduce_sum, "
                 "so it silently does nothing on real programs", evidence=SPELLING_EV),
          spelling="all_reduce"),
    _case("col_3d_static_tp4", "x [B,S,H] static, TP 4",
          Expect(True, "EQUIVALENT", "the pass splits the grad on every rank"), tp=4),
    _case("col_3d_inplace", "the allreduce of dX in place (Out = X), nothing in the window",
          Expect(True, "EQUIVALENT", "the split is correct when no op reads dX in the window"),
          inplace=True),
    _case("col_three_layers", "three stacked column-parallel layers",
          Expect(True, "EQUIVALENT", "every layer is split"), layers=3),
    _case("col_seq1", "x [B,1,H]: a sequence of one",
          Expect(True, "EQUIVALENT", "the fold [B*1, H] is still the kernel's fold"), seq=1),
    _case("col_2d_dynamic", "x [-1,K]: 2-D with dynamic rows",
          Expect(True, "PASS_CRASHED",
                 "3.3.1 folds [-1, K] into the 1-D target [-K] and raises",
                 evidence=_FOLD_2D_EV),
          two_d=True, dynamic_batch=True),
    _case("col_cast_window_dynamic", "AMP cast window with a dynamic batch",
          Expect(True, "PASS_CRASHED", "the dynamic batch alone makes 3.3.1 build [-4, 8]",
                 evidence=_FOLD_EV),
          window="cast", dynamic_batch=True),
    _case("col_cast_and_read_window", "both a cast of Y@GRAD and a read of dX in the window",
          Expect(True, "NOT_EQUIVALENT",
                 "the cast is fine, but the window's read of the in-place dX now sees the "
                 "reduced value", evidence=_WINDOW_READ_EV),
          window="cast_and_read", inplace=True),
    _case("col_two_layers_tp4", "two stacked column-parallel layers, TP 4",
          Expect(True, "EQUIVALENT", "both layers are split on every rank"), layers=2, tp=4),
    _case("col_three_layers_tp4", "three stacked column-parallel layers, TP 4",
          Expect(True, "EQUIVALENT", "every layer is split on every rank"), layers=3, tp=4),
    _case("col_seq1_dynamic", "x [-1,1,H]: dynamic batch, a sequence of one",
          Expect(True, "EQUIVALENT", "by luck the static product -1*1 = -1 is a valid "
                 "reshape target: the fold [B, H] holds for every B (Z3), unlike S > 1"),
          seq=1, dynamic_batch=True),
    _case("col_cast_window_tp4", "AMP master-grad cast in the window, TP 4",
          Expect(True, "EQUIVALENT", "the dY matmul is placed before the window ops on "
                 "every rank"), window="cast", tp=4),
]
