"""The public case API: everything a case file needs, in one module.

A *case file* is a Python file anywhere on disk that defines ``CASES``, a
list of :class:`Case`; run it with ``python -m verify run --case-file
PATH.py`` (repeatable) or in the gate with ``pytest verify/ --case-file
PATH.py``.  Its cases run alongside the built-in ones (``--case GLOB``
selects among both) and are reported with their file.  Import only from
this module; it is the stable surface (everything else is internal)::

    from verify.case_api import (BACKWARD, Case, Expect, ProgramBuilder,
                                 OVERLAP, tp_mesh, tp_rings)

    def build(case, rank):                 # one rank's programs
        b = ProgramBuilder(case, rank)     # main + startup + DistributedContext
        x = b.data("x", [2, 4, 8], [2, 4, 8])
        ...                                # b.param / b.var / b.op / b.grad_op
        return b.finish()                  # a RankProgram

    CASES = [Case(name="my_col", family="mine", summary="...", mesh=tp_mesh(2),
                  builder=build, rings=tp_rings(tp_mesh(2)),
                  sharded_params=frozenset({"w"}),
                  expect={OVERLAP: Expect(fires=True, verdict="EQUIVALENT")})]

See ``examples/my_cases.py`` for a column-parallel and a row-parallel case.

What the fields of :class:`Case` mean
-------------------------------------
``name``      unique, not a built-in case's name (``python -m verify list``).
``builder``   ``builder(case, rank) -> RankProgram``; deterministic (it is
              called once for the original and once for the copy the pass
              rewrites; names come from a fresh ``unique_name`` guard).
``mesh``      the process mesh: ``[0, 1]`` (TP 2) or ``[[0, 1], [2, 3]]``
              (DP 2 x TP 2; the last axis is tensor parallel).
``rings``     ``{ring_id: [[ranks of one group], ...]}``: which ranks a
              collective with that ``ring_id`` spans (:func:`tp_rings`,
              :func:`dp_rings`).  Every ring an op uses must be declared.
``expect``    ``{pass name or short name: Expect(fires, verdict, reason)}``;
              a pass not named must leave the case alone (EQUIVALENT).
              ``python -m verify run`` exits 1 when a verdict differs.
``symbols``   symbolic dims of fed vars: ``{"x": ("B", None, None)}`` makes
              x's dim 0 the Z3 integer ``B > 0`` (a ``-1`` dim not named is
              a fresh symbol).
``sharded_params``  parameters whose value differs per TP rank (numeric
              runs give each TP rank its own shard); others are replicated.
``enable_sp`` / ``amp_level``  what the promotion pass is told (its
              ``enable_sp`` and ``amp_level`` attrs: ``"o0"|"o1"|"o2"``).
``gloo_unfaithful``  why real CPU ranks cannot run the case ("" if they can).
``params``    free-form, for the builder.

Sharding (dist attrs)
---------------------
Every var gets a ``dims_mapping``: one entry per tensor dim, the mesh axis
it is split along, or ``-1`` for replicated (:func:`replicated`,
:func:`sharded`).  On a 1-D mesh the TP axis is 0; on a DP x TP mesh DP is
0 and TP is 1.  ``ProgramBuilder`` puts it on vars (``mapping=``) and every
op it appends gets a dist attr on the case's mesh: the passes read these
from the ``DistributedContext``.
"""
from __future__ import annotations

from verify.ir import legacy_ir  # noqa: F401  (legacy IR before paddle)

from cases.base import Case, Expect, FeedSpec, RankProgram  # noqa: E402
from cases.program_builder import (  # noqa: E402
    BACKWARD,
    FORWARD,
    LOSS,
    OPTIMIZE,
    ProgramBuilder,
)

OVERLAP = "allreduce_matmul_grad_overlapping"
PROMOTION = "auto_parallel_fused_linear_promotion"
VERDICTS = ("EQUIVALENT", "NOT_EQUIVALENT", "CONTRACT_BROKEN", "PASS_CRASHED",
            "NOT_APPLIED", "INCONCLUSIVE")


def tp_mesh(tp: int) -> list:
    """A 1-D tensor-parallel mesh ``[0, .., tp-1]``."""
    return list(range(tp))


def dp_tp_mesh(dp: int, tp: int) -> list:
    """A DP x TP mesh: row ``i`` holds the TP group of replica ``i``."""
    return [[i * tp + j for j in range(tp)] for i in range(dp)]


def tp_rings(mesh, ring_id: int = 0) -> dict:
    """``{ring_id: [TP groups]}``: the rows of ``mesh`` (or the 1-D mesh)."""
    rows = mesh if mesh and isinstance(mesh[0], (list, tuple)) else [mesh]
    return {ring_id: [list(r) for r in rows]}


def dp_rings(mesh) -> dict:
    """``{ring_id: [group]}`` for each data-parallel group (a column of a
    DP x TP mesh), numbered as Paddle's planner numbers them: the id of the
    group in Paddle's process-group registry.  The promotion pass compares a
    startup broadcast's ring with these ids to tell a DP broadcast."""
    from paddle.distributed.auto_parallel.static.process_group import new_process_group

    cols = [[row[i] for row in mesh] for i in range(len(mesh[0]))]
    return {new_process_group(sorted(c)).id: [c] for c in cols}


def dp_ring_of(mesh, rank: int) -> int:
    """The ring id of ``rank``'s data-parallel group (see :func:`dp_rings`)."""
    for rid, groups in dp_rings(mesh).items():
        if rank in groups[0]:
            return rid
    raise ValueError(f"rank {rank} not in mesh {mesh}")


def replicated(ndim: int) -> list:
    """The dims mapping of a tensor replicated on every rank."""
    return [-1] * ndim


def sharded(ndim: int, dim: int, mesh_axis: int = 0) -> list:
    """The dims mapping of a tensor whose ``dim`` is split along ``mesh_axis``."""
    m = [-1] * ndim
    m[dim] = mesh_axis
    return m


__all__ = ["BACKWARD", "Case", "Expect", "FORWARD", "FeedSpec", "LOSS", "OPTIMIZE",
           "OVERLAP", "PROMOTION", "ProgramBuilder", "RankProgram", "VERDICTS",
           "dp_ring_of", "dp_rings", "dp_tp_mesh", "replicated", "sharded",
           "tp_mesh", "tp_rings"]
