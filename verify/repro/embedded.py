"""The code under review, embedded in a reproducer: the ``--pass-file``
source and the ``--paddle-file`` / premerge overlay sources.

A reproducer runs in a fresh process with only Paddle installed, so it must
carry the pass it judges, never fall back to the installed one:

* :func:`pass_loader` gives the lines defining ``load_pass_source()``: the
  pass file's text, exec'd as a submodule of ``paddle.distributed.passes``
  (its relative imports resolve against the installed package), so its
  ``@register_pass`` replaces the installed pass of the same name; it checks
  the text's sha256 against the one recorded when the script was written and
  that the file registered the passes it registered then (else exit 2,
  "cannot judge"), and returns a line naming file and sha256;
* :func:`overlay_preamble` gives the lines, inserted before anything imports
  Paddle, that put a finder first on ``sys.meta_path`` loading every module
  of the overlay in force (``$VERIFY_PADDLE_OVERLAY``'s manifest) from the
  embedded text under its own name, as ``verify/premerge/overlay.py`` loads
  them from files; deleted modules raise ``ModuleNotFoundError``.

``embed(text)`` inserts the overlay preamble into a script's text.

:func:`literal` is how any value from input (a case name, a path, a case's
params) enters a generated script: a Python literal (``repr`` of plain data,
checked by ``ast.literal_eval``), never text formatted into a docstring,
comment or string literal; :func:`fill` substitutes a script's placeholders
in one pass (a value holding another placeholder's name stays as it is).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os

MARK = "# --- the Paddle sources under review (--paddle-file / premerge), embedded ---"

_LOADER = r'''
PASS_SOURCE = __SOURCE__
PASS_FILE = __PATH__
PASS_SHA256 = __SHA__
PASS_NAMES = __NAMES__


def load_pass_source():
    """The pass under review from the embedded source (``--pass-file``),
    registered in place of the installed pass of the same name, as it sits
    in Paddle's tree (its relative imports); "installed" without one."""
    import hashlib
    import sys
    import types

    import paddle

    if not PASS_SOURCE:
        embedded = any(getattr(f, "paddle_overlay", False) for f in sys.meta_path)
        return "installed Paddle " + paddle.__version__ + (
            " with the embedded Paddle sources above" if embedded else "")
    if hashlib.sha256(PASS_SOURCE.encode("utf-8")).hexdigest() != PASS_SHA256:
        print(f"cannot judge: the embedded source of {PASS_FILE} was changed after the "
              "reproducer was written (sha256 differs)")
        sys.exit(2)
    import paddle.distributed.passes as pkg
    from paddle.distributed.passes.pass_base import PassBase

    before = dict(PassBase._REGISTERED_PASSES)
    name = pkg.__name__ + "._repro_pass"
    module = types.ModuleType(name)
    module.__package__ = pkg.__name__
    module.__file__ = PASS_FILE
    sys.modules[name] = module
    exec(compile(PASS_SOURCE, PASS_FILE, "exec"), module.__dict__)
    missing = [n for n in PASS_NAMES
               if dict.get(PassBase._REGISTERED_PASSES, n) is before.get(n)]
    if missing:
        print(f"cannot judge: the embedded {PASS_FILE} did not register {missing} here")
        sys.exit(2)
    return f"pass source embedded from {PASS_FILE} (sha256 {PASS_SHA256})"
'''

_FINDER = r'''
import importlib.abc as _iabc
import importlib.machinery as _imach
import importlib.util as _iutil
import sys as _sys

_OVERLAY_SOURCES = __MODULES__  # module -> [path it came from, text, sha256]
_OVERLAY_DELETED = __DELETED__


class _EmbeddedPaddleSources(_iabc.MetaPathFinder, _iabc.Loader):
    """Loads the embedded modules in place of the installed ones."""

    paddle_overlay = True  # the suite's marker of an overlay finder

    def find_spec(self, fullname, path=None, target=None):
        if fullname in _OVERLAY_DELETED:
            raise ModuleNotFoundError(f"No module named {fullname!r} (deleted in the "
                                      "change under review)", name=fullname)
        if fullname not in _OVERLAY_SOURCES:
            return None
        origin = _OVERLAY_SOURCES[fullname][0]
        package = origin.endswith("__init__.py")
        spec = _iutil.spec_from_loader(fullname, self, origin=origin, is_package=package)
        spec.has_location = True
        if package:  # its other submodules: the installed package's directory
            installed = _imach.PathFinder.find_spec(fullname, path)
            spec.submodule_search_locations = list(
                (installed and installed.submodule_search_locations) or [])
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        origin, text, _ = _OVERLAY_SOURCES[module.__spec__.name]
        exec(compile(text, origin, "exec"), module.__dict__)


_early = sorted(m for m in _OVERLAY_SOURCES if m in _sys.modules)
if _early:
    raise RuntimeError(f"the embedded Paddle sources come too late: {_early} imported")
_sys.meta_path.insert(0, _EmbeddedPaddleSources())
print("Paddle sources under review, embedded: "
      + ", ".join(f"{m} from {p} (sha256 {s[:12]})"
                  for m, (p, _, s) in sorted(_OVERLAY_SOURCES.items())))
# ---
'''


def literal(value) -> str:
    """``value`` (plain data: str, bytes, numbers, bool, None, and lists,
    tuples, dicts of them) as Python source evaluating to it; ReproError for
    anything else (an object whose ``repr`` is not a literal could be code)."""
    from verify.repro.errors import ReproError

    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise ReproError(f"a {type(value).__name__} value cannot be written into a "
                         "reproducer as a literal")
    return text


def fill(template: str, values: dict) -> str:
    """``template`` with every placeholder (a key of ``values``) replaced by
    its value in one pass: inserted text is never searched for placeholders."""
    import re

    if not values:
        return template
    pattern = re.compile("|".join(re.escape(k) for k in sorted(values, key=len, reverse=True)))
    return pattern.sub(lambda m: values[m.group(0)], template)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pass_record(pass_file) -> dict:
    """``{"path", "source", "sha256", "names"}`` of a pass file (the names
    it registers, as loading it here says); empty without one."""
    if not pass_file:
        return {"path": "", "source": "", "sha256": "", "names": []}
    from verify.ir.pass_files import load_pass_file

    path = os.path.abspath(pass_file)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    loaded = load_pass_file(path)  # the names it registers (restored at once)
    names = sorted(loaded.registered)
    loaded.restore()
    return {"path": path, "source": source, "sha256": _sha(source), "names": names}


def pass_loader(pass_file) -> str:
    """Lines defining ``load_pass_source()`` for ``pass_file`` (None: the
    installed pass)."""
    rec = pass_record(pass_file)
    return fill(_LOADER, {"__SOURCE__": literal(rec["source"]),
                          "__PATH__": literal(rec["path"]), "__SHA__": literal(rec["sha256"]),
                          "__NAMES__": literal(rec["names"])})


def overlay_sources() -> tuple:
    """``({module: [path, text, sha256]}, [deleted modules])`` of the overlay
    in force (``$VERIFY_PADDLE_OVERLAY``), ``({}, [])`` without one."""
    from verify.ir.paddle_overlay import ENV

    path = os.environ.get(ENV)
    if not path:
        return {}, []
    with open(path) as f:
        manifest = json.load(f)
    modules = {}
    for mod, src in sorted(manifest.get("modules", {}).items()):
        with open(src, encoding="utf-8") as f:
            text = f.read()
        modules[mod] = [src, text, _sha(text)]
    return modules, sorted(manifest.get("deleted", []))


def overlay_preamble() -> str:
    """The lines installing the overlay in force from embedded text ("" without one)."""
    modules, deleted = overlay_sources()
    if not modules and not deleted:
        return ""
    return MARK + "\n" + fill(_FINDER, {"__MODULES__": literal(modules),
                                       "__DELETED__": literal(deleted)}).lstrip("\n")


def embed(text: str) -> str:
    """``text`` (a reproducer) with the overlay preamble before its first
    statement that is not the docstring or a ``__future__`` import."""
    pre = overlay_preamble()
    if not pre or MARK in text:
        return text
    return after_header(text, "\n" + pre)


def after_header(text: str, insert: str) -> str:
    """``text`` (a script) with ``insert`` after its docstring and
    ``from __future__`` imports (where statements may start); ``text``
    unchanged if it does not parse."""
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return text
    line = 0
    for i, node in enumerate(body):
        if (i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)) or \
                (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            line = node.end_lineno
            continue
        break
    lines = text.splitlines(keepends=True)
    return "".join(lines[:line]) + insert + "".join(lines[line:])


def constants(table: dict) -> list:
    """``NAME = literal`` lines of a case module's ``REPRO_CONSTANTS``."""
    from verify.repro.errors import ReproError

    out = []
    for name, value in table.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise ReproError(f"REPRO_CONSTANTS key {name!r} is not an identifier")
        out.append(f"{name} = {literal(value)}")
    return out
