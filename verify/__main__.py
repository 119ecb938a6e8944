import sys

if sys.argv[1:2] == ["premerge"]:  # a driver of child runs: it never imports Paddle
    from verify.premerge.run import main as premerge_main

    sys.exit(premerge_main(sys.argv[2:]))

from verify import interrupt  # noqa: E402

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
