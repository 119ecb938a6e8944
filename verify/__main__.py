import os
import sys

if sys.argv[1:2] == ["premerge"]:  # a driver of child runs: it never imports Paddle
    from verify.premerge.run import main as premerge_main

    sys.exit(premerge_main(sys.argv[2:]))

if not sys.argv[1:] or {"-h", "--help"} & set(sys.argv[1:]):
    # help imports no Paddle (2.5 s of the 2.7 s it took): the parsers are plain
    from verify.cli import main as help_main

    sys.exit(help_main())

from verify import interrupt  # noqa: E402
from verify import exit_guard  # noqa: E402

exit_guard.install()  # an os._exit(0) from loaded code is not a green run

interrupt.install()  # Ctrl-C ends the run within seconds, also during start-up
if "--paddle-file" in " ".join(sys.argv[1:]):  # before Paddle is imported: the
    # overlay is loaded in this process too (verify/premerge/paddle_files.py)
    from verify.premerge.paddle_files import install_early

    install_early(sys.argv[1:])
try:
    if sys.argv[1:2] == ["run"] and not {"--no-isolation", "-h", "--help"} & set(sys.argv):
        # the isolation worker imports Paddle while this process does, not after
        from verify.engine.isolation import prestart

        prestart()
    from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)
    from verify.cli import main

    if "verify.engine.isolation" in sys.modules:  # Paddle's SIGTERM handler is in: ours over it
        sys.modules["verify.engine.isolation"].arm_signals()
except BaseException:  # noqa: B036  an interrupt during start-up (maybe swallowed)
    if interrupt.received() is None:
        raise
    if "verify.engine.isolation" in sys.modules:  # a prestarted worker: not left behind
        sys.modules["verify.engine.isolation"].shutdown()
    print(f"interrupted ({interrupt.received()}) during start-up", file=sys.stderr)
    sys.stderr.flush()
    # Not sys.exit: nothing is started yet to clean up, and a half-done import
    # (Paddle's) can end the interpreter's finalization by the signal itself
    # (exit -2 instead of 130, seen under load).
    os._exit(interrupt.exit_code())

sys.exit(main())
