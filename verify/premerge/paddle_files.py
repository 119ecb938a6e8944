"""``--paddle-file PATH`` (``verify run``, the gate): single changed Paddle
modules overlaid like a checkout's (``overlay.py``), without a checkout.

Each file is resolved to the installed module it replaces
(``verify/ir/paddle_overlay.module_of``), copied into an overlay directory
with its manifest (``overlay.write``), and the manifest is exported to the
processes the run starts (``overlay.child_env``: ``VERIFY_PADDLE_OVERLAY``
and the boot ``sitecustomize`` first on ``PYTHONPATH``).  The process that
calls this has imported Paddle already and keeps the installed modules; the
work an overlay changes (planning, pass application, runs) happens in the
processes it starts.
"""
from __future__ import annotations

import os
import tempfile

from verify.ir.paddle_overlay import OverlayError, installed_rel, installed_root, module_of

from . import overlay


def export(paths, directory: str | None = None) -> dict:
    """Overlay ``paths`` for every process started from now on; returns
    ``{module: path}`` (OverlayError on a file that names no module).  An
    overlay of the same texts loaded in this process already (``python -m
    verify`` installs it at start, :func:`install_early`; a process started
    with it) is kept as it is."""
    table = dict(module_of(p) for p in paths)
    if not table:
        return table
    if _same_as_active(table):
        return table
    files = {mod: source_text(path) for mod, path in table.items()}  # OverlayError
    directory = directory or tempfile.mkdtemp(prefix="verify-paddle-files-")
    files = {installed_rel(mod): text for mod, text in files.items()}
    manifest = overlay.write(directory, files, installed_root())
    env = overlay.child_env(manifest)
    os.environ[overlay.ENV] = env[overlay.ENV]
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    return table


def source_text(path: str) -> str:
    """The text of a --paddle-file, compiled to check it: OverlayError (one
    line naming the file) when it is not UTF-8 or does not compile."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise OverlayError(f"--paddle-file {path}: cannot read it: {exc.strerror or exc}"
                           ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OverlayError(f"--paddle-file {path} is not UTF-8 text ({exc.reason} at byte "
                           f"{exc.start})") from None
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
        raise OverlayError(f"--paddle-file {path} does not compile: "
                           f"{type(exc).__name__}: {getattr(exc, 'msg', exc)}{where}") from None
    return text


def import_error(path: str, exc: BaseException) -> str:
    """The one line of a --paddle-file that failed to import."""
    lines = str(exc).strip().splitlines()
    return (f"--paddle-file {path} does not import: {type(exc).__name__}"
            + (f": {lines[0]}" if lines else ""))


def check_imports(table: dict) -> None:
    """Import each overlaid module in this process (when the overlay is
    loaded here): one that fails is an OverlayError naming its file, before
    any pass is judged with it."""
    import importlib

    from verify.ir.paddle_overlay import loaded_here

    if not loaded_here():
        return
    for mod in sorted(table):
        try:
            importlib.import_module(mod)
        except Exception as exc:  # noqa: BLE001  (user code)
            raise OverlayError(import_error(table[mod], exc)) from None


def _same_as_active(table: dict) -> bool:
    """Whether the overlay loaded in this process holds exactly ``table``'s texts."""
    finder = overlay.active()
    if finder is None or set(finder.modules) != set(table):
        return False
    for mod, path in table.items():
        try:
            with open(path, encoding="utf-8") as a, \
                    open(finder.modules[mod], encoding="utf-8") as b:
                if a.read() != b.read():
                    return False
        except OSError:
            return False
    return True


def install_early(argv) -> None:
    """``python -m verify run|repro ... --paddle-file F``: export the overlay
    and load it in this process too, before anything imports Paddle, so the
    work done here (applications of passes applied in process, the
    reproducers' payloads, ``--no-isolation``) runs the files under review,
    as every process it starts does.  Bad files are left to the command's
    own error (it calls :func:`export` again)."""
    if argv[:1] not in (["run"], ["repro"]):
        return
    paths = []
    for i, a in enumerate(argv):
        if a == "--paddle-file" and i + 1 < len(argv):
            paths.append(argv[i + 1])
        elif a.startswith("--paddle-file="):
            paths.append(a.split("=", 1)[1])
    if not paths:
        return
    try:
        table = export(paths)
    except (OverlayError, OSError):
        return
    finder = overlay.active()
    if finder is None:
        finder = overlay.install(os.environ[overlay.ENV])

    def on_error(module, exc):  # Paddle's import (or a later one) met the file's error
        import sys

        print(f"error: {import_error(table.get(module, module), exc)}", file=sys.stderr)
        sys.stderr.flush()
        raise SystemExit(2)

    finder.on_error = on_error
