"""pytest plumbing for the gate: the ``--pass-file`` option and markers."""
from __future__ import annotations

from verify import legacy_ir  # noqa: F401  (before anything imports paddle)


def pytest_addoption(parser):
    group = parser.getgroup("pass verification")
    group.addoption("--pass-file", default=None, metavar="PATH",
                    help="verify the pass defined in this source file instead of "
                         "the installed one (pre-merge use)")
    group.addoption("--backend", default="simulated",
                    choices=["none", "simulated", "ranks", "both"],
                    help="numeric backend of the gate (default: simulated)")
    group.addoption("--seed", type=int, default=None,
                    help="seed of parameters and inputs (default: the report's)")


def pytest_configure(config):
    path = config.getoption("--pass-file", default=None)
    if path:
        from passes.loader import load_pass_file

        config._verify_pass_file = load_pass_file(path)


def pytest_unconfigure(config):
    loaded = getattr(config, "_verify_pass_file", None)
    if loaded is not None:
        loaded.restore()
