"""Installs the Paddle source overlay (``verify/premerge/overlay.py``) at
interpreter start when ``$VERIFY_PADDLE_OVERLAY`` names a manifest, and the
executed-source recorder (``verify/premerge/trace.py``) when
``$VERIFY_TRACE_EXECUTED`` names a directory; this
directory is put first on ``PYTHONPATH`` by ``overlay.child_env``.  Then runs
the ``sitecustomize`` this one shadows, if there is one."""
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("VERIFY_PADDLE_OVERLAY"):
    _spec = importlib.util.spec_from_file_location(
        "_paddle_overlay_boot", os.path.join(os.path.dirname(_here), "overlay.py"))
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
    _mod.install_from_env()
if os.environ.get("VERIFY_TRACE_EXECUTED"):  # verify/premerge/trace.py
    _spec = importlib.util.spec_from_file_location(
        "_paddle_trace_boot", os.path.join(os.path.dirname(_here), "trace.py"))
    _trace = importlib.util.module_from_spec(_spec)
    sys.modules["_paddle_trace_boot"] = _trace  # one recorder per process
    _spec.loader.exec_module(_trace)
    _trace.install_from_env()

# chain: the next sitecustomize on sys.path (e.g. a distribution's)
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_next = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _next is not None and _next.origin and os.path.dirname(_next.origin) != _here:
    _m = importlib.util.module_from_spec(_next)
    _next.loader.exec_module(_m)
