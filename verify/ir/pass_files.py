"""Load a pass from a user's source file, for pre-merge gating.

The file is a Paddle pass module as it sits in
``python/paddle/distributed/passes/`` with relative imports such as
``from .pass_base import register_pass``.  It is loaded as a submodule of the
installed ``paddle.distributed.passes`` package so those imports resolve
against the installed framework, and its ``@register_pass`` replaces the
installed pass of the same name while the returned handle is active.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field

from verify.ir.legacy_ir import paddle_module
from verify.ir.pass_sources import ACTIVE, watch


class PassFileError(Exception):
    """The pass file is missing, does not import, or registers no pass."""


@dataclass
class LoadedPassFile:
    path: str
    module_name: str
    registered: dict  # pass name -> class, as the file registered them
    replaced: dict = field(default_factory=dict)  # pass name -> previous class or None
    sha256: str = ""  # of the file's bytes as loaded
    mtime: float = 0.0

    def restore(self) -> None:
        """Put back the passes this file replaced (installed ones)."""
        from paddle.distributed.passes.pass_base import PassBase

        for name, previous in self.replaced.items():
            if previous is None:
                PassBase._REGISTERED_PASSES.pop(name, None)
            else:
                PassBase._REGISTERED_PASSES[name] = previous
        sys.modules.pop(self.module_name, None)
        if self in ACTIVE:
            ACTIVE.remove(self)


def load_pass_file(path: str) -> LoadedPassFile:
    """Import ``path`` inside ``paddle.distributed.passes``; returns what it registered."""
    paddle_module()
    import paddle.distributed.passes as pkg
    from paddle.distributed.passes.pass_base import PassBase

    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise PassFileError(f"pass file {path} does not exist")
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    stem = os.path.splitext(os.path.basename(path))[0]
    module_name = f"{pkg.__name__}._user_{stem}_{digest}"
    watch()  # lookups of the passes it registers are recorded (pass_sources.py)
    with open(path, "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    mtime = os.path.getmtime(path)
    before = dict(PassBase._REGISTERED_PASSES)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PassFileError(f"pass file {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    module.__package__ = pkg.__name__
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        PassBase._REGISTERED_PASSES.clear()
        PassBase._REGISTERED_PASSES.update(before)
        raise PassFileError(f"pass file {path} does not import: "
                            f"{type(exc).__name__}: {exc}") from exc
    after = PassBase._REGISTERED_PASSES
    registered = {n: c for n, c in after.items() if before.get(n) is not c}
    if not registered:
        sys.modules.pop(module_name, None)
        raise PassFileError(f"pass file {path} registers no pass (no @register_pass)")
    loaded = LoadedPassFile(path, module_name, registered,
                            {n: before.get(n) for n in registered}, sha256, mtime)
    ACTIVE.append(loaded)
    return loaded
