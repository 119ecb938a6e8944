import sys

if sys.argv[1:2] == ["premerge"]:  # a driver of child runs: it never imports Paddle
    from verify.premerge.run import main as premerge_main

    sys.exit(premerge_main(sys.argv[2:]))

from verify.ir import legacy_ir  # noqa: F401,E402  (before anything imports paddle)
from verify.cli import main  # noqa: E402

sys.exit(main())
