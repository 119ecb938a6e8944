"""Where the planner relation says a rank first parts from the serial program
(``verify/numeric/divergence.py``), on final programs written out by hand:
a later stage's copy of a parameter is not compared (the parameter is fetched
after the step's updates, the copy holds it before them), and a wrong piece a
chain of reshard ops made from nothing (3.3.1's r_to_p writes
``pd_op.full(0)`` in place of the value off global rank 0) is named by the op
the chain starts from, beside a twin where a reshard op's own wrong result is
still blamed on it."""
from __future__ import annotations

from verify.numeric.divergence import blamed_op_text, first_divergent_op

_PLC = {"process_ids": [1], "mesh_shape": [1], "dims_mapping": [-1], "partial": {}}


def _op(type_, operands, results, origin="serial", serial=None):
    return {"type": type_, "operands": operands, "results": results, "origin": origin,
            "serial": serial, "placements": [_PLC] * len(results)}


def _program():
    return [
        _op("builtin.parameter", [], ["b"], serial=["B"]),
        _op("pd_op.data", [], ["x"], serial=["X"]),
        _op("pd_op.share_data_", ["b"], ["%c"], origin="reshard"),  # the bias, copied
        _op("pd_op.full", [], ["%z"], origin="reshard"),  # r_to_p's zeros off rank 0
        _op("pd_op.all_reduce", ["%z"], ["%r"], origin="reshard"),
        _op("pd_op.slice", ["%r"], ["%s"], origin="reshard"),
        _op("pd_op.matmul_grad", ["x", "%s", "%c"], ["%g"], serial=["G"]),
    ]


def test_a_copy_of_an_updated_parameter_is_not_blamed_the_zero_fill_is():
    # the copy "differs" from the parameter as fetched after the update; the
    # gradient differs because it read the zeros
    wrong = {"%c", "%g"}
    loc = first_divergent_op(_program(), lambda res, ser, plc:
                             ("value", {}) if res in wrong else None)
    assert (loc["op_index"], loc["op_type"], loc["stage"]) == (6, "pd_op.matmul_grad",
                                                               "reshard"), loc
    assert blamed_op_text(loc["stage_op"]) == "pd_op.slice %s, from pd_op.full %z"


def test_a_reshard_op_whose_own_result_is_wrong_is_still_blamed():
    ops = _program()
    ops.insert(2, _op("pd_op.relu", ["x"], ["a"], serial=["A"]))
    ops.insert(3, _op("pd_op.all_gather", ["a"], ["%ag"], origin="reshard"))
    loc = first_divergent_op(ops, lambda res, ser, plc:
                             ("value", {}) if res in ("%ag", "%g") else None)
    assert (loc["op_index"], loc["op_type"], loc["serial_value"]) == \
        (3, "pd_op.all_gather", "A"), loc
    assert blamed_op_text(loc["stage_op"]) == "pd_op.all_gather %ag"
