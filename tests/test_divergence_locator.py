"""The first-divergence locator (verify/numeric/divergence.py, through the
numeric relation's ``planner_runs.first_divergence``) relates each rank value
to the serial value at the same point of the step, and blames the stage that
made what the divergent op reads, in-place writes resolved.

Small program pairs as plain records (``final_ops``) and snapshots, the runs'
outputs as arrays: no planner, no executor.  Each broken pair is one the old
locator (operands as recorded, every counterpart fetched at the step's end)
named the wrong op or stage for; each twin keeps a real divergence where it is.
"""
import numpy as np

from verify.ir.snapshot import Op, ProgramSnapshot
from verify.numeric.divergence import START, counterparts_at, first_divergent_op, program_reads
from verify.numeric.planner_runs import first_divergence

R = {"dims_mapping": [-1], "mesh_shape": [1], "partial": {}, "process_ids": [0]}
ACC = "w@GRAD@MERGE"  # a gradient merge's accumulator: a keyword block argument


def rec(typ, origin, results, operands, serial=None):
    return {"type": typ, "origin": origin, "serial_op": None, "results": results,
            "placements": [R] * len(results), "serial": serial, "operands": operands}


def snap(final_ops, inputs, inplace):
    """The plain snapshot of ``final_ops``: per op its named inputs (a keyword
    block argument by its keyword, which ``final_ops`` cannot name)."""
    ops = [Op(i, r["type"], ins, {f"out{k}": [n] for k, n in enumerate(r["results"]) if n})
           for i, (r, ins) in enumerate(zip(final_ops, inputs))]
    return ProgramSnapshot(ops, {}, meta={"ir": "pir", "inplace": inplace,
                                          "block_kwargs": [ACC]})


def gm_program(scale_first: bool):
    """Gradient merge of a Momentum-like optimizer (avg): the micro-step's
    gradient added into the accumulator in place, the optimizer reading the
    accumulator by its keyword, the 1/k ``scale_`` after it (3.3.1's defect)
    or, mended, before it."""
    ops = [rec("builtin.parameter", "serial", ["w"], [], ["w"]),
           rec("pd_op.data", "serial", ["x"], [], ["x"]),
           rec("pd_op.multiply", "serial", ["%0"], ["x", "w"], ["%g"]),
           rec("pd_op.add_", "gradient_merge", ["%1"], [None, "%0"])]
    inputs = [{}, {}, {"x": ["x"], "y": ["w"]}, {"x": [ACC], "y": ["%0"]}]
    opt = rec("pd_op.sgd_", "serial", ["%2"], ["w", None], ["%w1"])
    scale = rec("pd_op.scale_", "gradient_merge", ["%3"], [None])
    if scale_first:
        ops += [scale, opt]
        inputs += [{"x": [ACC]}, {"param": ["w"], "grad": [ACC]}]
    else:
        ops += [opt, scale]
        inputs += [{"param": ["w"], "grad": [ACC]}, {"x": [ACC]}]
    inplace = {"%1": ACC, "%2": "w", "%3": ACC}
    return ops, snap(ops, inputs, inplace)


def gm_runs(rank_update):
    """One optimizer step of 2 micro-steps: the serial update by the mean of
    the micro-gradients, the rank's by ``rank_update`` (values as made)."""
    w, g, lr = np.array([1.0, 2.0], "float32"), np.array([0.5, -1.0], "float32"), 0.1
    serial = [{"%g": g, "%w1": w - lr * g, "w@micro0": w}]
    rank = {0: [{"%0": g, "%2": w - lr * rank_update(g)}]}
    return serial, rank


def test_gm_avg_defect_blames_the_gradient_merge_not_partition():
    ops, program = gm_program(scale_first=False)
    serial, rank = gm_runs(lambda g: 2 * g)  # the sum of 2 equal micro-gradients
    loc = first_divergence(0, 0, ops, serial, rank, None, 8, program, micro_steps=2)
    assert (loc["op_index"], loc["op_type"], loc["stage"]) == (4, "pd_op.sgd_", "gradient_merge")
    # the accumulator as the optimizer reads it: the add_ of the micro-step
    assert (loc["stage_op"]["op_index"], loc["stage_op"]["op_type"]) == (3, "pd_op.add_")
    # the old locator: operands as recorded (the keyword argument unnamed) -> partition
    old = first_divergence(0, 0, ops, serial, rank, None, 8, None, micro_steps=2)
    assert old["stage"] == "partition"


def test_gm_mended_scale_before_the_optimizer_relates():
    ops, program = gm_program(scale_first=True)
    serial, rank = gm_runs(lambda g: g)  # the mean: what avg asks for
    assert program_reads(ops, program)["reads"][5] == ["w", "%3"]  # the scaled accumulator
    assert first_divergence(0, 0, ops, serial, rank, None, 8, program, micro_steps=2) is None


def alias_program():
    """A reshard's ``share_data_`` alias of a parameter read by the forward,
    the optimizer then updating the parameter through the alias in place;
    ``relu`` is carried over (partition gave its local computation)."""
    ops = [rec("builtin.parameter", "serial", ["w"], [], ["w"]),
           rec("pd_op.data", "serial", ["x"], [], ["x"]),
           rec("pd_op.share_data_", "reshard", ["%a"], ["w"]),
           rec("pd_op.multiply", "serial", ["%0"], ["x", "%a"], ["%0"]),
           rec("pd_op.relu", "serial", ["%1"], ["%0"], ["%1"]),
           rec("pd_op.sgd_", "serial", ["%2"], ["%a", None], ["%w1"])]
    inputs = [{}, {}, {"x": ["w"]}, {"x": ["x"], "y": ["%a"]}, {"x": ["%0"]},
              {"param": ["%a"], "grad": ["%0"]}]
    return ops, snap(ops, inputs, {"%a": "w", "%2": "%a"})


def alias_runs(relu_wrong: bool, steps=1):
    w0, x = np.array([1.0, -2.0], "float32"), np.array([3.0, 1.0], "float32")
    serial, rank, w = [], {0: []}, w0
    for _ in range(steps):
        y = x * w
        r = np.maximum(y, 0)
        w1 = w - 0.1 * y
        # the serial run fetches the parameter after its update; the value as made
        # of each op; @micro0: the parameter before the update (a merged run's)
        serial.append({"w": w1, "%0": y, "%1": r, "%w1": w1, "w@micro0": w})
        rank[0].append({"%a": w, "%0": y, "%1": r + 1 if relu_wrong else r, "%2": w1})
        w = w1
    return serial, rank


def test_share_data_alias_compared_before_the_update_not_after():
    ops, program = alias_program()
    assert counterparts_at(ops, program)["%a"] == "w" + START
    serial, rank = alias_runs(relu_wrong=True)
    loc = first_divergence(0, 0, ops, serial, rank, None, 8, program, micro_steps=2)
    assert (loc["op_index"], loc["op_type"], loc["stage"]) == (4, "pd_op.relu", "partition")
    # without the snapshot the in-place writes are unknown: the alias (as made,
    # before the update) is not compared with the parameter fetched after it
    # (the locator once did, and blamed the reshard's share_data_)
    blind = first_divergence(0, 0, ops, serial, rank, None, 8, None, micro_steps=2)
    assert (blind["op_index"], blind["stage"]) == (4, "partition")
    assert "%a" not in counterparts_at(ops, None)


def test_share_data_alias_twin_without_a_divergence():
    ops, program = alias_program()
    serial, rank = alias_runs(relu_wrong=False)
    assert first_divergence(0, 0, ops, serial, rank, None, 8, program, micro_steps=2) is None


def test_plain_run_alias_fetched_after_its_update_is_left_unrelated():
    """A plain run fetches at the program's end: the alias then reads the
    updated buffer (not the value made), and at step 0 no start value is
    known; the alias is neither compared nor blamed, the real divergence is
    found (at step 1, from the previous step's parameter, too)."""
    ops, program = alias_program()
    assert program_reads(ops, program)["written_after"][2]
    serial, rank = alias_runs(relu_wrong=True, steps=2)
    for step in (0, 1):
        rank[0][step]["%a"] = serial[step]["w"]  # the buffer after the update
        loc = first_divergence(0, step, ops, serial, rank, None, 8, program)
        assert (loc["op_index"], loc["stage"]) == (4, "partition")


def test_a_reshard_piece_that_is_wrong_is_still_blamed_on_the_reshard():
    """Twin: a later stage's op that makes a wrong piece of what it stands for
    (here the parameter at the step's start) is the divergence."""
    ops, program = alias_program()
    serial, rank = alias_runs(relu_wrong=False)
    rank[0][0]["%a"] = rank[0][0]["%a"] * 2
    loc = first_divergence(0, 0, ops, serial, rank, None, 8, program, micro_steps=2)
    assert (loc["op_index"], loc["op_type"], loc["stage"]) == (2, "pd_op.share_data_", "reshard")


def test_a_read_not_seen_to_relate_is_blamed_before_one_that_relates():
    """The optimizer reads a reshard's alias of the parameter (related) and a
    gradient merge's accumulator (no serial value): the accumulator is blamed,
    whichever it reads first; a read seen to relate is still blamed when it is
    the only later stage's read (it may stand where another value belongs)."""
    ops, program = alias_program()
    ops = ops[:5] + [rec("pd_op.add_", "gradient_merge", ["%m"], [None, "%0"]),
                     rec("pd_op.sgd_", "serial", ["%2"], ["%a", None], ["%w1"])]
    inputs = [op.inputs for op in program.ops[:5]] + [{"x": [ACC], "y": ["%0"]}]
    for grad_first in (True, False):
        sgd = {"grad": [ACC], "param": ["%a"]} if grad_first else {"param": ["%a"], "grad": [ACC]}
        prog = snap(ops, inputs + [sgd], {"%a": "w", "%m": ACC, "%2": "%a"})

        def differs(res, ser, plc):
            return ("value", {}) if res == "%2" else None
        loc = first_divergent_op(ops, differs, prog)
        assert (loc["op_index"], loc["stage"], loc["stage_op"]["op_index"]) == \
            (6, "gradient_merge", 5)

    def relu_differs(answer_for_alias):
        def f(res, ser, plc):
            if res == "%a":
                return answer_for_alias
            return ("value", {}) if res == "%0" else None
        return f

    ops, program = alias_program()
    for answer in ("unknown", None):  # the multiply reads the alias: the reshard's
        assert first_divergent_op(ops, relu_differs(answer), program)["stage"] == "reshard"
