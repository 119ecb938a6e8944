"""``verify/numeric/pir_execution.py``: a PIR program with ``pd_op.c_identity``
(no CPU kernel in 3.3.1) runs once translated, with the identity's value and
its result's name kept; untranslated, Paddle's executor refuses it (the twin)."""
import numpy as np
import pytest

from verify.numeric.pir_execution import translate_for_execution


def _program():
    import paddle

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle._C_ops.c_identity(x, 0, True, True)
        z = paddle.scale(y, 2.0)
    return main, startup, y, z


def _run(main, startup, fetch):
    import paddle

    exe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        exe.run(startup)
        return exe.run(main, feed={"x": np.arange(6, dtype="float32").reshape(2, 3)},
                       fetch_list=[fetch])[0]


def test_c_identity_runs_as_assign_in_place():
    import paddle

    with paddle.pir_utils.IrGuard():
        main, startup, y, z = _program()
        names = type("N", (), {"table": {(y.get_defining_op().id(), 0): "%7"}})()
        types = [op.name() for op in main.global_block().ops]
        assert translate_for_execution(main, names) == 1
        after = [op.name() for op in main.global_block().ops]
        i = types.index("pd_op.c_identity")
        assert after[i] == "pd_op.assign" and len(after) == len(types)
        assert list(names.table.values()) == ["%7"]
        new = main.global_block().ops[i]
        assert names.table == {(new.id(), 0): "%7"}
        got = _run(main, startup, z)
    assert np.array_equal(got, 2 * np.arange(6, dtype="float32").reshape(2, 3))


def test_untranslated_c_identity_has_no_cpu_kernel_twin():
    import paddle

    with paddle.pir_utils.IrGuard():
        main, startup, _, z = _program()
        with pytest.raises(Exception, match="c_identity"):
            _run(main, startup, z)
