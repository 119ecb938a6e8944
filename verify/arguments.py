"""The command line's argument types and parser: numbers finite and in
range, usage errors one line and exit 2.  Shared by ``verify`` and its
sub-commands (premerge, mutate, the gate's options); it imports nothing of
the suite, so each of them can use it without importing the others."""
from __future__ import annotations

import argparse
import math

SEED_LIMIT = 2 ** 32  # numpy's and Paddle's seeds are 32-bit
COUNT_LIMIT = 2 ** 62
TIMEOUT_LIMIT_S = 1e6  # about 11 days; beyond it a thread's wait overflows
MEMORY_LIMIT_MB = 2 ** 30  # a petabyte


def _number(text: str, kind):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seconds_arg(text: str) -> float:
    """A time limit: finite, > 0 and at most TIMEOUT_LIMIT_S seconds."""
    value = _number(text, float)
    if not 0 < value <= TIMEOUT_LIMIT_S:
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: must be > 0 and <= {TIMEOUT_LIMIT_S:.0f} seconds")
    return value


def megabytes_arg(text: str) -> int:
    """A memory limit in MB: an integer >= 0 (0: no limit)."""
    value = _number(text, int)
    if not 0 <= value <= MEMORY_LIMIT_MB:
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: must be >= 0 (0: no limit) and <= {MEMORY_LIMIT_MB} MB")
    return value


def seed_arg(text: str) -> int:
    """A seed: an integer >= 0 and < 2**32."""
    value = _number(text, int)
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: must be >= 0 and < 2**32 ({SEED_LIMIT})")
    return value


def count_arg(text: str) -> int:
    """A count or budget: an integer >= 1."""
    value = _number(text, int)
    if not 1 <= value <= COUNT_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: must be >= 1 and <= 2**62")
    return value


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr (``error: argument
    --seed: ...``), exit 2, like every other bad input."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")
