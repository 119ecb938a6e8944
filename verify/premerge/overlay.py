"""The source overlay: a checkout's changed ``python/paddle`` files imported
in place of the installed ones, in this process and every process it starts.

Nothing installed is modified.  An overlay is a directory holding the changed
files at their package paths (``<dir>/paddle/distributed/passes/pass_utils.py``)
and a ``manifest.json``::

    {"schema": "paddle-overlay/1",
     "modules": {"paddle.distributed.passes.pass_utils": "<abs path>", ...},
     "packages": {"paddle.distributed.passes": "<installed dir>", ...},
     "deleted": ["paddle.x.y", ...]}

:class:`OverlayFinder`, first on ``sys.meta_path``, answers for exactly the
listed modules: a changed module is loaded from the overlay file under its
own name (so relative imports and ``__package__`` resolve against the
installed package), a changed ``__init__.py`` keeps the installed package's
directory as its search path, a deleted module raises ``ModuleNotFoundError``
as it would in the working tree.  Every other import is left to the normal
machinery.

Inheritance: :func:`child_env` points ``VERIFY_PADDLE_OVERLAY`` at the
manifest and puts ``verify/premerge/boot`` first on ``PYTHONPATH``; that
directory's ``sitecustomize.py``, which Python imports at start-up in every
interpreter that does not run with ``-S``/``-I``, installs the finder before
anything can import Paddle.  The suite's worker and planning processes all
extend the inherited ``PYTHONPATH`` (isolation workers, rank workers, the
Engine planning processes), so they inherit the overlay with no change.

This module imports only the standard library: it runs at interpreter start.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

ENV = "VERIFY_PADDLE_OVERLAY"
SCHEMA = "paddle-overlay/1"
COPY = "_overlay_finder.py"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")


class OverlayFinder(importlib.abc.MetaPathFinder):
    """Finds the overlay's modules; ``None`` (normal import) for all others."""

    paddle_overlay = True  # marker: installed at most once per process
    # ``on_error(module, exc)``: called when an overlaid module fails to
    # import (``--paddle-file``: one line naming the file, exit 2), then the
    # error goes on as usual; None: just the error
    on_error = None

    def __init__(self, manifest: dict, path: str = ""):
        self.modules = dict(manifest.get("modules", {}))
        self.packages = dict(manifest.get("packages", {}))
        self.deleted = set(manifest.get("deleted", ()))
        self.path = path

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.deleted:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (deleted in the overlay {self.path})",
                name=fullname)
        source = self.modules.get(fullname)
        if source is None:
            return None
        search = None
        if os.path.basename(source) == "__init__.py":
            # the package's other submodules stay the installed ones (or
            # the overlay's, which this finder answers first anyway)
            installed = self.packages.get(fullname)
            search = [installed] if installed else [os.path.dirname(source)]
        loader = _Loader(fullname, source)
        loader.finder = self
        return importlib.util.spec_from_file_location(
            fullname, source, loader=loader, submodule_search_locations=search)


class _Loader(importlib.machinery.SourceFileLoader):
    """An overlaid module's loader: its finder's ``on_error`` hears of a
    failure to import it."""

    finder = None

    def exec_module(self, module):
        try:
            super().exec_module(module)
        except Exception as exc:
            if self.finder is not None and self.finder.on_error is not None:
                self.finder.on_error(self.name, exc)
            raise


def load_manifest(path: str) -> dict:
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a {SCHEMA} manifest")
    return data


def active() -> OverlayFinder | None:
    """The finder installed in this process, if any."""
    for f in sys.meta_path:
        if getattr(f, "paddle_overlay", False):
            return f
    return None


def install(manifest_path: str) -> OverlayFinder:
    """Put the overlay's finder first on ``sys.meta_path`` (once).

    Raises RuntimeError when a module of the overlay was imported already:
    that process would run the installed code and call it the overlay's."""
    finder = active()
    if finder is not None:
        return finder
    finder = OverlayFinder(load_manifest(manifest_path), manifest_path)
    early = sorted(m for m in finder.modules if m in sys.modules)
    if early:
        raise RuntimeError(f"the overlay {manifest_path} comes too late: "
                           f"{', '.join(early)} already imported")
    sys.meta_path.insert(0, finder)
    return finder


def install_from_env() -> OverlayFinder | None:
    """:func:`install` the manifest named by ``$VERIFY_PADDLE_OVERLAY``, if set."""
    path = os.environ.get(ENV)
    return install(path) if path else None


def child_env(manifest_path: str, base: dict | None = None) -> dict:
    """An environment whose Python processes (and theirs) run with the overlay."""
    env = dict(os.environ if base is None else base)
    env[ENV] = os.path.abspath(manifest_path)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOT_DIR]
    env["PYTHONPATH"] = os.pathsep.join([BOOT_DIR] + rest)
    return env


def write(directory: str, files: dict, installed_root: str, deleted=()) -> str:
    """Write an overlay: ``files`` maps paths relative to the ``paddle``
    package's parent (``paddle/distributed/x.py``) to their text; returns
    the manifest's path.  ``installed_root`` is the directory holding the
    installed ``paddle`` package (for the search path of changed packages)."""
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    modules, packages = {}, {}
    for rel, text in sorted(files.items()):
        dest = os.path.join(directory, rel)
        # a package path, never one leading out of the overlay directory
        if not os.path.realpath(dest).startswith(os.path.realpath(directory) + os.sep):
            raise ValueError(f"overlay path {rel!r} leads out of {directory}")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w", encoding="utf-8") as f:
            f.write(text)
        name = module_name(rel)
        modules[name] = dest
        if rel.endswith("__init__.py"):
            packages[name] = os.path.join(installed_root, os.path.dirname(rel))
    manifest = {"schema": SCHEMA, "modules": modules, "packages": packages,
                "deleted": sorted(module_name(r) for r in deleted)}
    path = os.path.join(directory, "manifest.json")
    # a copy of this module beside the manifest: a reproducer's preamble
    # loads it from there, so the overlay directory is all it needs
    with open(os.path.abspath(__file__), encoding="utf-8") as src, \
            open(os.path.join(directory, COPY), "w", encoding="utf-8") as dst:
        dst.write(src.read())
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def module_name(rel: str) -> str:
    """``paddle/a/b.py`` -> ``paddle.a.b``; ``paddle/a/__init__.py`` -> ``paddle.a``."""
    parts = rel.replace(os.sep, "/")[:-len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def preamble(manifest_path: str) -> str:
    """Python lines that install the overlay at the top of a standalone
    script (a reproducer), so it runs the overlaid sources too."""
    manifest_path = os.path.abspath(manifest_path)
    here = os.path.join(os.path.dirname(manifest_path), COPY)
    return (
        "# --- verify premerge: run with the checkout's changed Paddle sources ---\n"
        "import importlib.util as _ilu, sys as _sys\n"
        f"_spec = _ilu.spec_from_file_location('_paddle_overlay', {here!r})\n"
        "_ov = _ilu.module_from_spec(_spec); _spec.loader.exec_module(_ov)\n"
        f"_ov.install({manifest_path!r})\n"
        "# ---\n")
