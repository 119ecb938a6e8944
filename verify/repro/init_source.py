"""How a reproducer draws parameters as the suite's runs do, as source text it
embeds (a reproducer imports nothing of the suite).

``legacy_source()``: the suite's own reading and mapping of startup
initialisations (``verify/numeric/inputs.py``: ``startup_inits``,
``init_like``, ``init_changes``, ``describe_init_changes``), copied, so a
parameter the rewritten startup initialises differently gets what that
initialisation draws and the reproducer names the change (rank, parameter,
startup op, attrs).  ``pir_source()``: the same plus :func:`pir_startup_inits`,
which reads a live PIR startup program as ``inputs.snapshot_inits`` reads its
snapshot (``tests/test_repro_init.py`` checks they agree).
"""
from __future__ import annotations

import inspect

_PIR_NOISE = ("op_callstack", "op_dist_attr")


class _StartupOp:
    """One op of a live PIR startup program in the form
    ``snapshot_inits`` reads (type, attrs, idx, reads(), writes())."""

    def __init__(self, idx, op_type, attrs, reads, writes):
        self.idx, self.type, self.attrs = idx, op_type, attrs
        self._reads, self._writes = reads, writes

    def reads(self):
        return self._reads

    def writes(self):
        return self._writes


def _pir_plain(v):
    """An attr value as plain data (as the PIR snapshot records it)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_pir_plain(x) for x in v]
    s = str(v)
    return s.replace("paddle.", "") if s.startswith("paddle.") else s


def pir_startup_inits(startup) -> dict:
    """``{var: Init}`` of a live PIR startup program: the op computing the
    value each ``builtin.set_parameter`` / ``builtin.shadow_output`` stores,
    a ``pd_op.full``/``full_int_array`` operand's constant folded into the
    consumer's attrs as ``<slot>@value`` (``snapshot_inits``, which this
    calls, says the rest)."""
    names, consts, ops = {}, {}, []

    def name(value):  # a value by its defining op and result index (stable)
        op = value.get_defining_op()
        key = (op.id(), value.index()) if op is not None else ("arg", id(value))
        return names.setdefault(key, f"%{len(names)}")

    for idx, op in enumerate(startup.global_block().ops):
        raw = dict(op.attrs())
        attrs = {k: _pir_plain(v) for k, v in raw.items() if k not in _PIR_NOISE}
        n_in = op.num_operands()
        slots = ["operands"] * n_in
        if op.name().startswith("pd_op.") and not op.num_regions():
            got = list(op.get_input_names())
            slots = got if len(got) == n_in else slots
        reads = []
        for i, slot in enumerate(slots):
            src = op.operand_source(i)
            if not src.initialized():
                continue
            reads.append(name(src))
            if reads[-1] in consts:
                attrs[f"{slot}@value"] = consts[reads[-1]]
        writes = [name(op.result(i)) for i in range(op.num_results())
                  if op.result(i).initialized()]
        if op.name() in ("pd_op.full", "pd_op.full_int_array") and writes:
            consts[writes[0]] = _pir_plain(raw.get("value"))
        if op.name() == "builtin.set_parameter":
            writes = [str(raw.get("parameter_name"))]
        if op.name() == "builtin.shadow_output":
            writes = [str(raw.get("output_name"))]
        attrs["chunk_id"] = int(getattr(op, "chunk_id", -1))
        ops.append(_StartupOp(idx, op.name(), attrs, reads, writes))

    class _Snap:
        startup_ops = ops

    return snapshot_inits(_Snap)


def legacy_source() -> str:
    """The init functions of ``verify/numeric/inputs.py`` as source text."""
    from verify.numeric import inputs

    consts = [f"{n} = {getattr(inputs, n)!r}"
              for n in ("_ASIDE", "_UNIFORM", "_GAUSS", "_CONST", "_WRITE_BY_NAME")]
    fns = [inputs._rng, inputs.init_signature, inputs.startup_inits, inputs._f,
           inputs.init_like, inputs.Init, inputs._origin, inputs.snapshot_inits,
           inputs.init_changes, inputs.describe_init_changes]
    return "\n".join(consts) + "\n\n\n" + "\n\n".join(inspect.getsource(f) for f in fns)


def pir_source() -> str:
    """:func:`legacy_source` plus the live PIR startup reader."""
    fns = [_StartupOp, _pir_plain, pir_startup_inits]
    return legacy_source() + f"\n\n_PIR_NOISE = {_PIR_NOISE!r}\n\n\n" + \
        "\n\n".join(inspect.getsource(f) for f in fns)


def snapshot_inits(snap):  # the suite's, for pir_startup_inits in this process
    from verify.numeric.inputs import snapshot_inits as read

    return read(snap)
