"""``python -m verify repro``: one self-contained reproducer file per application.

The file (``verify/repro/legacy_template.py`` with this application's data filled in)
needs only the installed Paddle: it rebuilds every rank's original programs
from their serialized ProgramDescs plus the recorded dist attrs (which the
descs do not carry), applies the pass (installed, or the ``--pass-file``
source embedded in the file) with the attrs the adapter gives it, and prints
the evidence (the traceback; the pass doing nothing where its pattern is
present; or the values that differ between the original and the rewritten
programs of all ranks, run with Paddle's executor and a lock-step simulator
for the collectives).  It exits 1 while the defect is present, 0 once the
rewrite is faithful, 2 when it cannot judge.

What the file records per rank: main/startup desc bytes (base64), every op's
and var's dist attr, the pass attrs that are not programs (``global_rank``,
``enable_sp``, ``amp_level``; ``dist_context`` and ``params_grads`` are
rebuilt, a Variable attr such as AMP's ``loss`` is written by name and
looked up in the rebuilt main), whether the pass's documented pattern is present (the adapter's
matcher, run here on the original), feeds, fetches, loss, the rank's DP/TP
position; for the case: rings, Paddle's process groups, sharded parameters,
the seed; and the application's contract findings as *claims* the file
re-evaluates on the programs it builds (``contract_claims``), so a finding
whose values are kept (CONTRACT_BROKEN: a collective left on the wrong
stream, a stale declared shape) also exits 1 while it is present.
"""
from __future__ import annotations

import base64
import json
import os
import zlib

from verify.ir.legacy_ir import paddle_module
from verify.ir.paddle_overlay import require_here
from verify.repro.errors import ReproError  # noqa: F401  (callers catch it from here)
from verify.repro.embedded import embed, fill, literal, pass_loader
from verify.repro.init_source import legacy_source

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "legacy_template.py")
STEPS = 3


def _here(adapter, case, rank):
    """``adapter.apply_local`` in this process (the program it builds is
    fingerprinted as the reproducer's own build will be: extra attrs kept),
    refused under a --paddle-file overlay this process did not load."""
    require_here(f"the reproducer of {adapter.name} on case {case.name} rank {rank}")
    return adapter.apply_local(case, rank)


def _attrs_record(attrs: dict, rp, adapter=None, case=None) -> dict:
    out = {}
    for k, v in attrs.items():
        if v is rp.dist_context:
            out[k] = {"$": "dist_context"}
        elif k == "params_grads":
            out[k] = {"$": "params_grads"}
        elif isinstance(v, paddle_module().static.Variable):
            # a var of this rank's main (the AMP pass's ``loss``): written by
            # name (payload data, never source), resolved in the rebuilt main
            block = rp.main.global_block()
            if not block.has_var(v.name) or block.var(v.name) is not v:
                where = f"{adapter.name} on case {case.name} rank {rp.rank}: " \
                    if adapter is not None and case is not None else ""
                raise ReproError(f"{where}pass attr {k!r}: Variable {v.name!r} is not a "
                                 "var of the rank's main global block")
            out[k] = {"$": "var", "name": v.name}
        else:
            try:
                json.dumps(v)
            except TypeError:
                where = f"{adapter.name} on case {case.name} rank {rp.rank}: " \
                    if adapter is not None and case is not None else ""
                raise ReproError(f"{where}pass attr {k!r} ({type(v).__name__}) cannot be "
                                 "written to a reproducer") from None
            out[k] = v
    return out


def _pattern_text(adapter, snap) -> str:
    """Where the adapter's matcher found the pass's documented pattern."""
    import sys

    mod = sys.modules.get(type(adapter).__module__)
    where = []
    try:
        if hasattr(mod, "matched_pairs"):  # overlap: matmul_v2_grad -> allreduce of dX
            where = [f"{g.type} op {g.idx} -> {ar.type} op {ar.idx} of its X@GRAD"
                     for g, ar in mod.matched_pairs(snap)]
        elif hasattr(mod, "biases"):  # promotion: bias added after a row collective
            where = [f"bias {b} added at op {i} after a row-parallel collective"
                     for b, i in mod.biases(snap).items()]
    except Exception:
        where = []
    return "; ".join(where) or f"{adapter.name}'s documented pattern, found by the " \
        "suite's matcher on the original"


# -- contract findings as claims the reproducer re-evaluates ------------------
def _fingerprint(program) -> str:
    """A hash of a program's structure: per op its type, the arity of its
    slots and its numeric/bool attrs (no var names: the pass's fresh names
    depend on the name generator's state, which differs between this
    process and the reproducer's); ``fingerprint`` in repro_script.py is
    the same function."""
    import hashlib

    sig = []
    for op in program.global_block().ops:
        d = op.desc
        attrs = sorted([a, op.attr(a)] for a in d.attr_names()
                       if isinstance(op.attr(a), (bool, int, float)) and a != "op_role")
        sig.append([op.type, sorted([s, len(d.input(s))] for s in d.input_names()),
                    sorted([s, len(d.output(s))] for s in d.output_names()), attrs])
    return hashlib.sha256(json.dumps(sig).encode()).hexdigest()[:16]


def _claim(check: dict) -> dict:
    """One CONTRACT_BROKEN check (report form) as a claim.  Kinds, chosen by
    what the counterexample records (never by check, case or pass name):

    * ``stream``: the op (``op_index``/``op_type``, reading ``var``) runs on
      the recorded ``stream`` (its dist attr ``execution_stream``);
    * ``follows_writer``: the op does not directly follow the op writing
      ``var`` (a ``previous`` op was recorded);
    * ``order``: the op runs before the op recorded as ``runs_before``
      (``op_index``/``op_type``/``var`` of each), which it must follow;
    * ``declared_shape``: ``var`` is declared with the recorded stale shape;
    * ``cast_dtype``: the cast at ``op_index`` produces another dtype than
      its output ``var`` is declared with;
    * ``program``: anything else: the rank's rewritten program is still the
      one the suite's check rejected (same fingerprint).
    A claim is the observation that broke the contract; the reproducer
    reports the defect while the program the pass builds still shows it."""
    cex = check.get("counterexample") or {}
    claim = {"rank": check.get("rank", cex.get("rank")),
             "check": f"{check.get('kind')}/{check.get('name')}",
             "message": check.get("message", ""), "op_index": cex.get("op_index"),
             "op_type": cex.get("op_type"), "var": cex.get("var")}
    if "stream" in cex and cex.get("op_type"):
        return {**claim, "kind": "stream", "broken": cex["stream"]}
    if isinstance(cex.get("runs_before"), dict) and cex.get("op_type") and cex.get("var"):
        later = cex["runs_before"]
        return {**claim, "kind": "order",
                "later": {k: later.get(k) for k in ("op_index", "op_type", "var")}}
    if "previous" in cex and cex.get("op_type") and cex.get("var"):
        return {**claim, "kind": "follows_writer"}
    if "declared" in cex and cex.get("var"):
        return {**claim, "kind": "declared_shape", "broken": list(cex["declared"])}
    if cex.get("rule") == "cast dtype" and cex.get("var"):
        return {**claim, "kind": "cast_dtype"}
    return {**claim, "kind": "program"}


def _contract_checks(adapter, case, pass_file=None) -> list:
    """The application's failing checks (report form), run here without the
    value proof and numeric runs (the contract and shape checks decide a
    CONTRACT_BROKEN)."""
    from verify.engine.application import run_application

    loaded = None
    if pass_file:
        from verify.ir.pass_files import load_pass_file

        loaded = load_pass_file(pass_file)
    try:
        app = run_application(adapter, case, value=False)
    finally:
        if loaded is not None:
            loaded.restore()
    return [c.to_dict() for c in app.checks if not c.ok]


def contract_claims(adapter, case, pass_file=None, checks=None) -> list:
    """The application's CONTRACT_BROKEN findings as claims (``_claim``),
    each with the fingerprint of its rank's rewritten main and startup
    programs.
    ``checks``: the application's checks as the report holds them (``verify
    run`` passes them); None: run the checks here."""
    if checks is None:
        checks = _contract_checks(adapter, case, pass_file)
    broken = [c for c in checks if c.get("verdict") == "CONTRACT_BROKEN"
              and not c.get("advisory") and not c.get("ok", False)]
    if not broken:
        return []
    claims = [_claim(c) for c in broken]
    ranks = sorted({c["rank"] for c in claims if c["rank"] is not None})
    loaded = None
    if pass_file:
        from verify.ir.pass_files import load_pass_file

        loaded = load_pass_file(pass_file)
    try:
        prints = {}
        for r in ranks:
            rewritten = _here(adapter, case, r).rewritten
            prints[r] = _fingerprint(rewritten.main) + _fingerprint(rewritten.startup)
    finally:
        if loaded is not None:
            loaded.restore()
    for c in claims:
        c["fingerprint"] = prints.get(c["rank"])
    return claims


def payload(adapter, case, pass_file=None, seed=None, checks=None, found=None) -> dict:
    """Everything the reproducer of ``adapter`` on ``case`` needs, as JSON data."""
    paddle = paddle_module()
    from paddle.distributed.passes.pass_base import PassBase

    if adapter.name not in PassBase._REGISTERED_PASSES and pass_file is None:
        raise ReproError(f"{adapter.name} on case {case.name}: not one Paddle pass (a "
                         "pipeline of them); its stage results name the pass to reproduce")
    if getattr(adapter, "repro_blocker", ""):  # what a standalone script cannot rebuild
        raise ReproError(f"{adapter.name} on case {case.name}: {adapter.repro_blocker}")
    from paddle.distributed.auto_parallel.static.process_group import get_all_process_groups

    from verify.plan.records import mesh_record as _mesh_record
    from verify.plan.records import program_record as _program_record
    from verify.report.write import DEFAULT_SEED
    from verify.ir.snapshot import from_programs

    ranks = {}
    mesh = None
    for rank in case.ranks:
        rp = case.build(rank)
        ctx = rp.dist_context
        if mesh is None:
            meshes = [m for m in ctx.process_meshes if _mesh_record(m)]
            mesh = _mesh_record(meshes[0]) if meshes else None
        # the pattern is judged on the program the pass meets (after the
        # passes it depends on); the reproducer embeds the case's own
        orp = adapter.build_original(case, rank) if adapter.preceding(case, rp) else rp
        snap = from_programs(orp.main, orp.startup)
        present = adapter.pattern_present(snap)
        ranks[str(rank)] = {
            "main": base64.b64encode(rp.main.desc.serialize_to_string()).decode(),
            "startup": base64.b64encode(rp.startup.desc.serialize_to_string()).decode(),
            "random_seed": int(rp.main.random_seed or 0),
            "dist": {"main": _program_record(rp.main, ctx),
                     "startup": _program_record(rp.startup, ctx)},
            "attrs": _attrs_record(adapter.attrs(case, rp), rp, adapter, case),
            # passes the planner applies before this one in the same context
            "preceding": [{"pass": name, "attrs": _attrs_record(attrs, rp, adapter, case)}
                          for name, attrs in adapter.preceding(case, rp)],
            "params_grads": [[p.name, g.name] for p, g in rp.params_grads],
            "pattern": _pattern_text(adapter, snap) if present else "",
            "feeds": [{"name": f.name, "shape": list(f.shape), "dtype": f.dtype,
                       "split": f.split} for f in rp.feeds],
            "fetches": list(rp.fetches), "loss": rp.loss,
            "dp_index": case.dp_index(rank), "tp_index": case.tp_index(rank),
        }
    # values the pass leaves stale on purpose, confirmed dead on the program it
    # builds (verify/ir/dead_values.py): the reproducer does not compare them
    from passes.base import PassAdapter

    if type(adapter).unobserved is not PassAdapter.unobserved:
        from verify.ir.dead_values import unobserved

        # on the program the pass under review builds (the file's, not the installed)
        loaded = None
        if pass_file:
            from verify.ir.pass_files import load_pass_file

            loaded = load_pass_file(pass_file)
        try:
            for rank in case.ranks:
                run = _here(adapter, case, rank)
                if run.error is None:
                    dead = unobserved(adapter, case, rank,
                                      from_programs(run.original.main, run.original.startup),
                                      from_programs(run.rewritten.main,
                                                    run.rewritten.startup))
                    ranks[str(rank)]["unobserved"] = sorted(dead)
        finally:
            if loaded is not None:
                loaded.restore()
    if mesh is None:
        import numpy as np

        arr = np.array(case.mesh)
        mesh = {"shape": list(arr.shape), "process_ids": arr.flatten().tolist(),
                "dim_names": ["dp", "mp"][-arr.ndim:]}
    low = case.params.get("amp_dtype")
    fp32_twin = case.amp_level in ("o1", "o2") and bool(low) and low != "float32" \
        and not paddle.is_compiled_with_cuda()
    return {
        "pass": adapter.name, "case": case.name,
        "expected": case.expectation(adapter.name).verdict,
        # the verdict the run that wrote it found ("" : written on its own)
        "found": found or "",
        # the pass file's text is embedded by script() (verify/repro/embedded.py)
        "pass_file": os.path.abspath(pass_file) if pass_file else "",
        "mesh": mesh,
        "rings": {str(k): [list(map(int, g)) for g in v] for k, v in case.rings.items()},
        # this process's registry of Paddle's process groups, where the case's
        # own single-group rings override it (other cases leave groups behind)
        "process_groups": {**{str(g.id): list(map(int, g.ranks))
                              for g in get_all_process_groups()},
                           **{str(k): list(map(int, v[0])) for k, v in case.rings.items()
                              if int(k) != 0 and len(v) == 1}},
        "sharded_params": sorted(case.sharded_params), "fp32_twin": fp32_twin,
        "seed": DEFAULT_SEED if seed is None else int(seed), "steps": STEPS,
        "ranks": ranks,
        "contract": contract_claims(adapter, case, pass_file, checks),
        # planning-process state the pass reads (passes.*: repro_planner)
        "planner": adapter.repro_planner(case) if hasattr(adapter, "repro_planner") else {},
    }


def script(adapter, case, pass_file=None, seed=None, checks=None, found=None) -> str:
    """The reproducer's source text."""
    blocker = (getattr(case, "params", None) or {}).get("repro_blocker")
    if blocker:  # what a standalone script cannot rebuild for this case
        raise ReproError(f"case {case.name}: {blocker}")
    if getattr(case, "ir", "legacy") == "pir":  # PIR programs: verify/repro/pir_script.py
        from verify.repro.pir_script import script as pir_script

        return embed(pir_script(adapter, case, pass_file, seed, found=found))
    data = payload(adapter, case, pass_file, seed, checks, found)
    blob = base64.b64encode(zlib.compress(json.dumps(data).encode(), 9)).decode()
    lines = "\n".join(blob[i:i + 100] for i in range(0, len(blob), 100))
    with open(TEMPLATE) as f:
        text = f.read()
    title = f"{adapter.name} on case {case.name}" + (
        f" (pass from {os.path.abspath(pass_file)})" if pass_file else "")
    # one pass over the template; every value from input is a literal (never
    # pasted into the docstring or a string: verify/repro/embedded.py)
    text = fill(text, {"__TITLE__": literal(title), "__PAYLOAD__": lines,
                       "__INIT_SOURCE__": legacy_source(),
                       "__PASS_LOADER__": pass_loader(pass_file).strip()})
    return embed(text)


def file_name(adapter, case) -> str:
    """The reproducer's file name: one safe path component whatever the case
    is called (``verify/safe_names.py``)."""
    from verify.safe_names import component

    return component(f"repro_{adapter.short}_{case.name}") + ".py"


def default_out(adapter, case) -> str:
    return os.path.join("reports", "repro", file_name(adapter, case))


def command(pass_name, case_name, pass_file=None, case_file=None) -> str:
    """The command line that writes this application's reproducer."""
    import shlex

    cmd = f"python -m verify repro --pass {shlex.quote(pass_name)} --case {shlex.quote(case_name)}"
    if pass_file and pass_file != "installed":
        cmd += f" --pass-file {shlex.quote(pass_file)}"
    if case_file:
        cmd += f" --case-file {shlex.quote(case_file)}"
    return cmd


def write(adapter, case, out=None, pass_file=None, seed=None, checks=None,
          found=None) -> str:
    out = out or default_out(adapter, case)
    text = script(adapter, case, pass_file, seed, checks, found)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    return out
