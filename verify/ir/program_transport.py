"""Legacy programs across a process boundary: the rewritten programs an
isolation worker sends back, rebuilt here (serialized descs drop the stream
attrs and the live params/grads pairs, so they travel beside them)."""
from __future__ import annotations


def rebuild_legacy(fresh, answer):
    """The rewritten legacy RankProgram from a worker's answer (serialized
    descs, stream attrs, params/grads by name) and a fresh build of the rank."""
    import dataclasses

    from verify.ir.legacy_ir import paddle_module

    paddle = paddle_module()
    main = paddle.static.Program.parse_from_string(answer["main"])
    startup = paddle.static.Program.parse_from_string(answer["startup"])
    for which, prog in (("main", main), ("startup", startup)):
        ops = prog.global_block().ops
        for idx, (stream, priority) in answer["streams"].get(which, {}).items():
            if idx < len(ops):
                attr = ops[idx].desc.dist_attr
                attr.execution_stream = stream
                attr.stream_priority = priority
                ops[idx].desc.dist_attr = attr
    block = main.global_block()
    pairs = [(block.var(p), block.var(g)) for p, g in answer["params_grads"]
             if block.has_var(p) and block.has_var(g)]
    return dataclasses.replace(fresh, main=main, startup=startup, params_grads=pairs)
