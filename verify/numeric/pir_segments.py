"""A PIR program cut at its collectives into *segments*, each op run once.

``pir_ranks.py``'s prefix stages re-run every op before a collective once per
collective after it: quadratic in the number of collectives (a 4-rank
LLaMA with a sharded optimizer has 35, so each step ran the program about
18 times) and wrong for state, so a program updating a parameter before
its last collective was refused.  Here stage ``j`` holds only the ops between
collective ``j-1`` and collective ``j``; a value computed in an earlier
stage and read in this one is fetched by the stage that computes it and fed
here (a ``pd_op.data`` named ``__pir_v_<op>_<result>``), as a collective's
result already is.  Ops that only read the scope or make a constant
(``SOURCES``) are kept in every stage that reads them, so a parameter read
after an in-place update sees the update, as the unsplit program does.

The cut is refused (``plan`` gives a reason; the caller falls back to the
prefix stages) where feeding a copy could differ from the unsplit program:
a carried value that is not a dense tensor (a ``builtin.combine`` vector),
an op with nested blocks (their reads are not operands), and an in-place op
(its name ends in ``_``) reading a value that is not in the scope and that
a later segment reads too: that segment would get a copy made before the
write, or a re-made constant.  (A later reader in the same segment, or a
parameter or persistable state in the scope, sees the write as unsplit.)
"""
from __future__ import annotations

# ops that read nothing but the scope, the feeds or their attrs: re-made in
# each stage that reads them instead of being carried
SOURCES = frozenset({"builtin.parameter", "pd_op.data", "pd_op.full", "pd_op.full_int_array",
                     "builtin.constant"})


def _in_scope(op) -> bool:
    """A source whose value lives in the scope (an in-place write there is seen
    by every later reader)."""
    return op.name() == "builtin.parameter" or (
        op.name() == "pd_op.data" and getattr(op.result(0), "persistable", False))


def plan(main, cut_ops: list, watch_pos: list):
    """``(carried, None)`` or ``(None, reason)``: ``carried`` maps ``(op index,
    result index)`` of a value computed in one segment and read in a later
    one to the set of segments reading it; segment ``j`` is the ops after
    collective ``j-1`` up to collective ``j`` (which it fetches the input of),
    the last segment also fetches the watched values ``watch_pos``."""
    ops = list(main.global_block().ops)
    index = {op.id(): i for i, op in enumerate(ops)}
    cut_set = set(cut_ops)
    last = len(cut_ops)
    segs = segments_of(len(ops), cut_ops)

    for i, op in enumerate(ops):
        if op.num_regions() and list(op.blocks()):  # a lazy, always truthy sequence
            return None, f"op {i} ({op.name()}) has nested blocks"
    carried = {}
    watched = set(map(tuple, watch_pos))
    for i, op in enumerate(ops):
        if i in cut_set or op.name() in SOURCES:
            continue
        s = segs[i]
        for k in range(op.num_results()):
            v = op.result(k)
            readers = set()
            for u in v.all_used_ops():
                j = index.get(u.id())
                if j is None:
                    return None, f"a result of op {i} ({op.name()}) is read outside the block"
                readers.add(segs[j])
            if (i, k) in watched:
                readers.add(last)
            later = {r for r in readers if r > s}
            if not later:
                continue
            if not v.is_dense_tensor_type():
                return None, f"op {i} ({op.name()}) carries a non-tensor value across a collective"
            carried[(i, k)] = later
    for i, op in enumerate(ops):  # in-place writes a later segment would miss
        if i in cut_set or not op.name().endswith("_"):
            continue
        for w in op.operands_source():
            d = w.get_defining_op() if w.initialized() else None
            if d is None or _in_scope(d) or d.id() not in index:
                continue
            later = {segs[index[u.id()]] for u in w.all_used_ops() if u.id() in index}
            if any((index[d.id()], k) in watched and w.is_same(d.result(k))
                   for k in range(d.num_results())):
                later.add(last)
            if any(r > segs[i] for r in later):
                return None, (f"op {i} ({op.name()}) may write in place a value a later "
                              "segment reads (it would read a copy made before the write)")
    return carried, None


def segments_of(n: int, cut_ops: list) -> list:
    """The segment of each of ``n`` ops: how many collectives come before it
    (collective ``m`` itself is in segment ``m``, which fetches its input)."""
    out, m = [], 0
    cuts = sorted(cut_ops)
    for i in range(n):
        while m < len(cuts) and cuts[m] < i:
            m += 1
        out.append(m)
    return out


def carry_name(i: int, k: int) -> str:
    return f"__pir_v_{i}_{k}"


def stage(main, cut_ops: list, j: int, watch_pos: list, carried: dict):
    """Segment ``j`` of ``main``: ``(program, fetch values, feed names, names
    of the carried values fetched after the first fetch)``."""
    import paddle

    prog = main.clone()
    ops = list(prog.global_block().ops)
    last = len(cut_ops)
    segs = segments_of(len(ops), cut_ops)

    fed = {}
    index = {op.id(): i for i, op in enumerate(ops)}
    watched = set(map(tuple, watch_pos))

    def read_here(i, res):  # read by an op of segment j (or watched by the last)
        return any(segs[index[u.id()]] == j for u in res.all_used_ops()
                   if u.id() in index) or (j == last and (i, 0) in watched)

    with paddle.static.program_guard(prog):
        paddle.pir.reset_insertion_point_to_start()
        for m in range(min(j, last)):  # earlier collectives' results read here: fed
            if not ops[cut_ops[m]].num_results():  # a send
                continue
            res = ops[cut_ops[m]].result(0)
            if not read_here(cut_ops[m], res):
                continue
            new = paddle.static.data(f"__pir_coll_{m}", list(res.shape),
                                     str(res.dtype).replace("paddle.", ""))
            res.replace_all_uses_with(new)
            fed[(cut_ops[m], 0)] = new
        for (i, k), readers in carried.items():  # earlier segments' values: fed
            if segs[i] < j and j in readers:
                res = ops[i].result(k)
                new = paddle.static.data(carry_name(i, k), list(res.shape),
                                         str(res.dtype).replace("paddle.", ""))
                res.replace_all_uses_with(new)
                fed[(i, k)] = new
        paddle.pir.reset_insertion_point_to_end()
    out = [(i, k) for (i, k), readers in carried.items() if segs[i] == j]
    if j < last:
        reads = [ops[cut_ops[j]].operand_source(0)] if ops[cut_ops[j]].num_operands() else []
        fetch = reads + [ops[i].result(k) for i, k in out]
        names = [carry_name(i, k) for i, k in out]
    else:
        fetch = [fed[p] if p in fed else ops[p[0]].result(p[1]) for p in map(tuple, watch_pos)]
        names = []
    cuts = set(cut_ops)
    keep = {i for i, op in enumerate(ops) if i not in cuts and
            (segs[i] == j or (segs[i] < j and op.name() in SOURCES))}
    for i in range(len(ops) - 1, -1, -1):
        if i not in keep:
            ops[i].erase()
    feeds = [op.attrs()["name"] for op in prog.global_block().ops if op.name() == "pd_op.data"]
    return prog, fetch, feeds, names
