"""Hand-built single-rank PIR programs: a two-layer matmul chunk, its backward
(``pd_op.matmul_grad``) and SGD; the family the VPP backward split exists for.

Per program (built under ``paddle.pir_utils.IrGuard()``; this process runs
Paddle in legacy mode otherwise)::

    x  = pd_op.data [B, S, K] (or [B*S, K]), stop_gradient False (an
         activation handed over by the previous pipeline stage)
    h  = pd_op.matmul(x, w0, transpose_x?, transpose_y?)
    o  = pd_op.matmul(h, w1, transpose_x?, transpose_y?)
    loss = mean(square(o))
    backward (paddle.static.append_backward via the optimizer): two
    pd_op.matmul_grad; then pd_op.sgd_ on w0 and w1.

Both layers carry the same transpose flags.  A transposed X is stored
``[.., K, S]`` (the matmul transposes its last two dims); a transposed
weight is stored ``[N, K]``.  Non-square weights: K=8 -> H=6 -> N=4.

Watched (the case's fetches, by value name): the loss, dX and dW of both
``matmul_grad`` ops (dX of layer 1 is dh; dX of layer 0 is the gradient
handed back to the previous stage) and the parameters after the step (the
``sgd_`` results).
"""
from __future__ import annotations

from .base import Case, Expect, FeedSpec, RankProgram

SPLIT = "_pir_split_matmul_grad_to_matmul"
B, S = 2, 4


# what a reproducer (verify/repro/pir_script.py) embeds besides build_programs
REPRO_CONSTANTS = {"B": B, "S": S}


class PirCase(Case):
    """A case whose programs are PIR programs (``ir = "pir"``)."""


def _shapes(p, B=B, S=S):
    """(x as declared, x as fed, w0, w1, transpose_x, transpose_y); plain Python
    (a reproducer embeds this function's source)."""
    k, h, n = (8, 8, 8) if p.get("square", True) else (8, 6, 4)
    two_d, tx, ty = p.get("two_d", False), p.get("tx", False), p.get("ty", False)
    batch, seq = (-1 if p.get("dynamic") else B), p.get("seq", S)
    lead = [batch * seq if batch > 0 else -1] if two_d else [batch, seq]
    concrete_lead = [B * seq] if two_d else [B, seq]

    def act(lead_, feat):  # an activation as stored (transposed X: last two swapped)
        if not tx:
            return lead_ + [feat]
        return lead_[:-1] + [feat, lead_[-1]]

    def weight(i, o):
        return [o, i] if ty else [i, o]
    return (act(lead, k), act(concrete_lead, k), weight(k, h), weight(h, n), tx, ty)


def build_programs(params):
    """``(main, startup, loss, params_grads, x_fed_shape)``, built under PIR;
    needs only Paddle and :func:`_shapes` (a reproducer embeds both)."""
    import paddle

    x_shape, x_concrete, w0_shape, w1_shape, tx, ty = _shapes(params)
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", x_shape, "float32")
            x.stop_gradient = False
            w0 = paddle.create_parameter(w0_shape, "float32", name="w0")
            w1 = paddle.create_parameter(w1_shape, "float32", name="w1")
            h = paddle.matmul(x, w0, transpose_x=tx, transpose_y=ty)
            if tx:  # the next layer reads h stored transposed, as the first read x
                h = paddle.transpose(h, list(range(len(x_shape) - 2)) +
                                     [len(x_shape) - 1, len(x_shape) - 2])
            o = paddle.matmul(h, w1, transpose_x=tx, transpose_y=ty)
            loss = paddle.mean(paddle.square(o))
            opt = paddle.optimizer.SGD(learning_rate=0.1)
            _, params_grads = opt.minimize(loss)
    return main, startup, loss, params_grads, x_concrete


REPRO_SOURCES = (_shapes,)


def build(case: Case, rank: int) -> RankProgram:
    import paddle

    from verify.ir.pir_snapshot import value_names

    main, startup, loss, params_grads, x_concrete = build_programs(case.params)
    with paddle.pir_utils.IrGuard():
        names = value_names(main)
        grads = []  # dX and dW of every matmul_grad (dX of layer 1 is dh)
        for op in main.global_block().ops:
            if op.name() == "pd_op.matmul_grad":
                grads += [names.name(op.result(0)), names.name(op.result(1))]
        sgd_outs = [names.name(op.result(0)) for op in main.global_block().ops
                    if op.name() == "pd_op.sgd_"]
        loss_name = names.name(loss)
    return PirRankProgram(rank=rank, main=main, startup=startup, dist_context=None,
                          params_grads=params_grads,
                          feeds=[FeedSpec("x", tuple(x_concrete))],
                          loss=loss_name, fetches=[n for n in grads + sgd_outs if n],
                          names=names)


from dataclasses import dataclass  # noqa: E402


@dataclass
class PirRankProgram(RankProgram):
    """A RankProgram of PIR programs, with the value-name table of ``main``
    (``verify.ir.pir_snapshot.Names``): loss and fetches are value names."""

    names: object = None
    # {var: placement record} of the main program's parameters and states,
    # as the planner recorded them (a program dir's planner.json); the
    # snapshot carries them (meta["placements"]: verify/numeric/startup_pieces.py)
    placements: dict = None
    # sha256 of the files a program dir's rank was imported from (build_pir),
    # as the builder returned it: the engine turns it into a stamp
    # (verify/ir/origin.py) for an original it built and hands to no pass
    plan_digest: str = None
    origin: object = None  # verify.ir.origin.Origin, set by the engine only


MERGE = "auto_parallel_gradient_merge_pass"
_MERGE = Expect(True, "PASS_CRASHED", "outside the merge's domain: these programs are not "
                "dist programs (no mix2dist, no dist types), and the PIR gradient merge reads "
                "grad._local_shape, which raises for a dense tensor (the Engine only ever "
                "hands it dist programs)")


def _case(name, summary, expect, **params):
    rank_ = 2 if params.get("two_d") else 3
    symbols = {"x": ("B",) + (None,) * (rank_ - 1)} if params.get("dynamic") else {}
    return PirCase(name=name, family="pir_matmul_grad", summary=summary, mesh=[0],
                   builder=build, expect={SPLIT: expect, MERGE: _MERGE}, symbols=symbols,
                   params=params, ir="pir")


_TRANSPOSE_EV = ("value proof refutes dX/dW (exact counterexample); PIR executor run: dW "
                 "differs (tensor, step, index in the report); shapes agree (square), so only "
                 "values tell")
_SPLIT_RAISES_EV = ("the pass raises inside PIR's shape inference / its assertion "
                    "(traceback)")

CASES = [
    _case("pir_mm_3d", "3-D x [2,4,8], square weights, no transpose",
          Expect(True, "EQUIVALENT", "the split is the kernel's own FoldInitDims + two "
                 "matmuls: proved and run"), square=True),
    _case("pir_mm_3d_nonsquare", "3-D x [2,4,8], weights 8x6 and 6x4",
          Expect(True, "EQUIVALENT", "non-square, untransposed: proved and run"),
          square=False),
    _case("pir_mm_3d_dynamic", "3-D x [-1,4,8] (dynamic batch), square weights",
          Expect(True, "PASS_CRASHED", "the fold's target is built from static dims: "
                 "x_dims[0]*x_dims[1] = -1*4 gives reshape to [-4, 8], which PIR's "
                 "reshape rejects inside the pass", evidence=_SPLIT_RAISES_EV), dynamic=True),
    _case("pir_mm_2d", "2-D x [8,8], square weights",
          Expect(True, "PASS_CRASHED", "a 2-D x is 'folded' to 1-D ([64]): the dW matmul "
                 "becomes a dot product and its reshape to [8, 8] fails inside the pass",
                 evidence=_SPLIT_RAISES_EV),
          two_d=True),
    _case("pir_mm_2d_dynamic", "2-D x [-1,8], square weights",
          Expect(True, "PASS_CRASHED", "2-D and dynamic: the fold gives [-8], and the "
                 "pass raises", evidence=_SPLIT_RAISES_EV), two_d=True, dynamic=True),
    _case("pir_mm_3d_ty_square", "3-D x, weights stored [N,K] (transpose_y), square",
          Expect(False, "NOT_EQUIVALENT", "the guard tests has_attr('trans_y') while PIR "
                 "spells transpose_y, so the transposed grad is split as if untransposed: "
                 "dX = dOut W^T instead of dOut W, dW = X^T dOut instead of dOut^T X "
                 "(shapes agree because W is square; values differ)", evidence=_TRANSPOSE_EV),
          ty=True),
    _case("pir_mm_3d_ty_nonsquare", "3-D x, weights stored [N,K] (transpose_y), 8x6, 6x4",
          Expect(False, "PASS_CRASHED", "split as if untransposed: the first grad split "
                 "(layer 0, dOut [2,4,6], W stored [6,8]) gets dX = matmul(dOut, W, "
                 "transpose_y=True), contracting 6 with 8; PIR's matmul shape inference "
                 "raises inside the pass", evidence=_SPLIT_RAISES_EV), ty=True, square=False),
    _case("pir_mm_3d_tx", "3-D x stored [B,K,S] (transpose_x), S=4 != K=8",
          Expect(False, "PASS_CRASHED", "the guard misses transpose_x; the helper's own "
                 "assertion on the first two dims of x and out_grad fails",
                 evidence=_SPLIT_RAISES_EV), tx=True),
    _case("pir_mm_3d_tx_square", "3-D x stored [B,K,S] (transpose_x), S = K = 8",
          Expect(False, "NOT_EQUIVALENT", "the guard misses transpose_x; with S = K the "
                 "helper's assertion passes and the grad is split as if untransposed",
                 evidence=_TRANSPOSE_EV),
          tx=True, seq=8),
    _case("pir_mm_3d_txty_square", "3-D x stored [B,K,S] and weights [N,K] (both "
          "transposed), S = K = N = 8",
          Expect(False, "NOT_EQUIVALENT", "both flags missed by the guard: split as if "
                 "untransposed; shapes agree, values differ", evidence=_TRANSPOSE_EV),
          tx=True, ty=True, seq=8),
]


class LazyPirRankProgram(PirRankProgram):
    """A :class:`PirRankProgram` whose ``main``, ``startup`` and ``names``
    are deserialized on first read, by ``load() -> (main, startup, names)``.

    The engine snapshots a stamped program from its caches by the stamp
    (``verify/engine/origins.py``): an application whose every original and
    rewrite is found there reads the metadata (feeds, loss, fetches, plan
    digest) and never these three; on the zoo, deserializing them was 3.1 of
    the parent's CPU s.  Anything that reads one (a cache miss, a pass
    applied in process, a numeric run to make) loads all three, once.
    ``dataclasses.replace`` of one gives one already loaded (it reads the
    three unless they are replaced)."""

    def __init__(self, load=None, **fields):
        self.__dict__["_load"] = load
        self.__dict__["_loaded"] = {}
        self.__dict__["_then"] = []  # callables run on the loaded rp
        self.__dict__["_token"] = object()
        for which in ("main", "startup", "names"):
            fields.setdefault(which, _UNLOADED)
        PirRankProgram.__init__(self, **fields)

    def _get(self, which):
        got = self.__dict__["_loaded"]
        if got.get(which, _UNLOADED) is _UNLOADED:
            load, self.__dict__["_load"] = self.__dict__["_load"], None
            if load is None:
                raise RuntimeError("LazyPirRankProgram: its programs failed to load before")
            from paddle.utils import unique_name

            with unique_name.guard():  # as Case.build deserialized it: a fresh generator
                main, startup, names = load()
            for k, v in (("main", main), ("startup", startup), ("names", names)):
                if got.get(k, _UNLOADED) is _UNLOADED:
                    got[k] = v
            then, self.__dict__["_then"] = self.__dict__["_then"], []
            for fn in then:
                fn(self)
        return got[which]

    def _set(self, which, value):
        if which in ("main", "startup"):  # other programs: a stamp no longer names them
            self.__dict__["_token"] = object()
        self.__dict__["_loaded"][which] = value

    def programs_token(self):
        """The same object while main and startup are the ones ``load``
        gives (read or not); another once either is set
        (``verify.ir.origin``'s stamps hold it instead of the programs)."""
        return self.__dict__["_token"]

    def when_loaded(self, fn) -> None:
        """``fn(self)`` once the programs are deserialized (now if they are)."""
        if self.loaded():
            fn(self)
        else:
            self.__dict__["_then"].append(fn)

    def loaded(self) -> bool:
        """Whether the programs were deserialized (tests, benchmarks)."""
        return self.__dict__["_load"] is None

    main = property(lambda s: s._get("main"), lambda s, v: s._set("main", v))
    startup = property(lambda s: s._get("startup"), lambda s, v: s._set("startup", v))
    names = property(lambda s: s._get("names"), lambda s, v: s._set("names", v))


class _Unloaded:
    def __repr__(self):
        return "<not loaded>"


_UNLOADED = _Unloaded()
