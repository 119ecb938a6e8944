"""Every uninterpreted kernel a value row applies has a reference, so a
refutation through it can be replayed (``verify/value/kernels.py``).

A kernel with no reference made a wrong rewrite whose difference passes
through it INCONCLUSIVE: the probes and Z3's models cannot be replayed with
the real kernel, so no counterexample is ever concrete (the zoo LLaMA's
``rsqrt`` and ``arange``).  ``verify/selfcheck/row_kernels.py`` reads every
kernel name the rows can apply from their source; the references are
checked against Paddle's CPU kernels in ``tests/test_kernel_differential.py``.
Here: the table has no gap (a new row without a reference fails), the
enumeration finds a gap in a row it was never told about, and a one-op
difference through each newly referenced kernel is REFUTED with a concrete
counterexample that Paddle's executor confirms, beside a correct rewrite
through the same kernel that is still proved.
"""
from __future__ import annotations

import numpy as np
import pytest

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)

from verify.selfcheck import row_kernels as RK  # noqa: E402
from verify.value import kernels  # noqa: E402
from verify.verdicts import Verdict  # noqa: E402


def test_every_kernel_a_row_applies_has_a_reference():
    uses, unresolved = RK.row_kernels()
    assert not unresolved, unresolved
    assert not RK.missing(uses), {k: sorted(u.rows) for k, u in RK.missing(uses).items()}
    # the enumeration reaches the rows it should (factories, families, a guarded name)
    want = {"rsqrt": "pd_op.rsqrt", "arange": "pd_op.arange", "sin": "pd_op.sin",
            "cos": "pd_op.cos", "pow": "pd_op.pow", "pow_grad": "pd_op.pow_grad",
            "where": "pd_op.where", "tril.*.*": "pd_op.tril", "silu": "pd_op.swiglu",
            "set_value_.*.*": "pd_op.set_value_", "adamw.*": "pd_op.adamw_",
            "cross_entropy_with_softmax_grad.*.*": "pd_op.cross_entropy_with_softmax_grad",
            "inv": "pd_op.divide_grad", "cast": "pd_op.cast"}
    for k, row in want.items():
        assert k in uses and row in uses[k].rows, (k, uses.get(k))
    assert "collective" in uses["max"].functions  # a MAX all_reduce's kernel
    # an exemption names a kernel the rows apply and that has no reference
    # (a stale or shadowing entry would hide a gap)
    for k, why in kernels.UNREPLAYABLE.items():
        assert k in uses and not kernels.has_reference(k) and why, k
    assert len(uses) >= 30


def test_a_kernel_without_a_reference_is_listed_with_its_rows(monkeypatch):
    """Teeth: with rsqrt's reference taken away the real table's rsqrt row is
    listed; ``reference`` itself then refuses it (NoReference)."""
    monkeypatch.setattr(kernels, "REFERENCED",
                        tuple(r for r in kernels.REFERENCED if r != "rsqrt"))
    gaps = RK.missing()
    assert set(gaps) == {"rsqrt"}, sorted(gaps)
    assert gaps["rsqrt"].rows == {"pd_op.rsqrt"}
    with pytest.raises(kernels.NoReference):
        kernels.reference("rsqrt", (), (4,))


_NEW_ROWS = '''
def uf_new(name, slots):
    def row(op, ins, k):
        return {"out": [k.uf(name, [ins[s] for s in slots], ())]}
    return row

def uf_wrapped(kernel):
    return uf_new(f"{kernel}.y", ["x"])

def asinh_row(op, ins, k):
    return {"out": [k.uf("asinh", [ins["x"]], ())]}

def mystery(op, ins, k):
    name = op.attrs["kernel"]
    return {"out": [k.uf(name, [ins["x"]], ())]}

ROWS = {"pd_op.erf": uf_new("erf", ["x"]), "pd_op.asinh": asinh_row,
        "pd_op.lgamma": uf_wrapped("lgamma"), "pd_op.rsqrt": uf_new("rsqrt", ["x"])}
'''


def test_the_enumeration_finds_new_rows_factories_and_unresolved_names():
    """A row source it was never told about: a new factory (its kernel name
    a parameter), a factory through another with an f-string, a literal
    ``k.uf`` call: all enumerated, the three without a reference missing;
    a name read at run time is reported unresolved."""
    uses, unresolved = RK.scan(_NEW_ROWS)
    assert set(uses) == {"erf", "asinh", "lgamma.y", "rsqrt"}, sorted(uses)
    assert set(RK.missing(uses)) == {"erf", "asinh", "lgamma.y"}
    assert [t for _, t in unresolved] == ["k.uf(name, [ins['x']], ())"], unresolved


# -- a difference through each kernel: INCONCLUSIVE before, REFUTED now --------
def _build(body, factor):
    """A one-rank PIR program ``y = body(C, x, factor)`` (x [2, 3] float32,
    c [2, 3] bool, label [2, 1] int64): (snapshot, y's name, program, y)."""
    import paddle

    from verify.ir.pir_snapshot import Names, from_pir_programs

    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            ins = {"x": paddle.static.data("x", [2, 3], "float32"),
                   "c": paddle.static.data("c", [2, 3], "bool"),
                   "label": paddle.static.data("label", [2, 1], "int64")}
            y = body(paddle._C_ops, ins, factor)
        names = Names("%")
        snap = from_pir_programs(main, names=names)
        snap.feeds = sorted(ins)
        return snap, names.name(y), main, y


def _full(C, v):
    import paddle
    return C.full([1], v, paddle.float32, paddle.CPUPlace())


# body(C, ins, f): f scales what reaches the kernel (the wrong rewrite: f = 2)
BODIES = {
    "rsqrt": lambda C, i, f: C.rsqrt(C.add(C.multiply(C.scale(i["x"], f, 0.0, True),
                                                      i["x"]), _full(C, 1.0))),
    "sin": lambda C, i, f: C.sin(C.scale(i["x"], f, 0.0, True)),
    "cos": lambda C, i, f: C.cos(C.scale(i["x"], f, 0.0, True)),
    "pow": lambda C, i, f: C.pow(C.scale(i["x"], f, 0.0, True), 3.0),
    "tril": lambda C, i, f: C.tril(C.scale(i["x"], f, 0.0, True), 0),
    "where": lambda C, i, f: C.where(i["c"], C.scale(i["x"], f, 0.0, True), i["x"]),
    "arange": lambda C, i, f: C.add(i["x"], _arange(C, f)),
    "cross_entropy_with_softmax": lambda C, i, f: C.cross_entropy_with_softmax(
        C.scale(i["x"], f, 0.0, True), i["label"], False, True, True, -100, -1)[1],
}


def _arange(C, f):
    import paddle
    return C.arange(0.0, 3.0 * f, f, paddle.float32, paddle.CPUPlace())


def _prove(kernel, factor_after, body_after=None):
    from verify.value.proof import prove_application

    a, ya, main_a, va = _build(BODIES[kernel], 1.0)
    b, yb, main_b, vb = _build(body_after or BODIES[kernel], factor_after)
    res = prove_application(f"test {kernel}", [0], {}, {0: a}, {0: b}, {0: [ya]},
                            renames={0: {ya: yb}} if ya != yb else None)
    assert len(res) == 1
    return res[0], (main_a, va), (main_b, vb)


def _run(program, value, feed):
    import paddle

    with paddle.pir_utils.IrGuard():
        exe = paddle.static.Executor(paddle.CPUPlace())
        return np.asarray(exe.run(program, feed=feed, fetch_list=[value])[0], dtype=float)


def _feed(cex):
    """The counterexample's feed (every input the differing values read;
    an input they do not read: zeros)."""
    out = {"x": np.zeros((2, 3), "float32"), "c": np.zeros((2, 3), "bool"),
           "label": np.zeros((2, 1), "int64")}
    for leaf in (cex.get("feed") or {}).values():
        out[leaf["var"]] = np.asarray(leaf["values"], dtype=float).astype(
            out[leaf["var"]].dtype)
    assert cex.get("feed"), cex
    return out


@pytest.mark.parametrize("kernel", sorted(BODIES))
def test_a_difference_through_the_kernel_is_refuted_with_a_counterexample_paddle_confirms(
        kernel):
    """The kernel's input off by a factor 2: REFUTED by replaying concrete
    inputs through the real kernel (it was INCONCLUSIVE with no reference:
    ``kernel ... has no reference to replay``); the counterexample's feed,
    run through both programs by Paddle's executor, gives the two values
    it states (float32 within 1e-5)."""
    r, (ma, va), (mb, vb) = _prove(kernel, 2.0)
    assert r.verdict == Verdict.NOT_EQUIVALENT, r.message
    cex = r.counterexample
    assert cex["replayed"] and cex["kernels"], cex
    feed = _feed(cex)
    i = tuple(cex["element"])
    got_a, got_b = _run(ma, va, feed), _run(mb, vb, feed)
    want_a, want_b = float(eval_frac(cex["original_value"])), \
        float(eval_frac(cex["rewritten_value"]))
    assert abs(got_a[i] - want_a) <= 1e-5 * max(1, abs(want_a)), (got_a, cex)
    assert abs(got_b[i] - want_b) <= 1e-5 * max(1, abs(want_b)), (got_b, cex)
    assert abs(got_a[i] - got_b[i]) > 1e-4, (got_a, got_b)


def eval_frac(s):
    from fractions import Fraction
    return Fraction(s) if "/" in s or "." not in s and "e" not in s else float(s)


# the same value reached another way: still proved (no probe difference)
TWINS = {
    "rsqrt": lambda C, i, f: C.rsqrt(C.add(C.multiply(i["x"], i["x"]), _full(C, 1.0))),
    "pow": lambda C, i, f: C.pow(C.multiply(i["x"], _full(C, 1.0)), 3.0),
    "where": lambda C, i, f: C.where(i["c"], C.scale(i["x"], 1.0, 0.0, True), i["x"]),
}


@pytest.mark.parametrize("kernel", sorted(TWINS))
def test_a_correct_rewrite_through_the_kernel_is_still_proved(kernel):
    r, _, _ = _prove(kernel, 1.0, body_after=TWINS[kernel])
    assert r.verdict == Verdict.EQUIVALENT, r.message
