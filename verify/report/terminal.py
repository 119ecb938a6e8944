"""What ``python -m verify run`` prints when it is done: the unexpected
verdicts with their counterexamples and reproduce commands, a status table per
pass, the totals and where the report is.  Through rich: coloured on a
terminal, plain text (a Markdown table) in logs and pipes."""
from __future__ import annotations

import shlex
from collections import Counter

from rich import box
from rich.table import Table
from rich.text import Text

from verify.engine.baseline import classify, describe
from verify.ir.paddle_overlay import command_flags
from verify.engine.console import console_for, verdict_style
from verify.report.write import summarize
from verify.safe_names import printable
from verify.verdicts import SHOWN as VERDICTS


def summary_table(apps, styled: bool = True) -> Table:
    """Status counts per pass (LEFT_ALONE apart from EQUIVALENT; of the
    EQUIVALENT, those witnessed but not proved) and the unexpected ones;
    plain (``styled=False``) it prints as a Markdown table."""
    table = Table(box=box.SIMPLE_HEAD if styled else box.MARKDOWN, show_edge=False,
                  pad_edge=False, header_style="bold" if styled else "")
    table.add_column("pass", no_wrap=True)
    for v in VERDICTS:
        table.add_column(v, justify="right", no_wrap=True,
                         header_style=verdict_style(v) if styled else "")
    table.add_column("proved at sizes only", justify="right", no_wrap=True)
    table.add_column("witnessed, not proved", justify="right", no_wrap=True)
    table.add_column("unexpected", justify="right", no_wrap=True)
    for p in dict.fromkeys(a.pass_name for a in apps):
        mine = [a for a in apps if a.pass_name == p]
        counts = Counter(a.status for a in mine)
        bad = sum(not a.as_expected for a in mine)
        # of the EQUIVALENT, those resting on sampling alone (no value proof)
        seen = sum(getattr(a, "proof", "") == "witnessed" and a.status == "EQUIVALENT"
                   for a in mine)
        cells = [Text(str(counts.get(v, 0)), style=verdict_style(v) if styled and counts.get(v)
                      else "") for v in VERDICTS]
        table.add_row(p, *cells, Text(str(_at_sizes(mine))), Text(str(seen)),
                      Text(str(bad), style="bold red" if styled and bad else ""))
    return table


def _at_sizes(apps) -> int:
    """Of the EQUIVALENT, those proved at sampled sizes of the -1 dims only."""
    return sum(str(getattr(a, "proof", "") or "").startswith("proved at sizes")
               and a.status == "EQUIVALENT" for a in apps)


def _pass_counts(apps):
    """Per pass, in first-seen order: (pass, [(label, count, style)]) with
    the nonzero status counts, the witnessed-not-proved and the unexpected."""
    out = []
    for p in dict.fromkeys(a.pass_name for a in apps):
        mine = [a for a in apps if a.pass_name == p]
        counts = Counter(a.status for a in mine)
        items = [(v, counts[v], verdict_style(v)) for v in VERDICTS if counts.get(v)]
        items += [(v, n, "") for v, n in sorted(counts.items()) if v not in VERDICTS]
        seen = sum(getattr(a, "proof", "") == "witnessed" and a.status == "EQUIVALENT"
                   for a in mine)
        if _at_sizes(mine):
            items.append(("proved at sizes only", _at_sizes(mine), ""))
        if seen:
            items.append(("witnessed, not proved", seen, ""))
        bad = sum(not a.as_expected for a in mine)
        items.append(("unexpected", bad, "bold red" if bad else ""))
        out.append((p, items))
    return out


def summary_lines(apps, width: int, styled: bool = True) -> list:
    """The summary for a narrow terminal: one block per pass, its name whole
    on a line of its own, then its counts (``NOT_EQUIVALENT 2; ...``) wrapped
    at ``width`` between items (``;`` apart), never inside a verdict or a name."""
    lines = []
    for p, items in _pass_counts(apps):
        lines.append(Text(p, style="bold" if styled else ""))
        row, used = Text("    "), 4
        for i, (label, n, style) in enumerate(items):
            piece = f"{label} {n}" + (";" if i < len(items) - 1 else "")
            if used > 4 and used + 1 + len(piece) > width:
                lines.append(row)
                row, used = Text("    "), 4
            if used > 4:
                row.append(" ")
                used += 1
            row.append(piece, style=style if styled else "")
            used += len(piece)
        lines.append(row)
    return lines


def print_summary(apps, path, seconds, out, summary=None) -> None:
    """The end of a run, written to ``out``; ``summary``: the report's own
    (``summarize`` of the same applications), else made here."""
    console = console_for(out)
    bad = [a for a in apps if not a.as_expected or  # by finding identity (cli)
           getattr(a, "baseline_label", "unchanged") != "unchanged"]
    console.print()
    for a in bad:  # counterexamples first: what a reviewer needs
        how = getattr(a, "baseline_label", None) or classify(a.expected.verdict,
                                                             a.verdict.value)
        # names and messages hold input (a case name): control characters
        # escaped (verify/safe_names.py), never sent to the terminal raw
        console.print(Text.assemble((how, "bold red"),
                                    f": {a.pass_name} on {printable(a.case_name)}: ",
                                    (a.verdict.value, verdict_style(a.verdict.value)),
                                    f" (baseline {a.expected.verdict})"))
        detail = getattr(a, "baseline_detail", None) or {}
        for word, key in (("new", "new"), ("gone", "gone")):
            for i in detail.get(key, [])[:3]:
                console.print(printable(f"    {word}: {describe(i)}"))
        shown = [c for c in a.checks if c.verdict.value == a.verdict.value]
        # what decided first: the checker's own environment failing, then
        # deciding checks with a counterexample; a proof not attempted only
        # explains (it leaves a witness "not proved"), so it comes last
        shown.sort(key=lambda c: (not c.message.split(": ", 1)[-1].startswith(
            "checker environment") and "checker environment:" not in c.message,
            c.advisory, bool(c.details.get("not_proved")), c.counterexample is None))
        for c in shown[:3]:
            console.print(printable(f"    [{c.kind}/{c.name} rank {c.rank}] {c.message}",
                                    keep="\n"))
            if c.counterexample:
                console.print(printable(f"      counterexample: {c.counterexample}",
                                        keep="\n"))
        console.print(printable(f"    reproduce: python -m verify run --pass "
                                f"{shlex.quote(a.pass_name)} --case {shlex.quote(a.case_name)}"
                                + command_flags(a.source)
                                + (f" --case-file {shlex.quote(a.case_file)}"
                                   if a.case_file else "")),
                      style="cyan")
    table = summary_table(apps, styled=console.is_terminal)
    if console.is_terminal and console.measure(
            table, options=console.options.update_width(10**6)).maximum > console.width:
        # the table would not fit: rich would shrink NOT_EQUIVALENT to
        # "NOT_..." and cut pass names; one block per pass instead
        for ln in summary_lines(apps, console.width):
            console.print(ln)
    else:
        console.print(table)
    summ = summary if summary is not None else summarize(apps)
    console.print(f"{len(apps)} applications in {seconds:.1f}s: " +
                  ", ".join(f"{k} {v}" for k, v in sorted(summ["by_status"].items())))
    console.print("numeric evidence: " + ", ".join(f"{k} {v}" for k, v in
                                                   sorted(summ["numeric_witness"].items())))
    vp = summ["value_proofs_by_rank"]
    if any(vp.values()):
        console.print(f"value proofs (per rank): proved {vp['proved']}, "
                      f"refuted {vp['refuted']}, unknown {vp['unknown']}; values proved by "
                      f"canonical form {vp.get('values_by_canonical_form', 0)}, with cuts expanded "
                      f"{vp.get('values_by_expanded_form', 0)}, by Z3 "
                      f"{vp.get('values_by_z3', 0)}; refutations replayed "
                      f"{vp.get('refutations_replayed', 0)}")
    at_sizes = summ.get("proved_at_sizes_only") or []
    if at_sizes:  # a proof at sampled sizes of the -1 dims, said apart from one at every size
        console.print(printable(f"EQUIVALENT, proved at sizes only ({len(at_sizes)}): "
                                + ", ".join(at_sizes)))
    witnessed = summ.get("witnessed_not_proved") or []
    if witnessed:  # EQUIVALENT on sampling alone: said apart from the proved
        console.print(printable(f"EQUIVALENT, witnessed not proved ({len(witnessed)}): "
                                + ", ".join(witnessed)))
    console.print(f"report: {path}")
    console.print(Text.assemble(f"{len(apps) - len(bad)} as expected, ",
                                (f"{len(bad)} unexpected", "bold red" if bad else "green")))
