"""The in-process SPMD simulator: every rank in one process.

Each rank's program is cut at its collective ops.  The pieces between run
with ``Executor(CPUPlace())`` in one scope per rank, and every collective
is performed here, between pieces, on numpy arrays (sum/max/min/prod/avg
all-reduce, all-gather, reduce-scatter, broadcast), for whichever
ring and group the case declares; a pipeline's point-to-point sends and
recvs go through a mailbox (a send never waits, a recv waits for its peer).  Ranks advance in lock step: a rank runs
until its next collective, and a collective fires when every member of its
group has reached a collective on that ring.  Ranks that wait for each other
forever, or meet different collectives, end the run with an error naming
them.

All vars of the pieces are made persistable so that values live in the
rank's scope between pieces (the executor drops non-persistable vars after
a run); feeds are written into the scope directly.

It is only trustworthy where it agrees with real ranks: the suite compares
the two on every case gloo runs faithfully.
"""
from __future__ import annotations

import time
import traceback

import numpy as np

from verify.ir.legacy_ir import paddle_module

from .run_spec import BackendError, RankResult, ScheduleError

from verify.ir.collectives import COLLECTIVES, REDUCE_TYPES, communicates  # noqa: E402

# TEST HOOK, never set by the suite: ``{op type: perform}`` replaces the
# simulator's reading of one collective op type, ``perform(kind, xs, colls,
# group) -> [out per member]`` (``xs``: the members' inputs, group order).
# It stands for a simulator whose reading of an op differs from Paddle's
# kernel, so a test can show that the cross-check against real ranks
# (``equivalence._agreement``) catches it; install it with :func:`overridden`.
OP_OVERRIDES: dict = {}


class overridden:
    """``with overridden(op_type, perform):`` the simulator reads ``op_type``
    with ``perform`` (see ``OP_OVERRIDES``; in this process only: a test
    runs the simulator in process, isolation off)."""

    def __init__(self, op_type: str, perform):
        self.op_type, self.perform = op_type, perform

    def __enter__(self):
        self.saved = OP_OVERRIDES.get(self.op_type)
        OP_OVERRIDES[self.op_type] = self.perform
        return self

    def __exit__(self, *exc):
        if self.saved is None:
            OP_OVERRIDES.pop(self.op_type, None)
        else:
            OP_OVERRIDES[self.op_type] = self.saved


def overrides_key() -> tuple:
    """What the installed overrides are, for the run memo's key (a run with
    an override is another run)."""
    return tuple(sorted((t, f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', f)}")
                        for t, f in OP_OVERRIDES.items()))


class _Coll:
    def __init__(self, op, index):
        slot_in, slot_out, kind = COLLECTIVES[op.type]
        self.type = op.type
        self.index = index
        self.x = op.desc.input(slot_in)[0]
        self.out = op.desc.output(slot_out)[0]
        self.ring = int(op.desc.attr("ring_id")) if op.desc.has_attr("ring_id") else 0
        if kind == "allreduce":
            kind = REDUCE_TYPES.get(int(op.desc.attr("reduce_type")), "unknown")
        elif kind == "reduce":  # to the root only: reduce_sum, reduce_max, ...
            kind = "reduce_" + REDUCE_TYPES.get(int(op.desc.attr("reduce_type")), "unknown")
        self.kind = kind
        self.root = int(op.desc.attr("root")) if op.desc.has_attr("root") else \
            int(op.desc.attr("root_id")) if op.desc.has_attr("root_id") else 0


def _pieces(program):
    """[("ops", Program) | ("coll", _Coll)] in program order."""
    ops = program.global_block().ops
    cuts = [i for i, op in enumerate(ops) if communicates(op.type)]
    bounds = []
    start = 0
    for c in cuts + [len(ops)]:
        if c > start:
            bounds.append(("ops", (start, c)))
        if c < len(ops):
            bounds.append(("coll", c))
        start = c + 1
    out = []
    for kind, val in bounds:
        if kind == "coll":
            out.append(("coll", _Coll(ops[val], val)))
            continue
        lo, hi = val
        piece = program.clone()
        blk = piece.global_block()
        n = len(blk.ops)
        for i in reversed(range(n)):
            if not (lo <= i < hi):
                blk._remove_op(i, sync=False)
        for v in blk.vars.values():
            v.desc.set_persistable(True)
        blk._sync_with_cpp()
        out.append(("ops", piece))
    return out


def _group(rings, ring, rank, where):
    for group in rings.get(ring, rings.get(str(ring), [])):
        if rank in group:
            return list(group)
    raise BackendError(f"{where}: rank {rank} runs a collective on ring {ring}, "
                       f"but the case declares no group of ring {ring} holding it "
                       f"(rings: {rings})", rank)


_ROOTED_REDUCTIONS = tuple("reduce_" + r for r in REDUCE_TYPES.values())


def _reduce(kind, arrays):
    if kind == "sum":
        return np.sum(arrays, axis=0).astype(arrays[0].dtype)
    if kind == "max":
        return np.max(arrays, axis=0)
    if kind == "min":
        return np.min(arrays, axis=0)
    if kind == "prod":
        return np.prod(arrays, axis=0).astype(arrays[0].dtype)
    if kind == "avg":
        return (np.sum(arrays, axis=0) / len(arrays)).astype(arrays[0].dtype)
    raise BackendError(f"unsupported reduction {kind}")


class _Rank:
    def __init__(self, spec, place):
        paddle = paddle_module()
        self.spec = spec
        self.rank = spec.rank
        self.place = place
        self.scope = paddle.static.Scope()
        self.exes = {}
        main = paddle.static.Program.parse_from_string(spec.main)
        startup = paddle.static.Program.parse_from_string(spec.startup)
        self.main_program = main
        self.startup = _pieces(startup)
        self.main = _pieces(main)
        self.items = []
        self.pos = 0

    def get(self, name):
        var = self.scope.find_var(name)
        if var is None or not var.get_tensor()._is_initialized():
            return None
        return np.array(var.get_tensor())

    def set(self, name, value):
        self.scope.var(name).get_tensor().set(np.ascontiguousarray(value), self.place)

    def check_feed(self, name, value, where):
        """Refuse a feed the executor would refuse (shape against the declared one)."""
        block = self.main_program.global_block()
        if not block.has_var(name):
            raise BackendError(f"{where}: rank {self.rank} feeds {name}, which the program "
                               "does not have", self.rank)
        declared = list(block.var(name).shape)
        if len(declared) != value.ndim or any(
                d >= 0 and d != v for d, v in zip(declared, value.shape)):
            raise BackendError(f"{where}: rank {self.rank} feeds {name} of shape "
                               f"{list(value.shape)}, the program declares {declared}",
                               self.rank)

    def start(self, items):
        self.items, self.pos = items, 0

    def advance(self):
        """Run pieces until the next collective; return it, or None at the end."""
        while self.pos < len(self.items):
            kind, val = self.items[self.pos]
            if kind == "coll":
                return val
            # one executor per piece: an executor caches only a few programs,
            # and a miss re-clones the piece (quadratic in program size)
            exe = self.exes.get(id(val))
            if exe is None:
                exe = self.exes[id(val)] = paddle_module().static.Executor(self.place)
            exe.run(val, scope=self.scope, use_program_cache=True)
            self.pos += 1
        return None


def _lockstep(states, rings, where, mailbox=None):
    """Advance every rank to its end, performing collectives when their
    whole group waits in them and point-to-point sends/recvs through
    ``mailbox`` (``{(ring, from, to): [arrays]}``; a new one when None): a
    send leaves its tensor and goes on, a recv waits for the oldest tensor
    its peer sent it on that ring.  A caller running a rank's job list in
    several calls passes one mailbox to all of them."""
    blocked = {}
    done = set()
    own_mailbox = mailbox is None
    mailbox = {} if own_mailbox else mailbox
    while len(done) < len(states):
        progress = False
        for r, st in states.items():
            if r in done or r in blocked:
                continue
            try:
                coll = st.advance()
            except Exception as exc:
                raise BackendError(f"{where}: rank {r} raised: {type(exc).__name__}: "
                                   f"{str(exc).strip().splitlines()[0][:300]}\n"
                                   + traceback.format_exc(), r) from exc
            progress = True
            if coll is None:
                done.add(r)
            else:
                blocked[r] = coll
        for r, coll in list(blocked.items()):
            if r not in blocked:
                continue
            if coll.kind in ("send", "recv"):
                if _point_to_point(r, coll, states, rings, mailbox, where):
                    states[r].pos += 1
                    del blocked[r]
                    progress = True
                continue
            group = _group(rings, coll.ring, r, where)
            if not all(m in blocked and blocked[m].ring == coll.ring for m in group):
                if any(m in done for m in group):
                    gone = [m for m in group if m in done]
                    raise ScheduleError(
                        f"{where}: rank {r} waits in {coll.type} (op {coll.index}, ring "
                        f"{coll.ring}) but rank(s) {gone} finished without it", gone[0])
                continue
            colls = [blocked[m] for m in group]
            kinds = {(c.type, c.kind) for c in colls}
            if len(kinds) != 1:
                desc = ", ".join(f"rank {m}: {blocked[m].type} op {blocked[m].index}"
                                 for m in group)
                raise ScheduleError(f"{where}: ranks meet different collectives on ring "
                                   f"{coll.ring}: {desc}", r)
            _perform(group, colls, states, where)
            for m in group:
                states[m].pos += 1
                del blocked[m]
            progress = True
        if not progress:
            desc = ", ".join(f"rank {r} in {c.type} (op {c.index}, ring {c.ring})"
                             for r, c in sorted(blocked.items()))
            raise ScheduleError(f"{where}: collectives do not match up; waiting: {desc}",
                               min(blocked) if blocked else None)
    unread = {k: len(v) for k, v in mailbox.items() if v}
    if own_mailbox and unread:
        (ring, src, dst), n = next(iter(sorted(unread.items())))
        raise ScheduleError(f"{where}: rank {src} sent {n} tensor(s) on ring {ring} that "
                           f"rank {dst} never received", src)


def _point_to_point(r, c, states, rings, mailbox, where) -> bool:
    """Perform rank ``r``'s send or recv ``c``; False while a recv waits."""
    group = _group(rings, c.ring, r, where)
    if not 0 <= c.peer < len(group):
        raise ScheduleError(f"{where}: rank {r} op {c.index} ({c.type}) names peer {c.peer} "
                           f"on ring {c.ring}, whose group is {group}", r)
    peer = group[c.peer]
    if c.kind == "send":
        x = states[r].get(c.x)
        if x is None:
            raise BackendError(f"{where}: rank {r} op {c.index} ({c.type}) sends {c.x}, "
                               "which holds no value", r)
        mailbox.setdefault((c.ring, r, peer), []).append(x)
        return True
    queue = mailbox.get((c.ring, peer, r))
    if not queue:
        return False
    x = queue.pop(0)
    shape = getattr(c, "shape", None)
    if shape is not None and (len(shape) != x.ndim or any(
            d >= 0 and d != v for d, v in zip(shape, x.shape)) or str(x.dtype) != c.dtype):
        raise ScheduleError(f"{where}: rank {r} op {c.index} ({c.type}) declares it receives "
                           f"{shape} {c.dtype} on ring {c.ring}; rank {peer} sent "
                           f"{list(x.shape)} {x.dtype}", r)
    states[r].set(c.out, x)
    return True


def _perform(group, colls, states, where):
    kind = colls[0].kind
    xs = []
    for m, c in zip(group, colls):
        x = states[m].get(c.x)
        if x is None:
            raise BackendError(f"{where}: rank {m} op {c.index} ({c.type}) reads {c.x}, "
                               "which holds no value", m)
        xs.append(x)
    n = len(group)
    override = OP_OVERRIDES.get(colls[0].type)
    if override is not None:  # the test hook above
        for m, c, out in zip(group, colls, override(kind, xs, colls, group)):
            states[m].set(c.out, out)
        return
    if kind == "broadcast" or kind in _ROOTED_REDUCTIONS:
        roots = {m: c.root for m, c in zip(group, colls)}
        if len(set(roots.values())) > 1:
            raise BackendError(f"{where}: the ranks of group {group} name different roots "
                               f"for {colls[0].type}: {roots}", group[0])
    if kind in ("sum", "max", "min", "prod", "avg", "reduce_scatter", "all_to_all") and \
            len({(x.shape, x.dtype) for x in xs}) > 1:
        desc = ", ".join(f"rank {m}: {list(x.shape)} {x.dtype}" for m, x in zip(group, xs))
        raise BackendError(f"{where}: {colls[0].type} over ranks {group} gets tensors that "
                           f"do not match: {desc}", group[0])
    for i, (m, c) in enumerate(zip(group, colls)):
        if kind in ("sum", "max", "min", "prod", "avg"):
            out = _reduce(kind, xs)
        elif kind == "all_gather":
            out = np.concatenate(xs, axis=0)
        elif kind == "reduce_scatter":
            total = _reduce("sum", xs)
            if total.shape[0] % n:
                raise BackendError(f"{where}: rank {m} op {c.index} reduce_scatter of dim "
                                   f"{total.shape[0]} over {n} ranks")
            out = np.split(total, n, axis=0)[i]
        elif kind == "all_to_all":  # chunk j of rank i's out: rank j's chunk i
            if xs[i].ndim == 0 or xs[i].shape[0] % n:
                raise BackendError(f"{where}: rank {m} op {c.index} all_to_all of shape "
                                   f"{list(xs[i].shape)} over {n} ranks: dim 0 is not "
                                   "divisible", m)
            out = np.concatenate([np.split(x, n, axis=0)[i] for x in xs], axis=0)
        elif kind == "broadcast":
            # the root is an index in the ring's group (Paddle's comm rank:
            # verify/checks/collective_validity.py); gloo/NCCL reject another
            if not 0 <= c.root < n:
                raise BackendError(f"{where}: rank {m} op {c.index} ({c.type}) has root "
                                   f"{c.root} on ring {c.ring}, whose group is {group}: "
                                   "the root is an index in the group", m)
            out = xs[c.root]
        elif kind in _ROOTED_REDUCTIONS:
            if not 0 <= c.root < n:
                raise BackendError(f"{where}: rank {m} op {c.index} ({c.type}) has root "
                                   f"{c.root} on ring {c.ring}, whose group is {group}: "
                                   "the root is an index in the group", m)
            # the reduction lands on the root (index in the group) only; the
            # other ranks' out keeps their own x
            out = _reduce(kind[len("reduce_"):], xs) if i == c.root else xs[i]
        else:
            raise BackendError(f"{where}: unsupported collective {c.type}")
        states[m].set(c.out, out)


def run_simulated(specs: dict, where: str = "simulated") -> dict:
    """Run every rank's spec in this process; ``{rank: RankResult}``.

    A rank that raises or collectives that do not match raise BackendError.
    """
    paddle = paddle_module()
    place = paddle.CPUPlace()
    start = time.perf_counter()
    states = {r: _Rank(s, place) for r, s in sorted(specs.items())}
    rings = next(iter(specs.values())).rings if specs else {}
    for st in states.values():
        st.start(st.startup)
    _lockstep(states, rings, where + " startup")
    for st in states.values():
        for name, value in st.spec.params.items():
            if st.get(name) is not None:
                st.set(name, value)
    results = {r: RankResult(r) for r in states}
    steps = len(next(iter(specs.values())).feeds) if specs else 0
    for k in range(steps):
        for r, st in states.items():
            for name, value in st.spec.feeds[k].items():
                st.check_feed(name, value, where)
                st.set(name, value)
            st.start(st.main)
        _lockstep(states, rings, f"{where} step {k}")
        for r, st in states.items():
            got = {}
            for name in st.spec.watch:
                v = st.get(name)
                if v is not None:
                    got[name] = v
            results[r].steps.append(got)
    secs = time.perf_counter() - start
    for res in results.values():
        res.seconds = secs
    return results
