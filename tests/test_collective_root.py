"""A rooted collective's ``root`` is an index in its ring's group (Paddle's
comm rank; ``verify.ir.collectives.root_of``): the value executor must read it
so, as the numeric simulator does.  On ring groups [1, 3] a ``broadcast``
with root 1 sends rank 3's value; reading 1 as a global rank would send
rank 1's own (stale) value and refute a faithful sharding rewrite."""
from __future__ import annotations

from verify.ir.snapshot import Op, ProgramSnapshot, Var
from verify.value.symbolic import Store, execute


def _snap():
    vars_ = {"p": Var("p", [2], "float32"), "q": Var("q", [2], "float32")}
    ops = [Op(0, "broadcast", {"x": ["p"]}, {"out": ["q"]}, {"root": 1, "ring_id": 12})]
    return ProgramSnapshot(ops, vars_)


def test_broadcast_root_is_an_index_in_the_group():
    store = Store()
    envs, _ = execute({1: _snap(), 3: _snap()}, {12: [[1, 3]]}, store)
    want = envs[3]["p"].arr.reshape(-1)[0].i  # rank 3's (group index 1) input
    for rank in (1, 3):
        got = envs[rank]["q"].arr.reshape(-1)[0].i
        assert store.render(got) == store.render(want) == "p@r3[0]", (rank, store.render(got))


def test_broadcast_root_zero_sends_the_first_member():
    store = Store()
    snaps = {1: _snap(), 3: _snap()}
    for s in snaps.values():
        s.ops[0].attrs["root"] = 0
    envs, _ = execute(snaps, {12: [[1, 3]]}, store)
    assert store.render(envs[3]["q"].arr.reshape(-1)[0].i) == "p@r1[0]"
