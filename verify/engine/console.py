"""Where the run's progress and summary are printed: a rich console on a
terminal (colour, a progress bar), plain text everywhere else (CI logs, pipes,
the stdout tests capture): no colour, no markup, no wrapping, so every line
reads and greps exactly as it was composed."""
from __future__ import annotations

from rich.console import Console

PLAIN_WIDTH = 10_000  # wide enough that no line or table cell of a log is ever wrapped

# the colours index.html gives the verdicts (verify/report/templates/report.css)
VERDICT_STYLES = {"EQUIVALENT": "green", "LEFT_ALONE": "green italic",
                  "CONTRACT_BROKEN": "dark_orange", "NOT_EQUIVALENT": "bold red",
                  "PASS_CRASHED": "bold magenta", "NOT_APPLIED": "yellow",
                  "INCONCLUSIVE": "grey50"}


def is_tty(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def console_for(out) -> Console:
    """A console writing to ``out``; styled only when ``out`` is a terminal.

    Markup and emoji codes are off: messages hold ``[...]`` and ``:name:``
    text that must print as it is."""
    tty = is_tty(out)
    return Console(file=out, force_terminal=tty, force_interactive=tty,
                   no_color=None if tty else True,  # None: a terminal still honours NO_COLOR
                   width=None if tty else PLAIN_WIDTH, markup=False, emoji=False,
                   highlight=False, soft_wrap=True)


def verdict_style(verdict) -> str:
    return VERDICT_STYLES.get(str(verdict), "")
