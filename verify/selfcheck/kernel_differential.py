"""Every value row against Paddle's own kernels, on generated inputs, on
each of Paddle's executors (issue 34 item 2).

An *example* (``kernel_programs.py``: the specs, Hypothesis, the PIR
builders) is a one-op Paddle program (plus the ``pd_op.full`` /
``full_int_array`` constants a PIR builder adds) with fed inputs: shapes
(broadcasting with ``axis``, a lower-rank operand), a dtype, non-default
attrs.  It runs in three modes, each a worker process of its own (the
flags are read at import and cached by the executor, so one mode a
process; the worker proves the flag took effect by counting the
executor's ``translate_to_pir`` calls):

  * ``legacy``      legacy op types by ``block.append_op``
                    (``FLAGS_enable_pir_api=0``), ``FLAGS_enable_pir_in_executor=0``;
  * ``legacy_pir``  the same programs with ``FLAGS_enable_pir_in_executor=1``
                    (translated to PIR for execution);
  * ``pir``         ``pd_op.*`` programs built by ``paddle._C_ops`` under the
                    PIR API.

The worker snapshots the program the way the suite does
(``verify.ir.snapshot.from_programs`` / ``pir_snapshot.from_pir_programs``)
and the rows of ``semantics.ROWS`` are applied to that snapshot's ops in
order on exact rationals (``ExactKernels``: constants exact, the
uninterpreted kernels ``kernels.reference``'s), as the proof applies them
on terms.  Paddle's output must then match:

  * integers exactly, after the row's wrap modulo 2^bits (``WRAPPED``);
    bool exactly;
  * floats within ``tolerance(dtype, ...)``: ``4 eps (|exact| + mag)``, eps
    the dtype's unit roundoff (2^-52, 2^-23, 2^-10, 2^-7), ``mag`` the
    largest |input|^2 times the longest dim plus the largest |input| (a
    bound on the terms a kernel accumulates: its rounding may differ from
    one rounding of the exact result).  Float inputs are multiples of 1/8
    in [-4, 4], exact in every float dtype.

A dtype the row does not model (``check_dtypes``) or an op Paddle refuses
(no kernel for the dtype, an attr it rejects) is skipped, counted apart.
Where the row models the dtype and Paddle runs it, they must agree.
Two executors' results for the same legacy program are compared too
(``executor_disagreements``): a result one computes and the other refuses,
or values further apart than the tolerance.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from . import kernel_programs as programs
from .kernel_programs import PIR_BUILD, Example, feed_array, sample, specs

DTYPES, VARTYPE = programs.DTYPES, programs.VARTYPE  # for callers building examples

MODES = ("legacy", "legacy_pir", "pir")
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10,
       "bfloat16": 2.0 ** -7}
_ENV = {"legacy": {"FLAGS_enable_pir_api": "0", "FLAGS_enable_pir_in_executor": "0"},
        "legacy_pir": {"FLAGS_enable_pir_api": "0", "FLAGS_enable_pir_in_executor": "1"},
        "pir": {"FLAGS_enable_pir_api": "1", "FLAGS_enable_pir_in_executor": "1"}}


# -- the worker: one executor mode, a batch of examples ---------------------------
def run_mode(mode: str, examples: list, timeout: float = 900) -> dict:
    """Run ``examples`` in a fresh worker process for ``mode``: ``{"results":
    {id: result}, "translations": n, "flags": {...}}``."""
    import tempfile

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGS_")}
    env.update(_ENV[mode])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("GLOG_minloglevel", "2")
    with tempfile.TemporaryDirectory(prefix="kdiff-") as d:
        src, dst = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(src, "w") as f:
            json.dump([e.to_json() for e in examples], f)
        proc = subprocess.run([sys.executable, "-m", "verify.selfcheck.kernel_differential",
                               mode, src, dst], env=env, cwd=root, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0 or not os.path.exists(dst):
            raise RuntimeError(f"kernel worker {mode} failed ({proc.returncode}): "
                               f"{proc.stderr[-2000:]}")
        with open(dst) as f:
            out = json.load(f)
    out["results"] = {r["id"]: r for r in out["results"]}
    return out


def _plain(v):
    return json.loads(json.dumps(v, default=str))


def _fetched(arr, declared):
    """A fetched array as JSON: its dtype the array's own (uint16 the
    bfloat16 bits; ``declared``, the program's var dtype, may differ)."""
    a = np.asarray(arr)
    dtype = "bfloat16" if a.dtype == np.uint16 else "bool" if a.dtype == np.bool_ else \
        str(a.dtype)
    if a.dtype == np.uint16:
        a = (a.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(a.shape)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    return {"shape": list(a.shape), "dtype": dtype,
            "data": [x if isinstance(x, int) else float(x) for x in a.reshape(-1).tolist()]}


def _run_legacy(paddle, ex):
    from verify.ir.snapshot import from_programs

    leg = ex["legacy"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        vs = {n: paddle.static.data(n, shape, dt) for n, (_, shape, dt) in ex["feeds"].items()}
        for n in (leg.get("grad") or {}).get("wrt", []):
            vs[n].stop_gradient = False
        # outputs declared in the example's dtype (cast: its target); an op
        # whose var-type inference sets its outputs' dtypes overrides it
        dt = leg.get("out_dtype", ex["dtype"])
        outs = {s: [block.create_var(name=f"out.{s}.{i}", dtype=dt) for i in range(n)]
                for s, n in leg["outputs"].items()}
        block.append_op(type=leg["type"], inputs={s: [vs[n] for n in names]
                                                  for s, names in leg["inputs"].items()},
                        outputs=outs, attrs=leg["attrs"])
        fetch = [v.name for s, vl in outs.items() if s != "XShape" for v in vl]
        if leg.get("grad"):
            out = next(vl[0] for s, vl in outs.items() if s != "XShape")
            grads = paddle.static.gradients([out], [vs[n] for n in leg["grad"]["wrt"]],
                                            target_gradients=[vs[leg["grad"]["gout"]]])
            fetch = [g.name for g in grads]
    snap = from_programs(main)
    return main, snap, fetch


def _run_pir(paddle, ex):
    from paddle import _C_ops

    from verify.ir.pir_snapshot import Names, from_pir_programs

    p = ex["pir"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        vs = {n: paddle.static.data(n, shape, dt) for n, (_, shape, dt) in ex["feeds"].items()}
        if p.get("grad"):
            for n in p["grad"]["wrt"]:
                vs[n].stop_gradient = False
        outs = PIR_BUILD[p["op"]](_C_ops, [vs[n] for n in p["ins"]], *p["args"])
        if p.get("grad"):
            from paddle.autograd.ir_backward import grad

            outs = grad(outs[:1], [vs[n] for n in p["grad"]["wrt"]],
                        grad_outputs=[vs[p["grad"]["gout"]]])
    names = Names("%")
    snap = from_pir_programs(main, names=names)
    fetch = [names.name(v) for v in outs]
    return main, snap, fetch, outs


def _message(exc) -> str:
    """Paddle's own message (its "In user code" traceback cut away)."""
    text = str(exc)
    import re

    m = re.search(r"\b(\w+Error: [^\n]*)", text.split("In user code:")[-1])
    if m:
        return " ".join(m.group(1).split())[:300]
    for mark in ("(InvalidArgument)", "(Unimplemented)", "(PreconditionNotMet)",
                 "(NotFound)", "(InvalidType)", "(Fatal)", "(OutOfRange)"):
        if mark in text:
            text = text[text.index(mark):]
            break
    else:
        text = text.strip().splitlines()[-1] if text.strip() else ""
    return " ".join(text.split())[:300]


def _worker(mode, src, dst):
    import paddle
    import paddle.base.executor as E

    calls = [0]
    orig = E.translate_to_pir

    def counted(*a, **k):  # proof that FLAGS_enable_pir_in_executor took effect
        calls[0] += 1
        return orig(*a, **k)
    E.translate_to_pir = counted
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    with open(src) as f:
        examples = json.load(f)
    results = []
    for ex in examples:
        r = {"id": ex["id"]}
        if ex["legacy" if mode != "pir" else "pir"] is None:
            continue
        try:
            if mode == "pir":
                main, snap, fetch, vals = _run_pir(paddle, ex)
                targets = vals
            else:
                main, snap, fetch = _run_legacy(paddle, ex)
                targets = fetch
            r["snap"] = {"ops": [{"type": o.type, "inputs": o.inputs, "outputs": o.outputs,
                                  "attrs": _plain(o.attrs)} for o in snap.ops],
                         "vars": {n: v.dtype for n, v in snap.vars.items()},
                         "shapes": {n: _plain(v.shape) for n, v in snap.vars.items()}}
            r["ops"] = [o.type for o in snap.ops]
            r["fetch"] = fetch
        except Exception as exc:  # Paddle refuses to build it
            r["error"] = f"build: {type(exc).__name__}: {_message(exc)}"
            results.append(r)
            continue
        try:
            feed = {n: feed_array(*v) for n, v in ex["feeds"].items()}
            got = exe.run(main, feed=feed, fetch_list=targets)
            r["outs"] = [_fetched(a, r["snap"]["vars"].get(n, "")) for a, n in zip(got, fetch)]
            r["declared"] = [r["snap"]["vars"].get(n, "") for n in fetch]
        except Exception as exc:  # Paddle refuses to run it
            r["error"] = f"run: {type(exc).__name__}: {_message(exc)}"
            r["error_full"] = str(exc)[-3000:]
        results.append(r)
    flags = paddle.get_flags(["FLAGS_enable_pir_in_executor", "FLAGS_enable_pir_api"])
    with open(dst, "w") as f:
        json.dump({"mode": mode, "translations": calls[0], "flags": _plain(flags),
                   "results": results}, f, default=str)



# -- the rows on exact values, and the comparison ---------------------------------
class ExactKernels:
    """``k`` for rows on exact rationals: constants as given, every
    uninterpreted kernel ``kernels.reference`` (the replay's real kernels)."""

    reduce_to = None

    def const(self, v):
        return Fraction(v)

    def uf(self, kernel, args, attrs=()):
        from verify.value.kernels import reference

        with np.errstate(over="ignore"):  # a cast that overflows: NotAnInput
            v = reference(kernel, attrs, tuple(Fraction(a) for a in args))
        return v if isinstance(v, Fraction) else Fraction(float(v))


def _tensor(data, shape, dtype):
    from verify.value import semantics as S

    arr = np.empty(len(data), dtype=object)
    for i, v in enumerate(data):
        arr[i] = Fraction(v)
    return S.Tensor(arr.reshape(shape), S.leaf_dims(shape), dtype)


def _wrap(v, dtype):
    from verify.value import semantics as S

    mod = S.wrap_modulus(dtype)
    if mod is None:
        return v
    bits, signed = mod
    n = int(v) % (1 << bits)
    return Fraction(n - (1 << bits) if signed and n >= 1 << (bits - 1) else n)


# ops that only declare a fed input (the ``data`` op a legacy program gets
# under FLAGS_enable_pir_in_executor=1, the executor's feed/fetch)
DECLARATIONS = frozenset({"data", "feed", "fetch"})


def _declared(res, name):
    from verify.value import semantics as S

    shape = res["snap"].get("shapes", {}).get(name)
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        return None
    return S.Tensor(np.empty(shape, dtype=object), S.leaf_dims(shape),
                    res["snap"]["vars"].get(name, ""))


def apply_rows(ex: Example, res: dict) -> list:
    """The rows of ``res``'s snapshot ops applied in order to ``ex``'s fed
    values (as ``symbolic.py`` applies them on terms): the fetched tensors."""
    from verify.ir.snapshot import Op
    from verify.value import semantics as S
    from verify.value.executor_disagreements import refusal

    env = {n: _tensor(*v) for n, v in ex.feeds.items()}
    k = ExactKernels()
    dtypes = res["snap"]["vars"]
    for i, rec in enumerate(res["snap"]["ops"]):
        op = Op(i, rec["type"], rec["inputs"], rec["outputs"], rec["attrs"])
        if op.type in DECLARATIONS:
            continue
        row = S.ROWS.get(op.type)
        if row is None:
            raise S.Unsupported(f"no semantics row for op {op.type}")
        # a var read before anything wrote it (a forward's XShape): its
        # declared shape, elements that fail if a row computes with them
        ins = {s: [env[n] if n in env else _declared(res, n) for n in names]
               for s, names in op.inputs.items() if names}
        S.check_dtypes(op, [(s, n, t.dtype) for s, names in op.inputs.items()
                            for n, t in zip(names, ins.get(s, [])) if t is not None] +
                       [(s, n, dtypes.get(n, "")) for s, names in op.outputs.items()
                        for n in names])
        why = refusal(op, [t.dtype for ts in ins.values() for t in ts if t is not None] +
                      [dtypes.get(n, "") for names in op.outputs.values() for n in names])
        if why:  # as the proof: no one meaning where Paddle's executors disagree
            raise S.Unsupported(why)
        outs = row(op, ins, k)
        for slot, names in op.outputs.items():
            for n, t in zip(names, outs.get(slot) or []):
                if t is None:
                    continue
                if op.type in S.WRAPPED and S.wrap_modulus(t.dtype):
                    flat = np.empty(t.arr.size, dtype=object)
                    for j, e in enumerate(t.arr.reshape(-1)):
                        flat[j] = _wrap(e, t.dtype)
                    t = S.Tensor(flat.reshape(t.arr.shape), t.dims, t.dtype)
                env[n] = t
    return [env.get(n) for n in res["fetch"]]


def magnitude(ex: Example) -> float:
    """The largest |input|^2 times the longest dim, plus the largest |input|."""
    big, longest = 0.0, 1
    for data, shape, _ in ex.feeds.values():
        if data:
            big = max(big, max(abs(float(v)) for v in data))
        longest = max([longest] + list(shape))
    return big * big * longest + big


def tolerance(dtype: str, exact: float, mag: float) -> float:
    return 4 * EPS[dtype] * (abs(exact) + mag)


def compare(ex: Example, res: dict, want: list) -> str | None:
    """None when Paddle's fetched outputs match the row's ``want``, else why not."""
    from verify.value import semantics as S

    mag = magnitude(ex)
    for i, (got, t) in enumerate(zip(res["outs"], want)):
        name = res["fetch"][i]
        if t is None:
            return f"{name}: the rows give no value"
        dtype = S.dtype_name(got["dtype"])
        if t.dtype and S.dtype_name(t.dtype) and S.dtype_name(t.dtype) != dtype:
            return f"{name}: row dtype {S.dtype_name(t.dtype)}, Paddle {dtype}"
        if list(t.arr.shape) != list(got["shape"]):
            return f"{name}: row shape {list(t.arr.shape)}, Paddle {got['shape']}"
        for j, (e, p) in enumerate(zip(t.arr.reshape(-1), got["data"])):
            if dtype in EPS:
                ef = float(e)
                if not (isinstance(p, (int, float)) and math.isfinite(p)) or \
                        abs(p - ef) > tolerance(dtype, ef, mag):
                    return (f"{name}[{j}]: row {ef!r}, Paddle {p!r} ({dtype}, tolerance "
                            f"{tolerance(dtype, ef, mag):.3g})")
            else:
                ev = _wrap(e, dtype) if dtype != "bool" else Fraction(int(e != 0))
                if Fraction(p) != ev:
                    return f"{name}[{j}]: row {ev}, Paddle {p} ({dtype})"
    return None


def judge(ex: Example, res: dict | None) -> tuple:
    """``(outcome, detail)``: agree, disagree, refused (Paddle), unsupported
    (the row), no_reference (a kernel the replay does not have), not_input."""
    from verify.value import semantics as S
    from verify.value.kernels import NoReference, NotAnInput

    if res is None:
        return "absent", ""
    if "error" in res:
        return "refused", res["error"]
    try:
        want = apply_rows(ex, res)
    except S.Unsupported as exc:
        return "unsupported", str(exc)
    except NoReference as exc:
        return "no_reference", str(exc)
    except NotAnInput as exc:
        return "not_input", str(exc)
    except Exception as exc:  # the row fails where Paddle computes
        return "disagree", f"the row raises {type(exc).__name__}: {exc}"
    why = compare(ex, res, want)
    return ("agree", "") if why is None else ("disagree", why)


def executor_diff(ex: Example, a: dict | None, b: dict | None) -> str | None:
    """How two modes' results for one example differ (one refuses, shapes,
    values beyond the tolerance), else None."""
    if a is None or b is None:
        return None
    if ("error" in a) != ("error" in b):
        bad, good = (a, b) if "error" in a else (b, a)
        return f"one refuses ({bad['error'][:200]}), the other computes"
    if "error" in a:
        return None
    mag = magnitude(ex)
    for x, y in zip(a["outs"], b["outs"]):
        if x["shape"] != y["shape"] or x["dtype"] != y["dtype"]:
            return f"{x['dtype']}{x['shape']} vs {y['dtype']}{y['shape']}"
        for j, (p, q) in enumerate(zip(x["data"], y["data"])):
            tol = tolerance(x["dtype"], p, mag) if x["dtype"] in EPS and \
                isinstance(p, float) and math.isfinite(p) else 0
            if not (p == q or (p != p and q != q)) and not abs(p - q) <= tol:
                return f"element {j}: {p!r} vs {q!r} ({x['dtype']})"
    return None



# -- a sweep: examples of every spec in every dtype its rows model ----------------
PAIRS = (("legacy", "legacy_pir"), ("legacy", "pir"), ("legacy_pir", "pir"))


@dataclass
class Sweep:
    examples: list
    outcomes: dict            # (mode, outcome) -> count
    disagreements: list       # (mode, spec, dtype, detail, example json): a row vs Paddle
    executor: list            # (mode a, mode b, spec, dtype, detail, example json, the
    #                           table's refusal for legacy vs legacy_pir, else None)
    rows_agreeing: set        # ROWS keys applied in a run that agreed with Paddle
    seconds: float
    translations: dict        # mode -> the executor's translate_to_pir calls
    runs: dict = field(default_factory=dict)  # mode -> run_mode's results by example id

    def examples_run(self, mode):
        return sum(n for (m, o), n in self.outcomes.items() if m == mode and o != "absent")


def listed_refusal(res: dict | None) -> str | None:
    """The table's refusal of an op of ``res``'s program snapshot (its
    attrs as the program records them: a legacy ``value`` attr is float32)."""
    from verify.ir.snapshot import Op
    from verify.value.executor_disagreements import refusal

    if not res or "snap" not in res:
        return None
    dtypes = list(res["snap"]["vars"].values())
    for i, rec in enumerate(res["snap"]["ops"]):
        why = refusal(Op(i, rec["type"], rec["inputs"], rec["outputs"], rec["attrs"]), dtypes)
        if why:
            return why
    return None


def build_examples(n: int, seed: int = 0, names=None) -> list:
    exs = []
    for spec in specs():
        if names and spec.name not in names:
            continue
        for dtype in spec.dtypes:
            for e in sample(spec, dtype, n, seed):
                e.id = len(exs)
                exs.append(e)
    return exs


def sweep(n: int = 1, seed: int = 0, names=None) -> Sweep:
    """``n`` examples a spec and dtype, run in the three modes and judged."""
    t0 = time.time()
    exs = build_examples(n, seed, names)
    runs = {m: run_mode(m, exs) for m in MODES}
    outcomes, dis, ex_dis, rows = {}, [], [], set()
    for e in exs:
        for m in MODES:
            res = runs[m]["results"].get(e.id)
            o, detail = judge(e, res)
            outcomes[(m, o)] = outcomes.get((m, o), 0) + 1
            if o == "agree":
                rows.update(t for t in res["ops"] if t not in DECLARATIONS)
            elif o == "disagree":
                dis.append((m, e.spec, e.dtype, detail, e.to_json()))
        for a, b in PAIRS:
            ra, rb = runs[a]["results"].get(e.id), runs[b]["results"].get(e.id)
            d = executor_diff(e, ra, rb)
            if d:
                listed = listed_refusal(ra) if (a, b) == ("legacy", "legacy_pir") else None
                ex_dis.append((a, b, e.spec, e.dtype, d, e.to_json(), listed))
    return Sweep(exs, outcomes, dis, ex_dis, rows, time.time() - t0,
                 {m: runs[m]["translations"] for m in MODES},
                 {m: runs[m]["results"] for m in MODES})


if __name__ == "__main__":
    _worker(*sys.argv[1:4])
