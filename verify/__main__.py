import sys

from verify.ir import legacy_ir  # noqa: F401  (before anything imports paddle)
from verify.cli import main

sys.exit(main())
