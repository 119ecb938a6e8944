"""Vars that are views of one buffer: ``coalesce_tensor``'s fused buffers.

Paddle's fused gradient all-reduce (the data-parallel optimization pass,
sharding) makes one flat buffer (``FusedOutput``) and each ``Output`` var a
view of a slice of it (phi's ``coalesce_tensor`` kernel: the views share
the buffer's allocation at aligned offsets).  So:

* the views' earlier values are gone after the op unless ``copy_data``
  (copied in) or ``set_constant`` (filled with ``constant``); a view read
  before something writes it again reads uninitialised memory;
* an op writing a view writes the buffer (the kernel reuses the shared
  allocation), and an op writing the buffer in place (the all-reduce)
  writes every view.

The model keeps a value per view and none for the buffer: a read of the
buffer is its views' current elements concatenated in order, a write of the
buffer is split back into the views.  Alignment padding between the slices
is left out.  That is exact only for ops that treat the buffer element by
element and write it in place: padding then never reaches a view, and the
views' slices line up.  So only such ops may touch the buffer here
(:data:`BUFFER_OPS`, and collectives whose kind is element-wise); any
other reader or writer (a reduce-scatter or an all-gather would split at
padded offsets) makes the proof INCONCLUSIVE naming the op and the buffer.
"""
from __future__ import annotations

import numpy as np

from verify.ir.collectives import COLLECTIVES, kind as collective_kind

from .semantics import Tensor, Unsupported, dtype_name, leaf_dims

# non-collective ops that may read and write a fused buffer, in place,
# element by element (or not at all: nop names vars for ordering only)
BUFFER_OPS = frozenset({"scale", "nop", "depend", "c_sync_calc_stream",
                        "c_sync_comm_stream", "c_wait_compute", "c_wait_comm"})
# collective kinds that combine the ranks' buffers position by position
ELEMENTWISE_KINDS = frozenset({"sum", "avg", "prod", "max", "min", "broadcast", "identity",
                               "reduce_sum", "reduce_avg", "reduce_prod", "reduce_max",
                               "reduce_min"})


class Uninitialised(Exception):
    """A view read after ``coalesce_tensor`` dropped its value and before
    anything wrote it again: ``(view, coalesce op index)``."""

    def __init__(self, view, at):
        super().__init__(view, at)
        self.view, self.at = view, at


def _given_shapes(op, n):
    """Each view's dims from ``concated_shapes``/``concated_ranks`` (the pass
    sets them when the views have no dims yet), else None per view."""
    dims = [int(d) for d in op.attrs.get("concated_shapes") or []]
    ranks = [int(r) for r in op.attrs.get("concated_ranks") or []]
    if not dims and not ranks:
        return [None] * n
    if len(ranks) != n or sum(ranks) != len(dims):
        raise Unsupported(f"coalesce_tensor op {op.idx}: concated_ranks {ranks} do not "
                          f"split concated_shapes {dims} into {n} views")
    out, at = [], 0
    for r in ranks:
        out.append(tuple(dims[at:at + r]))
        at += r
    return out


class Views:
    """One rank's fused buffers: buffer name -> its views in order."""

    def __init__(self):
        self.buffers = {}  # buffer -> [(view, shape, dtype)]
        self.dropped = {}  # view -> index of the coalesce_tensor op that dropped its value

    def __bool__(self):
        return bool(self.buffers)

    # -- the op that makes them --------------------------------------------------
    def coalesce(self, op, env, snap, constant, read):
        """Run ``coalesce_tensor`` ``op`` as phi's kernel does: record its
        buffer and give each view ``Output[i]`` its value, sized by
        ``Input[i]`` (the kernel resizes ``Output[i]`` to ``Input[i]``'s dims):

        * ``copy_data``: ``Input[i]``'s value, copied into the slice the
          view then points at (``read(name)``, the executor's read: the
          inputs are read before any view moves);
        * else ``set_constant``: ``constant`` everywhere;
        * else ``persist_output``: the view's own earlier value, when it
          had one;
        * else none: the value is dropped (a later read is an error).

        Without ``copy_data`` the kernel reads ``Input[i]``'s dims only, so
        an ``Input[i]`` other than ``Output[i]`` of the same dims computes
        the same; an ``Input[i]`` the model has no value for that is not
        ``Output[i]`` is refused (the kernel throws for an uninitialised one,
        and the model cannot tell).  ``constant(value, shape, dtype)`` makes
        a constant Tensor."""
        ins = list(op.inputs.get("Input") or [])
        outs = list(op.outputs.get("Output") or [])
        fused = (op.outputs.get("FusedOutput") or [None])[0]
        if fused is None or not outs:
            raise Unsupported(f"coalesce_tensor op {op.idx} without Output or FusedOutput")
        if len(ins) != len(outs):
            raise Unsupported(f"coalesce_tensor op {op.idx}: {len(ins)} Input for "
                              f"{len(outs)} Output (the kernel needs as many)")
        want = dtype_name(op.attrs.get("dtype", ""))
        copy = op.attrs.get("copy_data", True)
        given = _given_shapes(op, len(outs))
        # copy_data: every input's value, read before any view is re-pointed
        copied = [read(i) for i in ins] if copy else [None] * len(ins)
        members = []
        for i, (src, name, g) in enumerate(zip(ins, outs, given)):
            v = snap.vars.get(name)
            if copied[i] is not None:
                shape = copied[i].arr.shape
            elif src in env:
                shape = env[src].arr.shape
            elif src != name:
                raise Unsupported(f"coalesce_tensor op {op.idx}: Input {src} has no value "
                                  f"here and is not its Output {name} (the kernel sizes "
                                  f"{name} by {src}, and refuses an uninitialised one)")
            else:
                shape = v.shape if v else None
            if g is not None:  # the kernel sizes the views by these
                if shape is not None and all(int(n) >= 0 for n in shape) and \
                        tuple(int(n) for n in shape) != g:
                    raise Unsupported(f"coalesce_tensor op {op.idx}: concated_shapes give "
                                      f"view {name} {list(g)}, its value is {list(shape)}")
                shape = g
            if shape is None or any(int(n) < 0 for n in shape):
                raise Unsupported(f"coalesce_tensor op {op.idx}: view {name} has no static "
                                  f"shape ({shape})")
            dtype = getattr(v, "dtype", "") or ""
            for what, d in ((name, dtype), (src, copied[i].dtype if copied[i] else "")):
                if want and d and dtype_name(d) != want:
                    raise Unsupported(f"coalesce_tensor op {op.idx}: {what} is {d}, the "
                                      f"buffer {want}")
            members.append((name, tuple(int(n) for n in shape), dtype))
        self.buffers[fused] = members
        for (name, shape, dtype), value in zip(members, copied):
            self.dropped.pop(name, None)
            if copy:
                env[name] = value
            elif op.attrs.get("set_constant", False):
                env[name] = constant(op.attrs.get("constant", 0.0), shape, dtype)
            elif op.attrs.get("persist_output", False) and name in env and \
                    tuple(env[name].arr.shape) == shape:
                pass  # copied into the slice it now points at
            elif op.attrs.get("persist_output", False) and name in env:
                raise Unsupported(f"coalesce_tensor op {op.idx}: persist_output keeps "
                                  f"{name} {list(env[name].arr.shape)} in a slice of "
                                  f"{list(shape)}")
            else:
                env.pop(name, None)
                self.dropped[name] = op.idx

    # -- reads and writes ----------------------------------------------------------
    def check_access(self, op, name):
        """Refuse an op on a buffer the model cannot follow (see the module)."""
        if name not in self.buffers or op.type == "coalesce_tensor":
            return
        if op.type in COLLECTIVES:
            kind = collective_kind(op.type, op.attrs)
            inplace = COLLECTIVES[op.type][0] and \
                op.inputs.get(COLLECTIVES[op.type][0]) == op.outputs.get(COLLECTIVES[op.type][1])
            if kind in ELEMENTWISE_KINDS and inplace:
                return
        elif op.type in BUFFER_OPS and (op.type == "nop" or
                                        set(op.writes()) <= set(self.buffers) | set(op.reads())):
            return
        raise Unsupported(f"op {op.idx} ({op.type}) reads or writes the fused buffer {name}, "
                          "which the model of views follows only through element-wise "
                          "in-place ops")

    def read(self, name, env):
        """The buffer's value: its views' current elements, concatenated."""
        parts, dtype = [], ""
        for view, shape, dt in self.buffers[name]:
            if view in self.dropped:
                raise Uninitialised(view, self.dropped[view])
            parts.append(env[view].arr.reshape(-1))
            dtype = dtype or env[view].dtype or dt
        arr = np.concatenate(parts) if parts else np.empty(0, dtype=object)
        return Tensor(arr, leaf_dims(arr.shape), dtype)

    def write(self, name, t, env):
        """Bind ``name`` to ``t``; a buffer's elements go to its views."""
        if name in self.buffers:
            flat = t.arr.reshape(-1)
            at = 0
            for view, shape, dt in self.buffers[name]:
                n = int(np.prod(shape)) if shape else 1
                piece = flat[at:at + n].reshape(shape)
                env[view] = Tensor(piece, leaf_dims(shape), env[view].dtype
                                   if view in env else (t.dtype or dt))
                self.dropped.pop(view, None)
                at += n
            if at != flat.size:
                raise Unsupported(f"the fused buffer {name} is written with {flat.size} "
                                  f"elements, its views hold {at}")
            return
        env[name] = t
        self.dropped.pop(name, None)
