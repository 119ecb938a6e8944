"""Pass adapters: one module per pass under test, each defining ``ADAPTER``.

Adding a pass is adding one module here; it is found by name.
"""
from __future__ import annotations

import importlib
import pkgutil

from .base import PassAdapter, PassRun

_NOT_ADAPTERS = {"base"}


def adapters() -> dict:
    """Every adapter by Paddle pass name, in module-name order."""
    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _NOT_ADAPTERS or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        adapter = getattr(mod, "ADAPTER", None)
        if isinstance(adapter, PassAdapter):
            out[adapter.name] = adapter
    return out


def get(name: str) -> PassAdapter:
    """The adapter for a pass name or its short name; KeyError names the known ones."""
    table = adapters()
    for a in table.values():
        if name in (a.name, a.short):
            return a
    raise KeyError(f"unknown pass {name!r}; known: {', '.join(table)}")


__all__ = ["PassAdapter", "PassRun", "adapters", "get"]
