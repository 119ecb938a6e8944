# The project's own modules compiled once into its cache dir, not in every
# process, where the interpreter writes no bytecode (verify/bytecode.py).
from verify import bytecode as _bytecode

_bytecode.install()
