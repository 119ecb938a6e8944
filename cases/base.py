"""What a case is: a deterministic builder of per-rank legacy programs.

A case never knows which pass will be applied to it.  It states, per pass
name, what that pass must do on it (fire or not) and the verdict the
installed Paddle is expected to get, with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from verify.ir import legacy_ir  # noqa: F401  (legacy IR before paddle)


@dataclass(frozen=True)
class Expect:
    """What one pass must do on a case, and the verdict today's Paddle gets."""

    fires: bool
    verdict: str = "EQUIVALENT"
    reason: str = ""
    # for a finding: what shows it (which check, what counterexample), and the
    # fixed pass that mends it where there is one; docs/findings.md prints it
    evidence: str = ""


@dataclass
class FeedSpec:
    """A fed variable: concrete shape for numeric runs, dtype, and how the
    rank's data is chosen (``split``: "dp", equal within a TP group and
    different across DP replicas; "tp", different on every rank, for data
    sharded over the tensor-parallel axis)."""

    name: str
    shape: tuple
    dtype: str = "float32"
    split: str = "dp"


@dataclass
class RankProgram:
    """One rank's programs as a case built them (live Paddle objects)."""

    rank: int
    main: object
    startup: object
    dist_context: object
    params_grads: list
    feeds: list  # [FeedSpec]
    loss: str | None = None
    fetches: list = field(default_factory=list)  # forward outputs to compare


@dataclass
class Case:
    """A family member: per-rank programs plus what checks need to know.

    ``mesh`` is the process mesh as nested lists (``[[0, 1]]`` for DP1 x TP2,
    or a flat list for a 1-D mesh).  ``rings`` maps ring_id to the groups of
    ranks communicating on it.  ``symbols`` names the symbolic dims of fed
    vars (``{"x": ("B", None, None)}``); a ``-1`` not named here becomes a
    fresh symbol.  ``sharded_params`` are parameters whose values differ per
    tensor-parallel rank; all other parameters are replicated.
    """

    name: str
    family: str
    summary: str
    mesh: list
    builder: Callable[["Case", int], RankProgram]
    expect: dict  # pass name -> Expect
    rings: dict = field(default_factory=dict)
    symbols: dict = field(default_factory=dict)
    sharded_params: frozenset = frozenset()
    enable_sp: bool = False
    amp_level: str = "o0"
    # Runs the numeric backends can do faithfully; reason where one cannot.
    gloo_unfaithful: str = ""
    params: dict = field(default_factory=dict)  # free-form builder params
    # The IR of the programs the builder makes: "legacy" (ProgramDesc) or
    # "pir"; a pass adapter is paired only with cases of its own IR.
    ir: str = "legacy"
    # The case file a case came from (``--case-file``); "" for built-in cases.
    source_file: str = ""

    @property
    def ranks(self) -> list:
        return sorted(int(r) for r in np.array(self.mesh).flatten())

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def mesh_shape(self) -> tuple:
        return tuple(np.array(self.mesh).shape)

    def tp_index(self, rank: int) -> int:
        """Position of ``rank`` along the last (tensor-parallel) mesh axis."""
        arr = np.array(self.mesh)
        where = np.argwhere(arr == rank)[0]
        return int(where[-1])

    def dp_index(self, rank: int) -> int:
        """Position of ``rank`` along the data-parallel axis (0 for 1-D)."""
        arr = np.array(self.mesh)
        if arr.ndim == 1:
            return 0
        return int(np.argwhere(arr == rank)[0][-2])

    def expectation(self, pass_name: str) -> Expect:
        """What ``pass_name`` must do here; a pass a case does not name must
        leave it alone (its pattern is absent from this family)."""
        return self.expect.get(
            pass_name,
            Expect(fires=False, verdict="EQUIVALENT",
                   reason="pattern of this pass is absent from the family"),
        )

    def numeric_twin(self) -> "Case":
        """The case whose programs numeric runs execute on this platform.

        A case built for AMP (``params["amp_dtype"]`` float16/bfloat16) has
        no CPU kernels for its half-precision matmuls, so on a CPU build its
        numeric runs use a twin with the same ops and float32 compute; on a
        CUDA build the case itself runs.  Returns ``self`` when no twin is
        needed.
        """
        import dataclasses

        from verify.ir.legacy_ir import paddle_module

        low = self.params.get("amp_dtype")
        if self.amp_level not in ("o1", "o2") or not low or low == "float32" \
                or paddle_module().is_compiled_with_cuda():
            return self
        return dataclasses.replace(self, params={**self.params, "amp_dtype": "float32"})

    def build(self, rank: int, then=None) -> RankProgram:
        """Build ``rank``'s programs afresh; two builds are identical.

        ``then(rp)`` runs inside the same fresh name generator, so names a
        pass generates while rewriting are deterministic too.
        """
        if rank not in self.ranks:
            raise ValueError(f"case {self.name}: rank {rank} not in mesh {self.mesh}")
        from paddle.utils import unique_name

        with unique_name.guard():
            rp = self.builder(self, rank)
            if then is not None:
                then(rp)
                if getattr(rp, "plan_digest", None):  # no longer what the files hold
                    rp.plan_digest = None
            return rp
