import sys

from verify import interrupt

interrupt.install()  # Ctrl-C ends the run within seconds, also during start-up
try:
    from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)
    from verify.cli import main
except BaseException:  # noqa: B036  an interrupt during start-up (maybe swallowed)
    if interrupt.received() is None:
        raise
    print(f"interrupted ({interrupt.received()}) during start-up", file=sys.stderr)
    sys.exit(interrupt.exit_code())

sys.exit(main())
