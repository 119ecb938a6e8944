"""The value proof of a pipeline plan's relation: every rank's job list, as
its ``pipeline_scheduler`` pass made it, against the serial program's
micro-steps (``merged_relation``'s serial side), for ALL inputs, at the real
shapes (``verify/numeric/job_plan_runs.py`` is the numeric witness).

Each rank runs its job list in order, ``(type, micro-batch)`` pairs over
the scheduler's sub-programs (``forward``, ``backward``, ``optimizer``,
...), all ranks in lock step in one symbolic execution: a send leaves its
tensor in a mailbox and goes on, a recv takes the oldest tensor its peer
sent on that ring (``symbolic.Executor``), so under 1F1B a job's peer is a
job at another position of the other rank's list.  As 3.3.1's
``StandaloneExecutor`` scopes them: each micro-batch has its own scope, a
child of the rank's.  A job writes a value into the rank's scope when the
rank's scope holds it (parameters, persistable data, the merge's
accumulators: persistable keyword block arguments, set by the rank's
startup), else into its micro-batch's scope, and reads its micro-batch's
scope first.  What a job hands a later one (a ``builtin.shadow_output``)
stays in its micro-batch's scope; a non-persistable keyword block argument
no earlier job of the micro-batch stored (nor a feed of it) stops the run:
the job list cannot run (INCONCLUSIVE, saying which).  In-place writes of a
persistable carry to the rank's scope at the end of each job.

Compared on every rank, through the placements, as the merged proof does:
the loss of each micro-batch (where the rank's forward job stores it), each
gradient its optimizer job reads against the merged one, the parameters and
states after each micro-batch's backward job and after the step, and every
rank-only state back at its start value after the step (else a second step).
The job programs' values are found under the whole program's names by
``job_plan_runs.watch_map`` (the caller's).  A refuted rank whose whole
program's merged schedule is proved names the ``pipeline_scheduler`` stage.
"""
from __future__ import annotations

from bisect import bisect_right

from verify.ir.inplace import resolved
from verify.ir.snapshot import Op

from .merged_relation import _carry, _Schedule, prove_merged_relation
from .symbolic import ExecError, Rank
from .views import Views


class _ScopedEnv:
    """A job's view of its rank's scope (``shared``) and its micro-batch's
    (``local``): reads the local first; writes go to the rank's scope when
    it holds the name.  A handed value (``handed``) found in neither is an
    ExecError naming the job."""

    def __init__(self, shared, local, handed, rank, where):
        self.shared, self.local, self.handed = shared, local, handed
        self.rank, self.where = rank, where

    def get(self, name, default=None):
        if name in self.local:
            return self.local[name]
        if name in self.shared:
            return self.shared[name]
        if name in self.handed:
            raise ExecError(f"{self.where} reads {name}, which no earlier job of its "
                            "micro-batch stored", self.rank)
        return default

    def __getitem__(self, name):
        got = self.get(name)
        if got is None:
            raise KeyError(name)
        return got

    def __contains__(self, name):
        return name in self.local or name in self.shared

    def __setitem__(self, name, value):
        (self.shared if name in self.shared else self.local)[name] = value

    def update(self, items):
        for name, value in items.items():
            self[name] = value


class _JobList(Rank):
    """One rank's job list as one op stream (``Executor.run`` drives it):
    the env and snapshot of the job at ``pos``; a job's end carries its
    in-place writes of the rank's scope and calls ``finished(kind, m,
    env)``."""

    def __init__(self, rank, jobs, snaps, handed, shared, locals_, roots, finished):
        self.rank, self.pos, self.views = rank, 0, Views()
        self.shared, self.locals, self.roots, self.finished = shared, locals_, roots, finished
        self.starts, self.jobs, self.ops = [], [], []
        self.index = []  # each kept job's position in the job list
        for i, (kind, m) in enumerate(jobs):
            if not snaps[kind].ops:
                continue  # an empty sub-program (e.g. a stage's recv_forward)
            self.starts.append(len(self.ops))
            self.index.append(i)
            self.jobs.append((kind, m, snaps[kind], handed[kind]))
            self.ops += list(snaps[kind].ops)
        self.cur, self.view = None, None

    def _job(self) -> int:
        j = bisect_right(self.starts, min(self.pos, len(self.ops) - 1)) - 1
        if j != self.cur:
            self.finish()
            kind, m, _, handed = self.jobs[j]
            self.cur = j
            self.view = _ScopedEnv(self.shared, self.locals[m], handed, self.rank,
                                   f"rank {self.rank} job {self.index[j]} ({kind}, "
                                   f"micro-batch {m})")
        return j

    def where(self) -> str:
        """The job at ``pos``, for messages."""
        if self.pos >= len(self.ops):
            return "the end of its job list"
        j = bisect_right(self.starts, self.pos) - 1
        kind, m, _, _ = self.jobs[j]
        return f"job {self.index[j]} ({kind}, micro-batch {m}) op {self.pos - self.starts[j]}"

    def finish(self):
        """End the current job (once)."""
        if self.cur is None:
            return
        kind, m, snap, _ = self.jobs[self.cur]
        _carry(self.view, snap.ops, [n for n in self.roots if n in self.shared])
        self.finished(kind, m, self.view, self.index[self.cur])
        self.cur = None

    @property
    def env(self):
        self._job()
        return self.view

    @env.setter
    def env(self, value):  # Rank.__init__'s; the views are the jobs'
        pass

    @property
    def snap(self):
        return self.jobs[self._job()][2]

    @snap.setter
    def snap(self, value):
        pass


CONSTANT_OPS = ("pd_op.full_int_array", "pd_op.full")


def handed_constants(job_snaps: dict) -> dict:
    """``job_snaps`` with each op reading a constant an earlier job handed
    it (a ``builtin.shadow_output`` of a ``pd_op.full_int_array`` /
    ``pd_op.full`` result, the same constant wherever it is stored under
    that name) given ``<slot>@value``, as the snapshot records a constant
    operand of its own program (``pir_snapshot``): rows read constants from
    attrs.  The value read is still the handed one (a job reading a name no
    earlier job of its micro-batch stored stops the run)."""
    stored, clash = {}, set()
    for snap in job_snaps.values():
        const = {op.outputs["out"][0]: op.attrs["value"] for op in snap.ops
                 if op.type in CONSTANT_OPS and op.outputs.get("out") and "value" in op.attrs}
        for op in snap.ops:
            if op.type != "builtin.shadow_output":
                continue
            (src,) = op.inputs.get("operands") or [None]
            out = op.attrs.get("output_name")
            if src not in const or out is None:
                clash.add(out)
            elif stored.setdefault(out, const[src]) != const[src]:
                clash.add(out)
    for n in clash:
        stored.pop(n, None)
    out = {}
    for kind, snap in job_snaps.items():
        ops, changed = [], False
        for op in snap.ops:
            add = {f"{slot}@value": stored[ns[0]] for slot, ns in op.inputs.items()
                   if len(ns) == 1 and ns[0] in stored and f"{slot}@value" not in op.attrs}
            if add:
                op = Op(op.idx, op.type, op.inputs, op.outputs, {**op.attrs, **add}, op.role,
                        op.stream)
                changed = True
            ops.append(op)
        out[kind] = snap.with_ops(ops) if changed else snap
    return out


class _JobListSchedule(_Schedule):
    """``_Schedule`` with each rank's side its job list: ``jobs[r]`` =
    ``[(type, micro-batch)]``, ``job_snaps[r]`` = ``{type: snapshot}``,
    ``handed[r]`` = ``{type: non-persistable keyword arguments}``,
    ``persistables[r]`` = the persistable keyword arguments of its jobs,
    ``maps[r]`` = ``job_plan_runs.watch_map``'s answer."""

    def __init__(self, *args, jobs, job_snaps, handed, persistables, maps):
        super().__init__(*args)
        self.jobs, self.handed, self.maps = jobs, handed, maps
        self.sources = {}  # {rank: {label: the job (and op) that stored it}}
        self.job_snaps = {r: {t: resolved(s) for t, s in handed_constants(js).items()}
                          for r, js in job_snaps.items()}
        self.r_roots = {r: sorted(set(persistables[r]) | {
            n for s in self.job_snaps[r].values() for op in s.ops
            if op.type == "builtin.parameter" for ns in op.outputs.values() for n in ns})
            for r in self.ranks}

    def _ranks_step(self, tag, rec, envs):
        k = self.k
        got = {r: {"loss": {}, "states": {}, "grads": {}, "final": {}} for r in self.ranks}
        lists = {}
        for r in self.ranks:
            locals_ = {m: {} for m in range(k)}
            for m in range(k):
                self._micro_pieces(r, locals_[m], rec["feeds"][m])
            lists[r] = _JobList(r, self.jobs[r], self.job_snaps[r], self.handed[r], envs[r],
                                locals_, self.r_roots[r], self._recorder(r, got[r]))
            bad = [m for _, m in self.jobs[r] if m not in locals_]
            if bad:
                raise ExecError(f"rank {r}'s job list names micro-batch {bad[0]}, outside "
                                f"the {k} micro-batches of a step", r)
        try:
            self.ex.run(lists, startup=False)
        except ExecError as exc:  # op indices are the job programs': say which jobs
            at = "; ".join(f"rank {r} at {lists[r].where()}" for r in self.ranks)
            raise ExecError(f"{exc} (job lists: {at})", exc.rank) from None
        for r in self.ranks:
            lists[r].finish()
            g = got[r]
            for i in range(k):
                self._micro_pairs(r, i, tag, rec, g["loss"].get(i), g["states"].get(i, {}))
            self._step_pairs(r, tag, rec, g["grads"],
                             {n: envs[r][n] for n in self._related(r) if n in envs[r]})
            self._name_jobs(r, tag, g["jobs"])

    def _name_jobs(self, r, tag, jobs):
        """``sources[r][label]``: the job (and op) that stored a compared value
        (``jobs``: the recorder's ``{("loss", m) | ("grad", whole name) |
        ("states", m): text}``), for a refutation's counterexample."""
        src = self.sources.setdefault(r, {})
        for i in range(self.k):
            if ("loss", i) in jobs:
                src[f"loss (micro-step {i + 1}){tag}"] = jobs[("loss", i)]
            for n in self._related(r):
                if ("states", i) in jobs:
                    src[f"{n} (after micro-step {i + 1}){tag}"] = jobs[("states", i)]
        for pname, p in self.r_rels[r]["params"].items():
            if ("grad", p["grad"]) in jobs:
                src[f"{pname}@GRAD{tag}"] = jobs[("grad", p["grad"])]

    def _recorder(self, r, got):
        m_loss = self.maps[r].get("loss")
        grads = self.maps[r].get("grads", {})
        related = self._related(r)
        got["jobs"] = {}

        def job(j, kind, m, name=None):
            text = f"rank {r} job {j} ({kind}, micro-batch {m})"
            ops = self.job_snaps[r][kind].ops
            at = [i for i, op in enumerate(ops) if name is not None and
                  any(name in ns for ns in op.outputs.values())]
            return text + (f" op {at[-1]} ({ops[at[-1]].type}) value {name}" if at else "")

        def finished(kind, m, view, j):
            if m_loss and m_loss[0] == kind:
                got["loss"][m] = view.get(m_loss[1])
                got["jobs"][("loss", m)] = job(j, kind, m, m_loss[1])
            for jname, wname in grads.get(kind, {}).items():
                got["grads"][wname] = view.get(jname)
                got["jobs"][("grad", wname)] = job(j, kind, m, jname)
            if kind.startswith("backward"):  # the deferred update: unchanged after it
                got["states"][m] = {n: view.shared[n] for n in related if n in view.shared}
                got["jobs"][("states", m)] = job(j, kind, m)
        return finished


def prove_job_list_relation(where, serial_snap, rank_snaps: dict, serial_rel: dict,
                            rank_rels: dict, rings: dict, k: int, avg: bool, jobs: dict,
                            job_snaps: dict, handed: dict, persistables: dict, maps: dict,
                            scheduler: str = "the pipeline scheduler") -> list:
    """One CheckResult per rank (``merged_relation.prove_merged_relation``'s
    budget, verdicts and counterexamples) of the ranks' job lists: see the
    module docstring and ``_JobListSchedule`` for the arguments by rank.
    ``rank_snaps``: the ranks' whole programs (their startups run; the
    regions checked)."""
    def schedule(*args):
        return _JobListSchedule(*args, jobs=jobs, job_snaps=job_snaps, handed=handed,
                                persistables=persistables, maps=maps)

    return prove_merged_relation(where, serial_snap, rank_snaps, serial_rel, rank_rels, {},
                                 rings, k, avg, schedule=schedule,
                                 schedule_text=f"the job lists {scheduler} made")
