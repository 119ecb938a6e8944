"""How ``fuse_attention_ffn_qkv_pass`` made each fused parameter from the
unfused ones, read from what it did (``FLAGS_enable_fused_ffn_qkv_pass``;
Paddle 3.3.1 ``auto_parallel/static/pir_pass.py``).

The pass replaces the q/k/v projections (and a gate/up pair) of the Engine's
forward program by one matmul of a new parameter, and fills that parameter,
outside the programs, from the dygraph parameters it replaces
(``fuse_param_func``).  The programs alone therefore do not say which
columns of the fused parameter hold which unfused parameter's columns.
:func:`install_recorder` wraps the pass where the Engine calls it and
records, for every fused parameter, its parts (in the order the pass's
fusion map lists them) and the layout it actually wrote: read from the
values (every column of the fused parameter matched to the one column of one
part it equals), never from the pass's code.  :func:`fuse_by_record` then
makes a fused value from any unfused values by that layout, so a run can
give the fused program exactly what the pass's rule gives the flag-off
program's parameters.

The match needs columns that are pairwise distinct across the parts (random
initialisation makes them so); a column matching no part, or more than one,
is reported, not guessed.
"""
from __future__ import annotations

import numpy as np

from verify.numeric.fused_params import FusionLayoutError, derive_blocks


def install_recorder(sink: list, probe_seed=None) -> None:
    """Wrap the fusion where the Engine calls it
    (``engine.fuse_attention_ffn_qkv_pass``; call after any replacement of
    it) so that each call appends to ``sink`` one record per fused
    parameter: ``{"kind", "name", "parts", "part_shapes", "shape",
    "blocks"}`` (blocks: :func:`derive_blocks`), or, where the fused value is
    no permutation of its parts, ``{"kind", "name", "parts", "error",
    "counterexample"}``.  ``probe_seed``: first give every dygraph parameter
    distinct seeded values (a planning process, whose zero biases would
    leave columns ambiguous; its values are never run)."""
    from paddle.distributed.auto_parallel.static import engine

    fuse = engine.fuse_attention_ffn_qkv_pass

    def recorded(startup, main, concrete_program, *args, **kwargs):
        import paddle

        dy, pir = concrete_program.parameters
        # a dense (not dist) parameter is its own local value
        locals_ = [d._local_value() if d.is_dist() else d for d in dy]
        if probe_seed is not None:
            rs = np.random.RandomState(probe_seed)
            with paddle.base.dygraph.guard():
                for local in locals_:
                    paddle.assign(paddle.to_tensor(
                        rs.randn(*local.shape).astype(str(np.array(local.numpy()).dtype))),
                        local)
        before = {q.name: np.array(v.numpy()) for v, q in zip(locals_, pir)}
        fusion_map = fuse(startup, main, concrete_program, *args, **kwargs)
        after = {q.name: d for d, q in zip(*concrete_program.parameters)}
        for kind in sorted(fusion_map):
            for fusion in fusion_map[kind]:
                for fused_name, metas in fusion.items():
                    parts = {m.name: before[m.name] for m in metas}
                    fused = np.array(after[fused_name]._local_value().numpy())
                    rec = {"kind": kind, "name": fused_name, "parts": list(parts),
                           "part_shapes": {p: list(a.shape) for p, a in parts.items()},
                           "shape": list(fused.shape)}
                    try:
                        rec["blocks"] = derive_blocks(fused_name, parts, fused)
                    except FusionLayoutError as exc:
                        rec.update(error=str(exc), counterexample=exc.counterexample)
                    sink.append(rec)
        return fusion_map

    engine.fuse_attention_ffn_qkv_pass = recorded


RECORD = "fusion.json"  # beside the rank's planner records


def record_in_planning_process(probe_seed: int = 0) -> None:
    """In a planning process (``verify/plan/pir_rank.py``, whose
    ``--rank-dir`` names the rank's output folder): record the fusion into
    ``<rank dir>/fusion.json`` as the pass runs."""
    import json
    import sys
    from pathlib import Path

    argv = sys.argv
    if "--rank-dir" not in argv:
        raise RuntimeError("not a planning process: no --rank-dir among "
                           f"{argv[:6]!r} (verify.plan.pir_rank.command)")
    out = Path(argv[argv.index("--rank-dir") + 1])
    sink = []
    install_recorder(sink, probe_seed)
    from paddle.distributed.auto_parallel.static import engine

    recorded = engine.fuse_attention_ffn_qkv_pass

    def then_written(*args, **kwargs):
        fusion_map = recorded(*args, **kwargs)
        out.mkdir(parents=True, exist_ok=True)
        (out / RECORD).write_text(json.dumps(sink, indent=1, sort_keys=True))
        return fusion_map

    engine.fuse_attention_ffn_qkv_pass = then_written


NAMES = ("build_model", "loss", "optimizer", "inputs", "labels")


def with_fusion(base_file: str, namespace: dict) -> None:
    """Fill ``namespace`` (a model file's ``globals()``) with ``base_file``'s
    model (``NAMES``, ``BATCH``) and a ``configure`` (the planning process's
    strategy hook) that turns the fusion on and records it."""
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(
        "_fused_ffn_qkv_" + base_file.replace(".py", ""),
        os.path.join(os.path.dirname(__file__), base_file))
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    namespace.update({n: getattr(base, n) for n in NAMES})
    if hasattr(base, "BATCH"):
        namespace["BATCH"] = base.BATCH

    def configure(strategy):
        """read by Engine._parallel_pir in this (the planning) process only"""
        os.environ["FLAGS_enable_fused_ffn_qkv_pass"] = "1"
        record_in_planning_process()

    namespace["configure"] = configure
