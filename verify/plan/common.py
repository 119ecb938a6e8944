"""What both planners share: the error they raise, the mesh argument, the
model file and the strategy file."""
from __future__ import annotations

import json

SEED = 1234


class PlanError(Exception):
    pass


def parse_mesh(text, ranks: int) -> list:
    """``None`` -> ``[0..N-1]``; ``"DPxTP"`` -> a DP x TP mesh; else JSON lists."""
    if text is None:
        return list(range(ranks))
    text = text.strip()
    if "x" in text and not text.startswith("["):
        try:
            dp, tp = (int(t) for t in text.split("x"))
        except ValueError:
            raise PlanError(f"--mesh {text!r}: expected DPxTP (e.g. 2x2) or a JSON list") \
                from None
        mesh = [[i * tp + j for j in range(tp)] for i in range(dp)]
    else:
        try:
            mesh = json.loads(text)
        except json.JSONDecodeError:
            raise PlanError(f"--mesh {text!r}: expected DPxTP (e.g. 2x2) or a JSON list") \
                from None
    flat = sorted(r for row in mesh for r in (row if isinstance(row, list) else [row]))
    if flat != list(range(ranks)):
        raise PlanError(f"--mesh {text!r} holds ranks {flat}, not 0..{ranks - 1}")
    return mesh


def load_model(path: str, example: str = "examples/tiny_mlp.py"):
    """The model file as a module; PlanError naming what it lacks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_verify_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("build_model", "loss", "optimizer", "inputs", "labels"):
        if not hasattr(module, name):
            raise PlanError(f"model file {path} defines no {name!r} (see {example})")
    return module


def read_strategy(path) -> dict:
    """``--strategy FILE``: JSON settings of ``auto.Strategy``, sections as
    objects (``{"sp_optimization": {"enable": false}, "seed": 7}``)."""
    if path is None:
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise PlanError(f"strategy file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PlanError(f"strategy file {path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(f"strategy file {path}: expected a JSON object")
    return data
