"""The PIR Engine's AMP (``strategy.amp``), checked on the planner case
``planner_amp_bf16`` (``passes/pir_amp.py``): its serial program against the
same model planned in float32.

The real plan passes: the value check proves the AMP program is the float32
program with ``round_bfloat16`` exactly where PIR's AMP lists put casts, and
one step of both programs with Paddle's kernels agrees within the bfloat16
rounding tolerance.  Broken twins are refuted at their op and value: casts
removed, given another dtype or moved (edits of the recorded snapshot), a
loss seed scaled (a loss scale nobody unscales; an edit of the serial
program, run), and plans made with Paddle's AMP lists edited at plan time
(``matmul`` off the white list: no cast; ``tanh`` on it: a cast where the
installed lists put none).  The contract both ways: a model with no op on
the white list (``planner_amp_bf16_no_white``) is left alone, and the same
model planned with ``tanh`` put on the list is CONTRACT_BROKEN.  What does
not work on CPU is asserted with Paddle's own errors (docs/passes.md).
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest

import cases
import passes
from passes.planner import _snap, planner_dir
from passes.pir_amp import _serial_file
from verify.value.pir_amp_rounding import check_serial
from verify.verdicts import Verdict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CASE = "planner_amp_bf16"


@pytest.fixture(scope="module")
def planned():
    """``(adapter, case, amp dir, float32 dir, float32 serial, AMP serial)``."""
    adapter, case = passes.get("pir_amp"), cases.all_cases()[CASE]
    amp_dir, ref_dir = planner_dir(case), adapter.reference_dir(case)
    fp32 = _snap(ref_dir, 0, _serial_file(ref_dir, 0))
    amp = _snap(amp_dir, 0, _serial_file(amp_dir, 0))
    return adapter, case, amp_dir, ref_dir, fp32, amp


def _check(fp32, amp):
    return check_serial("test", 0, fp32, amp, "bfloat16", "O1")


def test_amp_plan_is_the_float32_plan_rounded_where_the_lists_say(planned):
    adapter, case, amp_dir, ref_dir, fp32, amp = planned
    assert adapter.handles(case) and passes.get("planner").handles(case)
    casts = [op for op in amp.ops if op.type == "pd_op.cast"]
    assert casts and not [op for op in fp32.ops if op.type == "pd_op.cast"]
    got = adapter.whole_application(case, numeric=True)
    verdicts = {c.name: c.verdict for c in got["checks"]}
    assert verdicts == {"fired": Verdict.EQUIVALENT, "pir amp rounding": Verdict.EQUIVALENT,
                        "pir amp rounding run": Verdict.EQUIVALENT}, got["checks"]
    assert got["fired"] == {0: True}
    value = next(c for c in got["checks"] if c.name == "pir amp rounding")
    assert value.details["low_ops"] == ["matmul", "matmul_grad"]
    assert value.details["unpaired_amp_types"] == ["pd_op.cast"]


def _consumer(snap, name):
    return next(op for op in snap.ops if any(name in ns for ns in op.inputs.values()))


def _first_cast_into(snap, op_type, slot):
    """The first bfloat16 cast whose result ``op_type`` reads as ``slot``."""
    for op in snap.ops:
        if op.type == "pd_op.cast" and op.attrs.get("dtype") == "bfloat16":
            out = op.outputs["out"][0]
            user = _consumer(snap, out)
            if user.type == op_type and out in user.inputs.get(slot, []):
                return op, user
    raise AssertionError(f"no bfloat16 cast into {op_type}.{slot}")


def _without(snap, cast):
    """``snap`` with ``cast`` removed, its readers reading its input."""
    snap = copy.deepcopy(snap)
    src, out = cast.inputs["x"][0], cast.outputs["out"][0]
    for op in snap.ops:
        for slot, ns in op.inputs.items():
            op.inputs[slot] = [src if n == out else n for n in ns]
    return snap.with_ops([op for op in snap.ops if op.idx != cast.idx])


def test_a_removed_cast_is_refuted_at_its_reader(planned):
    *_, fp32, amp = planned
    cast, mm = _first_cast_into(amp, "pd_op.matmul", "y")
    res = _check(fp32, _without(amp, cast))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    cex = res.counterexample
    assert (cex["op_type"], cex["slot"], cex["var"]) == ("pd_op.matmul", "y", cast.inputs["x"][0])
    assert cex["expected"].startswith("round_bfloat16(") and "round_" not in cex["found"]
    assert cex["witness"]["expected"].startswith("round_bfloat16(x)")


def test_a_cast_to_another_dtype_is_refuted(planned):
    *_, fp32, amp = planned
    cast, _ = _first_cast_into(amp, "pd_op.matmul", "x")
    broken = copy.deepcopy(amp)
    op = next(o for o in broken.ops if o.idx == cast.idx)
    op.attrs["dtype"] = "float16"
    broken.vars[op.outputs["out"][0]].dtype = "float16"
    res = _check(fp32, broken)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    cex = res.counterexample
    assert (cex["op_type"], cex["slot"]) == ("pd_op.matmul", "x")
    assert cex["found"].startswith("round_float16(") and cex["expected"].startswith(
        "round_bfloat16(")
    assert "input" in cex["witness"]  # a concrete value the two roundings differ on


def test_a_moved_cast_is_refuted_where_it_went_missing(planned):
    """The weight's cast moved to the bias of the add after the matmul: the
    matmul reads an unrounded weight (refuted there), the add a rounded bias."""
    *_, fp32, amp = planned
    cast, mm = _first_cast_into(amp, "pd_op.matmul", "y")
    broken = _without(amp, cast)
    add = next(o for o in broken.ops if o.type == "pd_op.add" and o.idx > mm.idx)
    moved = copy.deepcopy(cast)
    bias = add.inputs["y"][0]
    moved.inputs = {"x": [bias]}
    add.inputs["y"] = [moved.outputs["out"][0]]
    broken.vars[moved.outputs["out"][0]].shape = list(broken.vars[bias].shape)
    ops = list(broken.ops)
    ops.insert(ops.index(add), moved)
    res = _check(fp32, broken.with_ops(ops))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert (res.counterexample["op_type"], res.counterexample["slot"]) == ("pd_op.matmul", "y")
    # with the matmul's cast kept, the extra rounding of the bias is refuted at the add
    extra = copy.deepcopy(amp)
    ops = list(extra.ops)
    add2 = next(o for o in ops if o.type == "pd_op.add" and o.idx > mm.idx)
    more = copy.deepcopy(moved)
    more.outputs = {"out": ["%bias_bf16"]}
    extra.vars["%bias_bf16"] = copy.deepcopy(broken.vars[moved.outputs["out"][0]])
    add2.inputs["y"] = ["%bias_bf16"]
    ops.insert(ops.index(add2), more)
    res = _check(fp32, extra.with_ops(ops))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    cex = res.counterexample
    assert (cex["op_type"], cex["slot"], cex["var"]) == ("pd_op.add", "y", "%bias_bf16")
    assert cex["found"].startswith("round_bfloat16(") and cex["expected_precision"] == "float32"


def test_a_scaled_loss_seed_is_refuted(planned):
    """A loss scale nobody unscales (bfloat16 has none): the backward's seed
    ``full_like(loss, S)`` with S = 2^15 is refuted where it is read."""
    *_, fp32, amp = planned
    broken = copy.deepcopy(amp)
    seed = next(o for o in broken.ops if o.type == "pd_op.full_like")
    full = next(o for o in broken.ops if seed.inputs["value"][0] in o.outputs.get("out", []))
    full.attrs["value"] = 32768.0
    res = _check(fp32, broken)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["op_type"] == "pd_op.full_like"
    assert res.counterexample["slot"] == "value"


def _scaled_seed_dir(amp_dir: Path, out: Path, factor: float) -> Path:
    """A copy of the AMP plan's rank 0 whose serial program seeds the backward
    with ``factor`` instead of 1 (the same value names)."""
    import paddle

    from verify.ir.pir_snapshot import export_programs, import_programs, value_names

    shutil.copytree(amp_dir / "rank0", out)
    data = json.loads((out / "serial.json").read_text())
    data["main"], data["startup"] = data["main"].encode(), data["startup"].encode()
    with paddle.pir_utils.IrGuard():
        main, startup, _ = import_programs(data)
        seed = next(op for op in main.global_block().ops if op.name() == "pd_op.full_like")
        old = seed.operand_source(1).get_defining_op()
        with paddle.static.program_guard(main, startup):
            paddle.pir.set_insertion_point(old)
            new = paddle.full([1], factor, "float32")
        seed.operand(1).set_source(new)
        new.get_defining_op().op_role = old.op_role
        old.erase()
        exported = export_programs(main, startup, value_names(main))
    (out / "serial.json").write_text(json.dumps({
        "main": exported["main"].decode(), "startup": exported["startup"].decode(),
        "names": exported["names"], "counter": exported["counter"],
        "attrs": exported["attrs"]}))
    return out


def test_the_run_refutes_a_scaled_loss_seed(planned, tmp_path):
    from verify.numeric.pir_amp_runs import check
    from verify.value.pir_amp_rounding import rounding_depths

    adapter, case, amp_dir, ref_dir, fp32, _ = planned
    depths = rounding_depths(fp32, "bfloat16")
    types = {op.type for op in fp32.ops}
    same = check("test", 0, ref_dir / "rank0", _scaled_seed_dir(amp_dir, tmp_path / "one", 1.0),
                 "bfloat16", depths, types)
    assert same.verdict == Verdict.EQUIVALENT, same.message  # the edit alone changes nothing
    res = check("test", 0, ref_dir / "rank0", _scaled_seed_dir(amp_dir, tmp_path / "two", 2.0),
                "bfloat16", depths, types)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["value"].startswith(("grad of", "param of"))
    assert abs(res.counterexample["candidate"]) > abs(res.counterexample["reference"])


# -- plans made with Paddle's AMP lists edited at plan time ----------------------
def _plan_with_lists(tmp_path, edit: str, base: str = "planner_amp_mlp.py"):
    """The model ``base`` (the case's by default) planned with AMP and an
    edit of Paddle's ``amp_lists`` made in the planning process (a test-time
    edit: the installed lists, which the check reads, are untouched)."""
    from cases.planner_models import plan_model

    tmp_path.mkdir(parents=True, exist_ok=True)
    model = tmp_path / "amp_edited.py"
    model.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(EXAMPLES)!r})\n"
        "from amp_of import with_amp\n"
        f"with_amp({base!r}, globals(), dtype='bfloat16', level='O1')\n"
        "import paddle.amp.amp_lists as lists\n" + edit + "\n")
    out = plan_model(model, [0], tmp_path / "plan", "amp_edited")
    return _snap(out, 0, _serial_file(out, 0))


def test_plans_with_edited_lists_are_refuted(planned, tmp_path):
    adapter, case, *_, fp32, amp = planned
    # the PIR matmul is looked up by its legacy name, matmul_v2 (amp_name)
    no_matmul = _plan_with_lists(tmp_path / "a", "lists.BF16_WHITE_LIST.discard('matmul_v2')")
    res = _check(fp32, no_matmul)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert (res.counterexample["op_type"], res.counterexample["slot"]) == ("pd_op.matmul", "x")
    assert res.counterexample["expected_precision"] == "bfloat16"
    # the contract: the pattern (a white-list matmul) present and nothing rewritten
    fired = adapter.amp_fired_check(case, 0, fp32, no_matmul)
    assert fired.verdict == Verdict.NOT_APPLIED and fired.name == "fired", fired.message
    assert adapter.amp_fired_check(case, 0, fp32, amp).verdict == Verdict.EQUIVALENT
    tanh_low = _plan_with_lists(tmp_path / "b", "lists.BF16_WHITE_LIST.add('tanh')")
    res = _check(fp32, tanh_low)
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    cex = res.counterexample
    assert cex["op_type"] == "pd_op.tanh" and cex["expected_precision"] == "float32"
    assert cex["found"].startswith("round_bfloat16(")


# -- left alone: a model with no op on the white list --------------------------
NO_WHITE = "planner_amp_bf16_no_white"


def test_a_plan_with_no_white_op_is_left_alone():
    """``planner_amp_bf16_no_white`` (layer norm, tanh, elementwise scale and
    shift, a mean: nothing on the bfloat16 white list) planned with AMP on:
    the AMP serial program holds no cast and no bfloat16 value, the contract
    says left alone, the rounding relation holds with no rounding, and the
    engine counts the application LEFT_ALONE."""
    from verify.engine.application import run_application
    from verify.value.pir_amp_rounding import amp_rewrites, low_dtype

    adapter, case = passes.get("pir_amp"), cases.all_cases()[NO_WHITE]
    assert adapter.handles(case) and case.expect["pir_amp"].fires is False
    amp_dir, ref_dir = planner_dir(case), adapter.reference_dir(case)
    fp32 = _snap(ref_dir, 0, _serial_file(ref_dir, 0))
    amp = _snap(amp_dir, 0, _serial_file(amp_dir, 0))
    assert not adapter.pattern_present(fp32) and "pd_op.tanh" in {o.type for o in fp32.ops}
    assert not [o for o in amp.ops if o.type == "pd_op.cast"] and low_dtype(amp) is None
    assert amp_rewrites(fp32, amp) == []
    got = adapter.whole_application(case, numeric=False)
    verdicts = {c.name: c.verdict for c in got["checks"]}
    assert verdicts == {"left alone": Verdict.EQUIVALENT,
                        "pir amp rounding": Verdict.EQUIVALENT}, got["checks"]
    value = next(c for c in got["checks"] if c.name == "pir amp rounding")
    assert value.details["low_ops"] == [] and value.details["rounded_inputs"] == 0
    assert value.details["unpaired_amp_types"] == [] and got["fired"] == {0: False}
    app = run_application(adapter, case)
    assert app.verdict == Verdict.EQUIVALENT and app.left_alone and app.fired_ranks == []


def test_an_amp_build_that_fires_without_the_pattern_is_caught(tmp_path):
    """The broken twin: the same model planned with ``tanh`` put on Paddle's
    bfloat16 white list at plan time (the installed lists, which the check
    reads, have no op of this model): the build casts around tanh, and the
    contract refutes it (CONTRACT_BROKEN at the first cast it added), as
    does the rounding relation (tanh rounded where the lists say float32)."""
    adapter, case = passes.get("pir_amp"), cases.all_cases()[NO_WHITE]
    ref_dir = adapter.reference_dir(case)
    fp32 = _snap(ref_dir, 0, _serial_file(ref_dir, 0))
    tanh_low = _plan_with_lists(tmp_path, "lists.BF16_WHITE_LIST.add('tanh')",
                                base="planner_amp_no_white.py")
    res = adapter.amp_fired_check(case, 0, fp32, tanh_low)
    assert res.verdict == Verdict.CONTRACT_BROKEN and res.name == "left alone", res.message
    cex = res.counterexample
    first = next(o for o in tanh_low.ops if o.type == "pd_op.cast")
    assert (cex["op_index"], cex["op_type"]) == (first.idx, "pd_op.cast")
    assert "no counterpart in the float32 program" in cex["why"]
    value = _check(fp32, tanh_low)
    assert value.verdict == Verdict.NOT_EQUIVALENT, value.message
    assert value.counterexample["op_type"] == "pd_op.tanh"
    assert value.counterexample["expected_precision"] == "float32"


# -- what does not work on a CPU build (docs/passes.md) --------------------------
def _plan_text(tmp_path, body: str):
    """Plan a model file ``body`` on one rank; ``(folder or None, stderr)``."""
    import subprocess

    from verify.plan import pir_rank

    model = tmp_path / "m.py"
    model.write_text(f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\n" + body)
    out = tmp_path / "rank0"
    p = subprocess.run(pir_rank.command(0, str(model), [0], out), cwd=str(ROOT),
                       env=pir_rank.plan_env(0, 1, ROOT), capture_output=True, text=True,
                       timeout=300)
    return (out if p.returncode == 0 else None), p.stderr


def test_on_cpu_auto_cast_does_nothing_without_the_gpu_state(tmp_path):
    folder, err = _plan_text(tmp_path, (
        "from amp_of import with_amp\n"
        "with_amp('planner_amp_mlp.py', globals(), dtype='bfloat16', cpu_guard=False)\n"))
    assert folder is not None, err
    assert ("amp_guard can only be enabled on CUDAPlace, XPUPlace, and CustomPlace, "
            "current place is Place(cpu), so it makes no effect.") in err
    serial = _snap(folder.parent, 0, _serial_file(folder.parent, 0))
    assert not [op for op in serial.ops if op.type == "pd_op.cast"]


def test_float16_does_not_build_on_cpu(tmp_path):
    folder, err = _plan_text(tmp_path, (
        "from amp_of import with_amp\n"
        "with_amp('planner_amp_mlp.py', globals(), dtype='float16')\n"))
    assert folder is None
    assert ("Check data type error for op: matmul, input: y, y.dtype: float16, and "
            "expected_dtype: bfloat16, complex128, complex64, float32, float64") in err


def test_bfloat16_matmul_grad_without_x_grad_dies_on_cpu(tmp_path):
    """3.3.1's oneDNN bfloat16 ``matmul_grad`` dies (SIGSEGV) when nothing
    wants its ``x_grad`` (a matmul of a feed)."""
    import subprocess
    import sys

    folder, err = _plan_text(tmp_path, (
        "import paddle\nfrom paddle import nn\nfrom amp_of import with_amp\n"
        "with_amp('planner_amp_mlp.py', globals(), dtype='bfloat16')\n"
        "class M(nn.Layer):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.a = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        return self.a(x)\n"
        "build_model = lambda mesh: M()\n"))
    assert folder is not None, err
    code = ("import sys; from verify.numeric.pir_amp_runs import run_pair; "
            f"run_pair({str(folder)!r}, {str(folder)!r})")
    p = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout + p.stderr
    assert p.returncode == -11, (p.returncode, out[-2000:])  # SIGSEGV
    assert "MatmulGradKernel<phi::dtype::bfloat16, phi::OneDNNContext>" in out, out[-2000:]


def _bf16_as_f32(a):
    import numpy as np

    a = np.asarray(a)
    return (a.astype(np.uint32) << 16).view(np.float32) if a.dtype == np.uint16 else a


def test_o2_master_weights_are_not_updated_on_cpu(tmp_path):
    """O2 as a GPU user sets it up (``paddle.amp.decorate`` run as on a GPU,
    ``examples/amp_of.py``): the parameters are bfloat16, each ``sgd_`` has
    ``multi_precision`` and a float32 master copy.  On CPU the update goes to
    the bfloat16 parameter and the master copy stays where the startup put it
    (3.3.1's CPU SGD kernel does not use ``master_param``)."""
    import numpy as np
    import paddle

    from verify.plan.stages import read_serial

    folder, err = _plan_text(tmp_path, (
        "from amp_of import with_amp\n"
        "with_amp('planner_amp_mlp.py', globals(), dtype='bfloat16', level='O2', "
        "decorate=True)\n"))
    assert folder is not None, err
    main, startup, _ = read_serial(folder)
    with paddle.pir_utils.IrGuard():
        ops = main.global_block().ops
        params = {op.attrs()["parameter_name"]: str(op.result(0).dtype) for op in ops
                  if op.name() == "builtin.parameter"}
        assert set(params.values()) == {"paddle.bfloat16"}, params
        sgd = [op for op in ops if op.name() == "pd_op.sgd_"]
        assert len(sgd) == len(params) and all(op.attrs()["multi_precision"] for op in sgd)
        masters = {op.operand_source(0).get_defining_op().attrs()["parameter_name"]:
                   op.operand_source(3).get_defining_op().attrs()["name"] for op in sgd}
        assert all(m.endswith("_fp32_master_0") for m in masters.values())
        scope, exe = paddle.static.Scope(), paddle.static.Executor(paddle.CPUPlace())
        rng = np.random.default_rng(0)
        with paddle.static.scope_guard(scope):
            exe.run(startup)
            before = {m: np.array(scope.find_var(m).get_tensor()).copy()
                      for m in masters.values()}
            feed = {n: rng.standard_normal((2, 4, 8)).astype("float32")
                    for n in ("input0", "label0")}
            grads = exe.run(main, feed=feed, fetch_list=[op.operand_source(2) for op in sgd])
            moved = []
            for op, g in zip(sgd, grads):
                p = op.operand_source(0).get_defining_op().attrs()["parameter_name"]
                g = _bf16_as_f32(g)
                after = np.array(scope.find_var(masters[p]).get_tensor())
                new_p = _bf16_as_f32(np.array(scope.find_var(p).get_tensor()))
                if np.abs(g).max() > 0:  # a parameter the step moved
                    moved.append(p)
                    assert np.array_equal(after, before[masters[p]]), p  # master left behind
                    assert np.allclose(new_p, -0.1 * g, rtol=2 ** -7, atol=0)  # param updated
    assert moved  # the bias of the last linear gets a gradient from zero weights


# -- the planner relation of an AMP plan: the rounding tolerance ------------------
def test_planner_relation_of_a_tp2_amp_plan_uses_the_rounding_tolerance():
    """On TP2 the row-parallel bfloat16 matmul rounds each partial sum where
    the serial program rounds the whole: the ranks differ from the serial run
    by bfloat16 roundings, beyond float32's tolerance and within the rounding
    tolerance (``planner_runs.relate_value``'s ``rounding``).  That tolerance
    still refutes a rank whose gradient is off by a quarter."""
    import numpy as np

    from passes.planner import STEPS, _run_memo, amp_roundings, relation_run
    from verify.numeric import planner_runs

    case = cases.all_cases()["planner_amp_bf16_tp2"]
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    got = relation_run(case, folder, records, [])
    assert {c.verdict for c in got} == {Verdict.EQUIVALENT}, [c.message for c in got]
    serial_rel = records[0]["serial_relation"]
    rank_rels = {r: records[r]["relation"] for r in case.ranks}
    final_ops = {r: records[r]["final_ops"] for r in case.ranks}
    runs = _run_memo(folder, case.ranks, 0, STEPS).load()
    if runs is None:
        pytest.skip("the relation's runs were not memoized (VERIFY_PLANNER_RUN_MEMO=0)")
    serial_out, rank_outs = runs
    notes = []
    roundings = amp_roundings(folder, 0, records[0], serial_rel, notes)
    assert roundings and {d for d, _ in roundings.values()} == {"bfloat16"}
    assert "computes in bfloat16" in notes[0]

    def judge(outs, rnd):
        return planner_runs.compare_runs("t", serial_rel, rank_rels, final_ops, serial_out,
                                         outs, STEPS, roundings=rnd)

    assert {c.verdict for c in judge(rank_outs, roundings)} == {Verdict.EQUIVALENT}
    # float32's tolerance calls the bfloat16 roundings a difference
    assert Verdict.NOT_EQUIVALENT in {c.verdict for c in judge(rank_outs, {})}
    # a gradient off by a quarter on rank 1 is refuted under the rounding tolerance
    p = next(n for n, v in rank_rels[1]["params"].items()
             if np.abs(np.asarray(rank_outs[1][0][v["grad"]])).max() > 0)
    gname = rank_rels[1]["params"][p]["grad"]
    broken = {r: [dict(step) for step in outs] for r, outs in rank_outs.items()}
    for step in broken[1]:
        step[gname] = np.asarray(step[gname]) * 1.25
    res = {c.rank: c for c in judge(broken, roundings)}
    assert res[1].verdict == Verdict.NOT_EQUIVALENT, res[1].message
    assert res[1].counterexample["value"] == f"{p}@GRAD"


def test_zoo_llama_with_bfloat16_amp_does_not_build_on_cpu(request, tmp_path):
    """``examples/zoo/llama_amp_bf16.py`` (the zoo's LLaMA, keyed plan, AMP
    bfloat16 O1 as on a GPU): the build stops at the MLP's ``silu``, which
    reads the bfloat16 result of the gate projection (promoted: both its
    inputs are low) and has no bfloat16 CPU kernel.  A zoo model beyond the
    two the tests plan: run with ``--zoo all``."""
    import subprocess

    from cases import zoo
    from verify.plan import pir_rank

    if zoo.UNAVAILABLE:
        pytest.skip(f"zoo: {zoo.UNAVAILABLE}")
    if request.config.getoption("verify_zoo", default="sample") != "all":
        pytest.skip("a zoo model beyond zoo.TEST_PLANNED: run with --zoo all")
    p = subprocess.run(pir_rank.command(0, str(EXAMPLES / "zoo" / "llama_amp_bf16.py"), [0],
                                        tmp_path / "rank0"),
                       cwd=str(ROOT), env=pir_rank.plan_env(0, 1, ROOT), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode != 0
    assert ("Check data type error for op: silu, input: x, x.dtype: bfloat16, and "
            "expected_dtype: complex128, complex64, float32, float64") in p.stderr


def test_the_planner_relation_of_the_amp_plan_is_proved():
    """The planner's relation proof of ``planner_amp_bf16`` runs through
    ``pd_op.tanh`` (uninterpreted) and ``pd_op.tanh_grad`` (``dout (1 -
    out^2)``): proved at the real shapes over the reals, the casts on both
    sides the same kernels."""
    from passes.planner import relation_proof

    case = cases.all_cases()[CASE]
    folder = planner_dir(case)
    records = {r: json.loads((folder / f"rank{r}" / "planner.json").read_text())
               for r in case.ranks}
    got = relation_proof(case, folder, records, [])
    assert [c.verdict for c in got] == [Verdict.EQUIVALENT], [c.message for c in got]
    assert "PROVED at the real shapes" in got[0].message


# -- a model's own auto_cast(enable=False) region ------------------------------
_REGION_MODEL = '''
import sys
sys.path.insert(0, {examples!r})
import paddle
import planner_amp_mlp as base
from planner_amp_mlp import loss, optimizer, inputs, labels, BATCH


class RegionMLP(base.SmoothMLP):
    """The down projection built with AMP off, as paddleformers' rotary
    embedding ("force float32")."""

    def forward(self, x):
        h = paddle.tanh(self.up(self.norm(x)))
        with paddle.amp.auto_cast(enable=False):
            return self.down(h.astype("float32"))


def build_model(mesh):
    return RegionMLP()
'''


@pytest.fixture(scope="module")
def region_plans(tmp_path_factory):
    """The float32 and the AMP serial snapshots of ``RegionMLP``."""
    from cases.planner_models import plan_model

    tmp = tmp_path_factory.mktemp("amp_region")
    (tmp / "region_mlp.py").write_text(_REGION_MODEL.format(examples=str(EXAMPLES)))
    (tmp / "region_amp.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\nfrom amp_of import with_amp\n"
        f"with_amp({str(tmp / 'region_mlp.py')!r}, globals(), dtype='bfloat16', level='O1')\n")
    snaps = []
    for name in ("region_mlp", "region_amp"):
        out = plan_model(tmp / f"{name}.py", [0], tmp / name, name)
        snaps.append(_snap(out, 0, _serial_file(out, 0)))
    return snaps


def _matmuls(snap):
    return [op for op in snap.ops if op.type == "pd_op.matmul"]


def _marked(snap, op_idx, on: bool):
    """``snap`` with the AMP-off mark of op ``op_idx`` set or removed."""
    from verify.value.pir_amp_rounding import AMP_OFF

    out = copy.deepcopy(snap)
    op = next(o for o in out.ops if o.idx == op_idx)
    if on:
        op.attrs[AMP_OFF] = True
    else:
        op.attrs.pop(AMP_OFF, None)
    return out


def test_an_amp_off_region_of_the_model_computes_in_float32(region_plans):
    """The region's matmul is marked at plan time (``examples/amp_of.py``) and
    kept in float32: the relation holds; with the mark taken away the same
    program is refuted at that matmul (the mark, not a name, is what the
    check reads)."""
    from verify.value.pir_amp_rounding import AMP_OFF

    fp32, amp = region_plans
    up, down = _matmuls(amp)[:2]
    assert not up.attrs.get(AMP_OFF) and down.attrs.get(AMP_OFF)
    res = _check(fp32, amp)
    assert res.verdict == Verdict.EQUIVALENT, res.message
    res = _check(fp32, _marked(amp, down.idx, on=False))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["op_index"] == down.idx
    assert res.counterexample["expected_precision"] == "bfloat16"


def test_a_low_op_marked_amp_off_is_refuted_twin(region_plans):
    """Broken twin: the up projection (computed in bfloat16) marked as built
    with AMP off: the relation expects float32 there and is refuted at it."""
    fp32, amp = region_plans
    up = _matmuls(amp)[0]
    res = _check(fp32, _marked(amp, up.idx, on=True))
    assert res.verdict == Verdict.NOT_EQUIVALENT, res.message
    assert res.counterexample["op_index"] == up.idx
    assert res.counterexample["expected_precision"] == "float32"
