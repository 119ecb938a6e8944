"""The process state Paddle's planner leaves behind, rebuilt for one rank.

Several post-partition passes read global state of the planning process
instead of their attrs: the auto-parallel process-group registry
(``ring_id_to_process_group``, ``get_world_process_group``,
``get_all_process_groups``) and the parallel env's world size
(``paddle.distributed.get_world_size()``, read once from
``PADDLE_TRAINERS_NUM``).  In the planner's process they describe the job;
in the suite's process they describe whatever ran before.  This context
manager gives the pass exactly the job of ``case`` seen from ``rank`` --
the groups of the case's rings that hold the rank, the world group of all
the case's ranks, the world size -- and puts the suite's state back after.
"""
from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def planner_state(case, rank: int):
    """Process groups and world size of ``case`` as rank ``rank``'s planner had them."""
    from verify.ir.legacy_ir import paddle_module

    paddle_module()
    import paddle.distributed.parallel as parallel
    from paddle.distributed.auto_parallel.static import process_group as pg

    saved_map = pg._g_process_group_map
    saved_env = parallel._global_parallel_env
    saved_vars = {k: os.environ.get(k) for k in ("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM")}
    try:
        pg._g_process_group_map = {}
        pg._g_process_group_map[0] = pg.ProcessGroup(0, [])
        pg._g_process_group_map[0].add_ranks(list(case.ranks))
        for ring, groups in sorted(case.rings.items()):
            group = next((g for g in groups if rank in g), None)
            if group is not None and int(ring) != 0:
                pg._g_process_group_map[int(ring)] = pg.ProcessGroup(int(ring), list(group))
        os.environ["PADDLE_TRAINER_ID"] = str(rank)
        os.environ["PADDLE_TRAINERS_NUM"] = str(case.world_size)
        parallel._global_parallel_env = parallel.ParallelEnv()
        yield
    finally:
        pg._g_process_group_map = saved_map
        parallel._global_parallel_env = saved_env
        for k, v in saved_vars.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
