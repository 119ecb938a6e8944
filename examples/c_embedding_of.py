"""A model file planned with ``strategy.mp_optimization.replace_with_c_embedding``
(the engine's ``auto_parallel_c_embedding_pass``): another model file's names
and a ``configure(strategy)`` (the planning process's strategy hook,
``verify/plan/pir_rank.py``) that turns the flag on.

The pass reads fleet's hybrid communicate group (``fleet.get_hybrid_communicate_group()``:
the mp world size and this rank's mp rank), so ``configure`` first builds
it: ``fleet.init(is_collective=True)`` with ``hybrid_configs`` (dp = world /
MP, mp = MP), which on a CPU build needs the gloo backend
(``PADDLE_DISTRI_BACKEND=gloo``) and ``init_parallel_env()`` (every rank of
the plan rendezvous on ``PADDLE_TRAINER_ENDPOINTS``; the planner starts them
together).  The mesh must be 2-D ``["dp", "mp"]`` with mp of size MP: the pass
takes the weight's mesh axis from a fresh ``fleet.DistributedStrategy()``'s
``mp_degree`` (1), right on that mesh only (on a 1-D mesh the planning
process dies with SIGSEGV, docs/passes.md).

Over four or more processes ``fleet.init`` creates process groups whose members
hold the same group ranks at the same time (dp2 x mp2: ``[0, 2]`` and
``[1, 3]``), and 3.3.1's ``ProcessGroupGloo`` rendezvouses on the global
TCPStore under keys named by the group rank alone (its ``connectFullMesh``
takes the store unprefixed; only the comm context's store is prefixed by the
group id), so two such groups read each other's addresses: a rank pairs with
a process of the other group and the plan dies in ``fleet.init`` (gloo
``TIMEOUT`` / ``Connection refused`` after up to 170 s).  ``configure``
therefore lets one group rendezvous at a time (:func:`one_group_at_a_time`),
a user-level workaround: Paddle is not edited."""
import contextlib
import importlib.util
import os

NAMES = ("build_model", "loss", "optimizer", "inputs", "labels")
MP = 2


def with_c_embedding(base_file: str, namespace: dict) -> None:
    """Fill ``namespace`` (a model file's ``globals()``) with ``base_file``'s
    model (``NAMES``, ``BATCH``, ``VOCAB``) and the ``configure`` above."""
    spec = importlib.util.spec_from_file_location(
        "_c_embedding_" + base_file.replace(".py", ""),
        os.path.join(os.path.dirname(__file__), base_file))
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    namespace.update({n: getattr(base, n) for n in NAMES})
    for n in ("BATCH", "VOCAB", "MESH_DIMS"):
        if hasattr(base, n):
            namespace[n] = getattr(base, n)
    base_configure = getattr(base, "configure", None)

    def configure(strategy):
        """The base model's own strategy settings, fleet's hybrid group over
        gloo, then the c_embedding flag on."""
        if base_configure is not None:
            base_configure(strategy)
        hybrid_group()
        strategy._mp_optimization.replace_with_c_embedding = True

    namespace["configure"] = configure


def _own_ports(world: int) -> None:
    """This plan's rendezvous ports: the planner gives every plan the same
    endpoints (127.0.0.1:6170 + rank), and two plans rendezvousing there at
    once (pytest -n, premerge) pair with each other's ranks and fail (measured:
    a gloo TIMEOUT and a libuv assertion).  The ranks of one plan share their
    parent (the process that planned them), so its id picks the ports."""
    base = 20000 + (os.getppid() * 7919) % 20000
    eps = [f"127.0.0.1:{base + i}" for i in range(world)]
    rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    os.environ.update(PADDLE_TRAINER_ENDPOINTS=",".join(eps), PADDLE_CURRENT_ENDPOINT=eps[rank],
                      PADDLE_MASTER=eps[0], MASTER_ADDR="127.0.0.1", MASTER_PORT=str(base))


def hybrid_group(serialize: bool = True, trace=None) -> None:
    """fleet's hybrid communicate group (dp = world / MP, mp = MP) over gloo,
    its groups created one at a time (``serialize``; module docstring);
    ``trace(event, ranks)`` is told each group's ``"enter"`` and ``"leave"``."""
    import paddle.distributed as dist
    from paddle.distributed import fleet

    os.environ["PADDLE_DISTRI_BACKEND"] = "gloo"
    world = int(os.environ.get("PADDLE_TRAINERS_NUM", MP))
    _own_ports(world)
    dist.init_parallel_env()
    hybrid = fleet.DistributedStrategy()
    hybrid.hybrid_configs = {"dp_degree": max(1, world // MP), "mp_degree": MP,
                             "pp_degree": 1}
    with one_group_at_a_time(serialize, trace):
        fleet.init(is_collective=True, strategy=hybrid)


@contextlib.contextmanager
def one_group_at_a_time(serialize: bool = True, trace=None):
    """``paddle.distributed.new_group`` (which fleet's topology calls for
    every group, on every rank, in one order) followed by a barrier of the
    default group, so no two groups rendezvous at once (``serialize=False``:
    Paddle's own, for the test's broken twin)."""
    import paddle.distributed as dist

    made = dist.new_group

    def new_group(ranks=None, *args, **kwargs):
        if trace:
            trace("enter", ranks)
        group = made(ranks, *args, **kwargs)
        if trace:
            trace("leave", ranks)
        if serialize:
            dist.barrier()
        return group

    dist.new_group = new_group
    try:
        yield
    finally:
        dist.new_group = made
