"""Legacy programs across a process boundary: the rewritten programs an
isolation worker sends back, rebuilt here (serialized descs drop the stream
attrs, Paddle's runtime-only "extra" attrs (``mkldnn_data_type``,
``use_quantizer``, ...), the vars' Python-side ``is_data`` flag (a feed)
and the live params/grads pairs, so they travel
beside them: ``dropped_attrs`` finds what a serialized desc lost,
``rebuild_legacy`` sets it again)."""
from __future__ import annotations

# AttrType name -> the OpDesc setter that writes a value of that type back
_SETTERS = {"BOOL": "_set_bool_attr", "BOOLS": "_set_bools_attr",
            "INT": "_set_int32_attr", "INTS": "_set_int32s_attr",
            "LONG": "_set_int64_attr", "LONGS": "_set_int64s_attr",
            "FLOAT": "_set_float32_attr", "FLOATS": "_set_float32s_attr",
            "FLOAT64": "_set_float64_attr", "FLOAT64S": "_set_float64s_attr",
            "STRING": "_set_str_attr", "STRINGS": "_set_strs_attr"}


def dropped_attrs(program, serialized: bytes) -> list:
    """Every attr an op of ``program`` has that the op parsed back from
    ``serialized`` (its ``desc.serialize_to_string()``) lacks or holds
    otherwise: ``[(block, op, name, type name, value)]``.  An attr of a
    type no setter writes back (a block, a var, a scalar) is not listed;
    ``rebuild_legacy`` then finds the ops unequal and says so."""
    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    back = paddle.static.Program.parse_from_string(serialized)
    out = []
    for b in range(program.desc.num_blocks()):
        mine, theirs = program.desc.block(b), back.desc.block(b)
        for i in range(mine.op_size()):
            a, z = mine.op(i), theirs.op(i)
            have = set(z.attr_names(True))
            for name in a.attr_names(True):
                kind = str(a.attr_type(name, True)).rsplit(".", 1)[-1]
                if kind not in _SETTERS:
                    continue
                value = a.attr(name, True)
                if name in have and z.attr(name, True) == value:
                    continue
                out.append((b, i, name, kind, value))
    return out


def export_legacy(rp) -> dict:
    """A legacy RankProgram's rewritten programs as they travel: each
    serialized desc, and beside it what it does not carry (each op's
    ``execution_stream`` and ``stream_priority``, every attr the desc loses,
    the vars flagged ``is_data``, ``params_grads`` by name); read back by
    :func:`rebuild_legacy`."""
    streams, sent, attrs, is_data = {}, {}, {}, {}
    for which, prog in (("main", rp.main), ("startup", rp.startup)):
        s = {}
        for i, op in enumerate(prog.global_block().ops):
            try:
                d = op.desc.dist_attr
                if d is not None and d.execution_stream and d.execution_stream != "default":
                    s[i] = (d.execution_stream, d.stream_priority)
            except Exception:
                pass
        streams[which] = s
        sent[which] = prog.desc.serialize_to_string()
        attrs[which] = dropped_attrs(prog, sent[which])
        is_data[which] = [v.name for v in prog.global_block().vars.values()
                          if getattr(v, "is_data", False)]
    return {"main": sent["main"], "startup": sent["startup"], "streams": streams,
            "attrs": attrs, "is_data": is_data,
            "params_grads": [(p.name, g.name) for p, g in rp.params_grads]}


def rebuild_legacy(fresh, answer):
    """The rewritten legacy RankProgram from a worker's answer (serialized
    descs, stream attrs, params/grads by name) and a fresh build of the rank."""
    import dataclasses

    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    main = paddle.static.Program.parse_from_string(answer["main"])
    startup = paddle.static.Program.parse_from_string(answer["startup"])
    for which, prog in (("main", main), ("startup", startup)):
        # what serialize_to_string dropped (extra attrs), as the pass left it
        dropped = {}
        for b, i, name, kind, value in answer.get("attrs", {}).get(which, ()):
            dropped.setdefault((b, i), []).append((name, kind, value))
        for (b, i), attrs in sorted(dropped.items()):
            op = prog.desc.block(b).op(i)
            had = set(op.attr_names(True))
            # an extra attr's setter writes only an attr the op has: the
            # checker adds them all at their defaults, then each is set,
            # and whatever else the checker added is taken away again
            op.check_attrs()
            for name, kind, value in attrs:
                if not (op.has_attr(name) and op.attr(name, True) == value):
                    getattr(op, _SETTERS[kind])(name, value)
            keep = had | {name for name, _, _ in attrs}
            for name in op.attr_names(True):
                if name not in keep:
                    op.remove_attr(name)
    for which, prog in (("main", main), ("startup", startup)):
        ops = prog.global_block().ops
        for idx, (stream, priority) in answer["streams"].get(which, {}).items():
            if idx < len(ops):
                attr = ops[idx].desc.dist_attr
                attr.execution_stream = stream
                attr.stream_priority = priority
                ops[idx].desc.dist_attr = attr
    for which, prog in (("main", main), ("startup", startup)):
        # a Python-side flag of the var (a feed's), not in its desc
        block = prog.global_block()
        for name in answer.get("is_data", {}).get(which, ()):
            if block.has_var(name):
                block.var(name).is_data = True
    block = main.global_block()
    pairs = [(block.var(p), block.var(g)) for p, g in answer["params_grads"]
             if block.has_var(p) and block.has_var(g)]
    return dataclasses.replace(fresh, main=main, startup=startup, params_grads=pairs)
